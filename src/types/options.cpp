// Names of the option enums (both ways, defined once), the subcommands' defaults, and the checks
// that need no model or device (options.hpp).
#include "accumbench/options.hpp"

#include <algorithm>
#include <optional>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "accumbench/error.hpp"
#include "accumbench/units.hpp"

#include <thread>

namespace accumbench {

namespace {

// One table per enum: the name each value has on the command line and in result files.
template <typename Enum, size_t N>
using Names = std::array<std::pair<Enum, const char*>, N>;

constexpr Names<Precision, 3> kPrecisionNames = {{
    {Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}}};
constexpr Names<Checkpointing, 2> kCheckpointingNames = {{
    {Checkpointing::kNone, "none"}, {Checkpointing::kBlocks, "blocks"}}};
constexpr Names<LossNormalization, 2> kNormalizationNames = {{
    {LossNormalization::kToken, "token"}, {LossNormalization::kMeanOfMeans, "mean-of-means"}}};
constexpr Names<LengthMode, 2> kLengthNames = {{
    {LengthMode::kFixed, "fixed"}, {LengthMode::kVariable, "variable"}}};
// The modes that come from a file, for result files only (--lengths takes the path itself).
constexpr Names<LengthMode, 3> kAllLengthNames = {{
    {LengthMode::kFixed, "fixed"}, {LengthMode::kVariable, "variable"}, {LengthMode::kFile, "file"}}};
constexpr Names<Padding, 3> kPaddingNames = {{
    {Padding::kMax, "max"}, {Padding::kLongest, "longest"}, {Padding::kMultiple, "multiple"}}};
constexpr Names<OptimizerKind, 6> kOptimizerNames = {{{OptimizerKind::kAdamW, "adamw"},
                                                      {OptimizerKind::kAdamWForeach, "adamw-foreach"},
                                                      {OptimizerKind::kAdamW8bit, "adamw8bit"},
                                                      {OptimizerKind::kPagedAdamW8bit, "paged-adamw8bit"},
                                                      {OptimizerKind::kPagedAdamW32bit, "paged-adamw32bit"},
                                                      {OptimizerKind::kSgd, "sgd"}}};
// transformers' training_args.py OptimizerNames: ADAMW_TORCH_FUSED = "adamw_torch_fused"
// (torch.optim.AdamW(fused=True), the default from PyTorch 2.8), ADAMW_TORCH = "adamw_torch"
// (torch.optim.AdamW with its own default kernels: foreach on CUDA), ADAMW_8BIT = "adamw_8bit"
// (bitsandbytes.optim.AdamW with optim_bits=8), PAGED_ADAMW_8BIT = "paged_adamw_8bit",
// PAGED_ADAMW = "paged_adamw_32bit" (bitsandbytes.optim.PagedAdamW, optim_bits=32), SGD = "sgd"
// (torch.optim.SGD).
constexpr Names<OptimizerKind, 6> kHfOptimNames = {{{OptimizerKind::kAdamW, "adamw_torch_fused"},
                                                    {OptimizerKind::kAdamWForeach, "adamw_torch"},
                                                    {OptimizerKind::kAdamW8bit, "adamw_8bit"},
                                                    {OptimizerKind::kPagedAdamW8bit, "paged_adamw_8bit"},
                                                    {OptimizerKind::kPagedAdamW32bit, "paged_adamw_32bit"},
                                                    {OptimizerKind::kSgd, "sgd"}}};
constexpr Names<Packing, 3> kPackingNames = {{
    {Packing::kNone, "none"}, {Packing::kWrapped, "wrapped"}, {Packing::kBfd, "bfd"}}};
constexpr Names<BaseQuant, 3> kBaseQuantNames = {{
    {BaseQuant::kNone, "none"}, {BaseQuant::kNf4, "nf4"}, {BaseQuant::kInt8, "int8"}}};

template <typename Enum, size_t N>
std::string name_of(const Names<Enum, N>& names, Enum value) {
  for (const auto& [known, name] : names) {
    if (known == value) return name;
  }
  return "?";
}

// `what` is the option ("precision", "--lengths"); the message lists the choices in table order.
template <typename Enum, size_t N>
Enum value_of(const Names<Enum, N>& names, const std::string& text, const std::string& what) {
  std::string choices;
  for (size_t i = 0; i < N; ++i) {
    if (text == names[i].second) return names[i].first;
    choices += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(names[i].second);
  }
  throw UserError("unknown " + what + " " + text::quoted(text) + "; use " + choices);
}

std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

template <typename T>
std::string join(const std::vector<T>& values) {
  std::ostringstream out;
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  return out.str();
}

// A list's values as `name` writes each, comma-separated: "fp32,bf16".
template <typename T, typename Name>
std::string join(const std::vector<T>& values, Name name) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + name(values[i]);
  return out;
}

std::string flag(bool value) { return value ? "true" : "false"; }

// A grid dimension's values in the order given: the workload's own, then the grid's others, a
// value given twice kept once.
template <class Value>
std::vector<Value> first_then_others(Value first, const std::vector<Value>& others) {
  std::vector<Value> values = {first};
  for (const Value& value : others) {
    if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
  }
  return values;
}

}  // namespace

std::string to_string(Precision precision) { return name_of(kPrecisionNames, precision); }
Precision precision_from_string(const std::string& text) { return value_of(kPrecisionNames, text, "precision"); }
Precision weights_dtype_from_string(const std::string& text) {
  return value_of(kPrecisionNames, text, "--weights-dtype");
}
int64_t compute_bytes(Precision precision) { return precision == Precision::kFp32 ? 4 : 2; }

std::string to_string(Checkpointing checkpointing) { return name_of(kCheckpointingNames, checkpointing); }
Checkpointing checkpointing_from_string(const std::string& text) {
  return value_of(kCheckpointingNames, text, "--activation-checkpointing");
}

std::string to_string(LossNormalization normalization) { return name_of(kNormalizationNames, normalization); }
LossNormalization loss_normalization_from_string(const std::string& text) {
  return value_of(kNormalizationNames, text, "--loss-normalization");
}

std::string to_string(LengthMode mode) { return name_of(kAllLengthNames, mode); }
LengthMode length_mode_from_string(const std::string& text) { return value_of(kLengthNames, text, "--lengths"); }

