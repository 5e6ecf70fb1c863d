// Reporters print results; they never measure (docs/ARCHITECTURE.md). One small interface, one
// class per format for a sweep, and the printers of the plan, verify and the model list; output
// lines are tested against expected text in tests/test_reports.cpp.
//
//   ConsoleReporter({/*color=*/false}).report(result, std::cout);
//   write_file_atomically("sweep.json", to_json(result));
//   SweepResult again = load_sweep_result("sweep.json");
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "accumbench/model_config.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/result.hpp"
#include "accumbench/units.hpp"
#include "accumbench/verify.hpp"

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

// One self-contained HTML file with inline SVG charts (src/report/html/).
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

// ---- the plan (src/report/plan_text.cpp) ----
// The table, the per-phase peaks, and (when memory_bytes > 0) whether it fits.
void print_plan(const MemoryPlan& plan, std::ostream& out);
// One line per split: label, predicted peak per phase, the phase that holds it, fits or not.
void print_split_summary(const std::vector<MemoryPlan>& plans, int64_t memory_bytes, std::ostream& out);
// One line per split: the analytic peak and calibrations[i]'s prediction for plans[i].
void print_calibrated(const std::vector<MemoryPlan>& plans, const std::vector<Calibration>& calibrations,
                      std::ostream& out);

// ---- verify (src/report/verify_text.cpp) ----
// The header, the tolerances, one line per split and the verdict.
void print_verify(const VerifyResult& result, std::ostream& out);

// ---- the presets (src/report/models_text.cpp) ----
// `accumbench models`: one line per preset with its shape and parameter count.
void print_models(const std::vector<ModelConfig>& models, std::ostream& out);

}  // namespace accumbench
