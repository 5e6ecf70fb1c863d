// One line per run, for spreadsheets and pandas: the CSV view of the column table (columns.cpp).
// Numbers are the shortest text that reads back to the same double; "not measured" (NaN, or a
// run that did not finish) is an empty field. Quoting follows RFC 4180; lines end in "\n" (every
// CSV reader accepts it, and it diffs cleanly).
#include <string>
#include <vector>

#include "accumbench/report.hpp"
#include "report/columns.hpp"

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

}  // namespace

void CsvReporter::report(const SweepResult& result, std::ostream& out) const {
  using report::View;
  const std::vector<const report::ColumnDef*> columns = report::shown_columns(View::kCsv, result.runs, report::TableContext::of(result));
  for (std::size_t i = 0; i < columns.size(); ++i) out << (i > 0 ? "," : "") << columns[i]->csv;
  out << '\n';
  for (const RunResult& run : result.runs) {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      out << (i > 0 ? "," : "") << csv_field(report::cell_text(*columns[i], View::kCsv, run, {}));
    }
    out << '\n';
  }
}

}  // namespace accumbench