std::string to_string(Padding padding) { return name_of(kPaddingNames, padding); }
std::string to_string(OptimizerKind kind) { return name_of(kOptimizerNames, kind); }
OptimizerKind optimizer_kind_from_string(const std::string& text) {
  return value_of(kOptimizerNames, text, "--optimizer");
}
std::string hf_optim_name(OptimizerKind kind) { return name_of(kHfOptimNames, kind); }
std::string to_string(Packing packing) { return name_of(kPackingNames, packing); }
Packing packing_from_string(const std::string& text) { return value_of(kPackingNames, text, "--packing"); }
std::string packing_word(Packing packing) { return packing == Packing::kNone ? "unpacked" : "pack-" + to_string(packing); }
std::string to_string(BaseQuant quant) { return name_of(kBaseQuantNames, quant); }
BaseQuant base_quant_from_string(const std::string& text) { return value_of(kBaseQuantNames, text, "--base-quant"); }

void set_lengths(DataSource& data, const std::string& text) {
  data.lengths_file.clear();
  if (text == "fixed" || text == "variable") {
    data.lengths = length_mode_from_string(text);
    return;
  }
  data.lengths = LengthMode::kFile;  // src/data/lengths.cpp reads it and names a missing file
  data.lengths_file = text;
}

int64_t distinct_steps_from_string(const std::string& text) {
  if (text == "epoch") return DataSource::kEpochSteps;
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!text.empty() && std::all_of(text.begin(), text.end(), digit) && text.find_first_not_of('0') != std::string::npos) {
    // Past 18 digits: above any limit, which the caller's check names (it said "not a number").
    return text.size() > 18 ? std::numeric_limits<int64_t>::max() : std::stoll(text);
  }
  throw UserError("--distinct-steps " + text::quoted(text) + " is neither a positive number of steps nor epoch; give "
                  "the steps of data to cycle through, as in --distinct-steps 8, or epoch (one pass over the file)");
}

std::string distinct_steps_name(const DataSource& data) {
  if (data.distinct_steps == DataSource::kEpochSteps) return "epoch";
  return std::to_string(data.distinct_steps_given() ? data.distinct_steps : int64_t{kDistinctBatchesByDefault});
}

namespace {
// The words a boolean takes where users come from: transformers' argument parser (True, yes, 1...)
// and a CLI11 flag given a value (on/off); nullopt for any other.
std::optional<bool> boolean_word(const std::string& text) {
  std::string word = text;
  std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* yes : {"true", "t", "yes", "y", "on", "1"})
    if (word == yes) return true;
  for (const char* no : {"false", "f", "no", "n", "off", "0"})
    if (word == no) return false;
  return std::nullopt;
}
}  // namespace

bool completion_only_loss_from_string(const std::string& text) {
  // The spellings --group-by-length takes (helper-93: True was refused here, taken there).
  if (const std::optional<bool> value = boolean_word(text)) return *value;
  throw UserError("--completion-only-loss " + text::quoted(text) + " is neither true nor false; use true (a lengths "
                  "file's completion_mask leaves the prompts' labels out, TRL's default) or false (they count)");
}

bool kbit_upcast_from_string(const std::string& text) {
  if (text == "peft") return true;
  if (text == "none") return false;
  throw UserError("--kbit-prep " + text::quoted(text) + " is not a preparation of a quantised base; use peft (PEFT's "
                  "prepare_model_for_kbit_training: the other parameters in fp32) or none (they stay in --weights-dtype)");
}

std::string kbit_prep_name(bool upcast) { return upcast ? "peft" : "none"; }

Precision adapter_dtype_from_string(const std::string& text) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "bf16") return Precision::kBf16;
  if (text == "fp16") {
    throw UserError("--adapter-dtype fp16 is not measured: no trainer stores LoRA adapters in fp16 (PEFT keeps them "
                    "in fp32, TRL casts them to bf16), and their fp16 gradients could not train under fp16 autocast, "
                    "whose GradScaler refuses to unscale them; use fp32 (PEFT's default) or bf16");
  }
  throw UserError("--adapter-dtype " + text::quoted(text) + " is not a dtype for LoRA adapters; use fp32 (PEFT's "
                  "default) or bf16 (TRL's QLoRA)");
}

std::string weights_dtype_device_problem(Precision dtype, bool cuda, bool planning) {
  if (dtype != Precision::kFp16 || cuda) return "";
  return std::string("--weights-dtype fp16 needs a CUDA device (the CPU build's matrix products have no fp16 "
                     "kernels); ") +
         (planning ? "plan with --device cuda, or " : "") + "use --weights-dtype bf16 or fp32 on the CPU";
}

std::string adapter_dtype_problem(const LoraOptions& lora, Precision precision, Precision weights_dtype) {
  if (!lora.enabled() || lora.adapter_dtype == Precision::kFp32) return "";
  const std::string fix = "; use --precision bf16, or --adapter-dtype fp32";
  if (precision == Precision::kFp16) {
    return "--adapter-dtype bf16 under --precision fp16 is not planned or measured here: autocast would cast the bf16 "
           "adapters to fp16 at every use (TRL's QLoRA with fp16: true)" + fix;
  }
  if (weights_dtype == Precision::kFp16 && !lora.quantized()) {
    return "--adapter-dtype bf16 beside --weights-dtype fp16 is not planned: every adapter would copy its fp16 input "
           "to bf16; use --weights-dtype bf16, or --adapter-dtype fp32";
  }
  if (precision == Precision::kFp32 && (weights_dtype == Precision::kFp32 || lora.quantized())) {
    return std::string("--adapter-dtype bf16 beside fp32 activations (--precision fp32 over ") +
           (lora.quantized() ? "a quantised base, whose products run in fp32" : "fp32 weights") +
           ") is not planned: every adapter would copy its input to bf16 and add its delta back in fp32" + fix;
  }
  return "";
}

