// The table section of the HTML report (table.hpp): the HTML view of the column table
// (src/report/columns.cpp), with the recommended and tied runs marked.
#include "report/html/table.hpp"

#include <algorithm>

#include "accumbench/report.hpp"
#include "accumbench/statistics.hpp"
#include "report/columns.hpp"
#include "report/format.hpp"
#include "report/html/charts.hpp"
#include "report/html/text.hpp"

namespace accumbench::html {
namespace {

using report::ColumnDef;

std::string cell(const std::string& content, const std::string& cls = "") {
  return "<td" + (cls.empty() ? "" : " class=\"" + cls + "\"") + ">" + html_escape(content) + "</td>";
}

std::string head_row(const std::vector<const ColumnDef*>& columns) {
  std::string h = "<thead><tr>";
  for (const ColumnDef* c : columns) h += (c->html_class ? "<th class=\"text\">" : "<th>") + html_escape(c->html_header) + "</th>";
  return h + "</tr></thead>";
}

// A failed run has no measurements: its error takes the place of every column between its
// status and the plan's prediction.
size_t error_span(const std::vector<const ColumnDef*>& columns, size_t first) {
  size_t last = first;
  while (last < columns.size() && columns[last]->id != "predicted") ++last;
  return last - first;
}

std::string label_cell(const Slot& s) {
  std::string h = "<td>" + html_escape(s.label);
  if (s.recommended) {
    h += "<span class=\"badge\">best</span>";
  } else if (s.tied) {
    h += "<span class=\"badge tie\">tie</span>";
  }
  return h + "</td>";
}

std::string run_row(const std::vector<const ColumnDef*>& columns, const Slot& s, const report::TableContext& t) {
  const RunResult& r = *s.run;
  const std::string cls = s.recommended ? "recommended" : (!s.ok ? "failed" : "");
  std::string h = cls.empty() ? "<tr>" : "<tr class=\"" + cls + "\">";
  h += label_cell(s);
  for (size_t i = 1; i < columns.size(); ++i) {
    const ColumnDef& c = *columns[i];
    if (!s.ok && i > 1 && columns[i - 1]->id == "status") {
      const size_t span = error_span(columns, i);
      h += "<td class=\"error\" colspan=\"" + std::to_string(span) + "\">" +
           html_escape(r.error.empty() ? "no error message was recorded" : r.error) + "</td>";
      i += span - 1;
      continue;
    }
    h += cell(report::cell_text(c, report::View::kHtml, r, t), c.html_class ? c.html_class(r) : "");
  }
  return h + "</tr>";
}

}  // namespace

std::string table_section(const SweepResult& result, const std::vector<Slot>& slots) {
  double max_median = 0;
  for (const Slot& s : slots) {
    if (s.ok && finite(typical_step_seconds(*s.run))) max_median = std::max(max_median, typical_step_seconds(*s.run));
  }
  const Unit unit = time_unit(max_median > 0 ? max_median : 1);
  report::TableContext context = report::TableContext::of(result);  // slots point into result.runs
  context.time_divisor = unit.divisor;
  const std::vector<const ColumnDef*> columns = report::shown_columns(report::View::kHtml, result.runs, context);

  std::string h =
      "<section class=\"card table-card\"><h2>All numbers</h2><p class=\"note\">Times in " + unit.name +
      " per optimizer step; each phase column is that phase's median over the timed steps" +
      std::string(any_means(slots) ? " (its mean for a split whose steps differ in size, as that split's step time)" : "") +
      ", as in every other report, so the columns need not add up to the step's time. The mean is the one the decisions and the "
      "recommendation use, winsorized: each split's slowest twentieth of steps counts as the step just below them, and no "
      "step as more than 3\u00d7 the median (the CSV's step_seconds_mean is the plain mean). Memory is 1024-based. A failed run "
      "shows its error in place of the measurements.</p>";
  h += "<div class=\"table-wrap\"><table id=\"results-table\">" + head_row(columns) + "<tbody>";
  for (const Slot& s : slots) h += run_row(columns, s, context);
  h += "</tbody></table></div><p class=\"note\">" + html_escape(report::legend(result.runs, context, columns)) +
       "</p></section>\n";
  return h;
}

}  // namespace accumbench::html
