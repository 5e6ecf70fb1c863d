// One line per run, for spreadsheets and pandas. Numbers are the shortest text that reads back to
// the same double; "not measured" (NaN) is an empty field. Quoting follows RFC 4180; lines end in
// "\n" (every CSV reader accepts it, and it diffs cleanly).
#include <functional>
#include <string>
#include <vector>

#include "accumbench/report.hpp"
#include "report/format.hpp"

namespace accumbench {

namespace {

std::string csv_field(const std::string& value) {
  if (value.find_first_of(",\"\r\n") == std::string::npos) return value;
  std::string quoted = "\"";
  for (char c : value) {
    if (c == '"') quoted += '"';  // a quote inside a quoted field is doubled
    quoted += c;
  }
  return quoted + "\"";
}

std::string number(double value) { return text::format_exact(value); }
std::string number(int64_t value) { return std::to_string(value); }
std::string flag(bool value) { return value ? "true" : "false"; }

struct CsvColumn {
  const char* header;
  std::function<std::string(const RunResult&)> value;
  // A failed run has no measurements; its zero defaults would read as measured zeros.
  bool measured = false;
};

double phase_seconds(const RunResult& run, Phase phase) {
  return run.phase_median_seconds[static_cast<int>(phase)];
}

// Each column is named and computed in one place.
const std::vector<CsvColumn>& csv_columns() {
  static const std::vector<CsvColumn> kColumns = {
      {"label", [](const RunResult& r) { return r.config.label(); }},
      {"micro_batch", [](const RunResult& r) { return number(r.config.micro_batch); }},
      {"accum_steps", [](const RunResult& r) { return number(r.config.accum_steps); }},
      {"precision", [](const RunResult& r) { return r.config.precision; }},
      {"activation_checkpointing",
       [](const RunResult& r) { return r.config.activation_checkpointing; }},
      {"optimizer_in_backward",
       [](const RunResult& r) { return flag(r.config.optimizer_in_backward); }},
      {"cuda_graphs", [](const RunResult& r) { return flag(r.config.cuda_graphs); }},
      {"chunked_loss", [](const RunResult& r) { return flag(r.config.chunked_loss); }},
      {"world_size", [](const RunResult& r) { return std::to_string(r.config.world_size); }},
      {"status", [](const RunResult& r) { return std::string(run_status_name(r.status)); }},
      {"steps", [](const RunResult& r) { return number(r.step_seconds.count); }, true},
      {"step_seconds_median", [](const RunResult& r) { return number(r.step_seconds.median); },
       true},
      {"step_seconds_min", [](const RunResult& r) { return number(r.step_seconds.min); }, true},
      {"step_seconds_mean", [](const RunResult& r) { return number(r.step_seconds.mean); }, true},
      {"step_seconds_stddev", [](const RunResult& r) { return number(r.step_seconds.stddev); },
       true},
      {"step_seconds_cv", [](const RunResult& r) { return number(r.step_seconds.cv); }, true},
      {"step_seconds_ci_low", [](const RunResult& r) { return number(r.step_seconds.ci_low); },
       true},
      {"step_seconds_ci_high", [](const RunResult& r) { return number(r.step_seconds.ci_high); },
       true},
      {"data_seconds", [](const RunResult& r) { return number(phase_seconds(r, Phase::kData)); },
       true},
      {"h2d_seconds", [](const RunResult& r) { return number(phase_seconds(r, Phase::kH2D)); },
       true},
      {"forward_seconds",
       [](const RunResult& r) { return number(phase_seconds(r, Phase::kForward)); }, true},
      {"backward_seconds",
       [](const RunResult& r) { return number(phase_seconds(r, Phase::kBackward)); }, true},
      {"allreduce_seconds",
       [](const RunResult& r) { return number(phase_seconds(r, Phase::kAllReduce)); }, true},
      {"optimizer_seconds",
       [](const RunResult& r) { return number(phase_seconds(r, Phase::kOptimizer)); }, true},
      {"other_seconds", [](const RunResult& r) { return number(phase_seconds(r, Phase::kOther)); },
       true},
      {"device_busy_fraction", [](const RunResult& r) { return number(r.device_busy_fraction); },
       true},
      {"tokens_per_second", [](const RunResult& r) { return number(r.tokens_per_second); }, true},
      {"samples_per_second", [](const RunResult& r) { return number(r.samples_per_second); }, true},
      {"achieved_tflops", [](const RunResult& r) { return number(r.achieved_tflops); }, true},
      {"mfu", [](const RunResult& r) { return number(r.mfu); }, true},
      {"peak_allocated_bytes", [](const RunResult& r) { return number(r.peak_allocated_bytes); }},
      {"peak_reserved_bytes", [](const RunResult& r) { return number(r.peak_reserved_bytes); }},
      {"predicted_peak_bytes", [](const RunResult& r) { return number(r.predicted_peak_bytes); }},
      {"fits", [](const RunResult& r) { return flag(r.fits); }},
      {"error", [](const RunResult& r) { return r.error; }},
  };
  return kColumns;
}

}  // namespace

void CsvReporter::report(const SweepResult& result, std::ostream& out) const {
  const std::vector<CsvColumn>& columns = csv_columns();
  for (std::size_t i = 0; i < columns.size(); ++i) out << (i > 0 ? "," : "") << columns[i].header;
  out << '\n';
  for (const RunResult& run : result.runs) {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      const bool blank = columns[i].measured && run.status != RunStatus::kOk;
      out << (i > 0 ? "," : "") << (blank ? "" : csv_field(columns[i].value(run)));
    }
    out << '\n';
  }
}

}  // namespace accumbench