std::optional<std::string> recorded_option(const std::vector<std::pair<std::string, std::string>>& options,
                                           const std::string& name) {
  for (const auto& [option, value] : options) {
    if (option == name) return value;
  }
  if (name == "base_quant") return to_string(BaseQuant::kNone);
  if (name == "double_quant") return std::string("false");
  if (name == "lora_rslora") return std::string("false");
  if (name == "kbit_prep") return kbit_prep_name(true);
  if (name == "adapter_dtype") return to_string(Precision::kFp32);
  if (name == "tf32") return std::string("on");
  if (name == "max_grad_norm") return std::string("0");
  if (name == "completion_only_loss") return std::string("true");
  if (name == "distinct_steps") return std::to_string(kDistinctBatchesByDefault);
  return std::nullopt;
}

std::vector<std::string> option_names(const std::vector<std::pair<std::string, std::string>>& first,
                                      const std::vector<std::pair<std::string, std::string>>& second) {
  std::vector<std::string> names;
  for (const auto* options : {&first, &second}) {
    for (const auto& option : *options) {
      if (std::find(names.begin(), names.end(), option.first) == names.end()) names.push_back(option.first);
    }
  }
  return names;
}

std::string lengths_name(const DataSource& data) {
  if (!data.token_file.empty() && data.eos_id >= 0) {
    return "documents of " + data.token_file + " split at eos " + std::to_string(data.eos_id);
  }
  return data.lengths == LengthMode::kFile ? data.lengths_file : to_string(data.lengths);
}

PaddingChoice padding_from_string(const std::string& text) {
  const std::string prefix = "multiple:";
  if (text.rfind(prefix, 0) != 0) {
    if (text == "multiple") throw UserError("--padding multiple needs its N, as in multiple:8");
    if (text != "max" && text != "longest") {
      throw UserError("unknown --padding " + text::quoted(text) + "; use max, longest or multiple:N (as in multiple:8)");
    }
    return {value_of(kPaddingNames, text, "--padding"), 0};
  }
  const std::string digits = text.substr(prefix.size());
  // Digits only: strtoll would also take " 8" and "+8".
  const bool all_digits = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  char* end = nullptr;
  errno = 0;
  const long long n = all_digits ? std::strtoll(digits.c_str(), &end, 10) : 0;
  if (all_digits && errno == ERANGE) {
    throw UserError("--padding " + text::quoted(text, 60) + " is past any sequence length; pick an N up to --seq-len, as in multiple:8");
  }
  if (!all_digits || n <= 0) {
    throw UserError("--padding " + text::quoted(text, 60) + " needs a positive multiple, as in multiple:8 (pad each micro-batch to its longest sample rounded up to 8)");
  }
  return {Padding::kMultiple, n};
}

std::string padding_name(const PaddingChoice& choice) {
  return choice.padding == Padding::kMultiple ? "multiple:" + std::to_string(choice.multiple) : to_string(choice.padding);
}

std::string padding_word(const PaddingChoice& choice) {
  return "pad-" + (choice.padding == Padding::kMultiple ? "multiple" + std::to_string(choice.multiple) : to_string(choice.padding));
}

bool pads_every_row_to_t(const PaddingChoice& choice, int64_t seq_len) {
  return choice.padding == Padding::kMax || (choice.padding == Padding::kMultiple && choice.multiple == seq_len);
}

std::string join_paddings(const std::vector<PaddingChoice>& choices) {
  return join(choices, [](const PaddingChoice& c) { return padding_name(c); });
}

std::string join_packings(const std::vector<Packing>& packings) {
  return join(packings, [](Packing p) { return to_string(p); });
}

bool grouping_from_string(const std::string& text) {
  if (const std::optional<bool> value = boolean_word(text)) return *value;
  throw UserError("--group-by-length " + text::quoted(text) + " is neither true nor false; give true (transformers' "
                  "LengthGroupedSampler), false (a random order) or both, as in --group-by-length false,true");
}

std::string grouping_word(bool group_by_length) { return group_by_length ? "grouped" : "ungrouped"; }

std::string join_groupings(const std::vector<bool>& groupings) { return join(groupings, flag); }

void set_padding(DataSource& data, const std::string& text) { set_padding(data, padding_from_string(text)); }

void set_padding(DataSource& data, const PaddingChoice& choice) {
  data.padding = choice.padding;
  data.pad_multiple = choice.multiple;
}

PaddingChoice padding_of(const DataSource& data) { return {data.padding, data.pad_multiple}; }

std::string padding_name(const DataSource& data) { return padding_name(padding_of(data)); }

std::vector<PaddingChoice> data_paddings(const DataSource& data) {
  return first_then_others(padding_of(data), data.other_paddings);
}

int64_t padded_length(Padding padding, int64_t multiple, int64_t longest, int64_t seq_len) {
  switch (padding) {
    case Padding::kMax: return seq_len;
    case Padding::kLongest: return std::min(longest, seq_len);
    case Padding::kMultiple: return std::min(seq_len, (longest + multiple - 1) / multiple * multiple);
  }
  return seq_len;
}

int64_t padded_length(const DataSource& data, int64_t longest, int64_t seq_len) {
  return padded_length(data.padding, data.pad_multiple, longest, seq_len);
}

namespace {

// --padding multiple:N past T: the sentence, or "".
std::string multiple_past_seq_len_problem(const DataSource& data, int64_t n, int64_t longest, int64_t seq_len) {
  const bool packed = data.packing == Packing::kBfd;  // best-fit rows fill up to T, whatever the samples
  longest = packed ? seq_len : std::min(longest, seq_len);
  if (n <= seq_len && (longest + n - 1) / n * n <= seq_len) return "";
  const std::string rounded = n > seq_len ? std::to_string(n) : std::to_string((longest + n - 1) / n * n);
  const std::string t = std::to_string(seq_len);
  return "--padding multiple:" + std::to_string(n) + " pads a micro-batch whose longest " +
         (packed ? "packed row" : "sample") + " has " + std::to_string(longest) + " positions to " + rounded + ", past --seq-len " + t +
         " (TRL's and axolotl's pad_to_multiple_of do not stop at max_length), and accumbench runs no row longer than "
         "--seq-len; "
         "pick an N that divides " + t + ", or a --seq-len that is a multiple of " + std::to_string(n);
}

}  // namespace

