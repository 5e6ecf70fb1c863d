// Private text helpers shared by the reporters and by the recommendation's reason (numbers in
// words must read the same in the reason and in the table). Not part of the public API.
//
//   format_significant(0.19134, 3)   // "0.191"
//   format_count(342737)             // "342,737"
//   TextTable t({{"split", Align::kLeft}, {"step s", Align::kRight}});
//   t.add_row({"8×8", "0.191"});  t.render(std::cout);
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "accumbench/result.hpp"

namespace accumbench::text {

// Columns on a terminal, not bytes: UTF-8 continuation bytes take no column ("×", "±", "—").
std::size_t display_width(const std::string& s);

// Decimals needed to show `value` with `digits` significant digits (0 for |value| >= 10^digits).
int decimals_for_significant(double value, int digits);
// Fixed notation with `decimals` decimals; "-" for NaN/inf.
std::string format_fixed(double value, int decimals);
// `digits` significant digits in fixed notation: 0.19134 → "0.191", 1.4712 → "1.47", 123.4 → "123".
std::string format_significant(double value, int digits);
// Integer with thousands separators: 342737 → "342,737"; -1234 → "-1,234".
std::string format_count(int64_t value);
// Rounds, then format_count; "-" for NaN/inf.
std::string format_count(double value);
// 0.234 → "23 %" (decimals = 0) or "23.4 %" (decimals = 1); "-" for NaN.
std::string format_percent(double fraction, int decimals);
// 2.104 → "2.10×" (decimals = 2); "-" for NaN/inf.
std::string format_ratio(double ratio, int decimals);
// Shortest text that reads back to the same double (std::to_chars); "" for NaN.
std::string format_exact(double value);

// "0.191 ± 0.002": median step seconds with the half-width of its bootstrap interval (the noise
// the recommendation uses), or the standard deviation when no interval exists; "-" for NaN.
std::string format_step_seconds(const Summary& summary);

// Distinct precisions of the runs in first-seen order, joined by "/": "bf16" or "fp32/bf16".
std::string precisions_of(const std::vector<RunResult>& runs);

// One line describing what was measured (model, parameters, T, batch, device, precision, limit);
// the console and Markdown reporters open with it.
std::string context_line(const SweepResult& result);

enum class Align { kLeft, kRight };

struct Column {
  std::string header;
  Align align = Align::kRight;
};

// A plain-text table whose columns are padded to the widest cell (by display width). The last
// column is not padded, so lines carry no trailing spaces. Two spaces separate columns.
class TextTable {
 public:
  explicit TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}
  // `prefix`/`suffix` wrap the whole rendered line without counting toward widths (ANSI colour).
  void add_row(std::vector<std::string> cells, std::string prefix = "", std::string suffix = "");
  void render(std::ostream& out) const;

 private:
  struct Row {
    std::vector<std::string> cells;
    std::string prefix;
    std::string suffix;
  };
  std::string render_cells(const std::vector<std::string>& cells,
                           const std::vector<std::size_t>& widths) const;
  std::vector<Column> columns_;
  std::vector<Row> rows_;
};

}  // namespace accumbench::text
