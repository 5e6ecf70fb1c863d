// The JSON result file: written after every configuration (so --resume and `compare` read it
// back), therefore lossless. Each struct's fields are named once, in fields() below, and the
// same list drives both writing and reading, so the two directions cannot drift apart.
//
// Layout: {"json_schema_version": 11, "context": {...}, "runs": [...], "recommendation": {...},
// "time_models": [...], "interruption": {"signal": "", "splits_not_run": [],
// "saved_while_running": false, "error": ""}}.
// NaN ("not measured") is written as null and read back as NaN; JSON has no NaN literal.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "accumbench/error.hpp"
#include "accumbench/report.hpp"
#include "accumbench/statistics.hpp"
#include "accumbench/units.hpp"
#include "report/json_upgrade.hpp"

namespace accumbench {

namespace {

// ordered_json keeps fields in the order they are listed, so the file reads like the structs.
using Json = nlohmann::ordered_json;

template <class S, class T>
using IfIs = std::enable_if_t<std::is_same_v<std::remove_const_t<S>, T>>;

// The field lists. `S` is the struct, const when writing; `v(name, member)` is called per field.
template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, PhaseSpan> {
  v("micro_step", s.micro_step);
  v("phase", s.phase);
  v("start_seconds", s.start_seconds);
  v("duration_seconds", s.duration_seconds);
  v("bytes_at_start", s.bytes_at_start);
  v("bytes_at_end", s.bytes_at_end);
  v("peak_bytes", s.peak_bytes);
}

template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, StepSample> {
  v("step_seconds", s.step_seconds);
  v("host_seconds", s.host_seconds);
  v("device_seconds", s.device_seconds);
  v("loss", s.loss);
  v("tokens", s.tokens);
  v("positions", s.positions);
  v("computed_positions", s.computed_positions);
  v("peak_allocated_bytes", s.peak_allocated_bytes);
  v("skipped", s.skipped);
  v("round", s.round);
  v("data_step", s.data_step);
  v("data_steps", s.data_steps);
  v("session", s.session);
}

template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, Estimate> {
  v("value", s.value);
  v("low", s.low);
  v("high", s.high);
}

template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, Comparison> {
  v("index", s.index);
  v("ratio", s.ratio);
  v("paired_rounds", s.paired_rounds);
  v("verdict", s.verdict);
}

template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, Decision> {
  v("kind", s.kind);
  v("confidence", s.confidence);
  v("tie_tolerance", s.tie_tolerance);
  v("fastest", s.fastest);
  v("runner_up", s.runner_up);
  v("comparisons", s.comparisons);
  v("rounds", s.rounds);
  v("budget_spent", s.budget_spent);
  v("interrupted", s.interrupted);
}

template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, TimeModelResidual> {
  v("index", s.index);
  v("measured_seconds", s.measured_seconds);
  v("fitted_seconds", s.fitted_seconds);
}

template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, TimeModel> {
  v("precision", s.precision);
  v("knobs", s.knobs);
  v("fixed_seconds", s.fixed_seconds);
  v("seconds_per_token", s.seconds_per_token);
  v("optimizer_seconds", s.optimizer_seconds);
  v("residuals", s.residuals);
  v("max_relative_residual", s.max_relative_residual);
}

template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, MemoryBreakdown> {
  v("parameters_bytes", s.parameters_bytes);
  v("gradients_bytes", s.gradients_bytes);
  v("optimizer_state_bytes", s.optimizer_state_bytes);
  v("activations_bytes", s.activations_bytes);
  v("slack_bytes", s.slack_bytes);
}

template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, SplitConfig> {
  v("micro_batch", s.micro_batch);
  v("accum_steps", s.accum_steps);
  v("precision", s.precision);
  v("optimizer_in_backward", s.optimizer_in_backward);
  v("activation_checkpointing", s.activation_checkpointing);
  v("cuda_graphs", s.cuda_graphs);
  v("chunked_loss", s.chunked_loss);
  v("world_size", s.world_size);
  v("optimizer", s.optimizer);
  v("weights_dtype", s.weights_dtype);
  v("adapter_dtype", s.adapter_dtype);
  v("max_grad_norm", s.max_grad_norm);
  v("padding", s.padding);
  v("packing", s.packing);
  v("group_by_length", s.group_by_length);
}

template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, Summary> {
  v("median", s.median);
  v("min", s.min);
  v("mean", s.mean);
  v("stddev", s.stddev);
  v("cv", s.cv);
  v("ci_low", s.ci_low);
  v("ci_high", s.ci_high);
  v("count", s.count);
}

template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, RunResult> {
  v("config", s.config);
  v("status", s.status);
  v("error", s.error);
  v("step_seconds", s.step_seconds);
  v("phase_median_seconds", s.phase_median_seconds);
  v("device_median_seconds", s.device_median_seconds);
  v("device_busy_fraction", s.device_busy_fraction);
  v("tokens_per_step", s.tokens_per_step);
  v("tokens_per_second", s.tokens_per_second);
  v("computed_tokens_per_second", s.computed_tokens_per_second);
  v("padding_fraction", s.padding_fraction);
  v("samples_per_second", s.samples_per_second);
  v("achieved_tflops", s.achieved_tflops);
  v("hardware_tflops", s.hardware_tflops);
  v("mfu", s.mfu);
  v("peak_allocated_bytes", s.peak_allocated_bytes);
  v("peak_reserved_bytes", s.peak_reserved_bytes);
  v("peak_breakdown", s.peak_breakdown);
  v("predicted_peak_bytes", s.predicted_peak_bytes);
  v("fits", s.fits);
  v("steps", s.steps);
  v("timeline", s.timeline);
  v("clip_seconds", s.clip_seconds);
  v("session", s.session);
  v("mean_seconds", s.mean_seconds);
}

template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, Recommendation> {
  v("best_index", s.best_index);
  v("tied_indices", s.tied_indices);
  v("reason", s.reason);
  v("decision", s.decision);
}

template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, Interruption> {
  v("signal", s.signal);
  v("splits_not_run", s.splits_not_run);
  v("saved_while_running", s.saved_while_running);
  v("error", s.error);
}

template <class S, class V>
auto fields(S& s, V& v) -> IfIs<S, SweepContext> {
  v("json_schema_version", s.json_schema_version);
  v("date", s.date);
  v("host", s.host);
  v("device", s.device);
  v("device_name", s.device_name);
  v("device_memory_bytes", s.device_memory_bytes);
  v("driver", s.driver);
  v("libtorch_version", s.libtorch_version);
  v("build_type", s.build_type);
  v("git_commit", s.git_commit);
  v("threads", s.threads);
  v("world_size", s.world_size);
  v("distributed_backend", s.distributed_backend);
  v("model", s.model);
  v("parameters", s.parameters);
  v("trainable_parameters", s.trainable_parameters);
  v("seq_len", s.seq_len);
  v("batch", s.batch);
  v("flops_per_token", s.flops_per_token);
  v("transformers_flops_per_token", s.transformers_flops_per_token);
  v("peak_tflops", s.peak_tflops);
  v("memory_limit_bytes", s.memory_limit_bytes);
  v("framework_seconds_per_micro_step", s.framework_seconds_per_micro_step);
  v("framework_source", s.framework_source);
  v("load_average", s.load_average);
  v("cpu_cores", s.cpu_cores);
  v("other_cpu_seconds", s.other_cpu_seconds);
  v("other_cpu_span_seconds", s.other_cpu_span_seconds);
  v("options", s.options);
}

template <class T>
inline constexpr bool kIsRecord =
    std::is_same_v<T, PhaseSpan> || std::is_same_v<T, StepSample> ||
    std::is_same_v<T, MemoryBreakdown> || std::is_same_v<T, SplitConfig> ||
    std::is_same_v<T, Summary> || std::is_same_v<T, RunResult> ||
    std::is_same_v<T, Recommendation> || std::is_same_v<T, SweepContext> || std::is_same_v<T, Estimate> ||
    std::is_same_v<T, Comparison> || std::is_same_v<T, Decision> || std::is_same_v<T, TimeModelResidual> ||
    std::is_same_v<T, TimeModel> || std::is_same_v<T, Interruption>;

// A problem at a place in the document ("runs[2].steps[0].loss"); turned into a UserError that
// also names the file.
struct FormatError {
  std::string path;
  std::string problem;
};

// ---- writing --------------------------------------------------------------------------------

Json encode(double value);
Json encode(bool value);
Json encode(int value);
Json encode(int64_t value);
Json encode(const std::string& value);
Json encode(Phase value);
Json encode(RunStatus value);
Json encode(Precision value);
Json encode(Checkpointing value);
Json encode(OptimizerKind value);
Json encode(const PaddingChoice& value);
Json encode(Packing value);
Json encode(DecisionKind value);
Json encode(Verdict value);
Json encode(const PhaseSeconds& value);
Json encode(const std::vector<std::pair<std::string, std::string>>& options);
template <class T>
Json encode(const std::vector<T>& values);
template <class S, std::enable_if_t<kIsRecord<S>, int> = 0>
Json encode(const S& record);

struct Writer {
  Json& object;
  template <class T>
  void operator()(const char* name, const T& value) {
    object[name] = encode(value);
  }
};

// Non-finite values become null: JSON has no NaN, and null reads back as "not measured".
Json encode(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }
Json encode(bool value) { return Json(value); }
Json encode(int value) { return Json(value); }
Json encode(int64_t value) { return Json(value); }
Json encode(const std::string& value) { return Json(value); }
Json encode(Phase value) { return Json(phase_name(value)); }
Json encode(RunStatus value) { return Json(run_status_name(value)); }
Json encode(Precision value) { return Json(to_string(value)); }
Json encode(Checkpointing value) { return Json(to_string(value)); }
Json encode(OptimizerKind value) { return Json(to_string(value)); }
Json encode(const PaddingChoice& value) { return Json(padding_name(value)); }  // "longest", "multiple:8"
Json encode(Packing value) { return Json(to_string(value)); }                    // "none", "bfd"
Json encode(DecisionKind value) { return Json(to_string(value)); }
Json encode(Verdict value) { return Json(to_string(value)); }

// Keyed by phase name rather than position, so the file says which number is which.
Json encode(const PhaseSeconds& value) {
  Json object = Json::object();
  for (int p = 0; p < kPhaseCount; ++p) {
    object[phase_name(static_cast<Phase>(p))] = encode(value[p]);
  }
  return object;
}

// [name, value] pairs: the CLI order is part of the record, and an object would not keep it for
// every reader.
Json encode(const std::vector<std::pair<std::string, std::string>>& options) {
  Json array = Json::array();
  for (const auto& [name, value] : options) array.push_back(Json::array({name, value}));
  return array;
}

template <class T>
Json encode(const std::vector<T>& values) {
  Json array = Json::array();
  for (const T& value : values) array.push_back(encode(value));
  return array;
}

template <class S, std::enable_if_t<kIsRecord<S>, int>>
Json encode(const S& record) {
  Json object = Json::object();
  Writer writer{object};
  fields(record, writer);
  return object;
}

// ---- reading --------------------------------------------------------------------------------

void decode(const Json& j, const std::string& path, double& out);
void decode(const Json& j, const std::string& path, bool& out);
void decode(const Json& j, const std::string& path, int& out);
void decode(const Json& j, const std::string& path, int64_t& out);
void decode(const Json& j, const std::string& path, std::string& out);
void decode(const Json& j, const std::string& path, Phase& out);
void decode(const Json& j, const std::string& path, RunStatus& out);
void decode(const Json& j, const std::string& path, Precision& out);
void decode(const Json& j, const std::string& path, Checkpointing& out);
void decode(const Json& j, const std::string& path, OptimizerKind& out);
void decode(const Json& j, const std::string& path, PaddingChoice& out);
void decode(const Json& j, const std::string& path, Packing& out);
void decode(const Json& j, const std::string& path, DecisionKind& out);
void decode(const Json& j, const std::string& path, Verdict& out);
void decode(const Json& j, const std::string& path, PhaseSeconds& out);
void decode(const Json& j, const std::string& path,
            std::vector<std::pair<std::string, std::string>>& out);
template <class T>
void decode(const Json& j, const std::string& path, std::vector<T>& out);
template <class S, std::enable_if_t<kIsRecord<S>, int> = 0>
void decode(const Json& j, const std::string& path, S& record);

const Json& member(const Json& object, const std::string& path, const char* name) {
  const auto it = object.find(name);
  if (it == object.end()) throw FormatError{path, std::string("has no field \"") + name + "\""};
  return *it;
}

std::string join_path(const std::string& path, const char* name) {
  return path.empty() ? std::string(name) : path + "." + name;
}

struct Reader {
  const Json& object;
  const std::string& path;
  template <class T>
  void operator()(const char* name, T& value) {
    decode(member(object, path, name), join_path(path, name), value);
  }
};

[[noreturn]] void wrong_type(const Json& j, const std::string& path, const char* expected) {
  throw FormatError{path, std::string("is ") + j.type_name() + ", expected " + expected};
}

void decode(const Json& j, const std::string& path, double& out) {
  if (j.is_null()) {
    out = std::numeric_limits<double>::quiet_NaN();
  } else if (j.is_number()) {
    out = j.get<double>();
  } else {
    wrong_type(j, path, "a number or null");
  }
}

void decode(const Json& j, const std::string& path, bool& out) {
  if (!j.is_boolean()) wrong_type(j, path, "true or false");
  out = j.get<bool>();
}

void decode(const Json& j, const std::string& path, int64_t& out) {
  if (!j.is_number_integer() ||
      (j.is_number_unsigned() &&
       j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
    wrong_type(j, path, "an integer");
  }
  out = j.get<int64_t>();
}

void decode(const Json& j, const std::string& path, int& out) {
  int64_t wide = 0;
  decode(j, path, wide);
  if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
    throw FormatError{path, "is " + std::to_string(wide) + ", out of range"};
  }
  out = static_cast<int>(wide);
}

void decode(const Json& j, const std::string& path, std::string& out) {
  if (!j.is_string()) wrong_type(j, path, "a string");
  out = j.get<std::string>();
}

void decode(const Json& j, const std::string& path, Phase& out) {
  std::string name;
  decode(j, path, name);
  for (int p = 0; p < kPhaseCount; ++p) {
    if (name == phase_name(static_cast<Phase>(p))) {
      out = static_cast<Phase>(p);
      return;
    }
  }
  std::string names;
  for (const PhaseInfo& info : phase_table()) names += (names.empty() ? "" : ", ") + std::string(info.name);
  throw FormatError{path, "is \"" + name + "\", not a phase (" + names + ")"};
}

template <class E, size_t N>
void decode_named(const Json& j, const std::string& path, E& out, const std::array<E, N>& values) {
  std::string name;
  decode(j, path, name);
  std::string names;
  for (E value : values) {
    if (name == to_string(value)) {
      out = value;
      return;
    }
    names += (names.empty() ? "" : ", ") + std::string(to_string(value));
  }
  throw FormatError{path, "is \"" + name + "\", not one of " + names};
}

void decode(const Json& j, const std::string& path, DecisionKind& out) {
  decode_named(j, path, out,
               std::array<DecisionKind, 5>{DecisionKind::kNone, DecisionKind::kOnly, DecisionKind::kFastest,
                                           DecisionKind::kTie, DecisionKind::kUndecided});
}

void decode(const Json& j, const std::string& path, Verdict& out) {
  decode_named(j, path, out,
               std::array<Verdict, 4>{Verdict::kSlower, Verdict::kFaster, Verdict::kEquivalent, Verdict::kUndecided});
}

void decode(const Json& j, const std::string& path, RunStatus& out) {
  std::string name;
  decode(j, path, name);
  try {
    out = run_status_from_name(name);
  } catch (const UserError&) {
    throw FormatError{path,
                      "is \"" + name + "\", not a run status (ok, oom, predicted-oom, error)"};
  }
}

// An option's name in the file: the same words as on the command line.
template <class Enum>
void decode_name(const Json& j, const std::string& path, Enum& out, Enum (*from_string)(const std::string&)) {
  std::string name;
  decode(j, path, name);
  try {
    out = from_string(name);
  } catch (const UserError& error) {
    throw FormatError{path, "is \"" + name + "\", not a known value (" + error.what() + ")"};
  }
}

void decode(const Json& j, const std::string& path, Precision& out) {
  decode_name(j, path, out, precision_from_string);
}

void decode(const Json& j, const std::string& path, Checkpointing& out) {
  decode_name(j, path, out, checkpointing_from_string);
}

void decode(const Json& j, const std::string& path, OptimizerKind& out) {
  decode_name(j, path, out, optimizer_kind_from_string);
}

void decode(const Json& j, const std::string& path, PaddingChoice& out) {
  decode_name(j, path, out, padding_from_string);
}

void decode(const Json& j, const std::string& path, Packing& out) { decode_name(j, path, out, packing_from_string); }

void decode(const Json& j, const std::string& path, PhaseSeconds& out) {
  if (!j.is_object()) wrong_type(j, path, "an object keyed by phase");
  for (int p = 0; p < kPhaseCount; ++p) {
    const char* name = phase_name(static_cast<Phase>(p));
    decode(member(j, path, name), join_path(path, name), out[p]);
  }
}

void decode(const Json& j, const std::string& path,
            std::vector<std::pair<std::string, std::string>>& out) {
  if (!j.is_array()) wrong_type(j, path, "an array of [name, value] pairs");
  out.clear();
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    const Json& pair = j[i];
    if (!pair.is_array() || pair.size() != 2) wrong_type(pair, item_path, "a [name, value] pair");
    std::pair<std::string, std::string> option;
    decode(pair[0], item_path + "[0]", option.first);
    decode(pair[1], item_path + "[1]", option.second);
    out.push_back(std::move(option));
  }
}

template <class T>
void decode(const Json& j, const std::string& path, std::vector<T>& out) {
  if (!j.is_array()) wrong_type(j, path, "an array");
  out.clear();
  out.resize(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    decode(j[i], path + "[" + std::to_string(i) + "]", out[i]);
  }
}

template <class S, std::enable_if_t<kIsRecord<S>, int>>
void decode(const Json& j, const std::string& path, S& record) {
  if (!j.is_object()) wrong_type(j, path, "an object");
  Reader reader{j, path};
  fields(record, reader);
}

// What a file says beyond the record, for its readers (read_unmeasured_back undoes the nulls):
// - a split never timed (oom, predicted-oom, an error) has null for what it did not measure, not 0;
// - fits is null without --memory-limit (there was nothing to fit in), as in the tables, but for a
//   split out of the device's memory (false);
// - tables_read: which statistic of the timed steps the tables show, "median", or "mean" for steps
//   of many sizes (typical_step_seconds), and then phase_mean_seconds, their phases' means
//   (typical_phase_seconds); derived from the steps, so not read back.
void annotate_run(const RunResult& run, bool memory_limit, Json& j) {
  if (!memory_limit && run.fits) j["fits"] = nullptr;
  const bool timed = run.status == RunStatus::kOk && (!run.steps.empty() || run.step_seconds.count > 0);
  if (!timed) {
    for (const char* key : kUnmeasuredRates) j[key] = nullptr;
    // An out-of-memory split can keep the peak it reached before it failed.
    for (const char* key : kUnmeasuredPeaks) {
      if (j[key] == 0) j[key] = nullptr;
    }
    for (const char* key : kUnmeasuredPhases) {
      for (auto& [phase, seconds] : j[key].items()) {
        (void)phase;
        seconds = nullptr;
      }
    }
  }
  const bool means = timed && steps_differ_in_size(run);
  j["tables_read"] = !timed ? Json(nullptr) : Json(means ? "mean" : "median");
  j["phase_mean_seconds"] = means ? encode(typical_phase_seconds(run)) : Json(nullptr);
}

}  // namespace