std::string padding_past_seq_len_problem(const DataSource& data, int64_t longest, int64_t seq_len) {
  for (const Packing packing : data_packings(data)) {
    DataSource one = data;
    one.packing = packing;
    for (const PaddingChoice& choice : data_paddings(data)) {
      if (choice.padding != Padding::kMultiple || packing == Packing::kWrapped || choice.multiple <= 0) continue;
      if (std::string problem = multiple_past_seq_len_problem(one, choice.multiple, longest, seq_len); !problem.empty()) {
        return problem;
      }
    }
  }
  return "";
}

WorkloadOptions workload_defaults(Command command) {
  WorkloadOptions w;
  switch (command) {
    case Command::kSweep:
      break;  // the struct's own defaults: gpt2-mini, T=128, batch 8
    case Command::kVerify:
      // Fixed lengths, as sweep and plan: verify checks the workload as given. With them every
      // normalization gives the same update; verify says so and names --lengths variable.
      w.model.preset = "gpt2-tiny";
      w.seq_len = 64;
      break;
    case Command::kPlan:
      w.model.preset = "gpt2-124m";
      w.seq_len = 1024;
      w.batch = 64;
      break;
  }
  return w;
}

bool rows_are_samples(const DataSource& data) {
  return data.token_file.empty() ? data.lengths != LengthMode::kFixed : data.eos_id >= 0;
}

bool real_samples(const DataSource& data) { return data.lengths == LengthMode::kFile || data.eos_id >= 0; }

