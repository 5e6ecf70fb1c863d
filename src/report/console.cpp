// The table a person reads at the end of `accumbench sweep`: the console view of the column
// table (columns.cpp), the recommendation below it.
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

// One line under the table that spells out "vs fastest" and every abbreviation the split labels
// use on this sweep (SplitConfig::label).
std::string legend(const std::vector<RunResult>& runs, bool memory_limit) {
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
  if (!memory_limit) return text + "; fits: - without --memory-limit; vs fastest: median step time over the fastest split's";
  return text + "; vs fastest: median step time over the fastest fitting split's";
}

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
  out << legend(runs, context.memory_limit) << "\n";
  out << "\nRecommendation: "
      << (context.best != nullptr ? run_label(*context.best, result.runs) : std::string("none"))
      << " \xE2\x80\x94 " << result.recommendation.reason << "\n";  // em dash
  for (const TimeModel& model : result.time_models) out << text::time_model_text(model, runs) << "\n";
  // The recommended split in the user's own trainer (--emit prints it ready to paste).
  if (context.best != nullptr) out << settings_summary(trainer_settings(result, *context.best)) << "\n";
}

}  // namespace accumbench
