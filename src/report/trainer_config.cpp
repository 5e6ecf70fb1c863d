// Trainer settings in: a TRL or axolotl YAML config read as accumbench options
// (trainer_config.hpp): the file parsed and checked here, its keys read by trainer_config_trl.cpp
// and trainer_config_axolotl.cpp (each cites its trainer's sources), then applied to a workload
// under the command line's options, with notes of what was read.
#include "accumbench/trainer_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <vector>

#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/units.hpp"
#include "report/trainer_config_reader.hpp"

namespace accumbench {

namespace trainer_config_detail {

const char* format_name(ConfigFormat format) { return format == ConfigFormat::kTrl ? "TRL" : "axolotl"; }
const char* option_name(ConfigFormat format) {
  return format == ConfigFormat::kTrl ? "--trl-config" : "--axolotl-config";
}

// A number as short as reads back the same double ("2e-05", "0.05", "32", 1.23456789e-4 in
// full), as --emit writes them; std::to_string would print 1e-8 as "0.000000". A non-finite one is
// refused by the option then.
std::string num(double value) { return text::format_number(value); }

}  // namespace trainer_config_detail

namespace {

using trainer_config_detail::axolotl_unused_keys;
using trainer_config_detail::format_name;
using trainer_config_detail::option_name;
using trainer_config_detail::Reader;
using trainer_config_detail::trl_unused_keys;

int64_t whole_number(const ConfigSetting& s) { return std::stoll(s.value); }
double real_number(const ConfigSetting& s) { return std::stod(s.value); }

// Both model options name the model: either one on the command line wins over the file's.
bool overridden(const ConfigSetting& s, const std::function<bool(const std::string&)>& given) {
  if (s.option == "--model" || s.option == "--hf-config") return given("--model") || given("--hf-config");
  return given(s.option);
}

// A file's setting that only shapes what the command line turned off: the adapters' alpha, targets,
// dropout and the base's quantisation under --lora-rank 0 (full fine-tuning), NF4's double
// quantisation under another --base-quant. They are dropped with it, as overridden. Only options
// given on the command line are read from `w`, so the answer is the same before and after the
// file is applied.
bool moot(const ConfigSetting& s, const std::function<bool(const std::string&)>& given, const WorkloadOptions& w) {
  static const std::set<std::string> kAdapterOptions = {"--lora-alpha", "--lora-targets", "--lora-dropout", "--lora-rslora",
                                                         "--base-quant", "--double-quant", "--kbit-prep"};
  if (given("--lora-rank") && !w.lora.enabled() && kAdapterOptions.count(s.option) != 0) return true;
  if (s.option == "--kbit-prep" && given("--base-quant") && w.lora.base_quant == BaseQuant::kNone) return true;
  return s.option == "--double-quant" && given("--base-quant") && w.lora.base_quant != BaseQuant::kNf4;
}

// The adapters' dtype the trainer gives the workload the file and the command line leave
// (TrainerConfig::adapter_rule): TRL 1.x's SFTTrainer casts a quantised model's trainable
// parameters to bf16 (trl/trainer/sft_trainer.py at f2cd577), which accumbench plans beside bf16
// activations only, so under another precision they stay fp32 (a note says so); PEFT's
// autocast_adapter_dtype=False keeps them in the base layer's dtype, fp32 over a quantised or fp32
// base (_move_adapter_to_device_of_base_layer, peft/tuners/tuners_utils.py at 5d602fd).
Precision rule_adapter_dtype(const TrainerConfig& config, const WorkloadOptions& w) {
  switch (config.adapter_rule) {
    case TrainerConfig::AdapterRule::kPeft:
      return Precision::kFp32;
    case TrainerConfig::AdapterRule::kTrlQuantised:
      return w.lora.quantized() && w.precisions == std::vector<Precision>{Precision::kBf16} ? Precision::kBf16
                                                                                          : Precision::kFp32;
    case TrainerConfig::AdapterRule::kPeftBaseDtype:
      if (w.lora.quantized() || w.weights_dtype == Precision::kFp32) return Precision::kFp32;
      if (w.weights_dtype == Precision::kFp16) {
        throw UserError(config.path + " sets peft_autocast_adapter_dtype: false, which keeps the adapters in the fp16 "
                        "weights' dtype, whose fp16 gradients torch's GradScaler refuses to unscale under fp16; remove "
                        "the key (PEFT's fp32 adapters) or give --adapter-dtype fp32, or train in bf16");
      }
      return Precision::kBf16;
  }
  return Precision::kFp32;
}

void apply_setting(const ConfigSetting& s, WorkloadOptions& w) {
  const std::string& o = s.option;
  if (o == "--model") {
    w.model.preset = s.value;
    w.model.hf_config.clear();
  } else if (o == "--hf-config") {
    w.model.hf_config = s.value;
  } else if (o == "--seq-len") {
    w.seq_len = whole_number(s);
  } else if (o == "--batch") {
    w.batch = whole_number(s);
  } else if (o == "--precision") {
    w.precisions = {precision_from_string(s.value)};
  } else if (o == "--weights-dtype") {
    w.weights_dtype = weights_dtype_from_string(s.value);
  } else if (o == "--activation-checkpointing") {
    w.grid.checkpointing = checkpointing_from_string(s.value);
  } else if (o == "--packing") {
    w.data.packing = packing_from_string(s.value);
  } else if (o == "--padding") {
    set_padding(w.data, s.value);
  } else if (o == "--group-by-length") {
    w.data.group_by_length = true;
  } else if (o == "--completion-only-loss") {
    w.data.completion_only_loss = completion_only_loss_from_string(s.value);
  } else if (o == "--chunked-loss") {
    w.loss.chunked = true;
  } else if (o == "--device") {
    w.device = s.value;
  } else if (o == "--lora-rank") {
    w.lora.rank = whole_number(s);
  } else if (o == "--lora-alpha") {
    w.lora.alpha = real_number(s);
  } else if (o == "--lora-rslora") {
    w.lora.rslora = s.value == "true";
  } else if (o == "--lora-dropout") {
    w.lora.dropout = real_number(s);
  } else if (o == "--lora-targets") {
    w.lora.targets = s.value;
  } else if (o == "--lr") {
    w.optimizer.lr = real_number(s);
  } else if (o == "--weight-decay") {
    w.optimizer.weight_decay = real_number(s);
  } else if (o == "--max-grad-norm") {
    w.optimizer.max_grad_norm = real_number(s);
  } else if (o == "--beta1") {
    w.optimizer.beta1 = real_number(s);
  } else if (o == "--beta2") {
    w.optimizer.beta2 = real_number(s);
  } else if (o == "--adam-eps") {
    w.optimizer.eps = real_number(s);
  } else if (o == "--seed") {
    w.model.seed = static_cast<uint64_t>(whole_number(s));
  } else if (o == "--optimizer") {
    w.optimizer.kind = optimizer_kind_from_string(s.value);
  } else if (o == "--base-quant") {
    w.lora.base_quant = base_quant_from_string(s.value);
  } else if (o == "--double-quant") {
    w.lora.double_quant = true;
  } else if (o == "--kbit-prep") {
    w.lora.kbit_upcast = kbit_upcast_from_string(s.value);
  } else if (o == "--adapter-dtype") {
    w.lora.adapter_dtype = adapter_dtype_from_string(s.value);
  } else if (o == "--tf32") {
    w.tf32 = s.value == "on";
  }
}

// PEFT's default target modules for the model's type: c_attn on GPT-2, q_proj and v_proj on the
// Llama family (llama, mistral, qwen2, qwen3).
std::string peft_default_targets(const ModelConfig& model) {
  return model.arch == Architecture::kGpt2 ? "c_attn" : "q_proj,v_proj";
}

// In a list "all-linear" is a module name rather than PEFT's shorthand; axolotl's own key for every
// linear is lora_target_linear (a string, which axolotl hands PEFT as it is, is the shorthand).
std::string all_linear_hint(const TrainerConfig& config) {
  if (config.format == ConfigFormat::kAxolotl) {
    return "in a list all-linear is no shorthand; lora_target_linear: true puts adapters on every linear layer";
  }
  return "all-linear alone, not in a list, is PEFT's shorthand";
}

// The file's target_modules as --lora-targets for this model, or UserError naming the file and key.
std::string lora_targets_of(const TrainerConfig& config, const ModelConfig& model, bool quantized_base) {
  const PeftTargetModules& t = config.lora_target_modules;
  try {
    const std::string listed = t.key.empty() ? ""
                               : t.pattern.empty() && !t.one_name_list ? targets_from_peft_names(model, t.names, all_linear_hint(config))
                                                                        : targets_from_peft_pattern(model, t.pattern);
    if (!t.all_linear) return listed;
    // find_all_linear_names finds GPT-2's Conv1D projections only as bitsandbytes' layers.
    if (model.arch != Architecture::kGpt2 || quantized_base) return "all-linear";
    if (!listed.empty()) return listed;
    throw UserError(config.path + " sets lora_target_linear: true, but axolotl's find_all_linear_names finds no "
                    "linear layer in GPT-2 (its projections are transformers' Conv1D, not nn.Linear, unless a "
                    "quantised base replaced them), so PEFT gets no target module and stops; list them instead: "
                    "lora_target_modules: [c_attn, c_proj, c_fc]");
  } catch (const UserError& error) {
    if (t.key.empty() || std::string(error.what()).rfind(config.path, 0) == 0) throw;
    const bool axolotl_string = config.format == ConfigFormat::kAxolotl && !t.pattern.empty();
    // A list to write instead, where the string is names (q_proj, or q_proj|v_proj): PEFT matches a
    // list's names by the end of the path, not as a pattern, so '.*' has none.
    std::string as_list;
    if (axolotl_string && t.pattern.find_first_of("()[]{}*+?\\^$ ") == std::string::npos) {
      std::string names = t.pattern;
      for (size_t at = names.find('|'); at != std::string::npos; at = names.find('|', at)) names.replace(at, 1, ", ");
      if (names.find(", , ") == std::string::npos && names.front() != ',' && names.back() != ' ') as_list = "[" + names + "]";
    }
    throw UserError(config.path + ": " + t.key + " " +
                    (t.one_name_list ? "[" + t.pattern + "] reaches PEFT as one string (TRL's ModelConfig unwraps a "
                                                         "one-name list) and "
                     : axolotl_string ? "reaches PEFT as the string it is (axolotl makes it a list only beside "
                                        "lora_target_linear: true) and "
                                      : std::string()) +
                    error.what() + (as_list.empty() ? "" : ", or a list: " + as_list));
  }
}

// A mapping with its YAML merge keys applied (`<<: *defaults`, or a list of such), as PyYAML's
// safe_load applies them for TRL and axolotl (flatten_mapping): the merged pairs first, then the
// mapping's own, a later pair winning; a list's mappings are merged last to first (so its first
// wins), separate merge keys in their order (so the last wins). yaml-cpp 0.7 reads `<<` as a key
// like any other, which left a file's batch split at the defaults (helper-89).
YAML::Node with_merge_keys(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) return node;
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& item : node) {
    if (item.first.Scalar() != "<<") continue;
    const YAML::Node& value = item.second;
    std::vector<YAML::Node> sources;
    if (value.IsMap()) sources.push_back(value);
    if (value.IsSequence()) {
      for (const YAML::Node& source : value) sources.insert(sources.begin(), source);  // last to first
    }
    if (sources.empty() || std::any_of(sources.begin(), sources.end(), [](const YAML::Node& n) { return !n.IsMap(); })) {
      throw UserError(path + ": the merge key << on line " + std::to_string(item.first.Mark().line + 1) +
                      " takes a mapping (<<: *name of an anchored mapping) or a list of them; fix it in the file");
    }
    for (const YAML::Node& source : sources) {
      for (const auto& merged : with_merge_keys(source, path)) out[merged.first.Scalar()] = merged.second;
    }
  }
  for (const auto& item : node) {
    const std::string key = item.first.Scalar();
    if (key != "<<") out[key] = with_merge_keys(item.second, path);
  }
  return out;
}