namespace {

constexpr double kMaxLoraAlpha = 1e6;

void validate_lora_options(const LoraOptions& lora) {
  if (lora.rank < 0) {
    throw UserError("--lora-rank must not be negative, got " + std::to_string(lora.rank) + "; use 0 for full fine-tuning");
  }
  if (lora.rank == 0 && (lora.alpha != 0 || lora.dropout != 0 || lora.targets != "all-linear" || lora.rslora)) {
    throw UserError("--lora-alpha, --lora-targets, --lora-dropout and --lora-rslora shape LoRA adapters, which are off "
                    "(--lora-rank 0); add --lora-rank R or drop them");
  }
  // No LoRA setup scales its adapters by a million (alpha is the rank to a few times it): far
  // beyond, the first step's gradients overflow fp32 and every loss reads nan.
  if (!(lora.alpha >= 0) || !std::isfinite(lora.alpha) || lora.alpha > kMaxLoraAlpha) {
    throw UserError("--lora-alpha must be a number from 0 (twice the rank) to 1e6, got " + number(lora.alpha) +
                    "; alpha is usually the rank to a few times it");
  }
  if (!(lora.dropout >= 0 && lora.dropout < 1)) {
    throw UserError("--lora-dropout must be in [0, 1), got " + number(lora.dropout));
  }
  // QLoRA quantises the frozen base of LoRA; a full fine-tune trains the weights themselves.
  if (lora.base_quant != BaseQuant::kNone && lora.rank == 0) {
    throw UserError("--base-quant " + to_string(lora.base_quant) +
                    " stores the frozen base of LoRA, which is off (--lora-rank 0); add --lora-rank R (QLoRA) or drop --base-quant");
  }
  if (!lora.kbit_upcast && !lora.quantized()) {
    throw UserError("--kbit-prep none says how a quantised base's other parameters are kept, but there is no quantised "
                    "base; add --base-quant nf4 or int8, or drop --kbit-prep");
  }
  if (lora.adapter_dtype != Precision::kFp32 && !lora.enabled()) {
    throw UserError("--adapter-dtype " + to_string(lora.adapter_dtype) +
                    " stores LoRA adapters, which are off (--lora-rank 0); add --lora-rank R or drop --adapter-dtype");
  }
  if (lora.double_quant && lora.base_quant != BaseQuant::kNf4) {
    throw UserError("--double-quant quantises NF4's absmax again, but --base-quant is " + to_string(lora.base_quant) +
                    "; add --base-quant nf4 or drop --double-quant");
  }
}

// `value` must be finite and in [low, high] (`low_open`: above low); the message names the option.
// `high_open`: below high.
void require_in_range(const std::string& option, double value, double low, double high, bool low_open,
                      const std::string& what, bool high_open = false) {
  const bool ok = std::isfinite(value) && (low_open ? value > low : value >= low) && (high_open ? value < high : value <= high);
  if (!ok) throw UserError(option + " must be " + what + ", got " + number(value));
}

void require_at_most(const std::string& option, int64_t value, int64_t limit, const std::string& why) {
  if (value > limit) {
    throw UserError(option + " " + std::to_string(value) + " is above the limit of " + std::to_string(limit) + " (" + why +
                    "); pick a smaller value");
  }
}

void validate_optimizer(const OptimizerOptions& o) {
  require_in_range("--lr", o.lr, 0, 10, false, "a finite number in [0, 10]");
  require_in_range("--beta1", o.beta1, 0, 1, false, "in [0, 1)", /*high_open=*/true);
  require_in_range("--beta2", o.beta2, 0, 1, false, "in [0, 1)", /*high_open=*/true);
  require_in_range("--adam-eps", o.eps, 0, 1, true, "a positive number of at most 1");
  require_in_range("--weight-decay", o.weight_decay, 0, 10, false, "a finite number in [0, 10]");
  require_in_range("--max-grad-norm", o.max_grad_norm, 0, std::numeric_limits<double>::max(), false,
                   "a finite number of 0 or more (0: no clipping)");
}

// Limits that protect the machine and keep sizes in int64 arithmetic: far above any real run.
void validate_limits(const WorkloadOptions& w) {
  require_at_most("--seq-len", w.seq_len, kMaxSeqLen, "tokens per sequence");
  require_at_most("--batch", w.batch, kMaxBatch, "sequences per step");
  require_at_most("--batch × --seq-len", w.batch * w.seq_len, kMaxStepTokens, "tokens per step");
  const int64_t hardware = std::max(1u, std::thread::hardware_concurrency());
  require_at_most("--threads", w.threads, 4 * hardware, "four times this machine's " + std::to_string(hardware) + " hardware threads");
  require_at_most("--world-size", w.world_size, int64_t{1} << 16, "data-parallel ranks");
  require_at_most("--loss-chunk-tokens", w.loss.chunk_tokens, int64_t{1} << 31, "tokens per chunk");
  require_at_most("--lora-rank", w.lora.rank, int64_t{1} << 16, "adapter rank");
  require_at_most("--distinct-steps", w.data.distinct_steps, kMaxDistinctSteps, "steps of data");
}

// The options that arrange samples of different lengths ("--packing bfd", "--group-by-length"):
// with samples all of one length they have nothing to act on.
std::vector<std::string> sample_arranging_options(const DataSource& data) {
  std::vector<std::string> options;
  const std::vector<Packing> packings = data_packings(data);
  if (packings.size() > 1 || data.packing != Packing::kNone) options.push_back("--packing " + join_packings(packings));
  const std::vector<bool> groupings = data_groupings(data);
  if (groupings.size() > 1) {
    options.push_back("--group-by-length " + join_groupings(groupings));
  } else if (data.group_by_length) {
    options.push_back("--group-by-length");
  }
  return options;
}

// What the real-data options can be combined with (lengths files are read in src/data).
void validate_data_source(const WorkloadOptions& w) {
  const DataSource& data = w.data;
  const std::vector<PaddingChoice> paddings = data_paddings(data);
  for (const PaddingChoice& choice : paddings) {
    if (choice.padding == Padding::kMultiple && choice.multiple <= 0) {
      throw UserError("--padding multiple:" + std::to_string(choice.multiple) + " needs a positive multiple, as in multiple:8");
    }
    if (w.grid.cuda_graphs && choice.per_micro_batch()) {
      throw UserError("--cuda-graphs replays one fixed micro-batch shape, but --padding " + padding_name(choice) +
                      " changes the shape per micro-batch; use --padding max with --cuda-graphs or drop it");
    }
  }
  // A list compares paddings of samples shorter than T: where every row is T tokens, each padding
  // would run the same micro-batches, measured as many times over.
  const std::vector<Packing> packings = data_packings(data);
  const bool some_wrapped = std::find(packings.begin(), packings.end(), Packing::kWrapped) != packings.end();
  if (paddings.size() > 1) {
    const std::string list = "--padding " + join_paddings(paddings);
    if (some_wrapped && packings.size() > 1) {
      throw UserError(list + " compares nothing under --packing wrapped, whose rows are always T tokens of "
                      "concatenated samples; give one --padding, or drop wrapped from --packing " +
                      join_packings(packings));
    }
    if (some_wrapped) {
      throw UserError(list + " compares nothing under --packing wrapped, whose rows are always T tokens of "
                      "concatenated samples; give one --padding, or --packing none or bfd");
    }
    if (!data.token_file.empty() && data.eos_id < 0) {
      throw UserError(list + " compares nothing: --tokens without --eos-id cuts full windows of --seq-len + 1 "
                      "tokens, every row T long; give --eos-id N (its documents are the samples) or one --padding");
    }
    if (!rows_are_samples(data)) {
      throw UserError(list + " compares nothing with --lengths fixed, where every sample is T tokens; give your "
                      "dataset's lengths (--lengths FILE) or --lengths variable, or one --padding");
    }
  }
  // A list compares the rows each packing makes of samples of different lengths: full windows are
  // the same rows whatever packs them.
  if (packings.size() > 1) {
    const std::string list = "--packing " + join_packings(packings);
    if (!data.token_file.empty() && data.eos_id < 0) {
      throw UserError(list + " compares nothing: --tokens without --eos-id cuts full windows of --seq-len + 1 "
                      "tokens, which no packing changes; give --eos-id N (its documents are the samples) or one "
                      "--packing");
    }
    if (!rows_are_samples(data)) {
      throw UserError(list + " compares nothing with --lengths fixed, where every sample is a full row of T tokens; "
                      "give your dataset's lengths (--lengths FILE) or --lengths variable, or one --packing");
    }
  }
  // A list compares the steps each order makes of samples of different lengths: full windows, and
  // wrapped rows (always T tokens of concatenated samples), are the same steps in any order.
  if (const std::vector<bool> groupings = data_groupings(data); groupings.size() > 1) {
    const std::string list = "--group-by-length " + join_groupings(groupings);
    if (!data.token_file.empty() && data.eos_id < 0) {
      throw UserError(list + " compares nothing: --tokens without --eos-id cuts full windows of --seq-len + 1 "
                      "tokens, all of one length; give --eos-id N (its documents are the samples) or one --group-by-length");
    }
    if (!rows_are_samples(data)) {
      throw UserError(list + " compares nothing with --lengths fixed, where every sample is T tokens; give your "
                      "dataset's lengths (--lengths FILE) or --lengths variable, or one --group-by-length");
    }
    if (some_wrapped) {
      throw UserError(list + " compares nothing under --packing wrapped, whose rows are always T tokens of "
                      "concatenated samples; " +
                      (packings.size() > 1 ? "drop wrapped from --packing " + join_packings(packings) + ", or give one --group-by-length"
                                           : std::string("give one --group-by-length, or --packing none or bfd")));
    }
    // Padded to T (max, or a multiple of T or more), a grouped step runs the shapes a random one
    // does: only which samples it holds differs.
    if (std::all_of(paddings.begin(), paddings.end(), [&w](const PaddingChoice& c) { return pads_every_row_to_t(c, w.seq_len); })) {
      throw UserError(list + " compares nothing with --padding " + join_paddings(paddings) + ", which pads every row " +
                      "to T=" + std::to_string(w.seq_len) + ": both orders run the same shapes, and only which " +
                      "samples a step holds differs; give --padding longest (TRL's default) or multiple:N with N " +
                      "below T, or a --padding list with one of them");
    }
  }
  if (w.grid.cuda_graphs && std::find(packings.begin(), packings.end(), Packing::kBfd) != packings.end()) {
    throw UserError("--cuda-graphs replays one fixed attention layout, but --packing bfd gives every micro-batch its own "
                    "documents; " +
                    (packings.size() > 1 ? "drop bfd from --packing " + join_packings(packings) + " with --cuda-graphs"
                                         : std::string("use --packing none or wrapped with --cuda-graphs")) +
                    ", or drop it");
  }
  if (data.token_file.empty() && data.lengths != LengthMode::kFile) {
    // Synthetic samples reach T (fixed: all of them; variable: uniform up to T). A lengths file or
    // documents are checked against their own longest sample where they are read (src/data).
    if (const std::string problem = padding_past_seq_len_problem(data, w.seq_len, w.seq_len); !problem.empty()) {
      throw UserError(problem);
    }
  }
  if (data.distinct_steps == DataSource::kEpochSteps && data.token_file.empty() && data.lengths != LengthMode::kFile) {
    throw UserError(std::string("--distinct-steps epoch needs a lengths file (or sweep's --tokens) to pass over, and --lengths ") +
                    (data.lengths == LengthMode::kVariable ? "variable draws" : "fixed makes") +
                    " new samples without end; give a number of steps, as in --distinct-steps 8, or --lengths FILE");
  }
  if (data.token_bytes != 2 && data.token_bytes != 4) {
    throw UserError("--token-bytes " + std::to_string(data.token_bytes) +
                    ": token ids are 2 (uint16) or 4 (uint32) bytes wide; pass --token-bytes 2 or 4");
  }
  if (data.token_bytes != 2 && data.token_file.empty()) {
    throw UserError("--token-bytes gives the width of a --tokens file's ids, which is not given; add --tokens FILE or "
                    "drop --token-bytes");
  }
  if (data.eos_id < -1) {  // -1 is "none", the default
    throw UserError("--eos-id " + std::to_string(data.eos_id) +
                    " is not a token id; give your tokenizer's end-of-sequence id (0 or more)");
  }
  if (data.eos_id >= 0 && data.token_file.empty()) {
    throw UserError("--eos-id splits the documents of a --tokens file, which is not given; add --tokens FILE or drop --eos-id");
  }
  if (data.token_file.empty()) return;
  // A token file gives the samples itself: its documents with --eos-id, else full windows of
  // --seq-len + 1 tokens. Options that would shape samples otherwise have nothing to act on.
  const std::string lengths = data.lengths == LengthMode::kFile       ? "--lengths " + data.lengths_file
                              : data.lengths == LengthMode::kVariable ? "--lengths variable"
                                                                      : "";
  if (data.eos_id >= 0 && !lengths.empty()) {
    throw UserError(lengths + " and --eos-id both give the sample lengths; drop one of them");
  }
  if (data.eos_id < 0) {
    const std::vector<std::string> arranging = sample_arranging_options(data);
    const std::string shaping = !lengths.empty() ? lengths : arranging.empty() ? "" : arranging.front();
    if (!shaping.empty()) {
      throw UserError(shaping + " acts on samples of different lengths, but --tokens without --eos-id cuts " +
                      data.token_file + " into full windows of --seq-len + 1 tokens; add --eos-id N to take its " +
                      "documents as the samples, or drop " + shaping);
    }
  }
}

}  // namespace

