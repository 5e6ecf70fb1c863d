// The sweep runner, in named steps after google/benchmark's BenchmarkRunner: set up once (checks,
// device, model, data, process group), then per split: reuse a resumed result, skip a split the
// plan says will not fit, warm up, time, attribute the memory, profile, record. A split that
// fails (out of memory or anything else) is recorded and the sweep goes on; measurement never
// prints (the callbacks report progress).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "accumbench/data.hpp"
#include "accumbench/decision.hpp"
#include "sweep/framework_overhead.hpp"
#include "accumbench/engine.hpp"
#include "accumbench/error.hpp"
#include "accumbench/interrupt.hpp"
#include "accumbench/plan_fit.hpp"
#include "accumbench/statistics.hpp"
#include "accumbench/sweep.hpp"
#include "accumbench/throughput.hpp"
#include "accumbench/trace.hpp"
#include "accumbench/units.hpp"
#include "compat/compat.hpp"
#include "compat/distributed.hpp"
#include "sweep/resumed_runs.hpp"
#include "sweep/split_measurement.hpp"

namespace accumbench {

namespace {

std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

void check_sweep_options(const SweepOptions& options) {
  validate_workload(options.workload);
  if (options.warmup < 1) {
    throw UserError("--warmup must be at least 1, got " + std::to_string(options.warmup) +
                    ": a split's memory is read in its first, untimed step");
  }
  if (options.steps <= 0) throw UserError("--steps must be positive, got " + std::to_string(options.steps) + "; give the timed rounds per split, e.g. --steps 5");
  constexpr int kMaxSteps = 1000000;
  if (options.warmup > kMaxSteps || options.steps > kMaxSteps) {
    throw UserError("--warmup and --steps must be at most " + std::to_string(kMaxSteps) + "; use --time-budget for long runs");
  }
  if (!(options.time_budget_seconds >= 0) || !(options.time_budget_seconds <= 1e7)) {
    throw UserError("--time-budget must be a number of seconds in [0, 1e7], got " + number(options.time_budget_seconds) +
                    "; use 0 for exactly --steps rounds");
  }
  if (!(options.tie_tolerance >= 0) || !(options.tie_tolerance < 1)) {
    throw UserError("--tie-tolerance must be a fraction in [0, 1), got " + number(options.tie_tolerance) +
                    "; 0.03 calls splits within 3 % of each other equivalent");
  }
  if (!(options.confidence > 0.5) || !(options.confidence < 1)) {
    throw UserError("--confidence must be in (0.5, 1), got " + number(options.confidence) + "; 0.95 is the usual level");
  }
  // NaN is "not given" (the device table); anything else must be a finite positive peak.
  if (!std::isnan(options.peak_tflops) && !(options.peak_tflops > 0 && std::isfinite(options.peak_tflops))) {
    throw UserError("--peak-tflops must be a positive number of TFLOP/s, got " + number(options.peak_tflops));
  }
}

void check_profile_dir(const std::string& directory, c10::Device device) {
  if (!device.is_cuda() || !compat::KernelProfile::available()) {
    throw UserError("--profile needs --device cuda and a LibTorch 2.x built with Kineto (PyTorch's own; this one is " +
                    compat::libtorch_version() + " on " + device.str() + "); drop the option");
  }
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error || !std::filesystem::is_directory(directory)) {
    throw UserError("--profile " + directory + " is not a directory that can be created (" + error.message() +
                    "); give a writable directory");
  }
}

// Options a resumed sweep may change: the grid's dimensions (splits measured before stay in the
// file), the memory limit (every "fits" is judged again), output and machine settings.
bool may_differ_on_resume(const std::string& option) {
  static const char* const kFree[] = {"micro_batches", "precisions", "optimizer", "weights_dtype", "adapter_dtype",
                                      "max_grad_norm", "padding", "packing", "group_by_length", "memory_judged_on",
                                      // the samples' words already say it (a file from before it lacks it)
                                      "labels_masked_by",
                                      "knobs", "cuda_graphs", "chunked_loss", "activation_checkpointing",
                                      "optimizer_in_backward",
                                      "memory_limit_bytes", "try_predicted_oom", "profile_dir",
                                      "peak_tflops", "tie_tolerance", "confidence",
                                      // how long to go on deciding, or to wait for other ranks:
                                      // neither changes what a finished split measured
                                      "time_budget_seconds", "dist_timeout_seconds",
                                      // the rounds every split takes: a split of the file with fewer
                                      // timed steps is measured again (ResumedRuns::finished)
                                      "steps"};
  for (const char* free : kFree) {
    if (option == free) return true;
  }
  return false;
}

// What the user changes to make a context option match, in their words: the option's flag, or the
// file whose content it fingerprints.
std::string resume_option_words(const std::string& name) {
  static const std::pair<const char*, const char*> kWords[] = {
      {"model_file_fingerprint", "the content of the config.json"},
      {"token_file_fingerprint", "the content of the --tokens file"},
      {"lengths_file_fingerprint", "the content of the --lengths file"},
      {"samples", "the samples of --lengths"},
      {"memory_judged_on", "the micro-batch memory is judged on"},
      {"token_file", "--tokens"},
      {"OMP_WAIT_POLICY", "the environment's OMP_WAIT_POLICY"},
      {"eps", "--adam-eps"}};
  for (const auto& [option, words] : kWords) {
    if (name == option) return words;
  }
  std::string flag = "--" + name;  // seq_len -> --seq-len: the flag, for every other option
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

// A resume file from another configuration would mix two experiments in one report: every option
// that changes a measurement (the options list carries the config.json's and token file's
// content fingerprints), the LibTorch version and the device must match. The file is left as
// it is (nothing has been written yet).
void check_resume(const SweepResult& resume, const SweepContext& now) {
  const SweepContext& done = resume.context;
  const auto mismatch = [](const std::string& what, const std::string& then, const std::string& wanted) {
    throw UserError("--resume file was measured with " + what + " " + text::quoted(then, 60) + ", this sweep has " +
                    text::quoted(wanted, 60) + "; resume with the same options, or write to a new file");
  };
  // A file named by another path (relative against absolute, moved, copied) with the same content
  // is the same input: its fingerprints match, and the path and the words derived from it
  // (the model's name from its config.json, the samples' description) are not compared.
  const auto same_file = [&](const char* fingerprint) {
    const std::optional<std::string> then = recorded_option(done.options, fingerprint);
    const std::optional<std::string> wanted = recorded_option(now.options, fingerprint);
    return then && wanted && *then == *wanted && !then->empty() && *then != "preset" && *then != "synthetic";
  };
  const bool same_model_file = same_file("model_file_fingerprint");
  const bool same_lengths_file = same_file("lengths_file_fingerprint");
  const bool same_token_file = same_file("token_file_fingerprint");
  if (done.model != now.model && !same_model_file) mismatch("model", done.model, now.model);
  if (done.seq_len != now.seq_len) mismatch("--seq-len", std::to_string(done.seq_len), std::to_string(now.seq_len));
  if (done.batch != now.batch) mismatch("--batch", std::to_string(done.batch), std::to_string(now.batch));
  if (done.world_size != now.world_size) {
    mismatch("world size", std::to_string(done.world_size), std::to_string(now.world_size));
  }
  if (done.libtorch_version != now.libtorch_version) mismatch("LibTorch", done.libtorch_version, now.libtorch_version);
  if (done.device_name != now.device_name) mismatch("device", done.device_name, now.device_name);
  // On the CPU: TF32 acts on nothing there, and OpenMP's wait policy changes every step's time
  // (2.5–4× on 2 cores), as the thread count does, which is compared as the threads that ran ("all"
  // on a machine of 2 is 2).
  const bool cpu = !names_cuda(now.device);
  // Two CPUs of one model name ("AMD EPYC") are not one machine: the cores tell them apart (the
  // host name does not, a container's changes at every start). helper-113: a file of 64 cores
  // resumed on 2, its steps and the new ones merged without a word.
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (cpu && done.cpu_cores > 0 && cores > 0 && done.cpu_cores != cores) {
    throw UserError("--resume file was measured on a CPU of " + std::to_string(done.cpu_cores) + " cores, this machine has " +
                    std::to_string(cores) + " (both named " + text::quoted(done.device_name, 60) +
                    "): its steps and this sweep's would not be one machine's; resume on that machine, or write to a new file");
  }
  const auto threads = [](int n) { return std::to_string(n) + (n == 1 ? " thread" : " threads"); };
  if (done.threads > 0 && now.threads > 0 && done.threads != now.threads)
    mismatch("--threads", threads(done.threads), threads(now.threads));
  // Every option either side recorded, this sweep's first (an option recorded only when set, as
  // --base-quant, stands for its default on the side that left it out).
  for (const std::string& name : option_names(now.options, done.options)) {
    if (may_differ_on_resume(name)) continue;
    if ((name == "model" && same_model_file) || (name == "lengths" && same_lengths_file) ||
        (name == "token_file" && same_token_file) || (name == "samples" && (same_lengths_file || same_token_file)))
      continue;
    if ((name == "tf32" && cpu) || (name == "OMP_WAIT_POLICY" && !cpu)) continue;
    if (name == "threads" && done.threads > 0 && now.threads > 0) continue;  // compared above
    const std::optional<std::string> then = recorded_option(done.options, name), wanted = recorded_option(now.options, name);
    if (!wanted) continue;  // derived from options this sweep does not have (a lengths file's samples)
    if (!then && name == "OMP_WAIT_POLICY") continue;  // files from before it was recorded: cannot tell
    // OpenMP reads its wait policy in any case: passive is PASSIVE.
    if (then && name == "OMP_WAIT_POLICY" && text::upper(*then) == text::upper(*wanted)) continue;
    if (!then) {
      throw UserError("--resume file was written before accumbench recorded " + resume_option_words(name) +
                      ", so it cannot tell whether its splits match this sweep; write to a new file");
    }
    if (*then != *wanted) mismatch(resume_option_words(name), *then, *wanted);
  }
}

// The runs of `resume` that this sweep's grid does not measure again: kept, never dropped.
std::vector<RunResult> runs_kept_from(const SweepResult& resume, const std::vector<SplitConfig>& grid) {
  std::vector<RunResult> kept;
  for (const RunResult& run : resume.runs) {
    const bool in_grid = std::any_of(grid.begin(), grid.end(), [&](const SplitConfig& s) { return s.key() == run.config.key(); });
    if (!in_grid) kept.push_back(run);
  }
  return kept;
}

// The values of a comma list ("fp32,bf16" -> fp32, bf16); none for "".
std::vector<std::string> comma_items(const std::string& list) {
  std::vector<std::string> values;
  std::stringstream stream(list);
  for (std::string item; std::getline(stream, item, ',');) values.push_back(item);
  return values;
}

// A resumed file keeps the runs the new grid leaves out (runs_kept_from): the context names their
// values too, so that "optimizer adamw" never heads a file that holds sgd runs. Each list of the
// grid becomes this sweep's values, then the kept runs' others (every divisor holds any micro-batch).
// `not_begun`: a stopped file's splits never begun ("8×2", "1×4 sgd"), whose micro-batches the list
// names too, so that the --resume with the file's own lists reaches them (the other values of their
// labels are not read back: a kept run of the same job names those).
void name_kept_runs_in_lists(std::vector<std::pair<std::string, std::string>>& options,
                             const std::vector<RunResult>& kept, const std::vector<std::string>& not_begun) {
  using Value = std::string (*)(const SplitConfig&);
  static const std::pair<const char*, Value> kLists[] = {
      {"micro_batches", [](const SplitConfig& s) { return std::to_string(s.micro_batch); }},
      {"precisions", [](const SplitConfig& s) { return to_string(s.precision); }},
      {"optimizer", [](const SplitConfig& s) { return to_string(s.optimizer); }},
      {"weights_dtype", [](const SplitConfig& s) { return to_string(s.weights_dtype); }},
      {"adapter_dtype", [](const SplitConfig& s) { return to_string(s.adapter_dtype); }},
      {"max_grad_norm", [](const SplitConfig& s) { return text::format_number(s.max_grad_norm); }},
      {"padding", [](const SplitConfig& s) { return padding_name(s.padding); }},
      {"packing", [](const SplitConfig& s) { return to_string(s.packing); }},
      {"group_by_length", [](const SplitConfig& s) { return std::string(s.group_by_length ? "true" : "false"); }}};
  for (const auto& [name, value_of] : kLists) {
    const std::optional<std::string> now = recorded_option(options, name);
    if (!now || *now == "all divisors") continue;
    std::vector<std::string> values = comma_items(*now);
    const size_t given = values.size();
    for (const RunResult& run : kept) {
      const std::string value = value_of(run.config);
      if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
    }
    for (const std::string& label : std::string(name) == "micro_batches" ? not_begun : std::vector<std::string>{}) {
      const size_t times = label.find("\xC3\x97");  // "8×2": the micro-batch before the sign
      if (times == 0 || times == std::string::npos ||
          label.find_first_not_of("0123456789") != times) {
        continue;  // not a label this version writes
      }
      const std::string value = std::to_string(std::stoll(label.substr(0, times)));
      if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
    }
    if (values.size() == given) continue;
    if (std::string(name) == "micro_batches") {
      std::sort(values.begin(), values.end(),
                [](const std::string& a, const std::string& b) { return std::stoll(a) < std::stoll(b); });
    }
    std::string merged;
    for (const std::string& value : values) merged += (merged.empty() ? "" : ",") + value;
    const auto found = std::find_if(options.begin(), options.end(), [&](const auto& o) { return o.first == name; });
    if (found != options.end()) {
      found->second = merged;
    } else {
      options.emplace_back(name, merged);  // absent at its default (adapter_dtype fp32, max_grad_norm 0)
    }
  }
}

// How a stopped file named the splits it never began: with their precision, clipping and padding
// only where its grid had several (its options' lists); where it had one, these hold that one in
// label words (" bf16", " clip1", " pad-longest"), and a file without a precisions list (older) may
// have named either way.
struct FileNaming {
  std::string only_precision, only_clipping, only_padding;
  bool precision_unknown = false;
  // One packing: it in label words (" pack-bfd"), its splits named without it; "" with a --packing
  // list, whose splits were named with theirs.
  std::string only_packing;
  bool several_packings = false;
  // The same for grouping (" grouped", " ungrouped").
  std::string only_grouping;
  bool several_groupings = false;
};

FileNaming file_naming(const SweepContext& file) {
  const std::vector<std::string> precisions = comma_items(recorded_option(file.options, "precisions").value_or(""));
  const std::vector<std::string> norms = comma_items(recorded_option(file.options, "max_grad_norm").value_or(""));
  FileNaming naming;
  naming.precision_unknown = precisions.empty();
  if (precisions.size() == 1) naming.only_precision = " " + precisions.front();
  try {
    if (norms.size() == 1) naming.only_clipping = " " + clipping_word(text::number_from_text(norms.front()));
  } catch (const std::invalid_argument&) {  // not a norm: the file does not say
  }
  const std::vector<std::string> packings = comma_items(recorded_option(file.options, "packing").value_or("none"));
  naming.several_packings = packings.size() > 1;
  try {
    if (packings.size() == 1) naming.only_packing = " " + packing_word(packing_from_string(packings.front()));
  } catch (const UserError&) {  // not a packing: the file does not say
  }
  const std::vector<std::string> groupings = comma_items(recorded_option(file.options, "group_by_length").value_or("false"));
  naming.several_groupings = groupings.size() > 1;
  try {
    if (groupings.size() == 1) naming.only_grouping = " " + grouping_word(grouping_from_string(groupings.front()));
  } catch (const UserError&) {  // not a grouping: the file does not say
  }
  const std::vector<std::string> paddings = comma_items(recorded_option(file.options, "padding").value_or("max"));
  try {
    if (paddings.size() == 1) naming.only_padding = " " + padding_word(padding_from_string(paddings.front()));
  } catch (const UserError&) {  // not a padding: the file does not say
  }
  return naming;
}

// Whether `label`, a split a stopped file never began, is `split` ("8×1" of a file clipped at 1
// alone is not this sweep's 8×1 no-clip).
bool names_split(const std::string& label, const SplitConfig& split, const FileNaming& file) {
  const std::string precision = " " + to_string(split.precision), clipping = " " + clipping_word(split.max_grad_norm),
                    padding = " " + padding_word(split.padding);
  if (!file.only_precision.empty() && file.only_precision != precision) return false;  // another job of the file's
  if (!file.only_clipping.empty() && file.only_clipping != clipping) return false;
  if (!file.only_padding.empty() && file.only_padding != padding) return false;
  if (!file.only_packing.empty() && file.only_packing != " " + packing_word(split.packing)) return false;
  if (!file.only_grouping.empty() && file.only_grouping != " " + grouping_word(split.group_by_length)) return false;
  const std::string rest = (file.only_clipping.empty() ? clipping : "") +
                           (file.several_packings ? " " + packing_word(split.packing) : "") +
                           (file.several_groupings ? " " + grouping_word(split.group_by_length) : "") +
                           (file.only_padding.empty() ? padding : "");
  const std::string named = split.label() + (file.only_precision.empty() ? precision : "") + rest;
  return label == named || (file.precision_unknown && label == split.label() + rest);
}

// The splits not begun, by label; with the precision, the clipping and the padding too where the
// table holds more than one, this sweep's and a resumed file's runs together (a bf16 resume of an
// fp32 file: "2×4" alone would name the fp32 row).
class NotBegunNames {
 public:
  NotBegunNames(const std::vector<SplitConfig>& grid, const SweepResult* resume) {
    if (grid.empty()) return;
    const auto note = [&](const SplitConfig& split) {
      precisions_ = precisions_ || split.precision != grid[0].precision;
      norms_ = norms_ || split.max_grad_norm != grid[0].max_grad_norm;
      paddings_ = paddings_ || split.padding != grid[0].padding;
      packings_ = packings_ || split.packing != grid[0].packing;
      groupings_ = groupings_ || split.group_by_length != grid[0].group_by_length;
    };
    for (const SplitConfig& split : grid) note(split);
    if (resume != nullptr) {
      for (const RunResult& run : resume->runs) note(run.config);
    }
  }

  std::string operator()(const SplitConfig& split) const {
    return split.label() + (precisions_ ? " " + to_string(split.precision) : "") +
           (norms_ ? " " + clipping_word(split.max_grad_norm) : "") + (packings_ ? " " + packing_word(split.packing) : "") +
           (groupings_ ? " " + grouping_word(split.group_by_length) : "") + (paddings_ ? " " + padding_word(split.padding) : "");
  }

  // A stopped file's splits that it never began and this grid leaves out stay not begun (read with or
  // without their precision and clipping, as the file's grid named them). Carried over, they are
  // named as this sweep names its splits: the file's one precision or norm added where this sweep's
  // runs have several ("2×2" of a file clipped at 1 alone: "2×2 clip1").
  void carry_from(const SweepResult& resume, const std::vector<SplitConfig>& grid, Interruption& interruption) const {
    const FileNaming file = file_naming(resume.context);
    for (const std::string& label : resume.interruption.splits_not_run) {
      const bool in_grid =
          std::any_of(grid.begin(), grid.end(), [&](const SplitConfig& s) { return names_split(label, s, file); });
      if (in_grid) continue;
      interruption.splits_not_run.push_back(label + (precisions_ ? file.only_precision : "") +
                                            (norms_ ? file.only_clipping : "") + (packings_ ? file.only_packing : "") +
                                            (groupings_ ? file.only_grouping : "") + (paddings_ ? file.only_padding : ""));
    }
  }

 private:
  bool precisions_ = false, norms_ = false, paddings_ = false, packings_ = false, groupings_ = false;
};

// "AdamW moments", "adamw8bit state": what the resident-memory messages call the optimizer's state.
std::string optimizer_state_name(OptimizerKind kind) {
  return full_precision_adamw(kind) ? "AdamW moments" : to_string(kind) + " state";
}

// What the resident-memory messages call the state of the sweep's lightest optimizer (the sweep is
// refused only when the model does not fit even with it): "AdamW moments", "adamw8bit state (the
// smallest of --optimizer adamw,adamw8bit)".
std::string smallest_state_name(const WorkloadOptions& w, const ModelConfig& cfg) {
  const std::vector<OptimizerKind> kinds = grid_optimizers(w);
  return optimizer_state_name(lightest_optimizer(cfg, w)) +
         (kinds.size() > 1 ? " (the smallest of --optimizer " + join_optimizers(kinds) + ")" : "");
}

// The weights and the optimizer's state of what trains stay allocated for the whole sweep (one
// optimizer's at a time; with several, the smallest's: what every split needs at least).
int64_t resident_model_bytes(const WorkloadOptions& w, const ModelConfig& cfg) {
  int64_t weight_bytes = compute_bytes(w.weights_dtype) * parameter_count(cfg);
  if (w.lora.quantized()) {  // QLoRA: the quantised block linears, the rest in fp32 (--kbit-prep peft) or not
    const int64_t rest_bytes = w.lora.kbit_upcast ? 4 : compute_bytes(w.weights_dtype);
    weight_bytes =
        quantized_base_bytes(cfg, w.lora) + rest_bytes * (parameter_count(cfg) - block_linear_weight_numel(cfg));
  }
  const int64_t adapter_bytes = compute_bytes(w.lora.adapter_dtype) * lora_parameter_count(cfg, w.lora);
  return weight_bytes + adapter_bytes +
         optimizer_state_total_bytes(cfg, w.lora, w.weights_dtype, lightest_optimizer(cfg, w));
}

// What every split of the sweep needs at least: the resident bytes of its lightest weights dtype
// (one dtype's weights at a time), and the words that name them ("gpt2-124m's bf16 weights (the
// smallest of --weights-dtype fp32,bf16) and AdamW moments").
struct Resident {
  int64_t bytes = 0;
  std::string words;
};

Resident smallest_resident(const WorkloadOptions& w, const ModelConfig& cfg) {
  const std::vector<Precision> dtypes = grid_weights_dtypes(w), adapter_dtypes = grid_adapter_dtypes(w);
  Resident least;
  for (Precision dtype : dtypes) {
    for (Precision adapters : adapter_dtypes) {
      const WorkloadOptions one = with_adapter_dtype(with_weights_dtype(w, dtype), adapters);
      const int64_t bytes = resident_model_bytes(one, cfg);
      if (!least.words.empty() && bytes >= least.bytes) continue;
      least.bytes = bytes;
      least.words = cfg.name + "'s " + to_string(dtype) + " weights" +
                    (dtypes.size() > 1 ? " (the smallest of --weights-dtype " + join_precisions(dtypes) + ")" : "") +
                    (!w.lora.enabled()              ? ""
                     : adapter_dtypes.size() > 1 ? ", " + to_string(adapters) + " adapters (the smallest of --adapter-dtype " +
                                                       join_precisions(adapter_dtypes) + ")"
                                                 : ", adapters") +
                    " and " + smallest_state_name(one, cfg);
    }
  }
  return least;
}

void check_memory_limit_holds_the_model(const WorkloadOptions& w, const ModelConfig& cfg) {
  const Resident resident = smallest_resident(w, cfg);
  if (w.memory_limit_bytes > 0 && w.memory_limit_bytes < resident.bytes) {
    throw UserError("--memory-limit " + format_bytes(w.memory_limit_bytes) + " is below the " +
                    format_bytes(resident.bytes) + " that " + resident.words +
                    " alone need; raise the limit or pick a smaller model");
  }
}

std::vector<TokenBatch> load_batches(const WorkloadOptions& w, const ModelConfig& cfg, c10::Device device,
                                     const compat::LaunchEnvironment& launch) {
  DataOptions data_options = data_options_for(cfg.vocab_size, w.seq_len, w.batch, device.is_cuda());
  data_options.lengths = w.data.lengths;
  data_options.seed = w.model.seed;
  data_options.world_size = launch.world_size;
  data_options.distinct_batches = distinct_steps_of(w.data, w.seq_len, w.batch);
  // Every rank builds the same global batches (same seed or file); each split deals its share.
  return make_batches(w.data, data_options);
}

SweepContext sweep_context(const SweepOptions& options, const ModelConfig& cfg, c10::Device device, int world_size) {
  const WorkloadOptions& w = options.workload;
  SweepContext context = describe_environment(device.str());
  context.model = cfg.name;
  context.parameters = parameter_count(cfg) + lora_parameter_count(cfg, w.lora);
  context.trainable_parameters = w.lora.enabled() ? lora_parameter_count(cfg, w.lora) : context.parameters;
  context.seq_len = w.seq_len;
  context.batch = w.batch;
  context.flops_per_token = flops_per_token(cfg, w.seq_len, w.lora);
  context.transformers_flops_per_token = transformers_flops_per_token(cfg, w.lora);
  context.memory_limit_bytes = w.memory_limit_bytes;
  context.options = describe_options(options);
  context.world_size = world_size;
  const std::string primary_precision = to_string(w.precisions.front());
  context.peak_tflops = std::isnan(options.peak_tflops)
                            ? (device.is_cuda() ? device_peak_tflops(context.device_name, primary_precision) : kNotMeasured)
                            : options.peak_tflops;
  return context;
}

// Per-micro-batch padding: plan the activations for the longest padded micro-batch of the whole
// source, not for T (packed rows and max padding fill every row to T anyway). The source is read
// either way, so that a plan refuses a lengths or token file the sweep would refuse (a plan with
// --padding max passed over a file that holds no lengths). The ids of a token file are checked
// against the model where the sweep loads it, not here.
// Samples all one token long leave no target (a sample of n tokens trains n - 1): sweep and verify
// refuse such a step when they build it (with_targets), and a plan of it would plan a step that
// cannot run, so it is refused with the same fix.
void require_targets(const WorkloadOptions& w, const std::optional<SampleSource>& source) {
  if (!rows_are_samples(w.data)) return;  // full windows train T targets
  const std::string why = ", which leaves no target (a sample of n tokens trains n - 1); ";
  if (w.seq_len == 1) throw UserError("at --seq-len 1 every sample is one token long" + why + "use --seq-len 2 or more");
  if (source && !source->lengths.empty() &&
      std::all_of(source->lengths.begin(), source->lengths.end(), [](int64_t n) { return n <= 1; })) {
    throw UserError("every sample of " + lengths_name(w.data) + " is one token long" + why +
                    "give samples of two tokens or more");
  }
  if (source && !source->kept_labels.empty()) {
    if (source->nothing_counts == static_cast<int64_t>(source->lengths.size()) + source->dropped) {  // every row, those dropped too
      throw UserError(nothing_counts_problem(lengths_name(w.data), source->masked_by));
    }
    // Wrapped rows run across samples: a sample's label 0 is the previous one's last target.
    const bool wrapped = w.data.packing == Packing::kWrapped;
    int64_t targets = 0;
    for (size_t i = 0; i < source->lengths.size(); ++i) {
      targets += wrapped ? kept_labels_in(source->kept_labels[i], source->lengths[i])
                         : kept_targets(source->kept_labels[i], source->lengths[i]);
    }
    if (targets == 0) {
      throw UserError("no sample of " + lengths_name(w.data) + " has a target within T=" + std::to_string(w.seq_len) +
                      ": the labels that count (" + source->masked_by + ") fall past it, or only on a sample's " +
                      "first position, which nothing predicts; raise --seq-len, or give rows whose counted labels " +
                      "start within it");
    }
  }
}

// --lengths variable: the samples the sweep's steps hold, drawn as make_batches draws them (the
// seed and the model's vocabulary decide them), as a source of lengths; nullopt otherwise.
std::optional<SampleSource> variable_source(const WorkloadOptions& w) {
  if (w.data.lengths != LengthMode::kVariable || !rows_are_samples(w.data)) return std::nullopt;
  DataOptions options = data_options_for(resolve_model(w.model).vocab_size, w.seq_len, w.batch, /*cuda=*/false);
  options.seed = w.model.seed;
  options.distinct_batches = distinct_steps_of(w.data, w.seq_len, w.batch);
  SampleSource source;
  source.lengths = variable_sample_lengths(w.data, options);
  return source;
}

void plan_for_worst_micro_batch(PlanOptions& plan, const WorkloadOptions& w) {
  // The data as the sweep's loader reads it, against the model's vocabulary: a token file's ids,
  // --eos-id, and a file of windows too short for one step are refused here as there (helper-93:
  // a plan took them).
  const int64_t vocab_size = resolve_model(w.model).vocab_size;
  check_token_windows(w.data, w.seq_len, w.batch, vocab_size, distinct_steps_of(w.data, w.seq_len, w.batch));
  std::optional<SampleSource> source = read_sample_source(w.data, w.seq_len, vocab_size);
  require_targets(w, source);
  // Synthetic variable lengths are the samples the steps hold, which seldom reach T.
  const bool variable = !source && (source = variable_source(w)).has_value();
  if (!source) return;  // fixed synthetic lengths are T
  // The targets each sample counts (its n − 1, or those its masks keep).
  const auto targets_of = [&](size_t i) {
    return source->kept_labels.empty() ? source->lengths[i] - 1 : kept_targets(source->kept_labels[i], source->lengths[i]);
  };
  std::vector<int64_t> counted;  // per row of the data
  std::vector<int64_t> fills;    // --packing bfd: the positions each packed row holds
  if (w.data.packing == Packing::kNone) {
    // One sample per row.
    for (size_t i = 0; i < source->lengths.size(); ++i) counted.push_back(targets_of(i));
  } else if (w.data.packing == Packing::kBfd) {
    // The rows TRL's pack_dataset makes of the whole source (best_fit_decreasing in samples.cpp:
    // groups of kBfdGroupSamples in source order), each counting its documents' targets. Wrapped
    // rows depend on the order the samples are drawn in: T − 1 per row stands for them.
    for (const PackedRow& row : pack_bfd_in_groups(source->lengths, w.seq_len)) {
      int64_t row_targets = 0;
      for (const int64_t sample : row.samples) row_targets += targets_of(static_cast<size_t>(sample));
      counted.push_back(row_targets);
      fills.push_back(row.length);
    }
  }
  if (!counted.empty()) {
    // The chunked head gathers at most the b rows that count the most (most_counted_rows repeats a
    // source shorter than the micro-batch).
    const size_t most = std::min(counted.size(), static_cast<size_t>(std::max<int64_t>(1, w.batch)));
    std::partial_sort(counted.begin(), counted.begin() + static_cast<std::ptrdiff_t>(most), counted.end(), std::greater<>());
    counted.resize(most);
    std::partial_sum(counted.begin(), counted.end(), counted.begin());
    plan.most_counted_targets = std::move(counted);
  }
  // Wrapped rows are T long; packed ones as long as their documents, a micro-batch of them padded
  // to its longest row as a micro-batch of samples to its longest sample.
  if (w.data.packing == Packing::kWrapped) return;
  const bool packed = w.data.packing == Packing::kBfd;
  const std::vector<int64_t>& lengths = packed ? fills : source->lengths;
  if (!packed) {
    plan.longest_padding_activation_seq_len =
        worst_micro_batch(lengths, with_padding(w, {Padding::kLongest, 0}).data, w.seq_len).padded_length;
  }
  // A grouped order among the jobs: the whole source in the order a grouped epoch visits it, for
  // plan_memory to place each micro-batch of a grouped job in its step (plan_options_for clears it
  // for a random order's, whose longest micro-batch may come at any micro-step; one process, a
  // source of a step or more).
  const std::vector<bool> orders = grid_groupings(w);
  if (!packed && std::find(orders.begin(), orders.end(), true) != orders.end() && w.world_size <= 1 &&
      static_cast<int64_t>(lengths.size()) >= w.batch) {
    for (const int64_t sample : length_grouped_order(lengths, w.batch, w.model.seed))
      plan.grouped_lengths.push_back(lengths[static_cast<size_t>(sample)]);
    plan.grouped_step = w.batch;
  }
  // Each padding of the list pads the same micro-batch the most: the one holding the longest sample.
  const std::vector<PaddingChoice> paddings = grid_paddings(w);
  std::string words;  // "the one holding sample 4 of FILE (10 positions), padded to"
  std::string padded;  // " 16 (--padding multiple:16), 10 (--padding longest)"
  for (const PaddingChoice& padding : paddings) {
    if (!padding.per_micro_batch()) {
      plan.worst_by_padding.push_back({padding, 0, ""});
      if (paddings.size() > 1) padded += std::string(padded.empty() ? " " : ", ") + std::to_string(w.seq_len) + " (--padding max)";
      continue;
    }
    const WorstMicroBatch worst = worst_micro_batch(lengths, with_padding(w, padding).data, w.seq_len);
    const std::string drawn = "the " + std::to_string(source->lengths.size()) + " samples --lengths variable draws";
    if (packed) {
      words = "the one holding packed row " + std::to_string(worst.sample + 1) + " of the " +
              std::to_string(fills.size()) + " that --packing bfd makes of " + (variable ? drawn : lengths_name(w.data)) +
              " (" + std::to_string(worst.length) + " positions), padded to";
    } else if (variable) {
      words = "the one holding the longest of " + drawn + " (" + std::to_string(worst.length) + " positions), padded to";
    } else {
      const int64_t row = source->rows.empty() ? worst.sample : source->rows[static_cast<size_t>(worst.sample)];
      words = "the one holding sample " + std::to_string(row + 1) + " of " + lengths_name(w.data) + " (" +
              std::to_string(worst.length) + " positions" +
              (source->truncated > 0 && worst.length == w.seq_len ? ", cut to T" : "") + "), padded to";
    }
    const std::string to = " " + std::to_string(worst.padded_length) + " (--padding " + padding_name(padding) + ")";
    plan.worst_by_padding.push_back({padding, worst.padded_length, words + to});
    padded += (padded.empty() ? "" : ",") + to;
  }
  if (words.empty()) {  // --padding max alone: every micro-batch is T
    plan.worst_by_padding.clear();
    return;
  }
  plan.activation_seq_len = plan.worst_by_padding.front().activation_seq_len;
  plan.worst_micro_batch = words + padded;
  if (paddings.size() > 1) plan.worst_micro_batch_every_padding = plan.worst_micro_batch;
}

}  // namespace

int process_rank() { return compat::launch_environment().rank; }

namespace {

// What a --resume file holds, for the ranks to compare (each reads its own copy): "none", or its
// runs, timed steps and a hash of their times.
std::string resume_digest(const SweepResult* resume) {
  if (resume == nullptr) return "none";
  size_t steps = 0;
  size_t hash = 0;
  for (const RunResult& run : resume->runs) {
    steps += run.steps.size();
    for (const StepSample& step : run.steps) hash = hash * 31 + std::hash<double>{}(step.step_seconds);
  }
  std::ostringstream out;
  out << resume->runs.size() << " runs, " << steps << " timed steps (" << std::hex << (hash & 0xffffff) << ")";
  return out.str();
}

}  // namespace

void require_same_options_on_every_rank(compat::ProcessGroup& group, const std::string& command,
                                        const std::vector<std::pair<std::string, std::string>>& options) {
  // Ranks started with different arguments would pair up the wrong collectives: compare the
  // subcommand and the options (all but the machine's own) before the first one, and stop every
  // rank by name.
  std::vector<std::pair<std::string, std::string>> mine = {{"command", command}};
  for (const auto& option : options) {
    if (option.first != "OMP_WAIT_POLICY") mine.push_back(option);
  }
  std::string joined;
  for (const auto& [name, value] : mine) joined += name + "=" + value + "\n";
  const std::vector<std::string> all = group.exchange("accumbench/options", joined);
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (all[r] == joined) continue;
    std::vector<std::pair<std::string, std::string>> theirs;
    std::istringstream lines(all[r]);
    for (std::string line; std::getline(lines, line);) {
      const size_t equals = line.find('=');
      theirs.emplace_back(line.substr(0, equals), equals == std::string::npos ? "" : line.substr(equals + 1));
    }
    // By name, not by position: an option recorded only when set (max_grad_norm, base_quant, ...)
    // reads as its default on the rank that lacks it (recorded_option).
    for (const std::string& name : option_names(mine, theirs)) {
      const std::optional<std::string> a = recorded_option(theirs, name), b = recorded_option(mine, name);
      if (a == b) continue;
      const auto said = [&name](const std::optional<std::string>& value) {
        return value ? text::quoted(name + "=" + *value, 60) : "no " + name;
      };
      const bool resume = name == "resume";
      const bool files = name.find("_fingerprint") != std::string::npos;
      throw UserError("rank " + std::to_string(r) + " was started with " + said(a) + ", rank " +
                      std::to_string(group.rank()) + " with " + said(b) +
                      (resume  ? "; give every rank a copy of the same --resume file"
                       : files ? "; give every rank the same file content"
                               : "; start every rank with the same arguments"));
    }
  }
}

