// The column table (columns.hpp). One entry per column; the printers only choose a view.
#include "report/columns.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "accumbench/decision.hpp"
#include "accumbench/statistics.hpp"
#include "report/format.hpp"

namespace accumbench::report {

namespace {

using text::Align;

bool ok(const RunResult& run) { return run.status == RunStatus::kOk; }
std::string exact(double value) { return text::format_exact(value); }
std::string exact(int64_t value) { return std::to_string(value); }
std::string flag(bool value) { return value ? "true" : "false"; }
std::string milliseconds(double seconds) { return text::format_fixed(seconds * 1e3, 1); }
std::string bytes_or_dash(int64_t bytes) { return bytes >= 0 ? format_bytes(bytes) : "-"; }
std::string html_bytes(int64_t bytes) { return bytes >= 0 ? format_bytes(bytes) : kHtmlDash; }
std::string html_significant(double v, int digits) {
  return std::isfinite(v) ? text::format_significant(v, digits) : kHtmlDash;
}

// A column that only the CSV has: a name and the exact value.
ColumnDef csv_only(const std::string& name, std::function<std::string(const RunResult&)> raw, bool measured = false) {
  ColumnDef c;
  c.id = name;
  c.csv = name;
  c.measured = measured;
  c.raw = std::move(raw);
  return c;
}

// A step-time statistic: CSV exact seconds, and an HTML column in the table's time unit.
ColumnDef step_statistic(const std::string& csv, const std::string& html_header, double Summary::*field) {
  ColumnDef c;
  c.id = csv;
  c.csv = csv;
  c.html_header = html_header;
  c.html = html_header.empty() ? Shown::kNever : Shown::kAlways;
  c.measured = true;
  // One timed step has no spread: its stddev of 0 would read as a measurement without noise.
  const bool spread = field == &Summary::stddev || field == &Summary::cv;
  c.number = [field](const RunResult& r) { return r.step_seconds.*field; };
  c.raw = [field, spread](const RunResult& r) {
    return spread && r.step_seconds.count < 2 ? std::string() : exact(r.step_seconds.*field);
  };
  c.html_cell = [field, spread](const RunResult& r, const TableContext& t) {
    if (spread && r.step_seconds.count < 2) return std::string(kHtmlDash);
    return html_significant(r.step_seconds.*field / t.time_divisor, 4);
  };
  return c;
}

// A measured number of every finished run in the console, Markdown and HTML tables (`shown`),
// formatted by `format`, and exact in the CSV under its id.
ColumnDef measured_number(const std::string& id, const std::string& header, Shown shown, double RunResult::*field,
                          std::string (*format)(double)) {
  ColumnDef c;
  c.id = id;
  c.header = c.html_header = header;
  c.csv = id;
  c.console = c.markdown = c.html = shown;
  c.measured = true;
  c.number = [field](const RunResult& r) { return r.*field; };
  c.cell = [field, format](const RunResult& r, const TableContext&) { return format(r.*field); };
  c.raw = [field](const RunResult& r) { return exact(r.*field); };
  return c;
}

// One phase from the phase table: "fwd ms" on the console, forward_seconds in the CSV.
ColumnDef phase_column(const PhaseInfo& info) {
  const int index = static_cast<int>(info.phase);
  ColumnDef c;
  c.id = info.name;
  c.header = std::string(info.abbrev) + " ms";
  c.html_header = info.name;
  c.csv = std::string(info.name) + "_seconds";
  c.console = info.phase == Phase::kH2D ? Shown::kWhenAnyPositive
              : info.data_parallel_only ? Shown::kWhenDataParallel
                                        : Shown::kAlways;
  c.html = info.data_parallel_only ? Shown::kWhenDataParallel : Shown::kAlways;
  c.measured = true;
  // The median over the steps, or the mean where they differ in size (typical_phase_seconds).
  c.number = [index](const RunResult& r) { return typical_phase_seconds(r)[index]; };
  c.cell = [index](const RunResult& r, const TableContext&) { return milliseconds(typical_phase_seconds(r)[index]); };
  c.raw = [index](const RunResult& r) { return exact(typical_phase_seconds(r)[index]); };
  c.html_cell = [index](const RunResult& r, const TableContext& t) {
    return html_significant(typical_phase_seconds(r)[index] / t.time_divisor, 4);
  };
  return c;
}

// A left-aligned column of words about the run's split: `words` on the tables and in the CSV.
ColumnDef split_words_column(const std::string& id, const std::string& header, const std::string& csv, Shown shown,
                             std::function<std::string(const RunResult&)> words) {
  ColumnDef c;
  c.id = id;
  c.header = c.html_header = header;
  c.csv = csv;
  c.align = Align::kLeft;
  c.console = c.markdown = c.html = shown;
  c.cell = [words](const RunResult& r, const TableContext&) { return words(r); };
  c.raw = std::move(words);
  return c;
}

// What the run was: the split, its grid point, its status.
void add_identity_columns(std::vector<ColumnDef>& all) {
  all.push_back(split_words_column("split", "split", "label", Shown::kAlways, [](const RunResult& r) { return r.config.label(); }));
  all.push_back(csv_only("micro_batch", [](const RunResult& r) { return exact(r.config.micro_batch); }));
  all.push_back(csv_only("accum_steps", [](const RunResult& r) { return exact(r.config.accum_steps); }));
  // The label spells out micro-batch, accumulation, the knobs, the optimizer and the dtypes; the
  // precision, the clipping and the padding, settings of the step, it leaves out, so a sweep of several needs
  // them beside the label.
  all.push_back(split_words_column("precision", "precision", "precision", Shown::kWhenVaries,
                                   [](const RunResult& r) { return to_string(r.config.precision); }));
  // The label names an optimizer other than adamw; the CSV names every run's.
  all.push_back(csv_only("optimizer", [](const RunResult& r) { return to_string(r.config.optimizer); }));
  // The label names a weights or adapter dtype other than fp32; the CSV names every run's.
  all.push_back(csv_only("weights_dtype", [](const RunResult& r) { return to_string(r.config.weights_dtype); }));
  all.push_back(csv_only("adapter_dtype", [](const RunResult& r) { return to_string(r.config.adapter_dtype); }));
  // The clipping: "off" or the norm on the tables, every run's norm in the CSV (0: not clipped).
  ColumnDef clip = split_words_column("max_grad_norm", "clip", "max_grad_norm", Shown::kWhenVaries, [](const RunResult& r) {
    return r.config.max_grad_norm > 0 ? text::format_number(r.config.max_grad_norm) : std::string("off");
  });
  clip.raw = [](const RunResult& r) { return text::format_number(r.config.max_grad_norm); };
  all.push_back(clip);
  // The padding: "max", "longest", "multiple:8" (--padding's words) where the splits differ in it;
  // every run's in the CSV.
  all.push_back(split_words_column("padding", "padded", "padding", Shown::kWhenVaries,
                                   [](const RunResult& r) { return padding_name(r.config.padding); }));
  // The packing: "none", "wrapped", "bfd" (--packing's words) where the splits differ in it; every
  // run's in the CSV.
  all.push_back(split_words_column("packing", "packed", "packing", Shown::kWhenVaries,
                                   [](const RunResult& r) { return to_string(r.config.packing); }));
  // The order: "true" (grouped by length) or "false" (--group-by-length's words) where the splits
  // differ in it; every run's in the CSV.
  all.push_back(split_words_column("group_by_length", "grouped", "group_by_length", Shown::kWhenVaries,
                                   [](const RunResult& r) { return flag(r.config.group_by_length); }));
  all.push_back(csv_only("activation_checkpointing",
                         [](const RunResult& r) { return to_string(r.config.activation_checkpointing); }));
  all.push_back(csv_only("optimizer_in_backward", [](const RunResult& r) { return flag(r.config.optimizer_in_backward); }));
  all.push_back(csv_only("cuda_graphs", [](const RunResult& r) { return flag(r.config.cuda_graphs); }));
  all.push_back(csv_only("chunked_loss", [](const RunResult& r) { return flag(r.config.chunked_loss); }));
  all.push_back(csv_only("world_size", [](const RunResult& r) { return std::to_string(r.config.world_size); }));
  {
    ColumnDef c = csv_only("status", [](const RunResult& r) { return std::string(run_status_name(r.status)); });
    c.html_header = "status";
    c.html = Shown::kAlways;
    c.align = Align::kLeft;
    c.cell = [](const RunResult& r, const TableContext&) { return std::string(run_status_name(r.status)); };
    c.html_class = [](const RunResult& r) { return std::string(ok(r) ? "text status-ok" : "text status-bad"); };
    all.push_back(c);
  }
}

// The step time and its statistics.
void add_step_time_columns(std::vector<ColumnDef>& all) {
  all.push_back(csv_only("steps", [](const RunResult& r) { return exact(r.step_seconds.count); }, true));
  // What the step and phase columns read: the median, or the mean where the steps differ in size.
  all.push_back(csv_only("tables_read", [](const RunResult& r) { return std::string(steps_differ_in_size(r) ? "mean" : "median"); }, true));
  // The mean the decisions are made on (winsorized, decision.hpp) with its confidence interval; the
  // HTML table's "mean" is this one, the one the recommendation quotes (the steps' plain mean is the
  // CSV's step_seconds_mean: a stalled step moves it, not the decision).
  {
    ColumnDef c = csv_only("mean_seconds", [](const RunResult& r) { return exact(r.mean_seconds.value); }, true);
    c.html_header = "mean";
    c.html = Shown::kAlways;
    c.number = [](const RunResult& r) { return r.mean_seconds.value; };
    c.html_cell = [](const RunResult& r, const TableContext& t) {
      return html_significant(r.mean_seconds.value / t.time_divisor, 4);
    };
    all.push_back(c);
  }
  all.push_back(csv_only("mean_seconds_low", [](const RunResult& r) { return exact(r.mean_seconds.low); }, true));
  all.push_back(csv_only("mean_seconds_high", [](const RunResult& r) { return exact(r.mean_seconds.high); }, true));
  {
    ColumnDef c = step_statistic("step_seconds_median", "median", &Summary::median);
    c.id = "step_seconds";
    c.header = "step s";
    c.console = c.markdown = Shown::kAlways;
    c.number = [](const RunResult& r) { return typical_step_seconds(r); };  // the CSV keeps the median
    // Steps of many sizes: their mean (typical_step_seconds) ± the farther end of its interval.
    c.cell = [](const RunResult& r, const TableContext&) {
      if (!steps_differ_in_size(r)) return text::format_step_seconds(r.step_seconds);
      Summary mean = r.step_seconds;
      mean.median = typical_step_seconds(r);
      mean.ci_low = r.mean_seconds.low;
      mean.ci_high = r.mean_seconds.high;
      // Under 10 rounds the mean has no interval: no ±, rather than the steps' standard deviation,
      // stalls included, under the interval's sign (helper-99: "0.0128 ± 0.0344").
      mean.stddev = std::numeric_limits<double>::quiet_NaN();
      return text::format_step_seconds(mean);
    };
    all.push_back(c);
  }
  all.push_back(step_statistic("step_seconds_min", "min", &Summary::min));
  all.push_back(step_statistic("step_seconds_mean", "", &Summary::mean));
  all.push_back(step_statistic("step_seconds_stddev", "std dev", &Summary::stddev));
  all.push_back(step_statistic("step_seconds_cv", "", &Summary::cv));
  all.push_back(step_statistic("step_seconds_ci_low", "", &Summary::ci_low));
  all.push_back(step_statistic("step_seconds_ci_high", "", &Summary::ci_high));
  {
    ColumnDef c;
    c.id = "interval";
    c.html_header = "interval";
    c.html = Shown::kAlways;
    c.measured = true;
    c.html_cell = [](const RunResult& r, const TableContext& t) {
      // The interval of what the step column shows: the median's, or the mean's where the steps
      // differ in size.
      const bool mean = steps_differ_in_size(r);
      const double low = mean ? r.mean_seconds.low : r.step_seconds.ci_low;
      const double high = mean ? r.mean_seconds.high : r.step_seconds.ci_high;
      if (!std::isfinite(low) || !std::isfinite(high)) return std::string(kHtmlDash);
      return text::format_significant(low / t.time_divisor, 4) + " \u2013 " +
             text::format_significant(high / t.time_divisor, 4);
    };
    all.push_back(c);
  }
}

// The phases, then throughput.
void add_phase_and_throughput_columns(std::vector<ColumnDef>& all) {
  for (const PhaseInfo& info : phase_table()) all.push_back(phase_column(info));
  all.push_back(csv_only("device_busy_fraction", [](const RunResult& r) { return exact(r.device_busy_fraction); }, true));
  // Real tokens/s count non-pad targets; computed/s and pad say what the padding cost.
  all.push_back(measured_number("tokens_per_second", "tokens/s", Shown::kAlways, &RunResult::tokens_per_second,
                                [](double v) { return text::format_count(v); }));
  all.push_back(measured_number("computed_tokens_per_second", "computed/s", Shown::kWhenPadded,
                                &RunResult::computed_tokens_per_second, [](double v) { return text::format_count(v); }));
  all.push_back(measured_number("padding_fraction", "pad", Shown::kWhenPadded, &RunResult::padding_fraction,
                                [](double v) { return text::format_percent(v, 1); }));
  {
    ColumnDef c = csv_only("samples_per_second", [](const RunResult& r) { return exact(r.samples_per_second); }, true);
    c.html_header = "samples/s";
    c.html = Shown::kAlways;
    c.html_cell = [](const RunResult& r, const TableContext&) { return html_significant(r.samples_per_second, 4); };
    all.push_back(c);
  }
  {
    ColumnDef c = csv_only("achieved_tflops", [](const RunResult& r) { return exact(r.achieved_tflops); }, true);
    c.html_header = "TFLOP/s";
    c.html = Shown::kAlways;
    c.html_cell = [](const RunResult& r, const TableContext&) { return html_significant(r.achieved_tflops, 3); };
    all.push_back(c);
  }
  // Model FLOPs plus checkpointing's recompute (Korthikanti et al. 2022): what the device ran.
  all.push_back(csv_only("hardware_tflops", [](const RunResult& r) { return exact(r.hardware_tflops); }, true));
  {
    ColumnDef c;
    c.id = "mfu";
    c.header = c.html_header = "MFU";
    c.csv = "mfu";
    c.console = c.html = Shown::kAlways;
    c.markdown = Shown::kWhenAnyFinite;
    c.measured = true;
    c.number = [](const RunResult& r) { return r.mfu; };
    c.cell = [](const RunResult& r, const TableContext&) { return text::format_percent(r.mfu, 1); };
    c.html_cell = [](const RunResult& r, const TableContext&) {
      return std::isfinite(r.mfu) ? text::format_percent(r.mfu, 1) : kHtmlDash;
    };
    c.raw = [](const RunResult& r) { return exact(r.mfu); };
    all.push_back(c);
  }
}

// Memory measured and planned.
void add_memory_columns(std::vector<ColumnDef>& all) {
  {
    ColumnDef c;
    c.id = "peak";
    c.header = "peak";
    c.html_header = "peak allocated";
    c.csv = "peak_allocated_bytes";
    c.console = c.markdown = c.html = Shown::kAlways;
    c.number = [](const RunResult& r) { return static_cast<double>(r.peak_allocated_bytes); };
    // A run that failed before its first step has no peak; 0 B would read as a measurement.
    c.cell = [](const RunResult& r, const TableContext&) {
      return ok(r) || r.peak_allocated_bytes > 0 ? format_bytes(r.peak_allocated_bytes) : "-";
    };
    c.html_cell = [](const RunResult& r, const TableContext&) { return html_bytes(r.peak_allocated_bytes); };
    // The CSV's empty field is "not measured", as for the measured columns.
    c.raw = [](const RunResult& r) {
      return ok(r) || r.peak_allocated_bytes > 0 ? exact(r.peak_allocated_bytes) : std::string();
    };
    all.push_back(c);
  }
  {
    ColumnDef c = csv_only("peak_reserved_bytes", [](const RunResult& r) {
      return ok(r) || r.peak_reserved_bytes > 0 ? exact(r.peak_reserved_bytes) : std::string();
    });
    c.html_header = "peak reserved";
    c.html = Shown::kAlways;
    c.measured = false;
    c.html_cell = [](const RunResult& r, const TableContext&) { return html_bytes(r.peak_reserved_bytes); };
    all.push_back(c);
  }
  {
    ColumnDef c;
    c.id = "predicted";
    c.header = c.html_header = "predicted";
    c.csv = "predicted_peak_bytes";
    c.console = c.markdown = Shown::kWhenPredicted;
    c.html = Shown::kAlways;
    c.number = [](const RunResult& r) { return static_cast<double>(r.predicted_peak_bytes); };
    c.cell = [](const RunResult& r, const TableContext&) { return bytes_or_dash(r.predicted_peak_bytes); };
    c.html_cell = [](const RunResult& r, const TableContext&) { return html_bytes(r.predicted_peak_bytes); };
    c.raw = [](const RunResult& r) { return exact(r.predicted_peak_bytes); };
    all.push_back(c);
  }
  {
    ColumnDef c;
    c.id = "predicted_error";
    c.html_header = "predicted vs measured";
    c.html = Shown::kAlways;
    c.html_cell = [](const RunResult& r, const TableContext&) {
      if (!ok(r) || r.predicted_peak_bytes < 0 || r.peak_allocated_bytes <= 0) return std::string(kHtmlDash);
      const double error =
          static_cast<double>(r.predicted_peak_bytes) / static_cast<double>(r.peak_allocated_bytes) - 1;
      const std::string percent = text::format_percent(error, 1);
      if (percent == "-0.0 %" || percent == "0.0 %") return std::string("0.0 %");  // no sign on a rounded zero
      return (error >= 0 ? "+" : "") + percent;
    };
    all.push_back(c);
  }
}

// The verdicts: fits, relative to the best, and what went wrong.
void add_verdict_columns(std::vector<ColumnDef>& all) {
  {
    ColumnDef c;
    c.id = "fits";
    c.header = c.html_header = "fits";
    c.csv = "fits";
    c.align = Align::kLeft;
    c.console = c.html = Shown::kAlways;
    // With a limit it is the verdict that matters (every split "no" does not vary, and says most).
    c.markdown = Shown::kWhenLimitOrVaries;
    // Without --memory-limit there is nothing to fit in but the device itself: "-", except for a
    // split that ran (or was predicted to run) out of its memory.
    c.cell = [](const RunResult& r, const TableContext& t) {
      if (t.memory_limit) return std::string(r.fits ? "yes" : "no");
      const bool out_of_memory = r.status == RunStatus::kOutOfMemory || r.status == RunStatus::kPredictedOutOfMemory;
      return std::string(out_of_memory ? "no" : "-");
    };
    c.html_class = [](const RunResult& r) { return std::string(r.fits ? "text" : "text status-bad"); };
    c.raw = [](const RunResult& r) { return flag(r.fits); };
    all.push_back(c);
  }
  {
    ColumnDef c;
    // Median step time over the fastest split's, the one the rounds decided (TableContext::of; not
    // the recommended one's: a tie goes to the split with less memory, which may be a little
    // slower); one over --memory-limit reads what it would have saved (0.48×). A split the means
    // put behind may read a little under 1.00 by medians. Steps of many sizes compare their means
    // (typical_step_seconds), as the decision does.
    c.id = "vs_fastest";
    c.header = c.html_header = "vs fastest";
    // The page and the CSV too (helper-99: the page had only an engine-only headline ratio, and a
    // spreadsheet could not rank the splits as the decision did).
    c.csv = "vs_fastest";
    c.console = c.html = Shown::kAlways;
    c.measured = true;
    c.cell = [](const RunResult& r, const TableContext& t) {
      return t.fastest != nullptr ? text::format_ratio(t.compared_seconds(r) / t.compared_seconds(*t.fastest), 2) : "-";
    };
    c.raw_in_context = [](const RunResult& r, const TableContext& t) {
      return t.fastest != nullptr ? exact(t.compared_seconds(r) / t.compared_seconds(*t.fastest)) : std::string();
    };
    all.push_back(c);
  }
  {
    // Timed steps: the rounds a split took part in (the adaptive rounds measure contenders longer).
    // (The CSV has them as "steps".)
    ColumnDef c;
    c.id = "timed_steps";
    c.header = c.html_header = "steps";
    c.console = c.markdown = c.html = Shown::kWhenVaries;
    c.measured = true;
    c.number = [](const RunResult& r) { return static_cast<double>(r.steps.size()); };
    c.cell = [](const RunResult& r, const TableContext&) { return std::to_string(r.steps.size()); };
    all.push_back(c);
  }
  {
    // What the rounds decided about the split against the fastest (decision.hpp).
    ColumnDef c;
    c.id = "decided";
    c.header = c.html_header = "decided";
    c.csv = "decided";
    c.align = Align::kLeft;
    c.console = c.markdown = c.html = Shown::kWhenInRounds;
    c.measured = true;
    c.cell = [](const RunResult& r, const TableContext& t) {
      return t.verdict(r) + (t.slower_against_its_median(r) ? "*" : "");
    };
    // Empty where the rounds decided nothing about it (the tables' "-").
    c.raw_in_context = [](const RunResult& r, const TableContext& t) {
      const std::string verdict = t.verdict(r);
      return verdict == "-" ? std::string() : verdict + (t.slower_against_its_median(r) ? "*" : "");
    };
    all.push_back(c);
  }
  {
    // The status with its error, where something failed (CSV: the error alone, beside "status").
    ColumnDef c;
    c.id = "error";
    c.header = "status";
    c.csv = "error";
    c.align = Align::kLeft;
    c.console = c.markdown = Shown::kWhenAnyFailed;
    c.cell = [](const RunResult& r, const TableContext&) {
      std::string status = run_status_name(r.status);
      if (!r.error.empty()) status += ": " + r.error;
      return status;
    };
    c.raw = [](const RunResult& r) { return r.error; };
    all.push_back(c);
  }
}

std::vector<ColumnDef> build_columns() {
  std::vector<ColumnDef> all;
  add_identity_columns(all);
  add_step_time_columns(all);
  add_phase_and_throughput_columns(all);
  add_memory_columns(all);
  add_verdict_columns(all);
  return all;
}

// Whether a column's cells differ between runs, read in the table's own context (the fastest
// run, the memory limit, the decision), so that "vs fastest", "fits" and "decided" can vary.
bool varies(const ColumnDef& c, const std::vector<RunResult>& runs, const TableContext& context) {
  // A measured column prints "-" for a failed run: only the measured cells can differ.
  const RunResult* first = nullptr;
  for (const RunResult& r : runs) {
    if (c.measured && !ok(r)) continue;
    if (first == nullptr) first = &r;
    if (c.cell(r, context) != c.cell(*first, context)) return true;
  }
  return false;
}

bool visible(const ColumnDef& c, Shown rule, const std::vector<RunResult>& runs, const TableContext& context) {
  switch (rule) {
    case Shown::kNever: return false;
    case Shown::kAlways: return true;
    case Shown::kWhenVaries: return varies(c, runs, context);
    case Shown::kWhenLimitOrVaries: return context.memory_limit || varies(c, runs, context);
    case Shown::kWhenAnyFinite:
    case Shown::kWhenAnyPositive:
      for (const RunResult& r : runs) {
        const double v = c.number(r);
        if (ok(r) && std::isfinite(v) && (rule == Shown::kWhenAnyFinite || v > 0.0)) return true;
      }
      return false;
    case Shown::kWhenInRounds:
      for (const RunResult& r : runs) {
        if (r.session != 0) return true;
      }
      return false;
    case Shown::kWhenPredicted:
      for (const RunResult& r : runs) {
        if (r.predicted_peak_bytes >= 0) return true;
      }
      return false;
    case Shown::kWhenDataParallel:
      for (const RunResult& r : runs) {
        if (r.config.world_size > 1) return true;
      }
      return false;
    case Shown::kWhenAnyFailed:
      for (const RunResult& r : runs) {
        if (!ok(r)) return true;
      }
      return false;
    case Shown::kWhenPadded:
      for (const RunResult& r : runs) {
        if (ok(r) && r.padding_fraction > 0.0) return true;
      }
      return false;
  }
  return false;
}

}  // namespace

std::string TableContext::verdict(const RunResult& run) const {
  if (runs == nullptr || decision == nullptr || runs->empty()) return "-";
  const std::ptrdiff_t index = &run - runs->data();
  if (index < 0 || index >= static_cast<std::ptrdiff_t>(runs->size())) return "-";
  if (index == decision->fastest) return "fastest";
  for (const Comparison& c : decision->comparisons) {
    if (c.index != index) continue;
    switch (c.verdict) {
      case Verdict::kSlower: return "slower";
      case Verdict::kEquivalent: return "tie";
      case Verdict::kFaster:
      case Verdict::kUndecided: return "undecided";
    }
  }
  return "-";  // not a candidate (failed, or over the memory limit)
}

bool TableContext::slower_against_its_median(const RunResult& run) const {
  if (fastest == nullptr || &run == fastest || verdict(run) != "slower") return false;
  // As "vs fastest" prints it (two decimals): 1.00× or less.
  return compared_seconds(run) / compared_seconds(*fastest) < 1.005;
}

TableContext TableContext::of(const SweepResult& result) {
  TableContext context;
  context.runs = &result.runs;
  context.decision = &result.recommendation.decision;
  const int best = result.recommendation.best_index;
  if (best >= 0 && best < static_cast<int>(result.runs.size())) context.best = &result.runs[best];
  // The split the rounds decided fastest (their means, over paired rounds), so that "vs fastest"
  // reads 1.00× on the row "decided" calls fastest (by medians another split could). Without a
  // decision: the split with the lowest median that fits (all fit without --memory-limit; a split
  // measured earlier and over a lower limit now, --resume, is not the "1.00×"), else of all.
  const int fastest = result.recommendation.decision.fastest;
  if (result.recommendation.decision.kind != DecisionKind::kNone && fastest >= 0 &&
      fastest < static_cast<int>(result.runs.size()) && ok(result.runs[fastest]) &&
      std::isfinite(typical_step_seconds(result.runs[fastest]))) {
    context.fastest = &result.runs[fastest];
  }
  context.per_token = compared_per_token(result.runs);
  context.framework_seconds_per_micro_step = std::max(0.0, result.context.framework_seconds_per_micro_step);
  for (const bool must_fit : {true, false}) {
    if (context.fastest != nullptr) break;
    for (const RunResult& run : result.runs) {
      if (!ok(run) || !std::isfinite(typical_step_seconds(run)) || (must_fit && !run.fits)) continue;
      if (context.fastest == nullptr || context.compared_seconds(run) < context.compared_seconds(*context.fastest)) {
        context.fastest = &run;
      }
    }
    if (context.fastest != nullptr) break;
  }
  context.memory_limit = result.context.memory_limit_bytes > 0;
  return context;
}

double TableContext::compared_seconds(const RunResult& run) const {
  return accumbench::compared_seconds(typical_step_seconds(run) + framework_seconds_per_step(run, framework_seconds_per_micro_step),
                                      run, per_token);
}

const std::vector<ColumnDef>& columns() {
  static const std::vector<ColumnDef> kColumns = build_columns();
  return kColumns;
}

const ColumnDef& column(const std::string& id) {
  for (const ColumnDef& c : columns()) {
    if (c.id == id) return c;
  }
  throw std::out_of_range("no column \"" + id + "\" in src/report/columns.cpp");
}

bool visible_in(const ColumnDef& c, View view, const std::vector<RunResult>& runs, const TableContext& context) {
  switch (view) {
    case View::kCsv: return !c.csv.empty();
    case View::kConsole: return visible(c, c.console, runs, context);
    // Markdown is the console's table to paste: besides its own columns, every console column
    // whose cells differ between the runs (the phases, "vs fastest"), so nothing that tells the
    // splits apart is dropped.
    case View::kMarkdown:
      return visible(c, c.markdown, runs, context) ||
             (visible(c, c.console, runs, context) && varies(c, runs, context));
    case View::kHtml: return visible(c, c.html, runs, context);
  }
  return false;
}

std::vector<const ColumnDef*> shown_columns(View view, const std::vector<RunResult>& runs, const TableContext& context) {
  std::vector<const ColumnDef*> shown;
  for (const ColumnDef& c : columns()) {
    if (visible_in(c, view, runs, context)) shown.push_back(&c);
  }
  return shown;
}

std::string cell_text(const ColumnDef& c, View view, const RunResult& run, const TableContext& context) {
  if (view == View::kCsv) return c.measured && !ok(run) ? "" : c.raw_in_context ? c.raw_in_context(run, context) : c.raw(run);
  if (view == View::kHtml) {
    // One dash for "not measured" across the page (the console's "-" is the HTML's "—").
    const std::string text =
        c.measured && !ok(run) ? std::string("-") : c.html_cell ? c.html_cell(run, context) : c.cell(run, context);
    return text == "-" ? std::string(kHtmlDash) : text;
  }
  if (c.measured && !ok(run)) return "-";
  return c.cell(run, context);
}

std::string legend(const std::vector<RunResult>& runs, const TableContext& context,
                   const std::vector<const ColumnDef*>& shown) {
  bool ckpt = false, oib = false, chunked = false, graphs = false, optimizer = false;
  std::string weights, adapters;  // "bf16-weights", "bf16-adapters": the 16-bit dtypes the labels name
  for (const RunResult& run : runs) {
    optimizer = optimizer || run.config.optimizer != OptimizerKind::kAdamW;
    const std::string word = to_string(run.config.weights_dtype) + "-weights";
    if (run.config.weights_dtype != Precision::kFp32 && weights.find(word) == std::string::npos)
      weights += (weights.empty() ? "" : ", ") + word;
    const std::string adapter_word = to_string(run.config.adapter_dtype) + "-adapters";
    if (run.config.adapter_dtype != Precision::kFp32 && adapters.find(adapter_word) == std::string::npos)
      adapters += (adapters.empty() ? "" : ", ") + adapter_word;
    ckpt = ckpt || run.config.activation_checkpointing == Checkpointing::kBlocks;
    oib = oib || run.config.optimizer_in_backward;
    chunked = chunked || run.config.chunked_loss;
    graphs = graphs || run.config.cuda_graphs;
  }
  std::string text = "split: micro-batch \u00d7 accumulation steps";
  if (ckpt) text += "; ckpt: activation checkpointing (gradient_checkpointing)";
  if (oib) text += "; oib: the optimizer inside backward";
  if (chunked) text += "; chunked-ce: the chunked cross-entropy";
  if (graphs) text += "; graphs: replayed from CUDA graphs";
  if (optimizer) text += "; then the optimizer (--optimizer) unless adamw";
  if (!weights.empty()) text += "; " + weights + ": the weights stored in that dtype (--weights-dtype), fp32 unless named";
  if (!adapters.empty())
    text += "; " + adapters + ": LoRA's adapters stored in that dtype (--adapter-dtype), fp32 unless named";
  const auto has = [&](const char* id) {
    return std::any_of(shown.begin(), shown.end(), [&](const ColumnDef* c) { return c->id == id; });
  };
  if (has("max_grad_norm")) text += "; clip: the norm the step's gradients are clipped to (--max-grad-norm), off: none";
  if (has("packing")) {
    text += "; packed: how samples are laid out in rows (--packing), compared per real token";
    if (has("samples_per_second")) text += "; samples/s counts rows, and a packed row holds several samples";
  }
  if (has("group_by_length")) {
    text += "; grouped: whether the sampler groups samples by length (--group-by-length), compared per real token";
  }
  if (has("padding")) text += "; padded: how each micro-batch is padded (--padding)";
  if (has("fits") && !context.memory_limit) text += "; fits: - without --memory-limit";
  // Steps of many sizes read their mean (typical_step_seconds): said once, for every split or some.
  size_t timed = 0, many_sizes = 0;
  for (const RunResult& run : runs) {
    if (!ok(run) || !std::isfinite(typical_step_seconds(run))) continue;
    ++timed;
    if (steps_differ_in_size(run)) ++many_sizes;
  }
  const bool all_many_sizes = many_sizes > 0 && many_sizes == timed;
  if (many_sizes > 0 && has("step_seconds")) {
    text += std::string("; step s: the mean step") + (all_many_sizes ? ", since the steps differ in size" : " where a split's steps differ in size") +
            " (an epoch's time over its steps; the phases and rates from it)";
  }
  if (has("vs_fastest")) {
    // Over the fastest fitting split, or, when none fits the limit, the fastest of all (TableContext::of).
    const bool fitting = context.memory_limit && context.fastest != nullptr && context.fastest->fits;
    const std::string statistic = all_many_sizes ? "mean step time"
                                  : many_sizes > 0 ? "step time (median, or mean where the steps differ in size)"
                                                   : "median step time";
    text += "; vs fastest: " + statistic +
            (context.framework_seconds_per_micro_step > 0
                 ? " with the framework's host time (" + text::format_duration(context.framework_seconds_per_micro_step) +
                       " per micro-step)"
                 : "") +
            (context.per_token ? " per real token" : "") +
            " over the fastest " + (fitting ? "fitting " : "") + "split's" +
            (context.memory_limit && context.fastest != nullptr && !fitting ? ", none of which fits the memory limit" : "");
  }
  if (has("decided") && std::any_of(runs.begin(), runs.end(), [&](const RunResult& r) { return context.slower_against_its_median(r); })) {
    text += "; slower*: slower over the rounds both ran (their paired means), though its median step reads no slower "
            "(the machine's speed moved between rounds)";
  }
  return text;
}

}  // namespace accumbench::report