std::string idle_weights_dtype_note(const WorkloadOptions& w) {
  if (!w.lora.quantized() || !w.lora.kbit_upcast || w.weights_dtype == Precision::kFp32) return "";
  return "--weights-dtype " + to_string(w.weights_dtype) + " changes nothing here: the --base-quant " +
         to_string(w.lora.base_quant) + " base is the same in any dtype, and --kbit-prep peft casts every other "
         "parameter to fp32 (prepare_model_for_kbit_training); --kbit-prep none keeps them in " +
         to_string(w.weights_dtype);
}

std::string oib_foreach_note(const WorkloadOptions& w) {
  if (!w.grid.knobs && !w.grid.optimizer_in_backward) return "";
  std::vector<OptimizerKind> kinds = w.grid.other_optimizers;
  kinds.push_back(w.optimizer.kind);
  const auto listed = [&kinds](OptimizerKind k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); };
  if (!listed(OptimizerKind::kAdamWForeach)) return "";
  return std::string("with the optimizer inside backward each parameter steps alone as its gradient completes, so "
                     "adamw-foreach's oib splits step one tensor at a time") +
         (listed(OptimizerKind::kAdamW) ? ", the same step as adamw's oib splits" : ", as adamw does") +
         " (foreach kernels batch tensors only across a whole step)";
}

std::string idle_data_options_note(const WorkloadOptions& w) {
  const DataSource& data = w.data;
  std::string note;
  if (data.lengths == LengthMode::kFixed && data.token_file.empty()) {
    std::vector<std::string> idle = sample_arranging_options(data);
    // Every micro-batch's longest sample is T, so each padding pads to T, as max does.
    const std::vector<PaddingChoice> paddings = data_paddings(data);
    if (std::any_of(paddings.begin(), paddings.end(), [](const PaddingChoice& p) { return p.per_micro_batch(); })) {
      idle.insert(idle.begin(), "--padding " + join_paddings(paddings));
    }
    if (!idle.empty()) {
      const bool one = idle.size() == 1;
      std::string named = idle.front();
      for (size_t i = 1; i < idle.size(); ++i) named += (i + 1 == idle.size() ? " and " : ", ") + idle[i];
      note = (one ? named + " acts" : named + " act") +
             " on samples of different lengths, but with --lengths fixed every sample is T tokens, so " +
             (one ? "it changes" : "they change") +
             " nothing here; give your dataset's lengths (--lengths FILE) or --lengths variable";
    }
  }
  if (!data.token_file.empty() && data.eos_id < 0 && data.padding != Padding::kMax) {
    note += (note.empty() ? "" : "; ") + std::string("--padding ") + padding_name(data) + " pads nothing: --tokens "
            "without --eos-id cuts full windows of --seq-len + 1 tokens, every row T long";
  }
  const std::vector<Packing> packings = data_packings(data);
  const bool some_wrapped = std::find(packings.begin(), packings.end(), Packing::kWrapped) != packings.end();
  if (some_wrapped && data.group_by_length) {
    note += (note.empty() ? "" : "; ") + std::string("--group-by-length changes nothing under --packing wrapped, "
            "whose rows are always T tokens of concatenated samples");
  }
  if (some_wrapped && data.padding != Padding::kMax) {
    note += (note.empty() ? "" : "; ") + std::string("--padding ") + padding_name(data) +
            " pads nothing under --packing wrapped, whose rows are always T tokens of concatenated samples";
  }
  return note;
}

