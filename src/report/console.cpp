// The table a person reads at the end of `accumbench sweep`: the console view of the column
// table (columns.cpp), the recommendation below it.
#include <cmath>
#include <string>
#include <vector>

#include "accumbench/report.hpp"
#include "report/columns.hpp"
#include "report/format.hpp"

namespace accumbench {

namespace {

constexpr const char* kGreen = "\x1b[32m";
constexpr const char* kRed = "\x1b[31m";
constexpr const char* kReset = "\x1b[0m";

}  // namespace

void ConsoleReporter::report(const SweepResult& result, std::ostream& out) const {
  using report::View;
  const std::vector<RunResult>& runs = result.runs;
  const int best = result.recommendation.best_index;
  const report::TableContext context = report::TableContext::of(result);
  // Columns that would say nothing on this sweep are left out (columns.hpp, Shown).
  const std::vector<const report::ColumnDef*> shown = report::shown_columns(View::kConsole, runs, context);
  std::vector<text::Column> headers;
  for (const report::ColumnDef* column : shown) headers.push_back({column->header, column->align});
  text::TextTable table(headers);

  for (int i = 0; i < static_cast<int>(runs.size()); ++i) {
    const RunResult& run = runs[i];
    std::vector<std::string> cells;
    for (const report::ColumnDef* column : shown) cells.push_back(report::cell_text(*column, View::kConsole, run, context));
    std::string prefix, suffix;
    const bool ok = run.status == RunStatus::kOk;
    if (options_.color && (i == best || !ok)) {
      prefix = i == best ? kGreen : kRed;
      suffix = kReset;
    }
    table.add_row(std::move(cells), prefix, suffix);
  }

  out << text::context_line(result) << "\n\n";
  table.render(out);
  out << report::legend(runs, context, shown) << "\n";
  out << "\nRecommendation: "
      << (context.best != nullptr ? run_label(*context.best, result.runs) : std::string("none"))
      << " \xE2\x80\x94 " << result.recommendation.reason << "\n";  // em dash
  for (const TimeModel& model : result.time_models) out << text::time_model_text(model, runs) << "\n";
  // The recommended split in the user's own trainer (--emit prints it ready to paste).
  if (context.best != nullptr) out << settings_summary(trainer_settings(result, *context.best)) << "\n";
}

// The splits whose every timed step gave a loss that is not finite (fp16's skipped steps aside):
// their times are of a step that diverges, which no recommendation should be read from; "" when
// there are none.
std::string diverged_loss_note(const SweepResult& result) {
  std::string labels;
  for (const RunResult& run : result.runs) {
    bool counted = false;
    bool finite = false;
    for (const StepSample& step : run.steps) {
      if (step.skipped) continue;
      counted = true;
      finite = finite || std::isfinite(step.loss);
    }
    if (counted && !finite) labels += (labels.empty() ? "" : ", ") + run_label(run, result.runs);
  }
  if (labels.empty()) return "";
  return "the loss of " + labels + " is not finite in any timed step: the step diverges (its times are of "
         "arithmetic on inf and nan), so check what scales it (--lr, --lora-alpha, the weights' dtype) before "
         "reading the times";
}

std::vector<std::string> sweep_notes(const SweepResult& result) {
  std::vector<std::string> notes;
  for (const std::string& note : result.notes) {
    if (!note.empty()) notes.push_back(note);
  }
  const std::string diverged = diverged_loss_note(result);
  if (!diverged.empty()) notes.push_back(diverged);
  const std::string busy = busy_machine_note(result.context);
  if (!busy.empty()) notes.push_back(busy);
  return notes;
}

std::string busy_machine_note(const SweepContext& context) {
  const int cores = context.cpu_cores;
  const int ranks = std::max(1, context.world_size);
  const int64_t ours = context.threads > 0 ? static_cast<int64_t>(context.threads) * ranks : 0;
  const std::string on_cores = std::to_string(cores) + (cores == 1 ? " core" : " cores");
  // More threads than cores (per process × data-parallel ranks): the sweep waited on itself.
  const bool own = cores > 0 && ours > cores;
  const std::string threads = std::to_string(ours) + " threads" + (ranks > 1 ? " over " + std::to_string(ranks) + " processes" : "");
  const std::string tail =
      " with the steps, which moves their times from round to round, widens the intervals and can turn a close "
      "decision from one sweep to the next; " +
      (own ? "--threads " + std::to_string(std::max(1, cores / ranks)) + " on an idle machine measures the splits as they run alone"
           : std::string("an idle machine measures the splits as they run alone"));
  const double span = context.other_cpu_span_seconds;
  if (span > 0 && cores > 0) {
    // Other processes' cores on average, less this sweep's other ranks (each its threads' worth),
    // against the cores the sweep left free.
    const double others = context.other_cpu_seconds / span;
    const double strangers = others - static_cast<double>((ranks - 1) * std::max(0, context.threads));
    const double free = std::max<double>(0, static_cast<double>(cores - ours));
    const bool busy = strangers >= free + kBusyCores;
    if (!busy && !own) return "";
    if (!busy) return "the sweep ran more threads than the machine has cores (" + threads + " on " + on_cores + "): they took turns" + tail;
    // The sweep's own other ranks are not "other processes" (helper-111: 1.0 of a 2-rank sweep's 1.6 was its rank 1).
    return "the machine was busy while this sweep ran (other processes used " + text::format_fixed(std::max(0.0, strangers), 1) +
           " of its " + on_cores + " on average" + (ranks > 1 ? ", beside its " + std::to_string(ranks) + " ranks" : "") + (own ? "; and its " + threads + " are more than the cores" : "") +
           "): " + (own ? "its threads and other work took turns" : "other work took turns") + tail;
  }
  // Files before schema 20: the load read at the saves (which counts the sweep's own threads).
  if (cores <= 0 || context.load_average < cores + 0.5) return "";
  return "the machine was busy while this sweep ran (a load of " + text::format_fixed(context.load_average, 1) + " on " +
         on_cores + "): " + (own ? "its " + threads + " and any other work took turns" : "other work took turns") + tail;
}

}  // namespace accumbench