bool stop_requested_on_any_rank(compat::ProcessGroup* group, const std::string& device) {
  bool stop = stop_requested();
  if (group != nullptr) {
    at::Tensor flag = torch::full({1}, stop ? 1.0 : 0.0, torch::kFloat64).to(c10::Device(device));
    group->all_reduce_sum_async({flag})->wait();
    stop = flag.cpu().item<double>() > 0;
  }
  return stop;
}

std::string stop_cause() { return stop_signal() != 0 ? signal_name(stop_signal()) : "another rank's signal"; }

void require_reducible_gradients(const WorkloadOptions& w, const std::string& device, int world_size) {
  // What trains has bf16 gradients: bf16 adapters, or a full fine-tune of bf16 weights.
  const std::vector<Precision> dtypes = grid_weights_dtypes(w);
  const std::vector<Precision> adapters = grid_adapter_dtypes(w);
  const bool bf16_adapters =
      w.lora.enabled() && std::find(adapters.begin(), adapters.end(), Precision::kBf16) != adapters.end();
  const bool bf16_weights = !w.lora.enabled() && std::find(dtypes.begin(), dtypes.end(), Precision::kBf16) != dtypes.end();
  if (world_size <= 1 || !(bf16_adapters || bf16_weights)) return;
  if (compat::ProcessGroup::backend_for(c10::Device(device)) != "gloo") return;
  throw UserError(std::string("data parallel over Gloo cannot all-reduce bf16 gradients (PyTorch issue 111131), and ") +
                  (bf16_adapters ? "--adapter-dtype bf16 trains bf16 adapters; use --adapter-dtype fp32"
                                 : "a full fine-tune of --weights-dtype bf16 has them; use --weights-dtype fp32, LoRA "
                                   "(its adapters train in fp32)") +
                  " or CUDA devices (NCCL)");
}