void validate_workload(const WorkloadOptions& w) {
  if (w.seq_len <= 0) throw UserError("--seq-len must be positive, got " + std::to_string(w.seq_len) + "; give the tokens per sequence, e.g. --seq-len 1024");
  if (w.batch <= 0) throw UserError("--batch must be positive, got " + std::to_string(w.batch) + "; give the effective batch in sequences, e.g. --batch 64");
  validate_limits(w);
  validate_optimizer(w.optimizer);
  for (double norm : w.grid.other_max_grad_norms) validate_optimizer(with_max_grad_norm(w, norm).optimizer);
  // Below a second no rank can join (helper-98: 0.001 gave the store's socket timeout on rank 0).
  require_in_range("--dist-timeout", w.dist_timeout_seconds, 1, 86400, false,
                   "a number of seconds in [1, 86400] (joining takes a second or more)");
  for (int64_t micro : w.micro_batches) {
    if (micro <= 0) throw UserError("micro-batch must be positive, got " + std::to_string(micro) + "; give --micro-batches values of 1 or more");
  }
  if (w.precisions.empty()) throw UserError("--precision needs at least one of fp32, bf16, fp16");
  const std::vector<Precision> weights = grid_weights_dtypes(w);
  // With a quantised base the weights dtype changes only what --kbit-prep none leaves outside the
  // quantised linears (with peft every one of them is fp32): one dtype per sweep there.
  if (weights.size() > 1 && w.lora.quantized()) {
    throw UserError("--weights-dtype " + join_precisions(weights) + " with --base-quant " + to_string(w.lora.base_quant) +
                    " is not swept: the quantised base is the same in each, and the parameters beside it are " +
                    (w.lora.kbit_upcast ? "fp32 whatever the dtype (--kbit-prep peft)" : "one sweep's choice") +
                    "; give one --weights-dtype");
  }
  for (Precision dtype : weights) {
    // The quantised linears compute in the step's precision; without the fp32 upcast the norms and
    // embeddings beside them are in --weights-dtype, which only an autocast of that dtype joins.
    if (w.lora.quantized() && !w.lora.kbit_upcast && dtype != Precision::kFp32) {
      for (Precision p : w.precisions) {
        if (p != dtype)
          throw UserError("--kbit-prep none keeps the norms and embeddings in " + to_string(dtype) +
                          " (--weights-dtype), beside the quantised linears' " + to_string(p) +
                          " outputs, which only --precision " + to_string(dtype) + " (autocast) joins; use "
                          "--precision " + to_string(dtype) + ", or --kbit-prep peft");
      }
    }
    for (Precision adapters : grid_adapter_dtypes(w)) {
      LoraOptions lora = w.lora;
      lora.adapter_dtype = adapters;
      for (Precision p : w.precisions) {
        if (const std::string problem = adapter_dtype_problem(lora, p, dtype); !problem.empty()) throw UserError(problem);
      }
    }
  }
  if (w.threads < 0) {
    throw UserError("--threads must not be negative, got " + std::to_string(w.threads) +
                    "; use 0 for every hardware thread");
  }
  if (w.memory_limit_bytes < 0) throw UserError("--memory-limit must not be negative");
  if (w.world_size < 1) throw UserError("--world-size must be at least 1, got " + std::to_string(w.world_size));
  if (w.loss.chunk_tokens < 0) {
    throw UserError("--loss-chunk-tokens must not be negative, got " + std::to_string(w.loss.chunk_tokens) +
                    "; use 0 for the automatic size");
  }
  if (w.loss.chunk_tokens > 0 && !w.loss.chunked) {
    throw UserError("--loss-chunk-tokens sizes the chunks of the chunked loss, which is off; add --chunked-loss or drop the option");
  }
  if (w.grid.cuda_graphs && w.grid.optimizer_in_backward) {
    throw UserError("--cuda-graphs cannot replay the optimizer step inside backward, and --optimizer-in-backward puts it "
                    "in every split; drop one of the two options");
  }
  for (Precision adapters : grid_adapter_dtypes(w)) validate_lora_options(with_adapter_dtype(w, adapters).lora);
  validate_data_source(w);
}

void apply_base_quant_defaults(WorkloadOptions& w, bool checkpointing_given) {
  // prepare_model_for_kbit_training's use_gradient_checkpointing=True; without it, none.
  if (w.lora.quantized() && w.lora.kbit_upcast && !checkpointing_given) w.grid.checkpointing = Checkpointing::kBlocks;
}

std::vector<OptimizerKind> grid_optimizers(const WorkloadOptions& w) {
  return first_then_others(w.optimizer.kind, w.grid.other_optimizers);
}

std::string join_optimizers(const std::vector<OptimizerKind>& optimizers) {
  return join(optimizers, [](OptimizerKind kind) { return to_string(kind); });
}

std::vector<Precision> grid_weights_dtypes(const WorkloadOptions& w) {
  return first_then_others(w.weights_dtype, w.grid.other_weights_dtypes);
}

WorkloadOptions with_weights_dtype(WorkloadOptions w, Precision dtype) {
  w.weights_dtype = dtype;
  w.grid.other_weights_dtypes.clear();
  return w;
}

std::vector<Precision> grid_adapter_dtypes(const WorkloadOptions& w) {
  return first_then_others(w.lora.adapter_dtype, w.grid.other_adapter_dtypes);
}

WorkloadOptions with_adapter_dtype(WorkloadOptions w, Precision dtype) {
  w.lora.adapter_dtype = dtype;
  w.grid.other_adapter_dtypes.clear();
  return w;
}

std::vector<PaddingChoice> grid_paddings(const WorkloadOptions& w) { return data_paddings(w.data); }

WorkloadOptions with_padding(WorkloadOptions w, const PaddingChoice& choice) {
  set_padding(w.data, choice);
  w.data.other_paddings.clear();
  return w;
}

std::vector<Packing> data_packings(const DataSource& data) { return first_then_others(data.packing, data.other_packings); }

std::vector<Packing> grid_packings(const WorkloadOptions& w) { return data_packings(w.data); }

WorkloadOptions with_packing(WorkloadOptions w, Packing packing) {
  w.data.packing = packing;
  w.data.other_packings.clear();
  return w;
}

std::vector<bool> data_groupings(const DataSource& data) {
  return first_then_others(data.group_by_length, data.other_groupings);
}

