// Reporters print a SweepResult; they never measure (STYLE.md). One small interface, one class
// per format; output lines are tested against expected text in tests/test_reports.cpp.
//
//   ConsoleReporter({/*color=*/false}).report(result, std::cout);
//   write_file_atomically("sweep.json", to_json(result));
//   SweepResult again = load_sweep_result("sweep.json");
#pragma once

#include <ostream>
#include <string>

#include "accumbench/result.hpp"

namespace accumbench {

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void report(const SweepResult& result, std::ostream& out) const = 0;
};

// One row per split: split, step s ± spread, data/fwd/bwd/opt/other, tokens/s, MFU, peak memory,
// fits, vs best; the recommendation below. ANSI colour only when `color` (the CLI passes isatty).
class ConsoleReporter : public Reporter {
 public:
  struct Options {
    bool color = false;
  };
  ConsoleReporter() = default;
  explicit ConsoleReporter(Options options) : options_(options) {}
  void report(const SweepResult& result, std::ostream& out) const override;

 private:
  Options options_;
};

class JsonReporter : public Reporter {
 public:
  void report(const SweepResult& result, std::ostream& out) const override;
};

class CsvReporter : public Reporter {
 public:
  void report(const SweepResult& result, std::ostream& out) const override;
};

// Shows only the columns that vary across runs (llama-bench).
class MarkdownReporter : public Reporter {
 public:
  void report(const SweepResult& result, std::ostream& out) const override;
};

// One self-contained HTML file with inline SVG charts (src/report/html.cpp).
class HtmlReporter : public Reporter {
 public:
  void report(const SweepResult& result, std::ostream& out) const override;
};

// Chrome Trace Event Format: one process per split, one slice per phase per micro-step, memory as
// counter events (src/report/chrome_trace.cpp).
class ChromeTraceReporter : public Reporter {
 public:
  void report(const SweepResult& result, std::ostream& out) const override;
};

std::string to_json(const SweepResult& result);
// Throws UserError naming the problem on broken JSON or a wrong schema version.
SweepResult sweep_result_from_json(const std::string& json_text, const std::string& origin);
SweepResult load_sweep_result(const std::string& path);

// Writes to PATH.tmp then renames, so a kill never leaves a half-written file.
// Throws UserError when the directory cannot be written.
void write_file_atomically(const std::string& path, const std::string& content);

// `accumbench compare a.json b.json`: side by side per split (matched by SplitConfig::key()),
// with the ratio b / a of median step time and of peak memory.
void print_comparison(const SweepResult& a, const SweepResult& b, std::ostream& out);

// Human-readable byte counts in GiB/MiB/KiB (1024-based): "2.98 GiB", "512.0 MiB".
std::string format_bytes(int64_t bytes);
// Parses "16GiB", "16 GiB", "512MiB", "16GB" (1000-based), "1.5G" (1024-based), plain bytes.
// Throws UserError with the accepted forms on anything else.
int64_t parse_bytes(const std::string& text);

}  // namespace accumbench