void require_model_fits_device(const WorkloadOptions& w, const ModelConfig& cfg, const std::string& device) {
  const Resident resident = smallest_resident(w, cfg);
  const int64_t device_bytes = describe_environment(device).device_memory_bytes;
  if (device_bytes > 0 && resident.bytes > device_bytes) {
    throw UserError(resident.words + " alone need " + format_bytes(resident.bytes) + ", more than the " +
                    format_bytes(device_bytes) + " of " + device +
                    "; pick a smaller model, LoRA, or plan it with `accumbench plan`");
  }
}

PlanOptions sweep_plan_options(const WorkloadOptions& w, bool device_is_cuda, int token_batches) {
  PlanOptions plan;
  plan.seq_len = w.seq_len;
  plan.loss_chunk_tokens = w.loss.chunk_tokens;
  plan.weights_dtype = w.weights_dtype;
  plan.lora = w.lora;
  plan.optimizer = w.optimizer.kind;
  plan.max_grad_norm = w.optimizer.max_grad_norm;
  plan.padding = padding_of(w.data);
  plan.batch = w.batch;
  plan.cpu = !device_is_cuda;
  // Every host batch the runner keeps: each packing's distinct steps (planned_token_batches).
  plan.token_batches = token_batches;
  plan.libtorch_major = compat::libtorch_major_version();
  // compat::causal_attention: scaled_dot_product_attention from LibTorch 2.0 (flash kernels on
  // CUDA), the explicit masked softmax before.
  plan.attention = plan.libtorch_major >= 2 && device_is_cuda ? AttentionKind::kFlash : AttentionKind::kExplicit;
  plan.counted_rows_gathered = rows_are_samples(w.data);
  // Each packing's rows: the first's in the fields themselves, every one's in rows_by_packing with a
  // list (plan_options_for picks a split's).
  const auto rows_of = [&plan](const WorkloadOptions& packed) {
    PlanOptions one = plan;
    one.packing = packed.data.packing;
    one.packed_documents = packed.data.packing == Packing::kBfd && rows_are_samples(packed.data);  // full windows are never packed
    plan_for_worst_micro_batch(one, packed);
    return one;
  };
  const std::vector<Packing> packings = grid_packings(w);
  std::vector<PlanOptions::PackedRows> rows;
  PlanOptions first;
  for (const Packing packing : packings) {
    const PlanOptions one = rows_of(with_packing(w, packing));
    rows.push_back({packing, one});  // its PlannedRows
    if (rows.size() == 1) first = one;
  }
  if (packings.size() > 1) first.rows_by_packing = std::move(rows);
  return first;
}

