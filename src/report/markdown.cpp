// A GitHub-flavoured Markdown table for pasting into issues and READMEs. Like llama-bench, it
// shows only the columns that differ between runs, plus the measurements that always matter.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "accumbench/report.hpp"
#include "report/format.hpp"

namespace accumbench {

namespace {

// A "|" inside a cell would end the cell; newlines would end the row.
std::string markdown_cell(const std::string& value) {
  std::string escaped;
  for (char c : value) {
    if (c == '|') {
      escaped += "\\|";
    } else if (c == '\n' || c == '\r') {
      escaped += ' ';
    } else {
      escaped += c;
    }
  }
  return escaped;
}

struct MarkdownColumn {
  const char* header;
  bool right_aligned;
  // Shown when this returns true for the sweep; nullptr: always shown.
  std::function<bool(const std::vector<RunResult>&)> shown;
  std::function<std::string(const RunResult&)> value;
};

bool varies(const std::vector<RunResult>& runs,
            const std::function<std::string(const RunResult&)>& value) {
  for (const RunResult& run : runs) {
    if (value(run) != value(runs.front())) return true;
  }
  return false;
}

bool ok(const RunResult& run) { return run.status == RunStatus::kOk; }

std::string precision_of(const RunResult& r) { return r.config.precision; }
std::string fits_of(const RunResult& r) { return r.fits ? "yes" : "no"; }

const std::vector<MarkdownColumn>& markdown_columns() {
  static const std::vector<MarkdownColumn> kColumns = {
      {"split", false, nullptr, [](const RunResult& r) { return r.config.label(); }},
      // The label already spells out micro-batch, accumulation and the knobs; precision is the
      // one sweep dimension it leaves out.
      {"precision", false, [](const auto& runs) { return varies(runs, precision_of); },
       precision_of},
      {"step s", true, nullptr,
       [](const RunResult& r) { return ok(r) ? text::format_step_seconds(r.step_seconds) : "-"; }},
      {"tokens/s", true, nullptr,
       [](const RunResult& r) { return ok(r) ? text::format_count(r.tokens_per_second) : "-"; }},
      {"MFU", true,
       [](const auto& runs) {
         for (const RunResult& r : runs) {
           if (ok(r) && std::isfinite(r.mfu)) return true;
         }
         return false;
       },
       [](const RunResult& r) { return ok(r) ? text::format_percent(r.mfu, 1) : "-"; }},
      {"peak", true, nullptr,
       [](const RunResult& r) {
         return ok(r) || r.peak_allocated_bytes > 0 ? format_bytes(r.peak_allocated_bytes) : "-";
       }},
      {"predicted", true,
       [](const auto& runs) {
         for (const RunResult& r : runs) {
           if (r.predicted_peak_bytes >= 0) return true;
         }
         return false;
       },
       [](const RunResult& r) {
         return r.predicted_peak_bytes >= 0 ? format_bytes(r.predicted_peak_bytes) : "-";
       }},
      {"fits", false, [](const auto& runs) { return varies(runs, fits_of); }, fits_of},
      {"status", false,
       [](const auto& runs) {
         for (const RunResult& r : runs) {
           if (!ok(r)) return true;
         }
         return false;
       },
       [](const RunResult& r) {
         std::string status = run_status_name(r.status);
         if (!r.error.empty()) status += ": " + r.error;
         return status;
       }},
  };
  return kColumns;
}

}  // namespace

void MarkdownReporter::report(const SweepResult& result, std::ostream& out) const {
  std::vector<const MarkdownColumn*> shown;
  for (const MarkdownColumn& column : markdown_columns()) {
    if (!column.shown || (!result.runs.empty() && column.shown(result.runs))) {
      shown.push_back(&column);
    }
  }

  out << text::context_line(result) << "\n\n";
  std::string header = "|", rule = "|";
  for (const MarkdownColumn* column : shown) {
    header += std::string(" ") + column->header + " |";
    rule += column->right_aligned ? " ---: |" : " --- |";
  }
  out << header << '\n' << rule << '\n';
  for (const RunResult& run : result.runs) {
    out << '|';
    for (const MarkdownColumn* column : shown) {
      out << ' ' << markdown_cell(column->value(run)) << " |";
    }
    out << '\n';
  }

  const int best = result.recommendation.best_index;
  const bool have_best = best >= 0 && best < static_cast<int>(result.runs.size());
  out << "\n**Recommendation:** "
      << (have_best ? result.runs[best].config.label() : std::string("none")) << " \xE2\x80\x94 "
      << markdown_cell(result.recommendation.reason) << '\n';
}

}  // namespace accumbench
