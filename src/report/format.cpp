// The reporters' helpers that read results (format.hpp); the plain number and table helpers
// are in the leaf module (src/util/units.cpp).
#include "report/format.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <sstream>

#include "accumbench/error.hpp"

namespace accumbench::text {

std::string format_step_seconds(const Summary& s) {
  if (!std::isfinite(s.median)) return "-";
  // The spread carries the median's decimals so the two line up in a column.
  const int decimals = decimals_for_significant(s.median, 3);
  // The interval is asymmetric: "±" takes its farther end from the median, so that median ± spread
  // holds the whole interval (half its width would leave one end outside).
  double spread = std::max(s.ci_high - s.median, s.median - s.ci_low);
  // One step has no spread: its stddev of 0 would read as a measurement without noise.
  if (!std::isfinite(spread) && s.count > 1) spread = s.stddev;
  std::string cell = format_fixed(s.median, decimals);
  // Rounded up at the median's decimals: a spread below the last digit reads as one unit of it,
  // never "± 0.0000" for steps that did vary.
  if (std::isfinite(spread)) cell += " \xC2\xB1 " + format_fixed_outward(spread, decimals, /*up=*/true);  // ±
  return cell;
}

// "fp32/bf16": a list of values inside a header's comma-separated fields.
template <typename Value>
std::string slash_list(const std::vector<Value>& values) {
  std::string out;
  for (const Value& value : values) out += (out.empty() ? "" : "/") + to_string(value);
  return out;
}

std::string precisions_of(const std::vector<RunResult>& runs) {
  std::vector<Precision> seen;
  for (const RunResult& run : runs) {
    if (std::find(seen.begin(), seen.end(), run.config.precision) == seen.end()) seen.push_back(run.config.precision);
  }
  return slash_list(seen);
}

std::string trainable_line(int64_t trainable, int64_t total) {
  return "trainable " + format_count(trainable) + " of " + format_count(total) + " (" +
         format_percent(total > 0 ? static_cast<double>(trainable) / static_cast<double>(total) : 0.0, 2) + ")";
}

std::string base_quant_words(const std::string& kind, bool double_quant, bool kbit_upcast) {
  return kind + (double_quant ? " with double quant" : "") +
         (kbit_upcast ? "" : ", the rest in the weights' dtype (--kbit-prep none)");
}

namespace {

// The value of option `name` in the context block; empty when absent (files from older sweeps).
std::string option_value(const SweepContext& c, const std::string& name) {
  for (const auto& [key, value] : c.options) {
    if (key == name) return value;
  }
  return "";
}

// ", samples chat.txt: 512 samples, 13 cut to T=256, padding longest, grouped by length": what
// real data a sweep trained on; empty for synthetic data padded to T.
std::string data_words(const SweepContext& c) {
  std::string words;
  const std::string samples = option_value(c, "samples");
  if (!samples.empty()) words += ", samples " + samples;
  if (option_value(c, "lengths") == "variable") words += ", variable lengths";
  // A token file cut into windows names no samples: its name, so that the header says what trained.
  const std::string tokens = option_value(c, "token_file");
  if (samples.empty() && !tokens.empty() && tokens != "synthetic") words += ", tokens " + tokens + " (windows of T + 1)";
  // --distinct-steps where no samples' words count the steps (synthetic lengths, a token file's windows).
  const std::string steps = option_value(c, "steps_of_data");
  if (samples.empty() && !steps.empty()) words += ", " + steps;
  const std::string padding = option_value(c, "padding");
  if (!padding.empty() && padding != "max") words += ", padding " + padding;
  const std::string grouped = option_value(c, "group_by_length");
  if (grouped == "true") words += ", grouped by length";
  if (grouped.find(',') != std::string::npos) words += ", grouped by length or not (--group-by-length " + grouped + ")";
  const std::string packing = option_value(c, "packing");
  if (!packing.empty() && packing != "none") words += ", packing " + packing;
  return words;
}

}  // namespace

// The distinct values of one split field over the runs, in first-seen order; without runs, those
// of the context's comma list for `option` that this version can read.
template <class Value>
std::vector<Value> distinct_of(const SweepResult& result, Value SplitConfig::*field, const char* option,
                               Value (*from_string)(const std::string&)) {
  std::vector<Value> seen;
  const auto add = [&seen](Value value) {
    if (std::find(seen.begin(), seen.end(), value) == seen.end()) seen.push_back(value);
  };
  for (const RunResult& run : result.runs) add(run.config.*field);
  if (!result.runs.empty()) return seen;
  std::istringstream list(option_value(result.context, option));
  for (std::string name; std::getline(list, name, ',');) {
    try {
      add(from_string(name));
    } catch (const std::exception&) {  // a name from another version: not one to describe
    }
  }
  return seen;
}

std::vector<OptimizerKind> optimizers_of(const SweepResult& result) {
  return distinct_of(result, &SplitConfig::optimizer, "optimizer", optimizer_kind_from_string);
}

std::string optimizer_words(const std::vector<OptimizerKind>& optimizers) { return slash_list(optimizers); }

std::string dtype_words(const SweepResult& result) {
  const auto words = [](const std::vector<Precision>& dtypes, const char* what) {
    if (dtypes.empty() || dtypes == std::vector<Precision>{Precision::kFp32}) return std::string();
    return slash_list(dtypes) + " " + what;
  };
  const std::string weights =
      words(distinct_of(result, &SplitConfig::weights_dtype, "weights_dtype", weights_dtype_from_string), "weights");
  const std::string adapters =
      words(distinct_of(result, &SplitConfig::adapter_dtype, "adapter_dtype", adapter_dtype_from_string), "adapters");
  return weights + (weights.empty() || adapters.empty() ? "" : ", ") + adapters;
}

std::string context_line(const SweepResult& result) {
  const SweepContext& c = result.context;
  std::ostringstream line;
  line << "model " << c.model << ", ";
  if (c.trainable_parameters > 0 && c.trainable_parameters != c.parameters) {
    line << trainable_line(c.trainable_parameters, c.parameters) << " parameters, T=";
  } else {
    line << format_count(c.parameters) << " parameters, T=";
  }
  line << c.seq_len << ", batch " << c.batch << ", device ";
  if (c.device_name.empty() || c.device_name == c.device) {
    line << c.device;
  } else {
    line << c.device_name << " (" << c.device << ")";
  }
  std::string precisions = precisions_of(result.runs);
  // A precision asked for that no split has (a sweep stopped before any of its splits began): named,
  // so that the header does not read as the sweep asked (helper-106: "precision fp32" of fp32,bf16).
  std::string not_begun;
  std::istringstream asked(option_value(c, "precisions"));
  for (std::string name; std::getline(asked, name, ',');) {
    const bool ran = std::any_of(result.runs.begin(), result.runs.end(),
                                 [&name](const RunResult& run) { return to_string(run.config.precision) == name; });
    if (!ran && !name.empty()) not_begun += (not_begun.empty() ? "" : "/") + name;
  }
  if (!precisions.empty() && !not_begun.empty()) precisions += " (" + not_begun + " not begun)";
  if (!precisions.empty()) line << ", precision " << precisions;
  if (const std::string weights = dtype_words(result); !weights.empty()) line << ", " << weights;
  line << data_words(c);
  const std::string base_quant = option_value(c, "base_quant");
  if (!base_quant.empty() && base_quant != "none") {
    line << ", base "
         << base_quant_words(base_quant, option_value(c, "double_quant") == "true", option_value(c, "kbit_prep") != "none")
         << " (time approximate: dequantised by LibTorch ops, not bitsandbytes' kernels)";
  }
  // bitsandbytes' 8-bit AdamW is emulated with LibTorch ops: its memory is exact, its time is not.
  // A sweep of several optimizers names each ("adamw/adamw8bit"), and which of them are emulated:
  // those of its runs (a --resume keeps the file's runs of optimizers no longer given).
  const std::vector<OptimizerKind> optimizers = optimizers_of(result);
  if (!optimizers.empty() && optimizers != std::vector<OptimizerKind>{OptimizerKind::kAdamW}) {
    const bool several = optimizers.size() > 1;
    std::string emulated;
    for (const OptimizerKind kind : optimizers) {
      if (bitsandbytes_optimizer(kind)) emulated += (emulated.empty() ? "" : " and ") + to_string(kind);
    }
    line << (several ? ", optimizers " : ", optimizer ") << optimizer_words(optimizers);
    if (!emulated.empty()) line << " (" << (several ? emulated + " " : "") << "emulated: memory exact, time approximate)";
  }
  // The Trainer's clipping (--max-grad-norm): a pass over the gradients in every optimizer phase;
  // a list names each norm, the splits' clip column which is which.
  const std::vector<double> norms =
      distinct_of(result, &SplitConfig::max_grad_norm, "max_grad_norm", text::number_from_text);
  if (norms.size() > 1) {
    line << ", --max-grad-norm " << join_norms(norms) << " (0: not clipped)";
  } else if (!norms.empty() && norms.front() > 0) {
    line << ", gradients clipped to norm " << text::format_number(norms.front());
  }
  if (c.memory_limit_bytes > 0) line << ", memory limit " << format_bytes(c.memory_limit_bytes);
  if (c.world_size > 1) {
    line << ", data parallel over " << c.world_size << " ranks (" << c.distributed_backend
         << "; splits are per rank, micro-batch \u00d7 accumulation of each rank's " << c.batch / c.world_size
         << " sequences; times and memory of rank 0, tokens/s of all ranks)";
  }
  return line.str();
}

std::string time_model_text(const TimeModel& model, const std::vector<RunResult>& runs) {
  int worst = -1;
  double worst_error = -1;
  for (const TimeModelResidual& r : model.residuals) {
    const double error = std::abs(r.measured_seconds - r.fitted_seconds) / r.measured_seconds;
    if (error > worst_error) worst = r.index, worst_error = error;
  }
  std::string group = to_string(model.precision) + (model.knobs.empty() ? "" : " " + model.knobs) + ", " +
                      std::to_string(model.residuals.size()) + " splits";
  // A fit on its edge (time_model.cpp: neither cost may be negative) has one of the two at zero.
  const std::string fixed = text::format_duration(model.fixed_seconds) + " fixed";
  const std::string per_token = text::format_duration(model.seconds_per_token) + " per token";
  const std::string costs = model.fixed_seconds == 0       ? per_token + ", nothing fixed"
                            : model.seconds_per_token == 0 ? fixed + ", nothing per token"
                                                           : fixed + " + " + per_token;
  // A fit closer than the 0.1 % shown would read "within 0.0 %", as if no split were off at all.
  const std::string within =
      model.max_relative_residual < 0.0005 ? "0.05 %" : text::format_percent(model.max_relative_residual, 1);
  std::string line = "Time model (" + group + "): each micro-step costs " + costs + ", the optimizer " +
                     text::format_duration(model.optimizer_seconds) + " per step; it fits every split within " + within;
  if (worst >= 0 && worst < static_cast<int>(runs.size())) line += " (worst: " + runs[worst].config.label() + ")";
  // Far off, the line is no explanation: say so rather than let its two numbers stand as one.
  if (model.max_relative_residual > kLooseTimeModel) {
    line += ", too loosely to explain them: these step times are not a fixed cost per micro-step plus a cost per token";
  }
  return line + ".";
}

std::string markdown_cell(const std::string& value) {
  std::string escaped;
  for (char c : value) {
    switch (c) {
      case '|': escaped += "\\|"; break;
      case '\n':
      case '\r': escaped += ' '; break;
      case '<': escaped += "&lt;"; break;
      case '>': escaped += "&gt;"; break;
      case '&': escaped += "&amp;"; break;
      default: escaped += c;
    }
  }
  return escaped;
}

std::string markdown_notes(const std::vector<std::string>& notes) {
  if (notes.empty()) return "";
  std::string list = "Notes:\n\n";
  for (const std::string& note : notes) list += "- " + markdown_cell(note) + "\n";
  return list + "\n";
}

}  // namespace accumbench::text