bool cuda_attached() { return compat::cuda_available(); }

// The host memory this process may use: the kernel's MemAvailable (/proc/meminfo; free pages and
// the caches it can drop), shared by the ranks torchrun started on this machine (LOCAL_WORLD_SIZE).
// 0 when it cannot be read: then nothing is refused.
int64_t available_host_bytes_per_process() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") {
      const char* local = std::getenv("LOCAL_WORLD_SIZE");
      const int64_t ranks = local != nullptr && std::atoi(local) > 1 ? std::atoi(local) : 1;
      return kib * 1024 / ranks;
    }
  }
  return 0;
}

int planned_token_batches(const WorkloadOptions& w) {
  // Each packing's steps, built once per order of the samples (--group-by-length's list): an order
  // changes which samples a step holds, not how many steps there are.
  int batches = 0;
  for (const Packing packing : grid_packings(w)) batches += distinct_steps_of(with_packing(w, packing).data, w.seq_len, w.batch);
  return batches * static_cast<int>(grid_groupings(w).size());
}

void require_distinct_steps_fit(const WorkloadOptions& w, int64_t available_host_bytes) {
  if (!w.data.distinct_steps_given()) return;
  const std::string given = "--distinct-steps " + distinct_steps_name(w.data);
  int64_t steps = 0;
  for (const Packing packing : grid_packings(w)) {
    const int64_t requested = requested_distinct_steps(with_packing(w, packing).data, w.seq_len, w.batch);
    if (requested > kMaxDistinctSteps) {  // a count past it is refused with the other limits (validate_limits)
      throw UserError(given + " would keep " + text::format_count(requested) + " steps of " + lengths_name(w.data) +
                      (grid_packings(w).size() > 1 ? " (--packing " + to_string(packing) + ")" : "") +
                      ", more than the " + text::format_count(kMaxDistinctSteps) +
                      " a sweep holds; give a number of steps, as in --distinct-steps 64");
    }
    steps += requested;
  }
  // Each step's inputs and targets, int64, (B, T + 1) at most, once per packing and order.
  const auto orders = static_cast<int64_t>(grid_groupings(w).size());
  steps *= orders;
  const auto step_rows = static_cast<int64_t>(grid_packings(w).size()) * orders;
  const int64_t step_bytes = w.batch * (w.seq_len + 1) * 8 * 2;
  const int64_t bytes = steps * step_bytes;
  if (available_host_bytes > 0 && bytes > available_host_bytes / 2) {
    // The most steps of every packing and order that fit in half of it.
    const int64_t fitting = available_host_bytes / 2 / (step_bytes * step_rows);
    throw UserError(given + " keeps " + text::format_count(steps) + (steps == 1 ? " step" : " steps") + " of batches, " +
                    format_bytes(bytes) + " of host memory, more than half the " + format_bytes(available_host_bytes) +
                    " this process may use; " +
                    (fitting >= 1 ? "give fewer steps, as in --distinct-steps " + std::to_string(fitting)
                                  : std::string("one step of each packing takes more already: free memory, or give a "
                                                "smaller --batch or --seq-len")));
  }
}