std::vector<bool> grid_groupings(const WorkloadOptions& w) { return data_groupings(w.data); }

WorkloadOptions with_grouping(WorkloadOptions w, bool grouped) {
  w.data.group_by_length = grouped;
  w.data.other_groupings.clear();
  return w;
}

std::vector<StepRows> grid_step_rows(const WorkloadOptions& w) {
  std::vector<StepRows> rows;
  for (const Packing packing : grid_packings(w)) {
    for (const bool grouped : grid_groupings(w)) rows.push_back({packing, grouped});
  }
  return rows;
}

WorkloadOptions with_step_rows(WorkloadOptions w, const StepRows& rows) {
  return with_grouping(with_packing(std::move(w), rows.packing), rows.grouped);
}

std::vector<double> grid_max_grad_norms(const WorkloadOptions& w) {
  return first_then_others(w.optimizer.max_grad_norm, w.grid.other_max_grad_norms);
}

WorkloadOptions with_max_grad_norm(WorkloadOptions w, double norm) {
  w.optimizer.max_grad_norm = norm;
  w.grid.other_max_grad_norms.clear();
  return w;
}

bool grid_clips(const WorkloadOptions& w) {
  const std::vector<double> norms = grid_max_grad_norms(w);
  return std::any_of(norms.begin(), norms.end(), [](double norm) { return norm > 0; });
}

std::string join_norms(const std::vector<double>& norms) {
  return join(norms, [](double norm) { return text::format_number(norm); });
}

std::string clipping_word(double max_grad_norm) {
  return max_grad_norm > 0 ? "clip" + text::format_number(max_grad_norm) : "no-clip";
}

std::string join_precisions(const std::vector<Precision>& precisions) {
  return join(precisions, [](Precision p) { return to_string(p); });
}

std::vector<std::pair<std::string, std::string>> describe_workload(const WorkloadOptions& w) {
  std::vector<std::pair<std::string, std::string>> options = {
      {"model", w.model.hf_config.empty() ? w.model.preset : w.model.hf_config},
      {"seed", std::to_string(w.model.seed)},
      {"seq_len", std::to_string(w.seq_len)},
      {"batch", std::to_string(w.batch)},
      {"micro_batches", w.micro_batches.empty() ? "all divisors" : join(w.micro_batches)},
      {"device", w.device},
      {"precisions", join_precisions(w.precisions)},
      {"lengths", lengths_name(w.data)},
      {"padding", join_paddings(data_paddings(w.data))},
      {"group_by_length", join_groupings(data_groupings(w.data))},
      {"packing", join_packings(data_packings(w.data))},
      {"loss_normalization", to_string(w.loss.normalization)},
      {"optimizer", join_optimizers(grid_optimizers(w))},
      {"lr", number(w.optimizer.lr)},
      {"beta1", number(w.optimizer.beta1)},
      {"beta2", number(w.optimizer.beta2)},
      {"eps", number(w.optimizer.eps)},
      {"weight_decay", number(w.optimizer.weight_decay)},
      {"weights_dtype", join_precisions(grid_weights_dtypes(w))},
      {"lora_rank", std::to_string(w.lora.rank)},
      {"lora_alpha", w.lora.enabled() ? number(w.lora.alpha > 0 ? w.lora.alpha : 2.0 * w.lora.rank) : "-"},
      {"lora_targets", w.lora.enabled() ? w.lora.targets : "-"},
      {"lora_dropout", w.lora.enabled() ? number(w.lora.dropout) : "-"},
  };
  // Only when on, so that files written before --lora-rslora existed still resume.
  if (w.lora.enabled() && w.lora.rslora) options.push_back({"lora_rslora", "true"});
  // Only when not fp32 alone, so that files written before --adapter-dtype existed still resume.
  const std::vector<Precision> adapters = grid_adapter_dtypes(w);
  if (adapters != std::vector<Precision>{Precision::kFp32}) options.push_back({"adapter_dtype", join_precisions(adapters)});
  // Only when set, so that files written before --base-quant existed still resume.
  if (w.lora.base_quant != BaseQuant::kNone) {
    options.push_back({"base_quant", to_string(w.lora.base_quant)});
    options.push_back({"double_quant", flag(w.lora.double_quant)});
    // Only when not PEFT's, so that files written before --kbit-prep existed still resume.
    if (!w.lora.kbit_upcast) options.push_back({"kbit_prep", kbit_prep_name(false)});
  }
  // Only when off, so that files written before --tf32 existed (all with it on) still resume.
  if (!w.tf32) options.push_back({"tf32", "off"});
  // Only when some job clips, so that files written before --max-grad-norm existed still resume.
  // Exact (format_number reads back to the same double), so that --resume tells 0.1234567 from 0.123457.
  if (grid_clips(w)) options.push_back({"max_grad_norm", join_norms(grid_max_grad_norms(w))});
  // Only when off, so that files written before --completion-only-loss existed still resume.
  if (!w.data.completion_only_loss) options.push_back({"completion_only_loss", "false"});
  // Only when given, so that files written before --distinct-steps existed (all of two) still resume.
  if (w.data.distinct_steps_given()) options.push_back({"distinct_steps", distinct_steps_name(w.data)});
  return options;
}

std::vector<std::string> workload_option_names() {
  WorkloadOptions every;  // each option that describe_workload records only when set, set
  every.lora.rank = 8;
  every.lora.adapter_dtype = Precision::kBf16;
  every.lora.base_quant = BaseQuant::kNf4;
  every.lora.kbit_upcast = false;
  every.tf32 = false;
  every.optimizer.max_grad_norm = kTrainerMaxGradNorm;
  every.data.completion_only_loss = false;
  every.data.distinct_steps = DataSource::kEpochSteps;
  std::vector<std::string> names;
  for (const auto& option : describe_workload(every)) names.push_back(option.first);
  return names;
}

int default_threads() {
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp != nullptr) {
    // "4", or a list for nested levels ("4,2"), whose first is the outer level's.
    char* end = nullptr;
    const long wanted = std::strtol(omp, &end, 10);
    // Above any limit: held at 2^20, which configure_threads refuses with the value given.
    if (end != omp && wanted > 0) return static_cast<int>(std::min<long>(wanted, 1L << 20));
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace accumbench
