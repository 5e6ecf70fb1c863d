// The table a person reads at the end of `accumbench sweep`.
#include <cmath>
#include <string>
#include <vector>

#include "accumbench/report.hpp"
#include "report/format.hpp"

namespace accumbench {

namespace {

constexpr const char* kGreen = "\x1b[32m";
constexpr const char* kRed = "\x1b[31m";
constexpr const char* kReset = "\x1b[0m";

std::string milliseconds(double seconds) { return text::format_fixed(seconds * 1e3, 1); }

}  // namespace

void ConsoleReporter::report(const SweepResult& result, std::ostream& out) const {
  const std::vector<RunResult>& runs = result.runs;
  const int best = result.recommendation.best_index;
  const bool have_best = best >= 0 && best < static_cast<int>(runs.size());

  // Columns that would be all "-" on this sweep are left out: h2d is CUDA-only, predictions
  // need a plan, the status column only matters when something failed.
  bool show_h2d = false, show_allreduce = false, show_predicted = false, show_status = false, show_precision = false;
  for (const RunResult& run : runs) {
    const double h2d = run.phase_median_seconds[static_cast<int>(Phase::kH2D)];
    show_h2d = show_h2d || (run.status == RunStatus::kOk && std::isfinite(h2d) && h2d > 0.0);
    show_allreduce = show_allreduce || run.config.world_size > 1;
    show_predicted = show_predicted || run.predicted_peak_bytes >= 0;
    show_status = show_status || run.status != RunStatus::kOk;
    show_precision = show_precision || run.config.precision != runs.front().config.precision;
  }

  using text::Align;
  std::vector<text::Column> columns = {
      {"split", Align::kLeft}};
  // A precision sweep has rows with the same split label: say which precision each row is.
  if (show_precision) columns.push_back({"precision", Align::kLeft});
  columns.push_back({"step s", Align::kRight});
  columns.push_back({"data ms", Align::kRight});
  if (show_h2d) columns.push_back({"h2d ms", Align::kRight});
  columns.push_back({"fwd ms", Align::kRight});
  columns.push_back({"bwd ms", Align::kRight});
  if (show_allreduce) columns.push_back({"allreduce ms", Align::kRight});
  for (const char* header : {"opt ms", "other ms", "tokens/s", "MFU", "peak"}) {
    columns.push_back({header, Align::kRight});
  }
  if (show_predicted) columns.push_back({"predicted", Align::kRight});
  columns.push_back({"fits", Align::kLeft});
  columns.push_back({"vs best", Align::kRight});
  if (show_status) columns.push_back({"status", Align::kLeft});
  text::TextTable table(columns);

  for (int i = 0; i < static_cast<int>(runs.size()); ++i) {
    const RunResult& run = runs[i];
    const bool ok = run.status == RunStatus::kOk;
    const auto phase = [&](Phase p) {
      return ok ? milliseconds(run.phase_median_seconds[static_cast<int>(p)]) : "-";
    };
    std::vector<std::string> cells = {run.config.label()};
    if (show_precision) cells.push_back(run.config.precision);
    cells.push_back(ok ? text::format_step_seconds(run.step_seconds) : "-");
    cells.push_back(phase(Phase::kData));
    if (show_h2d) cells.push_back(phase(Phase::kH2D));
    cells.push_back(phase(Phase::kForward));
    cells.push_back(phase(Phase::kBackward));
    if (show_allreduce) cells.push_back(phase(Phase::kAllReduce));
    cells.push_back(phase(Phase::kOptimizer));
    cells.push_back(phase(Phase::kOther));
    cells.push_back(ok ? text::format_count(run.tokens_per_second) : "-");
    cells.push_back(ok ? text::format_percent(run.mfu, 1) : "-");
    // A run that failed before its first step has no peak; 0 B would read as a measurement.
    cells.push_back(ok || run.peak_allocated_bytes > 0 ? format_bytes(run.peak_allocated_bytes)
                                                       : "-");
    if (show_predicted) {
      cells.push_back(run.predicted_peak_bytes >= 0 ? format_bytes(run.predicted_peak_bytes) : "-");
    }
    cells.push_back(run.fits ? "yes" : "no");
    cells.push_back(
        ok && have_best
            ? text::format_ratio(run.step_seconds.median / runs[best].step_seconds.median, 2)
            : "-");
    if (show_status) {
      std::string status = run_status_name(run.status);
      if (!run.error.empty()) status += ": " + run.error;
      cells.push_back(status);
    }

    std::string prefix, suffix;
    if (options_.color && (i == best || !ok)) {
      prefix = i == best ? kGreen : kRed;
      suffix = kReset;
    }
    table.add_row(std::move(cells), prefix, suffix);
  }

  out << text::context_line(result) << "\n\n";
  table.render(out);
  out << "\nRecommendation: "
      << (have_best ? runs[best].config.label() + (show_precision ? " " + runs[best].config.precision : "")
                    : std::string("none"))
      << " \xE2\x80\x94 " << result.recommendation.reason << "\n";  // em dash
}

}  // namespace accumbench