// Edits (insert, delete, replace, swap two neighbours) from `a` to `b`, up to `cap` + 1.
size_t edits_between(const std::string& a, const std::string& b, size_t cap) {
  const size_t n = a.size(), m = b.size();
  if ((n > m ? n - m : m - n) > cap) return cap + 1;
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return std::min(d[n][m], cap + 1);
}

// The known key `key` is most likely a misspelling of: one edit away (two for keys of 8 characters
// or more; keys of 3 characters at least), "" when none is that close. `known`: the keys the reader handles and those it knows
// are unused.
std::string nearest_key(const std::string& key, const std::set<std::string>& known) {
  if (key.size() < 3) return "";  // fp1 for fp16, sed for seed
  const size_t cap = key.size() >= 8 ? 2 : 1;
  std::string best;
  size_t best_edits = cap + 1;
  for (const std::string& candidate : known) {
    const size_t edits = edits_between(key, candidate, cap);
    if (edits < best_edits) {
      best_edits = edits;
      best = candidate;
    }
  }
  return best;
}

}  // namespace

TrainerConfig parse_trainer_config(const std::string& yaml_text, ConfigFormat format, int world_size,
                                   const std::string& path) {
  YAML::Node root;
  try {
    // TRL and axolotl read the file with yaml.safe_load, which refuses a second document (even an
    // empty one after a trailing `---`); YAML::Load would read the first and drop the rest.
    const std::vector<YAML::Node> documents = YAML::LoadAll(yaml_text);
    if (documents.size() > 1) {
      throw UserError(path + " holds " + std::to_string(documents.size()) + " YAML documents (a `---` line starts each " +
                      "after the first), which " + format_name(format) + "'s yaml.safe_load refuses; keep the one " +
                      "document the training reads");
    }
    if (!documents.empty()) root = documents.front();
  } catch (const YAML::Exception& error) {
    // yaml-cpp quotes the offending character, a NUL too, which would cut the sentence short.
    std::string message;
    for (const char c : error.msg) {
      if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
        message += c;
      } else {
        static const char kHex[] = "0123456789abcdef";
        message += std::string("\\x") + kHex[(static_cast<unsigned char>(c) >> 4) & 0xf] + kHex[c & 0xf];
      }
    }
    throw UserError(path + " is not YAML (line " + std::to_string(error.mark.line + 1) + ": " + message +
                    "); pass the file " + (format == ConfigFormat::kTrl ? "trl sft --config" : "axolotl train") +
                    " reads");
  }
  if (!root.IsMap()) {
    if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);  // an empty file: every default
    else throw UserError(path + " holds no YAML mapping of keys; pass the file of " + format_name(format) + " keys");
  }
  // PyYAML, which TRL and axolotl read with, keeps a repeated key's last value; yaml-cpp its first.
  std::set<std::string> seen;
  for (const auto& item : root) {
    const std::string key = item.first.Scalar();
    // PyYAML applies every merge key of a mapping (with_merge_keys does too).
    if (key != "<<" && !seen.insert(key).second) {
      throw UserError(path + " sets " + key + " twice (again on line " + std::to_string(item.first.Mark().line + 1) +
                      "); TRL and axolotl would take the last value, accumbench takes none: keep one");
    }
  }
  root = with_merge_keys(root, path);
  Reader reader{root, format, path, {}, {}, {}};
  reader.config.path = path;
  reader.config.format = format;
  if (format == ConfigFormat::kTrl) reader.read_trl(std::max(1, world_size));
  else reader.read_axolotl(std::max(1, world_size));
  reader.refuse_collected();
  const std::set<std::string>& unused = format == ConfigFormat::kTrl ? trl_unused_keys() : axolotl_unused_keys();
  std::set<std::string> known = reader.read;
  known.insert(unused.begin(), unused.end());
  for (const auto& item : root) {
    const std::string key = item.first.Scalar();
    if (reader.read.count(key) != 0) continue;
    if (unused.count(key) != 0) {
      reader.config.unused.push_back(key);
      continue;
    }
    // A key a letter or two from a known one is a misspelling: trl sft hands a key none of its
    // parsers knows to accelerate launch, which stops on it (trl/cli/commands/training.py), so the
    // file would not train; axolotl ignores it, and so its default stands, as here (noted).
    const std::string near = nearest_key(key, known);
    if (!near.empty() && format == ConfigFormat::kTrl) {
      throw UserError(path + " sets " + key + ", which is no key of TRL, transformers or accelerate (trl sft stops on "
                      "it): did you mean " + near + "? fix the key in the file");
    }
    reader.config.unknown.push_back(near.empty() ? key : key + " (did you mean " + near + "? axolotl ignores it too)");
  }
  return reader.config;
}