namespace {

// The distinct steps `packing`'s runs cycle through, counted once per packing in `cache` (an epoch
// reads the file).
int cached_distinct_steps(std::map<Packing, int>& cache, const WorkloadOptions& w, Packing packing) {
  const auto known = cache.find(packing);
  if (known != cache.end()) return known->second;
  return cache[packing] = distinct_steps_of(with_packing(w, packing).data, w.seq_len, w.batch);
}

}  // namespace

std::string distinct_steps_rounds_note(const SweepResult& result, const WorkloadOptions& w,
                                      std::map<Packing, int>* steps_cache) {
  if (!w.data.distinct_steps_given()) return "";
  std::map<Packing, int> own;
  std::map<Packing, int>& cache = steps_cache != nullptr ? *steps_cache : own;
  // Each timed run against its packing's steps (a resumed file's runs too: the same data), each
  // packing's counted once (an epoch reads the file).
  std::string short_runs;
  int count = 0, most = 0;
  for (const RunResult& run : result.runs) {
    if (run.status != RunStatus::kOk || run.steps.empty()) continue;
    const int steps = cached_distinct_steps(cache, w, run.config.packing);
    most = std::max(most, steps);
    if (static_cast<int>(run.steps.size()) >= steps) continue;
    if (++count <= 4) {
      short_runs += (short_runs.empty() ? "" : ", ") + run_label(run, result.runs) + " on " +
                    std::to_string(run.steps.size()) + " of " + std::to_string(steps);
    }
  }
  if (count == 0) return "";
  return "--distinct-steps " + distinct_steps_name(w.data) + ": " + std::to_string(count) +
         (count == 1 ? " split was" : " splits were") + " timed on fewer than every step (" + short_runs +
         (count > 4 ? ", ..." : "") + "), so " + (count == 1 ? "its times stand" : "their times stand") +
         " for those steps only; --steps " + std::to_string(most) + " times every split on each";
}

std::string grouping_steps_note(const SweepResult& result, const WorkloadOptions& w,
                                std::map<Packing, int>* steps_cache) {
  const auto timed = [](const RunResult& run) { return run.status == RunStatus::kOk && !run.steps.empty(); };
  const bool grouped = std::any_of(result.runs.begin(), result.runs.end(),
                                   [&](const RunResult& run) { return timed(run) && run.config.group_by_length; });
  const bool random = std::any_of(result.runs.begin(), result.runs.end(),
                                  [&](const RunResult& run) { return timed(run) && !run.config.group_by_length; });
  if (!grouped || !real_samples(w.data)) return "";
  // Samples all of one length (or all cut to T) make the same steps in either order: nothing leans.
  const std::optional<SampleSource> source = read_sample_source(w.data, w.seq_len, std::numeric_limits<int64_t>::max());
  if (!source || std::adjacent_find(source->lengths.begin(), source->lengths.end(), std::not_equal_to<>()) ==
                     source->lengths.end())
    return "";
  std::map<Packing, int> own;
  std::map<Packing, int>& cache = steps_cache != nullptr ? *steps_cache : own;
  std::map<Packing, int64_t> epochs;  // each packing's pass, from the source read above
  int64_t shortest = -1, epoch_of_shortest = 0, longest_epoch = 0;
  for (const RunResult& run : result.runs) {
    if (!timed(run)) continue;
    const Packing packing = run.config.packing;
    if (epochs.count(packing) == 0) epochs[packing] = epoch_steps(*source, with_packing(w, packing).data, w.seq_len, w.batch);
    const int64_t epoch = epochs[packing];
    if (epoch <= 0) continue;
    longest_epoch = std::max(longest_epoch, epoch);
    const int distinct = cached_distinct_steps(cache, w, packing);
    // The steps of the data its rounds met: each round trains the next step of the cycle.
    const int64_t met = std::min<int64_t>(static_cast<int64_t>(run.steps.size()), distinct);
    if (met < epoch && (shortest < 0 || met < shortest)) shortest = met, epoch_of_shortest = epoch;
  }
  if (shortest < 0) return "";
  const std::string steps_met = std::to_string(shortest) + " of the " + std::to_string(epoch_of_shortest) +
                                " steps one pass over " + lengths_name(w.data) + " takes";
  const std::string over_the_epoch = "--distinct-steps epoch --steps " + std::to_string(longest_epoch);
  if (!random) {
    return "--group-by-length: the splits were timed on " + steps_met +
           ", and transformers' LengthGroupedSampler puts the longest samples first (the megabatch of up to 50 "
           "steps that holds the longest, sorted longest first), so these steps hold longer samples than an epoch's "
           "average, and their times and tokens/s are those of long samples; " + over_the_epoch + " times them over the epoch";
  }
  return "--group-by-length false,true: the orders are compared on " + steps_met +
         ", but transformers' LengthGroupedSampler sorts up to 50 steps of samples at a time, longest first, so "
         "a grouped step among the first holds longer samples than a grouped epoch's average (and a random step any): "
         "the per-token comparison leans toward the grouped order; " + over_the_epoch + " compares the orders on the same samples";
}

PlanTarget plan_target(const WorkloadOptions& w) {
  validate_workload(w);
  require_distinct_steps_fit(w, /*available_host_bytes=*/0);  // the sweep's limit on steps; a plan holds no batches
  const int token_batches = planned_token_batches(w);
  PlanTarget target;
  if (names_cuda(w.device) && !compat::cuda_available()) {
    target.cuda = true;
    target.attached = false;
    target.options = sweep_plan_options(w, /*device_is_cuda=*/true, token_batches);
    target.options.libtorch_major = std::max(target.options.libtorch_major, 2);
    target.options.attention = AttentionKind::kFlash;
    return target;
  }
  target.cuda = resolve_device(w.device).is_cuda();  // validates the name
  target.options = sweep_plan_options(w, target.cuda, token_batches);
  return target;
}