std::string to_json(const SweepResult& result) {
  Json root = Json::object();
  // The version of the layout this code writes, first, so a reader can check it before anything.
  root["json_schema_version"] = kJsonSchemaVersion;
  root["context"] = encode(result.context);
  root["runs"] = encode(result.runs);
  for (size_t i = 0; i < result.runs.size(); ++i) {
    annotate_run(result.runs[i], result.context.memory_limit_bytes > 0, root["runs"][i]);
  }
  root["recommendation"] = encode(result.recommendation);
  root["time_models"] = encode(result.time_models);
  root["interruption"] = encode(result.interruption);
  root["notes"] = encode(result.notes);
  // error_handler_t::replace: an exception message from a failed run may hold invalid UTF-8;
  // the file must still be written.
  return root.dump(2, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace) + "\n";
}

namespace {

// What the format allows but no sweep writes: a hand edit or damage that would make the tables,
// the recommendation and --resume's Trainer settings nonsense (a micro-batch of 0, a split that
// does not make the batch, a negative time or peak, an index past the runs). Throws FormatError.
// No sweep runs a billion rounds (at a millisecond a step, eleven days).
constexpr int64_t kMaxRound = 1'000'000'000;

void check_meaning(const SweepResult& r) {
  const auto at_least_one = [](const std::string& path, int64_t value) {
    if (value < 1) throw FormatError{path, "is " + std::to_string(value) + " but must be at least 1"};
  };
  const auto not_negative = [](const std::string& path, double value) {
    std::ostringstream shown;
    shown << value;  // as short as the file wrote it: -1, -5, -0.0248
    if (value < 0) throw FormatError{path, "is " + shown.str() + " but cannot be negative"};
  };
  at_least_one("context.batch", r.context.batch);
  at_least_one("context.seq_len", r.context.seq_len);
  // The machine's counts (0: not recorded, in files before they were); the load is a mean of them.
  not_negative("context.threads", static_cast<double>(r.context.threads));
  not_negative("context.cpu_cores", static_cast<double>(r.context.cpu_cores));
  if (!std::isfinite(r.context.load_average) || r.context.load_average < 0)
    throw FormatError{"context.load_average", "is " + text::format_exact(r.context.load_average) +
                                                  " but is a count of runnable threads, a number of 0 or more"};
  at_least_one("context.world_size", r.context.world_size);
  // What trains is part of the model (LoRA's adapters are counted in both).
  if (r.context.trainable_parameters < 0 || r.context.trainable_parameters > r.context.parameters) {
    throw FormatError{"context.trainable_parameters", "is " + std::to_string(r.context.trainable_parameters) +
                                                          " but must be from 0 to context.parameters (" +
                                                          std::to_string(r.context.parameters) + ")"};
  }
  const auto index_of = [&](const std::string& path, int index) {
    if (index < -1 || index >= static_cast<int>(r.runs.size()))
      throw FormatError{path, "is " + std::to_string(index) + " but the file holds " + std::to_string(r.runs.size()) +
                                  " runs"};
  };
  std::vector<std::string> keys;
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const RunResult& run = r.runs[i];
    const std::string at = "runs[" + std::to_string(i) + "]";
    at_least_one(at + ".config.micro_batch", run.config.micro_batch);
    at_least_one(at + ".config.accum_steps", run.config.accum_steps);
    at_least_one(at + ".config.world_size", run.config.world_size);
    if (!(std::isfinite(run.config.max_grad_norm) && run.config.max_grad_norm >= 0))
      throw FormatError{at + ".config.max_grad_norm", "must be a number of 0 or more (0: not clipped)"};
    const int64_t made = run.config.micro_batch * run.config.accum_steps * r.context.world_size;
    if (made != r.context.batch)
      throw FormatError{at + ".config", "makes " + std::to_string(made) + " sequences per step but context.batch is " +
                                            std::to_string(r.context.batch)};
    if (std::find(keys.begin(), keys.end(), run.config.key()) != keys.end())
      throw FormatError{at + ".config", "repeats an earlier run's split (" + run.config.label() + ")"};
    keys.push_back(run.config.key());
    not_negative(at + ".step_seconds.median", run.step_seconds.median);
    not_negative(at + ".step_seconds.count", static_cast<double>(run.step_seconds.count));
    not_negative(at + ".peak_allocated_bytes", static_cast<double>(run.peak_allocated_bytes));
    not_negative(at + ".peak_reserved_bytes", static_cast<double>(run.peak_reserved_bytes));
    // Rates and shares are counted, never below zero (NaN: not measured, as on the CPU's MFU).
    for (const auto& [name, value] :
         {std::pair<const char*, double>{"tokens_per_step", run.tokens_per_step},
          {"tokens_per_second", run.tokens_per_second},
          {"computed_tokens_per_second", run.computed_tokens_per_second},
          {"samples_per_second", run.samples_per_second},
          {"achieved_tflops", run.achieved_tflops},
          {"hardware_tflops", run.hardware_tflops},
          {"mfu", run.mfu},
          {"padding_fraction", run.padding_fraction},
          {"device_busy_fraction", run.device_busy_fraction}}) {
      not_negative(at + "." + name, value);
    }
    for (int p = 0; p < kPhaseCount; ++p) {
      not_negative(at + ".phase_median_seconds." + phase_name(static_cast<Phase>(p)), run.phase_median_seconds[p]);
    }
    if (run.padding_fraction > 1)
      throw FormatError{at + ".padding_fraction", "is " + text::format_exact(run.padding_fraction) +
                                                      " but is a share of the positions computed, at most 1"};
    // A failed split keeps no timed step (split_measurement clears them); a summary counts the
    // steps it was made of; a timed step computes some real positions.
    if (run.status != RunStatus::kOk && !run.steps.empty())
      throw FormatError{at + ".steps", "holds " + std::to_string(run.steps.size()) + " timed steps but the run's status is " +
                                           run_status_name(run.status) + ", which keeps none"};
    // (A summary without its steps, as the tests' fixtures hold, still reads: the tables show it and
    // the decisions, which need the steps, leave it out.)
    if (!run.steps.empty() && run.step_seconds.count != static_cast<int64_t>(run.steps.size()))
      throw FormatError{at + ".step_seconds.count", "is " + std::to_string(run.step_seconds.count) + " but the run holds " +
                                                        std::to_string(run.steps.size()) + " timed steps"};
    if (!run.steps.empty() && run.tokens_per_step < 1)
      throw FormatError{at + ".tokens_per_step", "is " + text::format_exact(run.tokens_per_step) +
                                                     " but a timed step computes at least one real position"};
    for (size_t k = 0; k < run.steps.size(); ++k) {
      const std::string step = at + ".steps[" + std::to_string(k) + "]";
      // A timed step takes some time: 0 would read as infinitely many tokens per second.
      // (null, which NaN is written as, too: helper-95's edited step blanked its split in a resume.)
      if (!(std::isfinite(run.steps[k].step_seconds) && run.steps[k].step_seconds > 0))
        throw FormatError{step + ".step_seconds", "is " +
                                                      (std::isfinite(run.steps[k].step_seconds)
                                                           ? text::format_exact(run.steps[k].step_seconds)
                                                           : std::string("null")) +
                                                      " but a timed step takes more than 0 s"};
      // Counts and phase times are never below zero (NaN: a device time not measured, as on the CPU).
      not_negative(step + ".tokens", static_cast<double>(run.steps[k].tokens));
      not_negative(step + ".positions", static_cast<double>(run.steps[k].positions));
      not_negative(step + ".computed_positions", static_cast<double>(run.steps[k].computed_positions));
      not_negative(step + ".peak_allocated_bytes", static_cast<double>(run.steps[k].peak_allocated_bytes));
      for (int p = 0; p < kPhaseCount; ++p) {
        const std::string phase = phase_name(static_cast<Phase>(p));
        not_negative(step + ".host_seconds." + phase, run.steps[k].host_seconds[p]);
        not_negative(step + ".device_seconds." + phase, run.steps[k].device_seconds[p]);
      }
      // Its interleaved round, or -1 (a split timed alone); rounds are counted, not a date.
      if (run.steps[k].round < -1 || run.steps[k].round > kMaxRound)
        throw FormatError{step + ".round", "is " + std::to_string(run.steps[k].round) + " but must be -1 (timed alone) or a round from 0 to " +
                                               std::to_string(kMaxRound)};
      // The batch it trained, one of its run's distinct ones, or -1 of 0 (not recorded).
      const StepSample& sample = run.steps[k];
      const bool unrecorded = sample.data_step == -1 && sample.data_steps == 0;
      if (!unrecorded && (sample.data_steps < 1 || sample.data_step < 0 || sample.data_step >= sample.data_steps))
        throw FormatError{step + ".data_step", "is " + std::to_string(sample.data_step) + " of " +
                                                   std::to_string(sample.data_steps) +
                                                   " but must be one of its run's distinct steps (from 0 to data_steps - 1), or -1 of 0"};
    }
  }
  // What the recommendation names ran: a split that failed or was skipped is never recommended.
  const auto ran = [&](const std::string& path, int index) {
    index_of(path, index);
    if (index >= 0 && r.runs[static_cast<size_t>(index)].status != RunStatus::kOk)
      throw FormatError{path, "names runs[" + std::to_string(index) + "], whose status is " +
                                  run_status_name(r.runs[static_cast<size_t>(index)].status) + ", not ok"};
  };
  ran("recommendation.best_index", r.recommendation.best_index);
  for (size_t k = 0; k < r.recommendation.tied_indices.size(); ++k)
    ran("recommendation.tied_indices[" + std::to_string(k) + "]", r.recommendation.tied_indices[k]);
  const Decision& d = r.recommendation.decision;
  ran("recommendation.decision.fastest", d.fastest);
  ran("recommendation.decision.runner_up", d.runner_up);
  for (size_t k = 0; k < d.comparisons.size(); ++k)
    ran("recommendation.decision.comparisons[" + std::to_string(k) + "].index", d.comparisons[k].index);
  // A note is a sentence the sweep printed on one stderr line: never blank, never broken.
  for (size_t k = 0; k < r.notes.size(); ++k) {
    const std::string& note = r.notes[k];
    if (note.find_first_not_of(" \t") == std::string::npos)
      throw FormatError{"notes[" + std::to_string(k) + "]", "is empty but a note says something"};
    if (note.find_first_of("\n\r") != std::string::npos)
      throw FormatError{"notes[" + std::to_string(k) + "]", "breaks a line but a note is one line"};
  }
}

}  // namespace