TrainerConfig read_trainer_config(const std::string& path, ConfigFormat format, int world_size) {
  require_file_size_at_most(path, int64_t{64} << 20, option_name(format), std::string(format == ConfigFormat::kTrl ? "a " : "an ") + format_name(format) + " YAML config");
  const std::shared_ptr<const std::string> text = read_file_bytes(path);  // a pipe too
  if (text == nullptr) {
    const std::string why = why_unreadable(path);
    throw UserError(std::string(option_name(format)) + " " + text::quoted(path) + " " +
                    (why == "is a directory" ? why : "cannot be read") + "; pass the path of your " +
                    format_name(format) + " YAML config");
  }
  return parse_trainer_config(*text, format, world_size, path);
}

void apply_trainer_config(const TrainerConfig& config, WorkloadOptions& workload,
                          const std::function<bool(const std::string& option)>& given, bool auto_is_cuda) {
  for (const TrainerConfig::Remark& refusal : config.refusals) {
    if (std::none_of(refusal.options.begin(), refusal.options.end(), given)) throw UserError(refusal.text);
  }
  for (const ConfigSetting& s : config.settings) {
    if (overridden(s, given) || moot(s, given, workload)) continue;
    // lora_alpha: 0 scales PEFT's adapters by 0 (their update is zero), where accumbench's
    // --lora-alpha 0 stands for twice the rank: neither reading would be the file's job.
    if (s.option == "--lora-alpha" && !s.by_default && std::strtod(s.value.c_str(), nullptr) == 0.0) {
      throw UserError(config.path + " sets lora_alpha: 0, which PEFT takes as a scale of 0 (the adapters would train to " +
                      "no effect); set lora_alpha to the alpha you train with, or give --lora-alpha (accumbench's " +
                      "--lora-alpha 0 stands for twice the rank, so it cannot mean this)");
    }
    try {
      apply_setting(s, workload);
    } catch (const UserError& error) {
      throw UserError(config.path + ": " + s.keys + ": " + error.what());
    }
  }
  if (!given("--lora-targets") && workload.lora.enabled()) {
    if (config.lora_target_modules.named()) {
      workload.lora.targets = lora_targets_of(config, resolve_model(workload.model), workload.lora.quantized());
    } else if (config.lora_default_targets) {
      workload.lora.targets = peft_default_targets(resolve_model(workload.model));
    }
  }
  if (config.adapter_rule != TrainerConfig::AdapterRule::kPeft && !given("--adapter-dtype") && workload.lora.enabled())
    workload.lora.adapter_dtype = rule_adapter_dtype(config, workload);
  if (!config.torch_default_adamw.empty() && !given("--optimizer")) {
    const bool cuda = names_cuda(workload.device) || (workload.device == "auto" && auto_is_cuda);
    workload.optimizer.kind = cuda ? OptimizerKind::kAdamWForeach : OptimizerKind::kAdamW;
  }
  workload.trl_loss = config.trl_loss;
  workload.trl_loss_by_default = config.trl_loss_by_default;
}