namespace {

std::string model_file_fingerprint(const WorkloadOptions& w) {
  return w.model.hf_config.empty() ? "preset" : file_fingerprint(resolve_hf_config_path(w.model.hf_config));
}

std::string token_file_fingerprint(const WorkloadOptions& w) {
  return w.data.token_file.empty() ? "synthetic" : file_fingerprint(w.data.token_file);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> file_fingerprints(const WorkloadOptions& w) {
  std::vector<std::pair<std::string, std::string>> files = {{"model_file_fingerprint", model_file_fingerprint(w)},
                                                            {"token_file_fingerprint", token_file_fingerprint(w)}};
  if (w.data.lengths == LengthMode::kFile) files.emplace_back("lengths_file_fingerprint", file_fingerprint(w.data.lengths_file));
  return files;
}

std::vector<std::pair<std::string, std::string>> describe_options(const SweepOptions& o) {
  const WorkloadOptions& w = o.workload;
  std::vector<std::pair<std::string, std::string>> options = describe_workload(w);
  const std::vector<std::pair<std::string, std::string>> sweep = {
      {"warmup", std::to_string(o.warmup)},
      {"steps", std::to_string(o.steps)},
      {"time_budget_seconds", number(o.time_budget_seconds)},
      {"tie_tolerance", number(o.tie_tolerance)},
      {"confidence", number(o.confidence)},
      {"memory_limit_bytes", std::to_string(w.memory_limit_bytes)},
      {"knobs", w.grid.knobs ? "true" : "false"},
      {"activation_checkpointing", to_string(w.grid.checkpointing)},
      {"optimizer_in_backward", w.grid.optimizer_in_backward ? "true" : "false"},
      {"try_predicted_oom", o.try_predicted_oom ? "true" : "false"},
      {"cuda_graphs", w.grid.cuda_graphs ? "true" : "false"},
      {"chunked_loss", w.loss.chunked ? "true" : "false"},
      {"loss_chunk_tokens", w.loss.chunk_tokens == 0 ? "auto" : std::to_string(w.loss.chunk_tokens)},
      {"profile_dir", o.profile_dir.empty() ? "none" : o.profile_dir},
      {"peak_tflops", std::isnan(o.peak_tflops) ? "device table" : number(o.peak_tflops)},
      {"token_file", w.data.token_file.empty() ? "synthetic" : w.data.token_file},
      // Content fingerprints, so that --resume tells an edited file at the same path.
      {"model_file_fingerprint", model_file_fingerprint(w)},
      {"token_file_fingerprint", token_file_fingerprint(w)},
      {"eos_id", w.data.eos_id >= 0 ? std::to_string(w.data.eos_id) : "none"},
      {"threads", w.threads == 0 ? "all" : std::to_string(w.threads)},
      {"dist_timeout_seconds", number(w.dist_timeout_seconds)},
      {"OMP_WAIT_POLICY", std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "(unset)"},
  };
  options.insert(options.end(), sweep.begin(), sweep.end());
  // Only for a lengths file, so that files measured on other lengths still resume.
  if (w.data.lengths == LengthMode::kFile) {
    options.emplace_back("lengths_file_fingerprint", file_fingerprint(w.data.lengths_file));
  }
  return options;
}

namespace {

// The micro-batch memory is judged on, in the context's options (replaced where there is one; none
// where every row is T): what the predicted peaks and the fits verdict judge, for every padding of
// `w`'s list.
void describe_memory_judged_on(SweepContext& context, const WorkloadOptions& w) {
  // Each packing of a --packing list judges memory on its own rows' longest micro-batch.
  const std::vector<Packing> packings = grid_packings(w);
  std::string words;
  for (const Packing packing : packings) {
    PlanOptions plan;
    plan_for_worst_micro_batch(plan, with_packing(w, packing));
    if (plan.worst_micro_batch.empty()) continue;
    words += (words.empty() ? "" : "; ") + (packings.size() > 1 ? "--packing " + to_string(packing) + ": " : "") +
             plan.worst_micro_batch;
  }
  auto& options = context.options;
  options.erase(std::remove_if(options.begin(), options.end(), [](const auto& o) { return o.first == "memory_judged_on"; }),
                options.end());
  if (!words.empty()) options.emplace_back("memory_judged_on", words);
}

// The real-data source's words (samples, masking columns) for `w`'s packings, replacing any.
void describe_samples_of(SweepContext& context, const WorkloadOptions& w, int64_t vocab_size);

// A resumed file's kept runs of paddings or packings this sweep does not list: the context names
// their samples' rows and longest micro-batch too (the options' lists hold them,
// name_kept_runs_in_lists).
void describe_kept_paddings(SweepContext& context, const WorkloadOptions& w, int64_t vocab_size) {
  const std::optional<std::string> paddings = recorded_option(context.options, "padding");
  const std::optional<std::string> packings = recorded_option(context.options, "packing");
  const bool more_paddings = paddings && *paddings != join_paddings(grid_paddings(w));
  const bool more_packings = packings && *packings != join_packings(grid_packings(w));
  if (!more_paddings && !more_packings) return;
  WorkloadOptions with_kept = w;
  try {
    if (more_paddings) {
      std::vector<PaddingChoice> choices;
      for (const std::string& name : comma_items(*paddings)) choices.push_back(padding_from_string(name));
      set_padding(with_kept.data, choices.front());
      with_kept.data.other_paddings.assign(choices.begin() + 1, choices.end());
    }
    if (more_packings) {
      std::vector<Packing> kinds;
      for (const std::string& name : comma_items(*packings)) kinds.push_back(packing_from_string(name));
      with_kept.data.packing = kinds.front();
      with_kept.data.other_packings.assign(kinds.begin() + 1, kinds.end());
      describe_samples_of(context, with_kept, vocab_size);
    }
    describe_memory_judged_on(context, with_kept);
  } catch (const UserError&) {  // the kept runs ran on these samples; should one not read, this sweep's words stay
  }
}

// The steps of data a run of `w` (one packing) cycles through, as the header says them: "an epoch of
// 64 steps" (--distinct-steps epoch) or "8 distinct steps".
std::string steps_of_data_words(const WorkloadOptions& w) {
  const int steps = distinct_steps_of(w.data, w.seq_len, w.batch);
  return w.data.distinct_steps == DataSource::kEpochSteps
             ? "an epoch of " + std::to_string(steps) + (steps == 1 ? " step" : " steps")
             : std::to_string(steps) + (steps == 1 ? " distinct step" : " distinct steps");
}

// The real-data source (lengths file or documents) in the context block: how many samples, how
// many were cut to T, and the micro-batch memory is judged on. The model's vocabulary checks the
// documents' ids.
void describe_samples_of(SweepContext& context, const WorkloadOptions& w, int64_t vocab_size) {
  auto& options = context.options;
  options.erase(std::remove_if(options.begin(), options.end(),
                               [](const auto& o) { return o.first == "samples" || o.first == "labels_masked_by"; }),
                options.end());
  // Each packing of a --packing list makes its own rows (how many samples a cut or a mask leaves, how
  // many rows, whether a step repeats some): named each where they differ from the first's words.
  const std::vector<Packing> packings = grid_packings(w);
  std::vector<std::pair<Packing, std::string>> words;
  std::string masked_by;
  for (const Packing packing : packings) {
    const WorkloadOptions one = with_packing(w, packing);
    const std::optional<SampleSource> source = read_sample_source(one.data, w.seq_len, vocab_size);
    if (!source) break;
    const std::string repeated = repeated_samples_words(*source, one.data, w.batch, w.seq_len);
    // --distinct-steps: the steps the runs cycle through.
    const std::string cycled = w.data.distinct_steps_given() ? ", " + steps_of_data_words(one) : "";
    words.emplace_back(packing, source->description + (repeated.empty() ? "" : ", " + repeated) + cycled);
    masked_by = source->masked_by;
  }
  if (!words.empty()) {
    const bool alike = std::all_of(words.begin(), words.end(), [&](const auto& p) { return p.second == words[0].second; });
    std::string samples = alike ? words[0].second : "";
    for (size_t i = 0; i < words.size() && !alike; ++i) {
      samples += (i == 0 ? "" : "; ") + std::string("--packing ") + to_string(words[i].first) + ": " + words[i].second;
    }
    context.options.emplace_back("samples", samples);
    // Which columns decided the labels that count: the Trainer settings say completion_only_loss:
    // true where a completion_mask did (trainer_settings.cpp).
    if (!masked_by.empty()) context.options.emplace_back("labels_masked_by", masked_by);
  }
}

void describe_samples(SweepContext& context, const WorkloadOptions& w, int64_t vocab_size) {
  describe_samples_of(context, w, vocab_size);
  describe_memory_judged_on(context, w);
  // --distinct-steps where no samples' words count the steps (synthetic lengths, a token file's
  // windows, which stop at the file's end): the steps kept, in the header's words.
  if (w.data.distinct_steps_given() && !recorded_option(context.options, "samples")) {
    context.options.emplace_back("steps_of_data", steps_of_data_words(w));
  }
}

// "3 splits not begun (1×8, 2×4, 4×2)": a count of splits in one state, then their names, after
// `lead` ("timed steps ") where the names need one.
std::string named_splits(const std::vector<std::string>& names, const std::string& state, const std::string& lead = "") {
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  return std::to_string(names.size()) + (names.size() == 1 ? " split " : " splits ") + state + " (" + lead + list + ")";
}

// The first sentence of the recommendation of a sweep that is not whole (result.hpp, Interruption):
// what stopped it, how far it got, and how to measure the rest. `rounds` were run of `min_rounds`
// (--steps) that every split is timed in; `mid_round`: an error stopped the next one, with some
// splits timed in it (the decision counts it: "Undecided after rounds + 1 rounds"); `profiled`:
// --profile was asked for (its steps come last).
std::string unfinished_sentence(const SweepResult& result, int64_t rounds, int64_t min_rounds, bool profiled,
                                const std::string& json_path, bool mid_round = false) {
  const Interruption& stop = result.interruption;
  const bool running = stop.signal.empty() && stop.error.empty();
  std::vector<std::string> parts;
  const std::vector<std::string>& not_run = stop.splits_not_run;
  if (!not_run.empty()) parts.push_back(named_splits(not_run, "not begun"));
  int64_t untimed = 0;
  for (const RunResult& run : result.runs) {
    if (run.status == RunStatus::kOk && run.steps.empty()) ++untimed;
  }
  const std::string reached = running ? "the timed rounds had reached " : "the timed rounds stopped after ";
  if (untimed > 0) {
    parts.push_back(std::to_string(untimed) + (untimed == 1 ? " split with its memory" : " splits with their memory") +
                    " measured but no timed step");
  } else if (mid_round) {
    parts.push_back("the timed rounds stopped during round " + std::to_string(rounds + 1) +
                    (rounds < min_rounds ? " of --steps " + std::to_string(min_rounds)
                                         : ", every split past its --steps " + std::to_string(min_rounds)));
  } else if (rounds < min_rounds) {
    parts.push_back(reached + std::to_string(rounds) + " of --steps " + std::to_string(min_rounds));
  } else {
    parts.push_back(reached + std::to_string(rounds) + ", every split past its --steps " + std::to_string(min_rounds));
  }
  if (profiled) parts.push_back("no --profile step taken");
  std::string sentence = !stop.signal.empty() ? "Interrupted by " + stop.signal
                         : !stop.error.empty() ? "Stopped by an error (" + text::shortened(stop.error, 300) + ")"
                                               : "Saved while the sweep ran; a file left like this is from a sweep "
                                                 "that did not reach its end (killed, or ended by an error)";
  for (size_t i = 0; i < parts.size(); ++i) sentence += (i == 0 ? ": " : ", ") + parts[i];
  const std::string missing = "what is missing (every split not begun or short of its --steps)";
  if (json_path.empty()) {
    return sentence + "; below is what was measured, which no file keeps: rerun with --json FILE to save a sweep "
                      "as it goes, and --resume FILE then measures " + missing + ".";
  }
  return sentence + "; below is what was measured, and the same command with --resume " + json_path + " measures " +
         missing + ".";
}

// A resume whose lists leave out splits that the file had not finished (a stopped sweep's, or runs
// short of a --steps raised since) keeps them as they were: the first sentence names them, so that
// the file never reads as a finished sweep of them.
std::string kept_unfinished_sentence(const SweepResult& result, const std::vector<RunResult>& kept, int64_t steps) {
  std::vector<std::string> short_runs;  // "2×4: 3", its timed steps
  for (const RunResult& run : kept) {
    if (run.status != RunStatus::kOk || static_cast<int64_t>(run.steps.size()) >= steps) continue;
    short_runs.push_back(run_label(run, result.runs) + ": " + std::to_string(run.steps.size()));
  }
  const std::vector<std::string>& not_run = result.interruption.splits_not_run;
  if (short_runs.empty() && not_run.empty()) return "";
  std::vector<std::string> parts;
  if (!short_runs.empty()) {
    parts.push_back(named_splits(short_runs, "short of --steps " + std::to_string(steps), "timed steps "));
  }
  if (!not_run.empty()) parts.push_back(named_splits(not_run, "never begun"));
  return "Kept from the --resume file as it had them, outside this sweep's lists: " + parts[0] +
         (parts.size() > 1 ? " and " + parts[1] : "") + "; the --resume with the file's own lists measures them.";
}

// Data parallel: every rank must run the same rounds, so every rank decides on rank 0's times
// and clock (a sum over the ranks of rank 0's values and zeros elsewhere), and a split that
// failed on any rank leaves the rounds on every rank (each rank's failures, summed). The steps
// agree on their failures already (Trainer::accumulate), so the sum only confirms them; a split
// that it shows failed elsewhere but not here is recorded so, lest the ranks go apart. None
// without a process group. The references are held until the rounds end.
AgreeOnRound agree_on_rank_zero(compat::ProcessGroup* group, const c10::Device& device, const std::vector<int>& slot_of,
                                std::vector<RunResult>& runs, SplitMeasurement& measurement) {
  if (group == nullptr) return nullptr;
  return [group, device, &slot_of, &runs, &measurement](std::vector<double>& seconds, double& elapsed) {
    const auto n = static_cast<int64_t>(seconds.size());
    // (2n + 1): rank 0's seconds (-1: none), its clock, then every rank's failures.
    at::Tensor values = torch::zeros({2 * n + 1}, torch::kFloat64);
    if (group->rank() == 0) {
      for (int64_t i = 0; i < n; ++i) values[i] = std::isnan(seconds[i]) ? -1.0 : seconds[i];
      values[n] = elapsed;
    }
    for (int64_t i = 0; i < n; ++i) {
      if (runs[slot_of[i]].status != RunStatus::kOk) values[n + 1 + i] = 1.0;
    }
    values = values.to(device);
    group->all_reduce_sum_async({values})->wait();
    values = values.cpu();
    for (int64_t i = 0; i < n; ++i) {
      const double v = values[i].item<double>();
      const bool failed = values[n + 1 + i].item<double>() > 0;
      seconds[i] = v < 0 || failed ? std::numeric_limits<double>::quiet_NaN() : v;
      if (failed) measurement.record_failure_elsewhere(runs[slot_of[i]]);
    }
    elapsed = values[n].item<double>();
  };
}

// How many splits share the rounds' confidence: every split with timed steps, as the final decision
// shares it (evidence_from_runs), so a resumed file's runs kept as they were, or timed alone, count
// too. With fewer here the rounds would stop on a verdict the final decision widens to undecided.
int decision_family(const std::vector<RunResult>& runs, const std::vector<int>& slot_of, const std::vector<RunResult>& kept) {
  const auto timed = [](const RunResult& run) { return run.status == RunStatus::kOk && !run.steps.empty(); };
  int family = static_cast<int>(slot_of.size());
  for (size_t index = 0; index < runs.size(); ++index) {
    const bool in_rounds = std::find(slot_of.begin(), slot_of.end(), static_cast<int>(index)) != slot_of.end();
    if (!in_rounds && timed(runs[index])) ++family;
  }
  return family + static_cast<int>(std::count_if(kept.begin(), kept.end(), timed));
}

// The interval of each timed split's mean, the engine's own: the evidence's holds the framework's
// time too. Below kMinRoundsToDecide steps there is none ([0, ∞) inside the evidence): no bounds,
// not a low of minus the framework's time.
void engine_mean_intervals(std::vector<RunResult>& runs, const std::vector<int>& slot_of, const RoundEvidence& evidence,
                           const std::vector<double>& framework_seconds) {
  for (size_t k = 0; k < slot_of.size(); ++k) {
    RunResult& run = runs[slot_of[k]];
    if (run.status != RunStatus::kOk) continue;
    const Estimate mean = evidence.mean_seconds(static_cast<int>(k));
    const bool interval = std::isfinite(mean.high);
    run.mean_seconds = Estimate{run.mean_seconds.value, interval ? mean.low - framework_seconds[k] : kNotMeasured,
                                interval ? mean.high - framework_seconds[k] : kNotMeasured};
  }
}

// Adds the steps the slots' runs hold, in their rounds keyed by (session, round), each round's regime
// its session: what rounds_as_timed rebuilds after the rounds, and what a resume's rounds start
// from (a re-timed split's earlier sweep's steps), so that they stop on the evidence the final
// decision weighs. Steps outside the rounds, or of no known sweep, are left to that decision.
void add_timed_rounds(RoundEvidence& evidence, const std::vector<RunResult>& runs, const std::vector<int>& slot_of) {
  struct Round {
    std::vector<double> seconds, scales;
    std::vector<Stratum> strata;
  };
  std::map<std::pair<int64_t, int64_t>, Round> rounds;
  for (size_t k = 0; k < slot_of.size(); ++k) {
    for (const StepSample& step : runs[slot_of[k]].steps) {
      const int64_t session = session_of(runs[slot_of[k]], step);
      if (step.round < 0 || session == 0) continue;
      Round& round = rounds[{session, step.round}];
      if (round.seconds.empty()) {
        round.seconds.assign(slot_of.size(), std::numeric_limits<double>::quiet_NaN());
        round.scales.assign(slot_of.size(), 1.0);
        round.strata.assign(slot_of.size(), Stratum{});
      }
      round.seconds[k] = step.step_seconds;
      round.scales[k] = per_token_scale(step.positions);
      round.strata[k] = Stratum{step.data_step, step.data_steps};
    }
  }
  for (const auto& [index, round] : rounds) evidence.add_round(round.seconds, round.scales, round.strata, index.first);
}

// The evidence of the rounds as timed, the splits' steps in their rounds (RoundEvidence as the rounds
// built it, without run_rounds' per-token scales).
RoundEvidence rounds_as_timed(const std::vector<RunResult>& runs, const std::vector<int>& slot_of, double confidence,
                              const std::vector<double>& framework_seconds, int family) {
  RoundEvidence timed(static_cast<int>(slot_of.size()), confidence, framework_seconds, family);
  timed.weigh_per_token(false);  // seconds per step; each step's positions place its bound
  add_timed_rounds(timed, runs, slot_of);
  return timed;
}

// Memory may have stopped every split: what the plan fits, in the limit or the device's memory less
// the plan's default headroom, among other splits than those tried (this sweep's and those a --resume
// file holds beyond them). Empty where the plan cannot model a change for this job: the
// recommendation points at `plan` instead.
std::string advice_when_none_succeeded(const SweepResult& result, const WorkloadOptions& w, const ModelConfig& cfg,
                                       const c10::Device& device, const PlanOptions& plan) {
  const int64_t device_bytes = device.is_cuda() ? result.context.device_memory_bytes : 0;
  const int64_t usable =
      w.memory_limit_bytes > 0 ? w.memory_limit_bytes : device_bytes - headroom_bytes(kDefaultHeadroom, device_bytes);
  std::vector<SplitConfig> tried;
  for (const RunResult& run : result.runs) tried.push_back(run.config);
  try {
    return fit_advice(cfg, plan, w, usable, tried);
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace

SweepResult run_sweep(const SweepOptions& options, const SweepCallback& on_split, const SweepResult* resume,
                      const ProgressCallback& on_step) {
  const WorkloadOptions& w = options.workload;
  check_sweep_options(options);
  SweepResult rederived;  // the file's runs with this build's means (with_this_builds_means)
  if (resume != nullptr) {
    rederived = with_this_builds_means(*resume);
    resume = &rederived;
  }
  configure_threads(w.threads);
  const compat::LaunchEnvironment launch = compat::launch_environment();
  const c10::Device device = resolve_device(w.device);
  if (device.is_cuda()) compat::cuda_set_device(device.index());
  if (w.grid.cuda_graphs) require_cuda_for_graphs(device);
  if (!options.profile_dir.empty()) check_profile_dir(options.profile_dir, device);
  MemoryProbe memory(device);  // on CPU this installs the counting allocator before anything is allocated
  const ModelConfig cfg = resolve_model(w.model);
  check_sequence_length(cfg, w.seq_len);
  require_model_fits_device(w, cfg, device.str());
  require_reducible_gradients(w, device.str(), launch.world_size);
  const std::vector<SplitConfig> grid = split_grid(w, launch.world_size);
  if (!device.is_cuda() && std::count(w.precisions.begin(), w.precisions.end(), Precision::kFp16) > 0) {
    throw UserError("fp16 needs a CUDA device (autocast with loss scaling); use bf16 or fp32 on the CPU");
  }
  for (Precision dtype : grid_weights_dtypes(w)) require_weights_dtype_runs_on(dtype, device);
  validate_lora(cfg, w.lora);
  if (device.is_cuda()) compat::allow_tf32(w.tf32);  // on by default, as the PyTorch anchor runs

  SweepResult result;
  result.context = sweep_context(options, cfg, device, launch.world_size);
  const FrameworkOverhead framework = sweep_framework_overhead(options.framework_overhead, result.context.device_name, w, cfg);
  result.context.framework_seconds_per_micro_step = framework.seconds_per_micro_step;
  result.context.framework_source = framework.source;
  if (resume != nullptr) check_resume(*resume, result.context);
  describe_samples(result.context, w, cfg.vocab_size);
  require_distinct_steps_fit(w, available_host_bytes_per_process());
  PackedBatches data;
  for (const StepRows& rows : grid_step_rows(w)) {
    data.add(rows, StepBatches(load_batches(with_step_rows(w, rows), cfg, device, launch)));
  }
  check_memory_limit_holds_the_model(w, cfg);
  // Joins the other ranks last, after every check that could stop this one alone.
  const std::unique_ptr<compat::ProcessGroup> group =
      compat::ProcessGroup::from_environment(device, w.dist_timeout_seconds);
  if (group) {
    result.context.distributed_backend = group->backend();
    std::vector<std::pair<std::string, std::string>> compared = result.context.options;
    compared.emplace_back("resume", resume_digest(resume));
    require_same_options_on_every_rank(*group, "sweep", compared);
  }
  // Past this point nothing throws a UserError for the whole sweep: failures belong to one split.
  measuring_begins();  // a signal from here on reports what was measured (interrupt.hpp)
  SplitMeasurement measurement(options, cfg, device, memory, data, group.get(), result.context, on_step);
  // Runs read back from the file are judged again against today's limit.
  std::vector<RunResult> kept = resume != nullptr ? runs_kept_from(*resume, grid) : std::vector<RunResult>{};
  name_kept_runs_in_lists(result.context.options, kept,
                          resume != nullptr ? resume->interruption.splits_not_run : std::vector<std::string>{});
  describe_kept_paddings(result.context, w, cfg.vocab_size);
  for (RunResult& run : kept) {
    if (run.status == RunStatus::kOk) measurement.judge_fits(run);
  }
  DecisionOptions decision_options;
  decision_options.tie_tolerance = options.tie_tolerance;
  decision_options.confidence = options.confidence;
  decision_options.framework_seconds_per_micro_step = framework.seconds_per_micro_step;
  decision_options.framework_source = framework.source;
  const NotBegunNames names(grid, resume);
  if (resume != nullptr) names.carry_from(*resume, grid, result.interruption);
  const auto not_begun = [&](size_t index) { return names(grid[index]); };
  // The file's runs, kept wherever this sweep does not finish a split (resumed_runs.hpp).
  const ResumedRuns file(resume, grid, options.steps, options.time_budget_seconds > 0,
                         [&](RunResult& run) { measurement.judge_fits(run); }, not_begun);
  // Saves made before the end say so (Interruption): `begun` of the grid's splits were begun,
  // `rounds` timed rounds run; `error`: the one that ends the sweep now. The file's other splits
  // follow this sweep's, so an interrupted resume keeps them.
  const bool profiled = !options.profile_dir.empty();
  const auto save = [&](std::vector<RunResult> runs, size_t begun, int64_t rounds, const std::string& error,
                        bool mid_round = false) {
    if (!on_split) return;
    SweepResult partial = result;
    partial.runs = std::move(runs);
    const std::string kept_longer = file.keep_longer(partial.runs) + file.keep_over_failures(partial.runs);
    file.add_not_begun(begun, partial.runs, partial.interruption);
    partial.runs.insert(partial.runs.end(), kept.begin(), kept.end());
    partial.interruption.saved_while_running = error.empty();
    partial.interruption.error = error;
    DecisionOptions decision = decision_options;
    decision.interrupted = true;  // an undecided verdict says a sweep left to its end can decide
    decision.stopped_by_error = !error.empty();  // helper-101: a peer gone read "(interrupted)"
    partial.recommendation = recommend(partial.runs, w.memory_limit_bytes, decision);
    partial.recommendation.reason =
        unfinished_sentence(partial, rounds, options.steps, profiled, options.json_path, mid_round) + kept_longer + " " +
        partial.recommendation.reason;
    partial.time_models = fit_time_models(partial.runs);
    on_split(partial);
  };

  // A signal (interrupt.hpp) stops the sweep between splits and between rounds; with data
  // parallel a stop asked on any rank stops every rank at the same point.
  const auto stop_agreed = [&] { return stop_requested_on_any_rank(group.get(), device.str()); };
  bool stopped = false;

  // 1. Each split alone: plan, warm-up, memory (and the whole timing of CUDA-graph splits).
  std::vector<bool> measured(grid.size(), false);  // in this sweep, not copied from the file
  size_t stopped_at = grid.size();                 // the first split not begun, when a signal came first
  // What a save holds of the splits the rounds time: finished as far as they got (a split with no
  // timed step yet has no times at all, not times of zero).
  const auto finished_copies = [&] {
    std::vector<RunResult> runs = result.runs;
    for (size_t index = 0; index < runs.size(); ++index) {
      if (measured[index] && measurement.in_rounds(runs[index])) measurement.finish(runs[index], index, /*final=*/false);
    }
    return runs;
  };
  for (size_t index = 0; index < grid.size(); ++index) {
    // A collective: a peer gone between two splits fails here, and the splits finished are saved
    // with the error, as within one (cli.data_parallel.dead_peer once saw the file without it).
    bool stop_now = false;
    try {
      stop_now = stop_agreed();
    } catch (const FatalRunError& error) {
      save(finished_copies(), index, 0, error.what());
      throw;
    }
    if (stop_now) {
      stopped = true;
      stopped_at = index;
      break;
    }
    // Done in the file: reused (a split it had short of --steps, or undecided, is measured again).
    if (const RunResult* done = file.finished(grid[index])) {
      result.runs.push_back(file.judged(*done));
      continue;
    }
    try {
      result.runs.push_back(measurement.prepare(grid[index], index, grid.size()));
    } catch (const FatalRunError& error) {
      save(finished_copies(), index, 0, error.what());
      throw;
    }
    // A split the file measured and today's --memory-limit skips before running it (a contender
    // of an undecided file, timed again) keeps the file's times, judged against the limit: the
    // skip measured nothing that could replace them.
    if (const RunResult* timed = file.timed_run(grid[index]);
        timed != nullptr && result.runs.back().status == RunStatus::kPredictedOutOfMemory) {
      result.runs.back() = file.judged(*timed);
      continue;
    }
    measured[index] = true;
    // A split the file timed, timed again (a contender of an undecided file, a split short of
    // --steps): the file's steps stay beside this sweep's, each with the sweep that timed it, so
    // that it still pairs with the file's other splits over the rounds they shared (a kept split,
    // slower beyond doubt over those, stays so; compared through means across sweeps, a drift of
    // the machine's load between them could put it ahead).
    if (const RunResult* timed = file.timed_run(grid[index]);
        timed != nullptr && result.runs.back().status == RunStatus::kOk && measurement.in_rounds(result.runs.back())) {
      std::vector<StepSample>& steps = result.runs.back().steps;
      steps.insert(steps.begin(), timed->steps.begin(), timed->steps.end());
      for (size_t k = 0; k < timed->steps.size(); ++k) steps[k].session = session_of(*timed, steps[k]);
    }
    save(finished_copies(), index + 1, 0, "");  // its memory, before the rounds time it
  }

  // 2. The timed steps, in interleaved rounds (decision.hpp): every split for --steps rounds,
  // then only the contenders until they are decided or --time-budget is spent.
  std::vector<int> slot_of;  // rounds' split -> grid index
  std::vector<bool> candidate;
  for (size_t index = 0; index < grid.size(); ++index) {
    if (!measured[index] || !measurement.in_rounds(result.runs[index])) continue;
    slot_of.push_back(static_cast<int>(index));
    candidate.push_back(w.memory_limit_bytes <= 0 || result.runs[index].fits);
  }
  // The wall clock in nanoseconds: "latest" among a resumed file's sessions is the greatest, which
  // a steady clock (restarted at boot) could misorder across a reboot.
  const int64_t session = std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  for (int index : slot_of) result.runs[index].session = session;
  RoundOptions round_options;
  // Splits of different rows (packings, orders) are weighed per real token (decision.hpp), by the
  // positions their steps trained, read right after the round measured each.
  std::vector<RunResult> configs_seen = result.runs;
  configs_seen.insert(configs_seen.end(), kept.begin(), kept.end());
  // Every step's positions place its winsorizing bound (a grouped order's long steps are no
  // stalls); the estimates are per token only where the splits differ in rows.
  const bool per_token = compared_per_token(configs_seen);
  round_options.step_scale = [&](int split) {
    const RunResult& run = result.runs[slot_of[split]];
    return run.steps.empty() ? 1.0 : per_token_scale(run.steps.back().positions);
  };
  // The batch each round's step trained on: the rounds over an epoch's steps are its strata.
  round_options.step_stratum = [&](int split) {
    const RunResult& run = result.runs[slot_of[split]];
    return run.steps.empty() ? Stratum{} : Stratum{run.steps.back().data_step, run.steps.back().data_steps};
  };
  round_options.min_rounds = options.steps;
  round_options.budget_seconds = options.time_budget_seconds;
  round_options.decision = decision_options;
  round_options.should_stop = [&] { return stopped || stop_agreed(); };
  const auto rounds_start = std::chrono::steady_clock::now();
  auto last_save = rounds_start;
  const AgreeOnRound agree = agree_on_rank_zero(group.get(), device, slot_of, result.runs, measurement);
  std::vector<double> framework_seconds;  // per split: what the framework adds to each of its steps
  for (int index : slot_of) {
    framework_seconds.push_back(framework_seconds_per_step(result.runs[index], framework.seconds_per_micro_step));
  }
  // Every rank's evidence is rank 0's times (agree), so its winsorizing bounds are the same too.
  const int family = decision_family(result.runs, slot_of, kept);
  RoundEvidence evidence(static_cast<int>(slot_of.size()), options.confidence, framework_seconds, family);
  evidence.weigh_per_token(per_token);
  add_timed_rounds(evidence, result.runs, slot_of);  // a resume's re-timed splits' earlier rounds
  RoundReport report;
  int64_t rounds_run = 0;  // for the saves before the end
  try {
    report = run_rounds(
        evidence, candidate, round_options,
        [&](int split, int64_t round) {
          const int index = slot_of[split];
          return measurement.timed_step(result.runs[index], index, round);
        },
        [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - rounds_start).count(); }, agree,
        [&](int64_t round, const std::vector<int>& live) {
          measurement.report_round(round, static_cast<int>(live.size()), grid.size());
          // Saved once every split has its --steps rounds, and every few seconds: a signal or
          // kill -9 loses at most those seconds (a split with fewer than --steps timed steps in
          // the file is measured again by --resume).
          const auto now = std::chrono::steady_clock::now();
          rounds_run = round + 1;
          if (round + 1 == options.steps || now - last_save > std::chrono::seconds(5)) {
            save(finished_copies(), grid.size(), rounds_run, "");
            last_save = now;
          }
        });
  } catch (const FatalRunError& error) {
    // A peer lost mid-round leaves that round timed for some splits (kept, and counted by the decision).
    bool mid_round = false;
    for (int index : slot_of) {
      for (const StepSample& step : result.runs[index].steps) {
        mid_round |= session_of(result.runs[index], step) == session && step.round >= rounds_run;
      }
    }
    save(finished_copies(), grid.size(), rounds_run, error.what(), mid_round);
    throw;
  }

  // 3. Finish: memory attribution, derived fields, profiles; intervals of the means.
  // Stopped by a signal: no more steps, so no --profile step either.
  for (int index : slot_of) measurement.finish(result.runs[index], index, /*final=*/!report.interrupted);
  // The means' intervals over every step the splits hold (a resumed split's earlier sweep's too,
  // as its mean is; the rounds' evidence held this sweep's only), as timed (the rounds' evidence
  // weighed seconds per token where the splits differ in rows).
  engine_mean_intervals(result.runs, slot_of,
                        rounds_as_timed(result.runs, slot_of, options.confidence, framework_seconds, family),
                        framework_seconds);
  const std::string kept_over_failures = file.keep_over_failures(result.runs);
  std::string kept_longer;
  if (stopped || report.interrupted) {
    kept_longer = file.keep_longer(result.runs);
    file.add_not_begun(stopped_at, result.runs, result.interruption);
  }
  result.runs.insert(result.runs.end(), kept.begin(), kept.end());
  DecisionOptions final_decision = decision_options;
  final_decision.budget_spent = report.budget_spent;
  final_decision.interrupted = report.interrupted;
  final_decision.rounds_seconds = report.seconds;
  final_decision.resume_file = options.json_path;
  final_decision.min_rounds = options.steps;
  for (const RunResult& run : kept) final_decision.outside_lists.push_back(run.config.key());
  if (report.interrupted) result.interruption.signal = stop_cause();
  result.recommendation = recommend(result.runs, w.memory_limit_bytes, final_decision);
  if (result.recommendation.best_index < 0) {
    final_decision.memory_advice = advice_when_none_succeeded(result, w, cfg, device, measurement.plan_options());
    result.recommendation = recommend(result.runs, w.memory_limit_bytes, final_decision);
  }
  if (report.interrupted) {
    // Nothing timed and nothing failed: the general "no split ran successfully" would only repeat it.
    const bool none_failed = std::all_of(result.runs.begin(), result.runs.end(),
                                         [](const RunResult& run) { return run.status == RunStatus::kOk; });
    const bool nothing_else = result.recommendation.best_index < 0 && none_failed;
    result.recommendation.reason = unfinished_sentence(result, report.rounds, options.steps, profiled, options.json_path) + kept_longer +
                                   kept_over_failures + (nothing_else ? "" : " " + result.recommendation.reason);
  } else {
    const std::string unfinished = kept_unfinished_sentence(result, kept, options.steps);
    if (!unfinished.empty()) result.recommendation.reason = unfinished + " " + result.recommendation.reason;
    if (!kept_over_failures.empty()) result.recommendation.reason = kept_over_failures.substr(1) + " " + result.recommendation.reason;
  }
  result.time_models = fit_time_models(result.runs);
  if (on_split) on_split(result);
  memory.set_limit_bytes(0);
  return result;
}

}  // namespace accumbench
