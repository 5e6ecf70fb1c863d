// A GitHub-flavoured Markdown table for pasting into issues and READMEs: the Markdown view of the
// column table (columns.cpp), which, like llama-bench, shows the columns that differ between
// runs plus the measurements that always matter.
#include <string>
#include <vector>

#include "accumbench/report.hpp"
#include "report/columns.hpp"
#include "report/format.hpp"

namespace accumbench {


void MarkdownReporter::report(const SweepResult& result, std::ostream& out) const {
  using report::View;
  const report::TableContext context = report::TableContext::of(result);
  const std::vector<const report::ColumnDef*> shown = report::shown_columns(View::kMarkdown, result.runs, context);

  out << text::markdown_cell(text::context_line(result)) << "\n\n";
  // The sweep's notes, as its stderr said them above the table (what the options left idle, ...).
  out << text::markdown_notes(sweep_notes(result));
  std::string header = "|", rule = "|";
  for (const report::ColumnDef* column : shown) {
    header += " " + column->header + " |";
    rule += column->align == text::Align::kRight ? " ---: |" : " --- |";
  }
  out << header << '\n' << rule << '\n';
  for (const RunResult& run : result.runs) {
    out << '|';
    for (const report::ColumnDef* column : shown) {
      out << ' ' << text::markdown_cell(report::cell_text(*column, View::kMarkdown, run, context)) << " |";
    }
    out << '\n';
  }

  // After a blank line: a line right under the table would be read as one more row.
  out << '\n' << text::markdown_cell(report::legend(result.runs, context, shown)) << '\n';
  out << "\n**Recommendation:** " << (context.best != nullptr ? run_label(*context.best, result.runs) : std::string("none"))
      << " \xE2\x80\x94 " << text::markdown_cell(result.recommendation.reason) << '\n';
  for (const TimeModel& model : result.time_models) {
    out << '\n' << text::markdown_cell(text::time_model_text(model, result.runs)) << '\n';
  }
  if (context.best != nullptr) {
    out << '\n' << text::markdown_cell(settings_summary(trainer_settings(result, *context.best))) << '\n';
  }
}

}  // namespace accumbench