std::vector<std::string> trainer_config_notes(const TrainerConfig& config,
                                              const std::function<bool(const std::string& option)>& given,
                                              const WorkloadOptions& workload) {
  std::string read = "read " + config.path + " as";
  std::string defaults, overridden_options, overridden_defaults, moot_options;
  for (const ConfigSetting& s : config.settings) {
    if (overridden(s, given)) {
      // A default the file leaves out is the trainer's, not the file's.
      (s.by_default ? overridden_defaults : overridden_options) += " " + s.option;
      continue;
    }
    if (moot(s, given, workload)) {
      moot_options += " " + s.option;
      continue;
    }
    read += " " + s.option + (s.value.empty() ? "" : " " + s.value);
    if (s.option == "--batch") read += " (" + s.keys + ")";
    if (!s.by_default) continue;
    // The batch's default is its per-device key's; one key may stand for two options (axolotl's
    // bf16: the precision and the weights' dtype), named once.
    const std::string key = s.option == "--batch" ? s.keys.substr(0, s.keys.find(' ')) : s.keys;
    if ((", " + defaults + ",").find(", " + key + ",") == std::string::npos)
      defaults += (defaults.empty() ? "" : ", ") + key;
  }
  // The adapters' dtype as the trainer picks it for this workload (rule_adapter_dtype).
  std::string adapter_note;
  if (config.adapter_rule != TrainerConfig::AdapterRule::kPeft && !given("--adapter-dtype") && workload.lora.enabled()) {
    const bool trl = config.adapter_rule == TrainerConfig::AdapterRule::kTrlQuantised;
    if (workload.lora.adapter_dtype == Precision::kBf16) {
      read += " --adapter-dtype bf16";
    } else if (trl && workload.lora.quantized()) {
      adapter_note = config.path + ": TRL 1.x's SFTTrainer casts the adapters of a quantised model to bf16, which "
                     "accumbench plans under bf16 autocast only (here " + join_precisions(workload.precisions) +
                     "): they are kept in fp32, as PEFT creates them, so the plan counts twice the adapters' weights, "
                     "gradients and optimizer state";
    } else if (!trl) {
      adapter_note = config.path + ": peft_autocast_adapter_dtype: false changes nothing here: PEFT keeps the adapters "
                     "in fp32 over " + (workload.lora.quantized() ? "a quantised base" : "fp32 weights");
    }
  }
  // adamw_torch as the device runs it (apply_trainer_config).
  std::string optimizer_note;
  if (!config.torch_default_adamw.empty()) {
    if (given("--optimizer")) {
      overridden_options += " --optimizer";
    } else if (workload.optimizer.kind == OptimizerKind::kAdamWForeach) {
      read += " --optimizer adamw-foreach (" + config.torch_default_adamw + ")";
    } else {
      read += " --optimizer adamw (" + config.torch_default_adamw + ")";
      optimizer_note = config.path + ": " + config.torch_default_adamw + " adamw_torch steps one tensor at a time on the "
                       "CPU, as accumbench's adamw; on CUDA torch runs its foreach kernels, which --device cuda "
                       "measures and plans (--optimizer adamw-foreach: a copy of what trains during the step)";
    }
  }
  const bool file_targets = config.lora_target_modules.named();
  if (!given("--lora-targets") && workload.lora.enabled()) {
    if (file_targets) read += " --lora-targets " + workload.lora.targets;
    else if (config.lora_default_targets) read += " --lora-targets PEFT's default for the model";
  } else if (file_targets && given("--lora-targets")) {
    overridden_options += " --lora-targets";
  } else if (file_targets && given("--lora-rank")) {
    moot_options += " --lora-targets";
  }
  std::vector<std::string> notes = {read};
  if (!defaults.empty()) {
    notes.push_back(config.path + " leaves out " + defaults + ": " + format_name(config.format) + "'s defaults stand");
  }
  if (!overridden_options.empty() || !overridden_defaults.empty()) {
    const std::string file = overridden_options.empty() ? "" : config.path + "'s" + overridden_options;
    const std::string trainer =
        overridden_defaults.empty() ? "" : std::string(format_name(config.format)) + "'s default" + overridden_defaults;
    notes.push_back("the command line overrides " + file + (file.empty() || trainer.empty() ? "" : " and ") + trainer +
                    (moot_options.empty() ? "" : ", and with it drops" + moot_options + " (nothing left to shape)"));
  }
  auto list = [](const std::vector<std::string>& keys) {
    std::string text;
    for (const std::string& key : keys) text += (text.empty() ? "" : ", ") + key;
    return text;
  };
  for (const TrainerConfig::Remark& remark : config.remarks) {
    if (std::none_of(remark.options.begin(), remark.options.end(), given)) notes.push_back(config.path + ": " + remark.text);
  }
  // Real samples longer than T: accumbench cuts them (TRL truncates to max_length too); axolotl drops
  // them unless told (handle_long_seq_in_dataset, utils/data/utils.py at 067b021), or stops on them.
  const std::vector<Packing> packings = data_packings(workload.data);  // wrapped rows cut no sample
  const bool some_cut = std::any_of(packings.begin(), packings.end(), [](Packing p) { return p != Packing::kWrapped; });
  if (config.format == ConfigFormat::kAxolotl && real_samples(workload.data) && some_cut &&
      config.excess_length_strategy != "truncate") {
    const std::string& strategy = config.excess_length_strategy;
    const std::string what = strategy.empty()       ? "leaves out excess_length_strategy, so axolotl drops"
                             : strategy == "raise" ? "sets excess_length_strategy: raise, which stops on"
                                                   : "sets excess_length_strategy: drop, which drops";
    notes.push_back(config.path + ": " + what +
                    " a sample longer than sequence_len, which accumbench cuts to T instead (the context line counts "
                    "those it cut); excess_length_strategy: truncate trains what is measured");
  }
  if (!adapter_note.empty()) notes.push_back(adapter_note);
  if (!optimizer_note.empty()) notes.push_back(optimizer_note);
  if (!config.unused.empty()) {
    notes.push_back(config.path + ": not used (no effect on the step accumbench measures): " + list(config.unused));
  }
  if (!config.unknown.empty()) {
    notes.push_back(config.path + ": not understood, ignored: " + list(config.unknown) +
                    " (if one of them changes memory or time, the results do not show it)");
  }
  return notes;
}

}  // namespace accumbench
