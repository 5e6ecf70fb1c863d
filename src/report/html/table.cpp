// The table section of the HTML report (table.hpp).
#include "report/html/table.hpp"

#include <algorithm>
#include <iterator>

#include "accumbench/report.hpp"
#include "report/format.hpp"
#include "report/html/charts.hpp"
#include "report/html/text.hpp"

namespace accumbench::html {
namespace {

std::string cell(const std::string& content, const std::string& cls = "") {
  return "<td" + (cls.empty() ? "" : " class=\"" + cls + "\"") + ">" + html_escape(content) +
         "</td>";
}

std::string bytes_cell(int64_t bytes) { return cell(bytes >= 0 ? format_bytes(bytes) : kDash); }

std::string time_cell(double seconds, const Unit& t) {
  return cell(finite(seconds) ? text::format_significant(seconds / t.divisor, 4) : kDash);
}

std::vector<std::string> column_names(const std::vector<Slot>& slots) {
  std::vector<std::string> names = {"split", "status",  "median",  "min",
                                    "mean",  "std dev", "interval"};
  for (int ph = 0; ph < kPhaseCount; ++ph) {
    if (phase_shown(slots, ph)) names.push_back(phase_name(static_cast<Phase>(ph)));
  }
  for (const char* c : {"tokens/s", "samples/s", "TFLOP/s", "MFU", "peak allocated",
                        "peak reserved", "predicted", "predicted vs measured", "fits"}) {
    names.push_back(c);
  }
  return names;
}

// The columns from "median" up to "predicted": what a failed run's error takes the place of.
int measured_columns(const std::vector<std::string>& names) {
  const auto first = std::find(names.begin(), names.end(), "median");
  return static_cast<int>(std::distance(first, std::find(first, names.end(), "predicted")));
}

std::string head_row(const std::vector<std::string>& names) {
  std::string h = "<thead><tr>";
  for (const std::string& name : names) {
    h += (name == "status" || name == "fits" ? "<th class=\"text\">" : "<th>") + html_escape(name) +
         "</th>";
  }
  return h + "</tr></thead>";
}

std::string measured_cells(const std::vector<Slot>& slots, const RunResult& r, const Unit& t) {
  const Summary& st = r.step_seconds;
  std::string h = time_cell(st.median, t) + time_cell(st.min, t) + time_cell(st.mean, t) +
                  time_cell(st.stddev, t);
  h += cell(finite(st.ci_low) && finite(st.ci_high)
                ? text::format_significant(st.ci_low / t.divisor, 4) + " \u2013 " +
                      text::format_significant(st.ci_high / t.divisor, 4)
                : kDash);
  const StepBar bar = step_bar(r);
  for (int ph = 0; ph < kPhaseCount; ++ph) {
    if (!phase_shown(slots, ph)) continue;
    const bool other = static_cast<Phase>(ph) == Phase::kOther;
    h += time_cell(other ? bar.segments[ph] : r.phase_median_seconds[ph], t);
  }
  h += cell(text::format_count(r.tokens_per_second));
  h += cell(sig(r.samples_per_second, 4));
  h += cell(sig(r.achieved_tflops, 3));
  h += cell(format_mfu(r.mfu));
  h += bytes_cell(r.peak_allocated_bytes);
  h += bytes_cell(r.peak_reserved_bytes);
  return h;
}

std::string run_row(const std::vector<Slot>& slots, const Slot& s, const Unit& t,
                    int error_columns) {
  const RunResult& r = *s.run;
  const std::string cls = s.recommended ? "recommended" : (!s.ok ? "failed" : "");
  std::string h = cls.empty() ? "<tr>" : "<tr class=\"" + cls + "\">";
  h += "<td>" + html_escape(s.label);
  if (s.recommended)
    h += "<span class=\"badge\">best</span>";
  else if (s.tied)
    h += "<span class=\"badge tie\">tie</span>";
  h += "</td>";
  h += cell(run_status_name(r.status), s.ok ? "text status-ok" : "text status-bad");
  if (s.ok) {
    h += measured_cells(slots, r, t);
  } else {
    h += "<td class=\"error\" colspan=\"" + std::to_string(error_columns) + "\">" +
         html_escape(r.error.empty() ? "no error message was recorded" : r.error) + "</td>";
  }
  h += bytes_cell(r.predicted_peak_bytes);
  if (s.ok && r.predicted_peak_bytes >= 0 && r.peak_allocated_bytes > 0) {
    const double error =
        static_cast<double>(r.predicted_peak_bytes) / static_cast<double>(r.peak_allocated_bytes) -
        1;
    h += cell((error >= 0 ? "+" : "") + text::format_percent(error, 1));
  } else {
    h += cell(kDash);
  }
  h += cell(r.fits ? "yes" : "no", r.fits ? "text" : "text status-bad");
  return h + "</tr>";
}

}  // namespace

std::string table_section(const std::vector<Slot>& slots) {
  double max_median = 0;
  for (const Slot& s : slots) {
    if (s.ok && finite(s.run->step_seconds.median))
      max_median = std::max(max_median, s.run->step_seconds.median);
  }
  const Unit t = time_unit(max_median > 0 ? max_median : 1);
  const std::vector<std::string> names = column_names(slots);

  std::string h =
      "<section class=\"card table-card\"><h2>All numbers</h2><p class=\"note\">Times in " +
      t.name +
      " per optimizer step; phase columns are medians over the timed steps (other = step "
      "median minus the timed phases). Memory is 1024-based. A failed run shows its error "
      "in place of the measurements.</p>";
  h += "<div class=\"table-wrap\"><table id=\"results-table\">" + head_row(names) + "<tbody>";
  for (const Slot& s : slots) h += run_row(slots, s, t, measured_columns(names));
  h += "</tbody></table></div></section>\n";
  return h;
}

}  // namespace accumbench::html