SweepResult sweep_result_from_json(const std::string& json_text, const std::string& origin) {
  Json root;
  try {
    root = Json::parse(json_text);
  } catch (const Json::parse_error& e) {
    // Drop nlohmann's "[json.exception.parse_error.101] " tag; keep the line and column.
    const std::string detail = text::shortened(text::json_error_text(e.what()), 200);
    throw UserError(origin + " is not valid JSON (" + detail +
                    "); pass a file written by `accumbench sweep --json`");
  } catch (const Json::out_of_range& e) {
    throw UserError(origin + " holds a number too large for a double; pass a file written by `accumbench sweep --json`");
  }
  if (root.is_object() && root.contains("kind") && root["kind"] == "accumbench plan") {
    throw UserError(origin + " is a plan (`accumbench plan --json`), not a sweep's results; a plan is read as it is, "
                             "and `report`, `compare` and --resume take a file written by `accumbench sweep --json`");
  }
  // verify's JSON says what it is (helper-101: "not an accumbench result"), as a plan's does.
  if (root.is_object() && root.contains("kind") && root["kind"] == "accumbench verify") {
    throw UserError(origin + " holds verify's results (`accumbench verify --json`), not a sweep's; `report`, `compare` "
                    "and --resume take a file written by `accumbench sweep --json`");
  }
  if (!root.is_object() || !root.contains("json_schema_version")) {
    throw UserError(origin + " has no json_schema_version, so it is not an accumbench result; "
                             "pass a file written by `accumbench sweep --json`");
  }
  if (!root["json_schema_version"].is_number_integer()) {  // 20.0, "20": no version, whatever it reads as
    throw UserError(origin + " has json_schema_version " + root["json_schema_version"].dump().substr(0, 40) +
                    ", not a whole number as accumbench writes it; pass a file written by `accumbench sweep --json`, "
                    "or write the version as a whole number");
  }
  upgrade_to_current_version(root);
  read_unmeasured_back(root);
  const Json version = root["json_schema_version"];  // read after the upgrade, which may move members
  if (!version.is_number_integer() || version.get<int64_t>() != kJsonSchemaVersion) {
    throw UserError(origin + " has json_schema_version " + version.dump() +
                    " but this accumbench reads versions 2 to " + std::to_string(kJsonSchemaVersion) +
                    "; rerun the sweep with this build or read it with the build that wrote it");
  }

  SweepResult result;
  try {
    decode(member(root, "", "context"), "context", result.context);
    decode(member(root, "", "runs"), "runs", result.runs);
    decode(member(root, "", "recommendation"), "recommendation", result.recommendation);
    decode(member(root, "", "time_models"), "time_models", result.time_models);
    decode(member(root, "", "interruption"), "interruption", result.interruption);
    decode(member(root, "", "notes"), "notes", result.notes);
    check_meaning(result);
  } catch (const FormatError& e) {
    const std::string where = e.path.empty() ? "the top level" : e.path;
    throw UserError(origin + ": " + where + " " + e.problem +
                    "; the file is damaged or was edited, so rerun the sweep to write it again");
  }
  return result;
}

