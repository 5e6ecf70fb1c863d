// The column table: every column of a sweep's results defined once (id, headers, CSV name, kind
// of value, when it is shown, how its value is read), and read by every printer: the console,
// Markdown, CSV, the HTML table and `compare` (llama-bench's get_fields()/get_values()). Adding a
// column is adding one entry to columns() in columns.cpp.
//
//   for (const ColumnDef* c : shown_columns(View::kConsole, result.runs)) { ... c->header ... }
//   std::string cell = c->cell(run, TableContext::of(result));   // "0.191 ± 0.002"
//   std::string raw = c->raw(run);                               // CSV: "0.19134"
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "accumbench/result.hpp"
#include "accumbench/units.hpp"

namespace accumbench::report {

enum class View { kConsole, kMarkdown, kHtml, kCsv };

// When a column appears in a human table (console, Markdown, HTML). A rule other than kAlways
// hides a column that would say nothing on this sweep.
enum class Shown {
  kNever,
  kAlways,
  kWhenVaries,        // its cells differ between runs (precision in a precision sweep)
  kWhenAnyFinite,     // some finished run has a number (MFU needs a device peak)
  kWhenAnyPositive,   // some finished run spent time in it (h2d is CUDA-only)
  kWhenPredicted,     // some run has a planned peak
  kWhenDataParallel,  // world size > 1 (the allreduce phase)
  kWhenAnyFailed,     // some run did not finish (status and error)
  kWhenPadded,        // some finished run computed padding (--padding, variable lengths)
  kWhenInRounds,      // some run was timed in interleaved rounds (it has a decision)
  kWhenLimitOrVaries,  // a --memory-limit was given, or its cells differ between runs
};

// What a cell needs beyond its run: the recommended run, the fastest ("vs fastest"), whether a
// memory limit was given ("fits"), and the HTML table's time unit.
struct TableContext {
  const RunResult* best = nullptr;
  const RunResult* fastest = nullptr;  // the decided fastest, else the fitting run with the lowest step time
  bool memory_limit = false;           // --memory-limit given: "fits" says yes or no, else "-"
  // The decision on each run (the "decided" column): a run's verdict is found by its place in runs.
  const std::vector<RunResult>* runs = nullptr;
  const Decision* decision = nullptr;
  std::string verdict(const RunResult& run) const;  // "fastest", "slower", "tie", "undecided" or "-"
  // Slower beyond doubt over the rounds both ran (paired means), though "vs fastest", median over
  // median, reads 1.00× or less: under drift the two disagree, and the "decided" cell marks it
  // ("slower*", explained by the legend).
  bool slower_against_its_median(const RunResult& run) const;
  double time_divisor = 1.0;  // seconds per unit of the HTML table's times
  // The runs differ in packing (--packing's list): "vs fastest" compares the time per real token,
  // as the decision does (compared_per_token), since their steps train other amounts of data.
  bool per_token = false;
  // --framework-overhead as the decisions added it to every micro-step (the context's): "vs fastest"
  // adds it too, so that the column compares what "decided" weighed.
  double framework_seconds_per_micro_step = 0;
  // What "vs fastest" compares of a run: its step time (typical_step_seconds: the median, or the
  // mean of steps of many sizes) with the framework's time of its micro-steps, or that per real token.
  double compared_seconds(const RunResult& run) const;
  static TableContext of(const SweepResult& result);
};

// What the HTML table shows for a number that was not measured.
inline constexpr char kHtmlDash[] = "\u2014";

struct ColumnDef {
  std::string id;           // stable name, used by compare and tests
  std::string header;       // console and Markdown header
  std::string html_header;  // the HTML table's header ("" : not in it)
  std::string csv;          // CSV header ("" : not in the CSV)
  text::Align align = text::Align::kRight;
  Shown console = Shown::kNever;
  Shown markdown = Shown::kNever;
  Shown html = Shown::kNever;
  // A run that did not finish has no measurements: "-" in tables, an empty CSV field, and the
  // HTML table's error cell spans these columns.
  bool measured = false;
  // The value read from a run: a number where the column has one (the "shown" rules use it).
  std::function<double(const RunResult&)> number;
  std::function<std::string(const RunResult&, const TableContext&)> cell;  // console, Markdown
  std::function<std::string(const RunResult&, const TableContext&)> html_cell;  // HTML (default: cell)
  // The HTML cell's class: "text" for words, with "status-bad" where the cell reads as a problem.
  std::function<std::string(const RunResult&)> html_class;
  std::function<std::string(const RunResult&)> raw;  // CSV, exact
  // CSV, exact, for a value that depends on the other runs ("vs fastest", "decided"); before raw.
  std::function<std::string(const RunResult&, const TableContext&)> raw_in_context;
};

// Every column, in table order.
const std::vector<ColumnDef>& columns();
const ColumnDef& column(const std::string& id);  // throws std::out_of_range on an unknown id

// Whether a view shows `column` for these runs (CSV: whenever it has a CSV name); `context` is the
// table's (TableContext::of), as a column shown "when it varies" is judged by its cells.
bool visible_in(const ColumnDef& column, View view, const std::vector<RunResult>& runs, const TableContext& context);

// The columns a view shows for these runs, in table order (CSV: every column with a CSV name).
std::vector<const ColumnDef*> shown_columns(View view, const std::vector<RunResult>& runs, const TableContext& context);

// The text of one cell in a view: "-" for a measured column of a run that did not finish.
std::string cell_text(const ColumnDef& column, View view, const RunResult& run, const TableContext& context);

// One line under a table that spells out every abbreviation the split labels use on these runs
// (SplitConfig::label), and the shown "fits" and "vs fastest" columns.
std::string legend(const std::vector<RunResult>& runs, const TableContext& context,
                   const std::vector<const ColumnDef*>& shown);

}  // namespace accumbench::report