SweepResult load_sweep_result(const std::string& path) {
  require_readable_file(path, "the result file");
  require_file_size_at_most(path, int64_t{2} << 30, "the result file", "any sweep's results");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw UserError("cannot read " + path + " (" + std::strerror(errno) +
                    "); check the path of the result file");
  }
  std::ostringstream content;
  content << in.rdbuf();
  return sweep_result_from_json(content.str(), path);
}

void write_file_atomically(const std::string& path, const std::string& content) {
  // A symbolic link is written through, as `>` would: the file it names gets the content, and the
  // link stays (a rename onto the link would replace it with a plain file).
  const std::string target = written_path(path);
  // A temporary of this process's own (helper-95: a fixed "<path>.tmp" was shared by two sweeps
  // writing one file, and replaced a file of the user's by that name), created, never reused.
  static std::atomic<unsigned> serial{0};
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temporary = temporary_beside(target, std::to_string(::getpid()) + "-" + std::to_string(serial++));
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  // Named as the user named it: the temporary beside it is how, not what, is lost.
  if (fd < 0) {
    throw UserError("cannot write " + path + " (writing " + temporary + ": " + std::strerror(errno) +
                    "); check that the directory exists and is writable");
  }
  // The file replaced keeps its permissions, as `>` leaves them.
  struct stat old {};
  if (::stat(target.c_str(), &old) == 0 && S_ISREG(old.st_mode)) (void)::fchmod(fd, old.st_mode & 07777);
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const int write_errno = written == content.size() ? 0 : (errno != 0 ? errno : ENOSPC);
  const bool closed = ::close(fd) == 0;
  if (write_errno != 0 || !closed) {
    const std::string reason = std::strerror(write_errno != 0 ? write_errno : errno);
    std::remove(temporary.c_str());
    throw UserError("cannot write " + path + " (writing " + temporary + ": " + reason +
                    "); check the free space of the disk");
  }
  // rename() replaces the old file in one step: a reader sees the old or the new content, never
  // half of one.
  if (std::rename(temporary.c_str(), target.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw UserError("cannot replace " + path + " (" + reason +
                    "); check the permissions of the file and of its directory");
  }
}

void JsonReporter::report(const SweepResult& result, std::ostream& out) const {
  out << to_json(result);
}

}  // namespace accumbench
