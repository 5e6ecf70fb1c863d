// HtmlReporter: one self-contained page a user can mail around. Inline CSS, inline SVG charts
// drawn here, no script that runs and no network reference (the only URL is the SVG namespace).
//
//   header + recommendation
//   charts  #chart-step-time  #chart-throughput  #chart-memory  #chart-timeline
//   the table of every number, the context block, the sweep as JSON (to_json) for tools
//
// Failed runs keep their slot in every chart as a labelled gap ("OOM") so a reader sees what is
// missing. Every text that came from outside (model, host, errors) goes through html_escape, and
// the embedded JSON through json_for_script, so a hostile name cannot close the <script>.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "accumbench/report.hpp"
#include "accumbench_report_css.hpp"  // kReportCss: src/report/html/report.css, generated
#include "accumbench/result.hpp"
#include "report/format.hpp"

namespace accumbench {
namespace {

// ---------------------------------------------------------------------------------------------
// Text

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// JSON inside <script> must never contain "</script" or "<!--". JSON syntax outside strings never
// uses '<', '>' or '&', and inside strings \u003c is the same character, so a textual replace is
// exact and the parsed data is unchanged.
std::string json_for_script(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

const char* const kDash = "\u2014";  // shown for a number that was not measured

bool finite(double v) { return std::isfinite(v); }

// SVG coordinates: two decimals are far below a device pixel; trailing zeros dropped.
std::string num(double v) {
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.2f", v);
  std::string s = buffer;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string sig(double v, int digits = 3) {
  return finite(v) ? text::format_significant(v, digits) : kDash;
}

// 0.238 → "238 ms", 1.47 → "1.47 s", 0.00085 → "850 µs".
std::string format_duration(double seconds) {
  if (!finite(seconds)) return kDash;
  const double a = std::fabs(seconds);
  if (a >= 1.0 || a == 0.0) return text::format_significant(seconds, 3) + " s";
  if (a >= 1e-3) return text::format_significant(seconds * 1e3, 3) + " ms";
  return text::format_significant(seconds * 1e6, 3) + " \u00b5s";
}

// 342737 → "343k", 1.5e6 → "1.50M".
std::string format_compact(double v) {
  if (!finite(v)) return kDash;
  const double a = std::fabs(v);
  if (a >= 1e9) return text::format_significant(v / 1e9, 3) + "G";
  if (a >= 1e6) return text::format_significant(v / 1e6, 3) + "M";
  if (a >= 1e3) return text::format_significant(v / 1e3, 3) + "k";
  return text::format_significant(v, 3);
}

std::string format_mfu(double mfu) { return finite(mfu) ? text::format_percent(mfu, 1) : kDash; }

// Rough advance width of `s` at font size 12 in a sans-serif face; lays out legends and labels.
double text_width(const std::string& s, double font_size = 12) {
  return static_cast<double>(text::display_width(s)) * font_size * 0.56;
}

// ---------------------------------------------------------------------------------------------
// Axes and units

struct Unit {
  double divisor = 1;
  std::string name;
};

Unit time_unit(double max_seconds) {
  if (max_seconds >= 1.0) return {1.0, "s"};
  if (max_seconds >= 1e-3) return {1e-3, "ms"};
  return {1e-6, "\u00b5s"};
}

// 1024-based, like format_bytes.
Unit byte_unit(double max_bytes) {
  if (max_bytes >= 1024.0 * 1024 * 1024) return {1024.0 * 1024 * 1024, "GiB"};
  if (max_bytes >= 1024.0 * 1024) return {1024.0 * 1024, "MiB"};
  if (max_bytes >= 1024.0) return {1024.0, "KiB"};
  return {1.0, "B"};
}

Unit rate_unit(double max_rate) {
  if (max_rate >= 1e6) return {1e6, "M"};
  if (max_rate >= 1e3) return {1e3, "k"};
  return {1.0, ""};
}

// A value axis from 0 with 1-2-2.5-5 steps (Heckbert, "Nice numbers for graph labels",
// Graphics Gems, 1990).
struct Axis {
  double top = 1;
  double step = 0.2;
  int decimals = 1;
};

Axis nice_axis(double max_value, int target_ticks = 5) {
  if (!(max_value > 0) || !finite(max_value)) max_value = 1;
  const double raw = max_value / target_ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normalized = raw / magnitude;
  double nice = 10;
  for (double candidate : {1.0, 2.0, 2.5, 5.0}) {
    if (normalized <= candidate + 1e-9) {
      nice = candidate;
      break;
    }
  }
  Axis axis;
  axis.step = nice * magnitude;
  axis.top = std::ceil(max_value / axis.step - 1e-9) * axis.step;
  // Decimals the tick labels need: step = nice · 10^e; 2.5 needs one more digit, 10 one fewer.
  const int e = static_cast<int>(std::floor(std::log10(magnitude) + 1e-9));
  axis.decimals = std::max(0, -e + (nice == 2.5 ? 1 : nice == 10 ? -1 : 0));
  return axis;
}

// ---------------------------------------------------------------------------------------------
// SVG writer

// Collects the elements; the size is given at the end, once the layout is known.
class Svg {
 public:
  explicit Svg(std::string label) : label_(std::move(label)) {}
  void raw(const std::string& s) { out_ += s; }
  void open_group(const std::string& attributes, const std::string& tooltip) {
    out_ += "<g " + attributes + "><title>" + html_escape(tooltip) + "</title>";
  }
  void close_group() { out_ += "</g>"; }
  void rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& extra = "") {
    out_ += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(std::max(0.0, w)) +
            "\" height=\"" + num(std::max(0.0, h)) + "\" fill=\"" + fill + "\"" +
            (extra.empty() ? "" : " " + extra) + "/>";
  }
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, double width,
            const std::string& extra = "") {
    out_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
            num(y2) + "\" stroke=\"" + stroke + "\" stroke-width=\"" + num(width) + "\"" +
            (extra.empty() ? "" : " " + extra) + "/>";
  }
  // `content` is plain text; it is escaped here.
  void text(double x, double y, const std::string& content, const std::string& extra = "") {
    out_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"" + (extra.empty() ? "" : " " + extra) +
            ">" + html_escape(content) + "</text>";
  }
  std::string finish(double width, double height) const {
    return "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + num(width) + ' ' +
           num(height) + "\" role=\"img\" aria-label=\"" + html_escape(label_) +
           "\" font-size=\"12\">" + out_ + "</svg>";
  }

 private:
  std::string label_;
  std::string out_;
};

// Diagonal hatch for the slot of a run that produced no numbers. Ids are per chart: all the
// SVGs share one document.
std::string hatch_pattern(const std::string& id) {
  return "<defs><pattern id=\"" + id +
         "\" width=\"7\" height=\"7\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect width=\"7\" height=\"7\" fill=\"#fdf4f3\"/>"
         "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"7\" stroke=\"#f1cdc8\" stroke-width=\"2.5\"/>"
         "</pattern></defs>";
}

struct LegendEntry {
  enum class Kind { kSwatch, kLine, kDashedLine, kWhisker, kMarker };
  std::string label;
  std::string color;
  Kind kind = Kind::kSwatch;
};

double legend_entry_width(const LegendEntry& e) { return 20 + text_width(e.label) + 20; }

// Lays the entries out left to right, wrapping at max_x; returns the height used.
double draw_legend(Svg* svg, double x0, double y0, double max_x,
                   const std::vector<LegendEntry>& entries) {
  double x = x0;
  double y = y0;
  for (const LegendEntry& e : entries) {
    const double w = legend_entry_width(e);
    if (x + w > max_x && x > x0) {
      x = x0;
      y += 20;
    }
    if (svg != nullptr) {
      using Kind = LegendEntry::Kind;
      switch (e.kind) {
        case Kind::kSwatch:
          svg->rect(x, y - 10, 13, 13, e.color, "rx=\"2\"");
          break;
        case Kind::kLine:
          svg->line(x, y - 3.5, x + 14, y - 3.5, e.color, 2);
          break;
        case Kind::kDashedLine:
          svg->line(x, y - 3.5, x + 14, y - 3.5, e.color, 2, "stroke-dasharray=\"4 2\"");
          break;
        case Kind::kWhisker:
          svg->line(x + 7, y - 10, x + 7, y + 3, e.color, 1.3);
          svg->line(x + 3, y - 10, x + 11, y - 10, e.color, 1.3);
          svg->line(x + 3, y + 3, x + 11, y + 3, e.color, 1.3);
          break;
        case Kind::kMarker:
          svg->raw("<path d=\"M" + num(x + 7) + ' ' + num(y - 9) +
                   " l5 5.5 -5 5.5 -5 -5.5z\" fill=\"" + e.color + "\"/>");
          break;
      }
      svg->text(x + 20, y + 1, e.label, "class=\"legend\"");
    }
    x += w;
  }
  return entries.empty() ? 0 : y - y0 + 20;
}

// ---------------------------------------------------------------------------------------------
// Shared chart pieces

// Tableau 10 (Tableau Software, 2016): distinct, colour-blind-aware, pleasant on white.
const char* const kPhaseColors[kPhaseCount] = {
    "#b07aa1",  // data
    "#edc948",  // h2d
    "#4e79a7",  // forward
    "#f28e2b",  // backward
    "#59a14f",  // optimizer
    "#bab0ac",  // other
    "#76b7b2",  // allreduce
};
const char* const kAccent = "#2563eb";
const char* const kBad = "#c0392b";
const char* const kInk = "#1f2430";
const char* const kMuted = "#5b6472";

struct Slot {
  const RunResult* run = nullptr;
  int index = 0;
  std::string label;
  bool ok = false;
  bool recommended = false;
  bool tied = false;
};

// The allreduce phase exists only with data parallel (world size > 1); without it, it is left
// out of legends, tooltips and the table rather than shown as zeros.
bool phase_shown(const std::vector<Slot>& slots, int ph) {
  if (static_cast<Phase>(ph) != Phase::kAllReduce) return true;
  for (const Slot& s : slots) {
    if (s.run->config.world_size > 1) return true;
  }
  return false;
}

std::vector<Slot> make_slots(const SweepResult& result) {
  std::vector<Slot> slots;
  for (std::size_t i = 0; i < result.runs.size(); ++i) {
    Slot s;
    s.run = &result.runs[i];
    s.index = static_cast<int>(i);
    s.label = s.run->config.label();
    s.ok = s.run->status == RunStatus::kOk;
    s.recommended = result.recommendation.best_index == s.index;
    const auto& tied = result.recommendation.tied_indices;
    s.tied = std::find(tied.begin(), tied.end(), s.index) != tied.end();
    slots.push_back(std::move(s));
  }
  return slots;
}

// The word a gap carries: "OOM", "OOM" + "predicted", "error".
std::pair<std::string, std::string> gap_words(RunStatus status) {
  switch (status) {
    case RunStatus::kOutOfMemory:
      return {"OOM", ""};
    case RunStatus::kPredictedOutOfMemory:
      return {"OOM", "predicted"};
    case RunStatus::kError:
      return {"error", ""};
    case RunStatus::kOk:
      break;
  }
  return {"", ""};
}

std::string gap_tooltip(const Slot& s) {
  std::string t = s.label + ": " + run_status_name(s.run->status);
  if (!s.run->error.empty()) t += " \u2014 " + s.run->error;
  return t;
}

// One panel of a column chart: a plot rectangle, a value axis from 0 and one slot per run.
struct Panel {
  double left = 76;
  double top = 0;
  double width = 0;
  double height = 0;
  Axis axis;
  std::size_t slots = 1;

  double bottom() const { return top + height; }
  double right() const { return left + width; }
  double y(double v) const {
    const double clamped = std::max(0.0, std::min(v, axis.top));
    return bottom() - height * clamped / axis.top;
  }
  double slot_width() const { return width / static_cast<double>(std::max<std::size_t>(1, slots)); }
  double center(std::size_t i) const {
    return left + slot_width() * (static_cast<double>(i) + 0.5);
  }
  double bar_width() const { return std::min(58.0, slot_width() * 0.62); }
};

constexpr double kChartWidth = 960;
constexpr double kRightMargin = 18;

std::string slot_label(const Slot& s) { return s.recommended ? "\u2605 " + s.label : s.label; }

bool labels_rotated(const std::vector<Slot>& slots, const Panel& p) {
  double widest = 0;
  for (const Slot& s : slots) widest = std::max(widest, text_width(slot_label(s)));
  return widest + 8 > p.slot_width();
}

// Height of the band under a panel that holds the split labels.
double label_band(const std::vector<Slot>& slots, const Panel& p) {
  if (!labels_rotated(slots, p)) return 30;
  double widest = 0;
  for (const Slot& s : slots) widest = std::max(widest, text_width(slot_label(s)));
  return 22 + widest * 0.6;  // rotated by 35°: sin(35°) ≈ 0.57
}

void draw_value_axis(Svg& svg, const Panel& p, const std::string& title) {
  for (int k = 0;; ++k) {
    const double v = k * p.axis.step;
    if (v > p.axis.top * (1 + 1e-9)) break;
    const double y = p.y(v);
    svg.line(p.left, y, p.right(), y, k == 0 ? "#9aa1ab" : "#e7e9ee", 1);
    svg.text(p.left - 8, y + 4, text::format_fixed(v, p.axis.decimals),
             "text-anchor=\"end\" class=\"tick\"");
  }
  const double cx = p.left - 56;
  const double cy = p.top + p.height / 2;
  svg.text(cx, cy, title,
           "text-anchor=\"middle\" class=\"axis-title\" transform=\"rotate(-90 " + num(cx) + ' ' +
               num(cy) + ")\"");
}

void draw_slot_labels(Svg& svg, const std::vector<Slot>& slots, const Panel& p) {
  const bool rotated = labels_rotated(slots, p);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    std::string cls = "split-label";
    if (s.recommended) cls += " recommended";
    if (!s.ok) cls += " failed";
    const double x = p.center(i);
    const double y = p.bottom() + 18;
    if (rotated) {
      svg.text(x + 4, y, slot_label(s),
               "text-anchor=\"end\" class=\"" + cls + "\" transform=\"rotate(-35 " + num(x + 4) +
                   ' ' + num(y) + ")\"");
    } else {
      svg.text(x, y, slot_label(s), "text-anchor=\"middle\" class=\"" + cls + "\"");
    }
  }
}

// The recommended split's column gets a soft band behind it.
void draw_recommended_band(Svg& svg, const std::vector<Slot>& slots, const Panel& p) {
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].recommended) continue;
    const double w = std::min(p.slot_width(), p.bar_width() + 24);
    svg.rect(p.center(i) - w / 2, p.top - 4, w, p.height + 4, "#eaf1fd", "rx=\"6\"");
  }
}

// A run without numbers keeps its column: hatched, outlined, and labelled with its status.
void draw_gap(Svg& svg, const Panel& p, std::size_t i, const Slot& s, const std::string& pattern) {
  const double w = p.bar_width();
  const double x = p.center(i) - w / 2;
  const double h = p.height * 0.42;
  svg.open_group("class=\"gap\"", gap_tooltip(s));
  svg.rect(x, p.bottom() - h, w, h, "url(#" + pattern + ")",
           "stroke=\"#e3a59d\" stroke-dasharray=\"4 3\" rx=\"2\"");
  const auto words = gap_words(s.run->status);
  const double y = p.bottom() - h / 2 + (words.second.empty() ? 5 : -2);
  svg.text(p.center(i), y, words.first,
           "text-anchor=\"middle\" class=\"gap-label\" fill=\"" + std::string(kBad) + "\"");
  if (!words.second.empty()) {
    svg.text(p.center(i), y + 14, words.second,
             "text-anchor=\"middle\" class=\"gap-sub\" fill=\"" + std::string(kBad) + "\"");
  }
  svg.close_group();
}

std::string empty_chart(const std::string& message) {
  Svg svg(message);
  svg.text(kChartWidth / 2, 45, message, "text-anchor=\"middle\" class=\"note-text\"");
  return svg.finish(kChartWidth, 80);
}

// ---------------------------------------------------------------------------------------------
// Chart 1: step time per split, stacked by phase, with the spread as a whisker.

struct StepBar {
  PhaseSeconds segments{};  // data … optimizer from the phase medians; other = the remainder
  double total = 0;
  double whisker_low = kNotMeasured;
  double whisker_high = kNotMeasured;
  bool whisker_is_interval = false;  // bootstrap interval of the median, else min..max of steps
};

StepBar step_bar(const RunResult& run) {
  StepBar bar;
  double timed = 0;
  for (int ph = 0; ph < kPhaseCount; ++ph) {
    if (static_cast<Phase>(ph) == Phase::kOther) continue;
    const double v = run.phase_median_seconds[ph];
    bar.segments[ph] = finite(v) && v > 0 ? v : 0;
    timed += bar.segments[ph];
  }
  const double median = run.step_seconds.median;
  // Medians of parts need not add up to the median of the whole; "other" absorbs the rest and a
  // bar never ends below the measured median.
  bar.segments[static_cast<int>(Phase::kOther)] =
      finite(median) ? std::max(0.0, median - timed) : 0;
  bar.total = std::max(timed, finite(median) ? median : 0.0);

  const Summary& s = run.step_seconds;
  if (finite(s.ci_low) && finite(s.ci_high)) {
    bar.whisker_low = s.ci_low;
    bar.whisker_high = s.ci_high;
    bar.whisker_is_interval = true;
  } else if (!run.steps.empty()) {
    bar.whisker_low = bar.whisker_high = run.steps.front().step_seconds;
    for (const StepSample& step : run.steps) {
      bar.whisker_low = std::min(bar.whisker_low, step.step_seconds);
      bar.whisker_high = std::max(bar.whisker_high, step.step_seconds);
    }
  } else if (finite(s.min)) {
    bar.whisker_low = s.min;
    bar.whisker_high = finite(median) ? std::max(median, s.min) : s.min;
  }
  return bar;
}

double fastest_median(const std::vector<Slot>& slots) {
  double best = kNotMeasured;
  for (const Slot& s : slots) {
    const double m = s.run->step_seconds.median;
    if (s.ok && finite(m) && !(m >= best)) best = m;
  }
  return best;
}

std::string step_time_chart(const std::vector<Slot>& slots) {
  if (slots.empty()) return empty_chart("No runs in this sweep");
  std::vector<StepBar> bars;
  double max_seconds = 0;
  for (const Slot& s : slots) {
    bars.push_back(s.ok ? step_bar(*s.run) : StepBar{});
    if (!s.ok) continue;
    max_seconds = std::max(max_seconds, bars.back().total);
    if (finite(bars.back().whisker_high))
      max_seconds = std::max(max_seconds, bars.back().whisker_high);
  }
  const Unit unit = time_unit(max_seconds);

  std::vector<LegendEntry> legend;
  for (int ph = 0; ph < kPhaseCount; ++ph) {
    if (phase_shown(slots, ph)) legend.push_back({phase_name(static_cast<Phase>(ph)), kPhaseColors[ph]});
  }
  legend.push_back({"spread", kInk, LegendEntry::Kind::kWhisker});

  Panel p;
  p.width = kChartWidth - p.left - kRightMargin;
  p.top = 14 + draw_legend(nullptr, p.left, 18, p.right(), legend) + 26;
  p.height = 300;
  p.axis = nice_axis(max_seconds / unit.divisor * 1.12);
  p.slots = slots.size();
  const double height = p.bottom() + label_band(slots, p) + 6;

  Svg svg("Median step time per split, stacked by phase");
  svg.raw(hatch_pattern("hatch-step"));
  draw_legend(&svg, p.left, 18, p.right(), legend);
  draw_recommended_band(svg, slots, p);
  draw_value_axis(svg, p, "step time (" + unit.name + ")");

  const double fastest = fastest_median(slots);
  const bool roomy = p.slot_width() >= 56;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    if (!s.ok) {
      draw_gap(svg, p, i, s, "hatch-step");
      continue;
    }
    const RunResult& run = *s.run;
    const StepBar& bar = bars[i];
    std::string tooltip = s.label + ": median " + format_duration(run.step_seconds.median) +
                          " over " + std::to_string(run.step_seconds.count) + " timed steps";
    for (int ph = 0; ph < kPhaseCount; ++ph) {
      if (!phase_shown(slots, ph)) continue;
      tooltip += std::string("\n") + phase_name(static_cast<Phase>(ph)) + " " +
                 format_duration(bar.segments[ph]);
    }
    if (finite(bar.whisker_low)) {
      tooltip += std::string("\n") +
                 (bar.whisker_is_interval ? "interval of the median " : "min\u2013max ") +
                 format_duration(bar.whisker_low) + " \u2013 " + format_duration(bar.whisker_high);
    }
    svg.open_group("class=\"bar\"", tooltip);
    const double w = p.bar_width();
    const double x = p.center(i) - w / 2;
    double acc = 0;
    for (int ph = 0; ph < kPhaseCount; ++ph) {
      const double v = bar.segments[ph] / unit.divisor;
      if (v <= 0) continue;
      const double y_top = p.y(acc + v);
      svg.rect(x, y_top, w, p.y(acc) - y_top, kPhaseColors[ph]);
      acc += v;
    }
    double label_y = p.y(bar.total / unit.divisor);
    if (finite(bar.whisker_low)) {
      const double y_low = p.y(bar.whisker_low / unit.divisor);
      const double y_high = p.y(bar.whisker_high / unit.divisor);
      const double cx = p.center(i);
      svg.line(cx, y_low, cx, y_high, kInk, 1.3, "class=\"whisker\"");
      svg.line(cx - 6, y_low, cx + 6, y_low, kInk, 1.3);
      svg.line(cx - 6, y_high, cx + 6, y_high, kInk, 1.3);
      label_y = std::min(label_y, y_high);
    }
    svg.close_group();

    const double median = run.step_seconds.median;
    std::string relative;
    if (finite(median) && finite(fastest) && roomy) {
      relative = median <= fastest
                     ? "fastest"
                     : "+" + text::format_significant((median / fastest - 1) * 100, 2) + "%";
    }
    const double value_y = label_y - (relative.empty() ? 7 : 21);
    svg.text(p.center(i), value_y, format_duration(median),
             "text-anchor=\"middle\" class=\"value" +
                 std::string(s.recommended ? " recommended" : "") + "\"");
    if (!relative.empty()) {
      svg.text(p.center(i), value_y + 14, relative, "text-anchor=\"middle\" class=\"value-sub\"");
    }
  }
  draw_slot_labels(svg, slots, p);
  return svg.finish(kChartWidth, height);
}

// ---------------------------------------------------------------------------------------------
// Chart 2: tokens/s per split, and MFU per split where the device peak is known.

struct SimplePanelSpec {
  std::string title;
  std::string color;
  Unit unit;
  double (*value)(const RunResult&);
  std::string (*label)(double);
};

double tokens_per_second_of(const RunResult& r) { return r.tokens_per_second; }
double mfu_percent_of(const RunResult& r) { return r.mfu * 100; }
std::string label_rate(double v) { return format_compact(v); }
std::string label_percent(double v) {
  return finite(v) ? text::format_significant(v, 3) + "%" : kDash;
}

// Draws one column panel at `top`; returns its bottom including the split labels.
double draw_simple_panel(Svg& svg, const std::vector<Slot>& slots, double top, double height,
                         const SimplePanelSpec& spec, const std::string& pattern) {
  double max_value = 0;
  for (const Slot& s : slots) {
    const double v = s.ok ? spec.value(*s.run) : kNotMeasured;
    if (finite(v)) max_value = std::max(max_value, v);
  }
  Panel p;
  p.width = kChartWidth - p.left - kRightMargin;
  p.top = top;
  p.height = height;
  p.slots = slots.size();
  p.axis = nice_axis(max_value / spec.unit.divisor * 1.1);
  draw_recommended_band(svg, slots, p);
  draw_value_axis(svg, p, spec.title);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    if (!s.ok) {
      draw_gap(svg, p, i, s, pattern);
      continue;
    }
    const double v = spec.value(*s.run);
    const double w = p.bar_width();
    if (!finite(v)) {
      svg.text(p.center(i), p.bottom() - 8, kDash, "text-anchor=\"middle\" class=\"value-sub\"");
      continue;
    }
    svg.open_group("class=\"bar\"", s.label + ": " + spec.label(v) + " " + spec.title);
    const double y = p.y(v / spec.unit.divisor);
    svg.rect(p.center(i) - w / 2, y, w, p.bottom() - y, spec.color, "rx=\"1.5\"");
    svg.close_group();
    svg.text(p.center(i), y - 7, spec.label(v),
             "text-anchor=\"middle\" class=\"value" +
                 std::string(s.recommended ? " recommended" : "") + "\"");
  }
  draw_slot_labels(svg, slots, p);
  return p.bottom() + label_band(slots, p);
}

bool any_mfu(const std::vector<Slot>& slots) {
  for (const Slot& s : slots) {
    if (s.ok && finite(s.run->mfu)) return true;
  }
  return false;
}

std::string throughput_chart(const std::vector<Slot>& slots) {
  if (slots.empty()) return empty_chart("No runs in this sweep");
  double max_rate = 0;
  for (const Slot& s : slots) {
    if (s.ok && finite(s.run->tokens_per_second))
      max_rate = std::max(max_rate, s.run->tokens_per_second);
  }
  const Unit rate = rate_unit(max_rate);
  const SimplePanelSpec tokens{
      "tokens per second" + (rate.name.empty() ? "" : " (" + rate.name + ")"), "#4e79a7", rate,
      tokens_per_second_of, label_rate};
  const SimplePanelSpec mfu{
      "MFU (% of device peak)", "#59a14f", {1, "%"}, mfu_percent_of, label_percent};
  const bool with_mfu = any_mfu(slots);

  Svg svg(with_mfu ? "Tokens per second and MFU per split" : "Tokens per second per split");
  svg.raw(hatch_pattern("hatch-tput"));
  svg.text(76, 16, "Tokens per second", "class=\"panel-title\"");
  double bottom = draw_simple_panel(svg, slots, 40, 240, tokens, "hatch-tput");
  if (with_mfu) {
    svg.text(76, bottom + 24, "Model FLOPs utilization", "class=\"panel-title\"");
    bottom = draw_simple_panel(svg, slots, bottom + 48, 170, mfu, "hatch-tput");
  }
  return svg.finish(kChartWidth, bottom + 6);
}

// ---------------------------------------------------------------------------------------------
// Chart 3: peak memory per split, stacked by category, with the limit and the prediction.

struct MemorySegment {
  const char* name;
  const char* color;
};
constexpr int kMemorySegments = 6;
const MemorySegment kMemory[kMemorySegments] = {
    {"parameters", "#4e79a7"},  {"gradients", "#f28e2b"},       {"optimizer state", "#b07aa1"},
    {"activations", "#76b7b2"}, {"allocator slack", "#d3cdc6"}, {"not broken down", "#9c9c9c"},
};

std::array<double, kMemorySegments> memory_segments(const RunResult& run) {
  const MemoryBreakdown& b = run.peak_breakdown;
  std::array<double, kMemorySegments> v{
      static_cast<double>(b.parameters_bytes),      static_cast<double>(b.gradients_bytes),
      static_cast<double>(b.optimizer_state_bytes), static_cast<double>(b.activations_bytes),
      static_cast<double>(b.slack_bytes),           0};
  double allocated_parts = 0;
  for (int k = 0; k < 4; ++k) {
    v[k] = std::max(0.0, v[k]);
    allocated_parts += v[k];
  }
  v[4] = std::max(0.0, v[4]);
  // Whatever of the measured peak the breakdown does not explain is shown, not hidden, unless it
  // is under 1 % of the peak (a sliver nobody could read; the tooltip has the exact parts).
  const double unexplained = static_cast<double>(run.peak_allocated_bytes) - allocated_parts;
  v[5] = unexplained >= 0.01 * static_cast<double>(run.peak_allocated_bytes) ? unexplained : 0;
  return v;
}

int64_t memory_limit(const SweepContext& c) {
  if (c.memory_limit_bytes > 0) return c.memory_limit_bytes;
  return c.device_memory_bytes > 0 ? c.device_memory_bytes : 0;
}

// A limit far above the data (a 140 GiB device, a 40 MiB model) would flatten the chart; it is
// drawn only when within reach, and otherwise named in the legend.
bool limit_within_scale(int64_t limit, double max_bytes) {
  return limit > 0 && static_cast<double>(limit) <= max_bytes * 1.6;
}

std::string memory_chart(const SweepResult& result, const std::vector<Slot>& slots) {
  if (slots.empty()) return empty_chart("No runs in this sweep");
  std::vector<std::array<double, kMemorySegments>> segments;
  std::array<bool, kMemorySegments> used{};
  bool any_prediction = false;
  double max_bytes = 0;
  for (const Slot& s : slots) {
    segments.push_back(s.ok ? memory_segments(*s.run) : std::array<double, kMemorySegments>{});
    double total = 0;
    for (int k = 0; k < kMemorySegments; ++k) {
      total += segments.back()[k];
      used[k] = used[k] || segments.back()[k] > 0;
    }
    max_bytes = std::max(max_bytes, total);
    if (s.run->predicted_peak_bytes >= 0) {
      any_prediction = true;
      max_bytes = std::max(max_bytes, static_cast<double>(s.run->predicted_peak_bytes));
    }
  }
  const int64_t limit = memory_limit(result.context);
  const bool limit_on_scale = limit_within_scale(limit, max_bytes);
  const double scale_bytes =
      limit_on_scale ? std::max(max_bytes, static_cast<double>(limit)) : max_bytes;
  const Unit unit = byte_unit(scale_bytes);

  std::vector<LegendEntry> legend;
  for (int k = 0; k < kMemorySegments; ++k) {
    if (used[k]) legend.push_back({kMemory[k].name, kMemory[k].color});
  }
  if (any_prediction) legend.push_back({"predicted peak (plan)", kInk, LegendEntry::Kind::kMarker});
  if (limit > 0) {
    legend.push_back(
        {std::string(result.context.memory_limit_bytes > 0 ? "memory limit" : "device memory") +
             " " + format_bytes(limit) + (limit_on_scale ? "" : " (off scale)"),
         kBad, LegendEntry::Kind::kDashedLine});
  }

  Panel p;
  p.width = kChartWidth - p.left - kRightMargin;
  p.top = 14 + draw_legend(nullptr, p.left, 18, p.right(), legend) + 26;
  p.height = 300;
  p.axis = nice_axis(scale_bytes / unit.divisor * 1.1);
  p.slots = slots.size();
  const double height = p.bottom() + label_band(slots, p) + 6;

  Svg svg("Peak memory per split, stacked by category");
  svg.raw(hatch_pattern("hatch-mem"));
  draw_legend(&svg, p.left, 18, p.right(), legend);
  draw_recommended_band(svg, slots, p);
  draw_value_axis(svg, p, "peak memory (" + unit.name + ")");

  for (std::size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    const RunResult& run = *s.run;
    const double w = p.bar_width();
    const double x = p.center(i) - w / 2;
    double top_y = p.bottom();
    if (!s.ok) {
      draw_gap(svg, p, i, s, "hatch-mem");
      top_y = p.bottom() - p.height * 0.42;
    } else {
      std::string tooltip = s.label + ": peak allocated " + format_bytes(run.peak_allocated_bytes) +
                            ", reserved " + format_bytes(run.peak_reserved_bytes);
      for (int k = 0; k < kMemorySegments; ++k) {
        if (segments[i][k] > 0) {
          tooltip += std::string("\n") + kMemory[k].name + " " +
                     format_bytes(static_cast<int64_t>(segments[i][k]));
        }
      }
      svg.open_group("class=\"bar\"", tooltip);
      double acc = 0;
      for (int k = 0; k < kMemorySegments; ++k) {
        const double v = segments[i][k] / unit.divisor;
        if (v <= 0) continue;
        const double y = p.y(acc + v);
        svg.rect(x, y, w, p.y(acc) - y, kMemory[k].color);
        acc += v;
      }
      svg.close_group();
      top_y = p.y(acc);
    }
    if (run.predicted_peak_bytes >= 0) {
      const double y = p.y(static_cast<double>(run.predicted_peak_bytes) / unit.divisor);
      svg.open_group("class=\"predicted\"",
                     s.label + ": predicted peak " + format_bytes(run.predicted_peak_bytes));
      svg.line(x - 3, y, x + w + 3, y, kInk, 1.5, "stroke-dasharray=\"3 2\"");
      svg.raw("<path d=\"M" + num(x + w + 3) + ' ' + num(y - 5.5) +
              " l5.5 5.5 -5.5 5.5 -5.5 -5.5z\" fill=\"" + kInk + "\"/>");
      svg.close_group();
      top_y = std::min(top_y, y);
    }
    if (s.ok) {
      std::string cls = "value";
      if (s.recommended) cls += " recommended";
      if (!run.fits) cls += " bad";
      svg.text(p.center(i), top_y - 9,
               format_bytes(run.peak_allocated_bytes) + (run.fits ? "" : " \u2717"),
               "text-anchor=\"middle\" class=\"" + cls + "\"");
    }
  }
  if (limit > 0 && limit_on_scale) {
    const double y = p.y(static_cast<double>(limit) / unit.divisor);
    svg.line(p.left, y, p.right(), y, kBad, 1.6, "stroke-dasharray=\"6 4\" class=\"limit-line\"");
    svg.text(p.right() - 4, y - 6, "limit " + format_bytes(limit),
             "text-anchor=\"end\" class=\"limit-label\" fill=\"" + std::string(kBad) + "\"");
  }
  draw_slot_labels(svg, slots, p);
  return svg.finish(kChartWidth, height);
}

// ---------------------------------------------------------------------------------------------
// Chart 4: allocated memory through one optimizer step, phase by phase, micro-step by micro-step.

struct TimelinePick {
  int index = -1;
  std::vector<std::string> roles;
};

// The recommended split and the two extremes of micro-batch size, each once.
std::vector<TimelinePick> timeline_picks(const SweepResult& result) {
  std::vector<TimelinePick> picks;
  const auto add = [&](int index, const std::string& role) {
    if (index < 0) return;
    for (TimelinePick& p : picks) {
      if (p.index == index) {
        p.roles.push_back(role);
        return;
      }
    }
    picks.push_back({index, {role}});
  };
  const auto usable = [&](int i) {
    const RunResult& r = result.runs[static_cast<std::size_t>(i)];
    return r.status == RunStatus::kOk && !r.timeline.empty();
  };
  int smallest = -1;
  int largest = -1;
  for (int i = 0; i < static_cast<int>(result.runs.size()); ++i) {
    if (!usable(i)) continue;
    const int64_t mb = result.runs[static_cast<std::size_t>(i)].config.micro_batch;
    if (smallest < 0 || mb < result.runs[static_cast<std::size_t>(smallest)].config.micro_batch)
      smallest = i;
    if (largest < 0 || mb > result.runs[static_cast<std::size_t>(largest)].config.micro_batch)
      largest = i;
  }
  const int best = result.recommendation.best_index;
  if (best >= 0 && best < static_cast<int>(result.runs.size()) && usable(best))
    add(best, "recommended");
  add(smallest, "smallest micro-batch");
  add(largest, "largest micro-batch");
  std::stable_sort(picks.begin(), picks.end(), [&](const TimelinePick& a, const TimelinePick& b) {
    return result.runs[static_cast<std::size_t>(a.index)].config.micro_batch <
           result.runs[static_cast<std::size_t>(b.index)].config.micro_batch;
  });
  return picks;
}

double span_end(const PhaseSpan& s) { return s.start_seconds + std::max(0.0, s.duration_seconds); }

double timeline_max_bytes(const RunResult& run) {
  double m = 0;
  for (const PhaseSpan& s : run.timeline) {
    m = std::max({m, static_cast<double>(s.peak_bytes), static_cast<double>(s.bytes_at_start),
                  static_cast<double>(s.bytes_at_end)});
  }
  return m;
}

constexpr double kTimelinePlotHeight = 150;
constexpr double kTimelinePanelHeight = 34 + kTimelinePlotHeight + 34;  // title, plot, time axis
constexpr double kTimelinePanelGap = 24;

struct Window {  // one micro-step (or the optimizer, micro_step -1) in time
  int micro_step;
  double start, end;
};

// Separators between micro-steps and their numbers above the plot. With many micro-steps only
// every stride-th is numbered (a power of two: accumulation counts usually are one), and
// separators are drawn only where they stay apart.
void draw_windows(Svg& svg, const Panel& p, const std::vector<PhaseSpan>& spans,
                  const std::function<double(double)>& x_of) {
  std::vector<Window> windows;
  for (const PhaseSpan& s : spans) {
    if (!windows.empty() && windows.back().micro_step == s.micro_step) {
      windows.back().end = std::max(windows.back().end, span_end(s));
    } else {
      windows.push_back({s.micro_step, s.start_seconds, span_end(s)});
    }
  }
  double narrowest = p.width;
  int last_micro_step = 0;
  for (const Window& w : windows) {
    if (w.micro_step < 0) continue;
    narrowest = std::min(narrowest, x_of(w.end) - x_of(w.start));
    last_micro_step = std::max(last_micro_step, w.micro_step + 1);
  }
  const double number_width = text_width(std::to_string(last_micro_step), 10) + 8;
  int stride = 1;
  while (stride * std::max(narrowest, 0.01) < number_width) stride *= 2;
  const bool every_separator = narrowest >= 8;

  for (std::size_t w = 0; w < windows.size(); ++w) {
    const double x0 = x_of(windows[w].start);
    const double x1 = x_of(windows[w].end);
    const bool optimizer = windows[w].micro_step < 0;
    const int number = windows[w].micro_step + 1;
    const bool numbered = !optimizer && number % stride == 0;
    if (w > 0 && (every_separator || numbered || optimizer)) {
      svg.line(x0, p.top - 2, x0, p.bottom(), "#c5cad3", 1, "stroke-dasharray=\"2 3\"");
    }
    if (optimizer) {
      const std::string name = x1 - x0 > 70 ? "optimizer" : "opt";
      if (x1 - x0 >= text_width(name, 10) + 4) {
        svg.text((x0 + x1) / 2, p.top + 10, name, "text-anchor=\"middle\" class=\"window-label\"");
      }
    } else if (numbered) {
      const bool spelled = stride == 1 && narrowest > 90;
      svg.text(stride == 1 ? (x0 + x1) / 2 : x1, p.top + 10,
               (spelled ? "micro-step " : "") + std::to_string(number),
               std::string("text-anchor=\"") + (stride == 1 ? "middle" : "end") +
                   "\" class=\"window-label\"");
    }
  }
}

// One run's panel at `top`: title, memory axis, time axis, micro-step windows, the untimed rest
// of the step, a block per phase up to its peak and the line through the boundary values.
void draw_timeline_panel(Svg& svg, const RunResult& run, const std::string& roles, bool recommended,
                         int64_t limit, double top) {
  std::vector<PhaseSpan> spans = run.timeline;
  std::stable_sort(spans.begin(), spans.end(), [](const PhaseSpan& a, const PhaseSpan& b) {
    return a.start_seconds < b.start_seconds;
  });
  double last_end = 0;
  int64_t peak = 0;
  for (const PhaseSpan& s : spans) {
    last_end = std::max(last_end, span_end(s));
    peak = std::max(peak, s.peak_bytes);
  }
  const double step_end =
      run.steps.empty() ? last_end : std::max(last_end, run.steps.back().step_seconds);
  const Unit t_unit = time_unit(step_end);
  const Axis t_axis = nice_axis(step_end / t_unit.divisor, 6);
  const double max_bytes = timeline_max_bytes(run);
  const bool show_limit = limit_within_scale(limit, max_bytes);
  const double scale_bytes =
      show_limit ? std::max(max_bytes, static_cast<double>(limit)) : max_bytes;
  const Unit unit = byte_unit(scale_bytes);

  Panel p;
  p.top = top + 34;
  p.width = kChartWidth - p.left - kRightMargin;
  p.height = kTimelinePlotHeight;
  p.axis = nice_axis(scale_bytes / unit.divisor * 1.08, 4);
  const auto x_of = [&](double seconds) {
    return p.left + p.width * (seconds / t_unit.divisor) / t_axis.top;
  };
  const auto y_of = [&](int64_t bytes) { return p.y(static_cast<double>(bytes) / unit.divisor); };

  const std::string label = run.config.label();
  svg.text(p.left, top + 16, label,
           std::string("class=\"panel-title") + (recommended ? " recommended" : "") + "\"");
  svg.text(p.left + text_width(label, 14) + 12, top + 16,
           roles + " \u00b7 step " + format_duration(step_end) + " \u00b7 peak " +
               format_bytes(peak) + " \u00b7 " + std::to_string(run.config.accum_steps) +
               " micro-step" + (run.config.accum_steps == 1 ? "" : "s"),
           "class=\"panel-sub\"");
  draw_value_axis(svg, p, "allocated (" + unit.name + ")");

  for (int k = 0;; ++k) {  // time axis; the unit rides on the last tick
    const double v = k * t_axis.step;
    if (v > t_axis.top * (1 + 1e-9)) break;
    const double x = p.left + p.width * v / t_axis.top;
    const bool last = (k + 1) * t_axis.step > t_axis.top * (1 + 1e-9);
    svg.line(x, p.bottom(), x, p.bottom() + 4, "#9aa1ab", 1);
    svg.text(x, p.bottom() + 17,
             text::format_fixed(v, t_axis.decimals) + (last ? " " + t_unit.name : ""),
             std::string("text-anchor=\"") +
                 (last     ? "end"
                  : k == 0 ? "start"
                           : "middle") +
                 "\" class=\"tick\"");
  }
  draw_windows(svg, p, spans, x_of);

  // Wall time after the last recorded phase: the step's untimed "other".
  if (step_end > last_end) {
    const double x0 = x_of(last_end);
    const double x1 = x_of(step_end);
    svg.rect(x0, p.top, x1 - x0, p.height, kPhaseColors[static_cast<int>(Phase::kOther)],
             "fill-opacity=\"0.16\"");
    if (x1 - x0 >= text_width("other", 10) + 4) {
      svg.text((x0 + x1) / 2, p.top + 10, "other", "text-anchor=\"middle\" class=\"window-label\"");
    }
    svg.line(x1, p.top - 2, x1, p.bottom(), "#9aa1ab", 1);
  }

  std::string path;
  for (const PhaseSpan& s : spans) {
    const double x0 = x_of(s.start_seconds);
    const double x1 = std::max(x_of(span_end(s)), x0 + 1.2);  // a 1 µs phase stays visible
    const double y = y_of(s.peak_bytes);
    const int ph = std::max(0, std::min(kPhaseCount - 1, static_cast<int>(s.phase)));
    const std::string where =
        s.phase == Phase::kAllReduce ? "after the micro-steps"
        : s.micro_step < 0           ? "optimizer step"
                                     : "micro-step " + std::to_string(s.micro_step + 1);
    svg.open_group("class=\"span\"", where + " \u00b7 " + phase_name(s.phase) + " " +
                                         format_duration(s.duration_seconds) + "\nallocated " +
                                         format_bytes(s.bytes_at_start) + " \u2192 " +
                                         format_bytes(s.bytes_at_end) + ", peak " +
                                         format_bytes(s.peak_bytes));
    svg.rect(x0, y, x1 - x0, p.bottom() - y, kPhaseColors[ph], "fill-opacity=\"0.8\"");
    svg.close_group();
    path += (path.empty() ? "M" : " L") + num(x0) + ' ' + num(y_of(s.bytes_at_start));
    path += " L" + num(x1) + ' ' + num(y_of(s.bytes_at_end));
  }
  svg.raw("<path d=\"" + path + "\" fill=\"none\" stroke=\"" + kInk +
          "\" stroke-width=\"1.6\" stroke-linejoin=\"round\" class=\"boundary-line\"/>");
  if (show_limit) {
    svg.line(p.left, y_of(limit), p.right(), y_of(limit), kBad, 1.4,
             "stroke-dasharray=\"6 4\" class=\"limit-line\"");
  }
}

// Each panel has its own memory scale: on a shared one the smallest micro-batch would be a flat
// line, and its shape (gradients held across the micro-steps) is the point of this chart. The
// peak-memory chart compares the peaks on one scale.
std::string timeline_chart(const SweepResult& result) {
  const std::vector<TimelinePick> picks = timeline_picks(result);
  if (picks.empty()) return empty_chart("No memory timeline was recorded (no successful run)");
  const int64_t limit = memory_limit(result.context);

  std::array<bool, kPhaseCount> phases_seen{};
  bool any_limit = false;
  for (const TimelinePick& pick : picks) {
    const RunResult& run = result.runs[static_cast<std::size_t>(pick.index)];
    for (const PhaseSpan& s : run.timeline) {
      const int ph = static_cast<int>(s.phase);
      if (ph >= 0 && ph < kPhaseCount) phases_seen[ph] = true;
    }
    any_limit = any_limit || limit_within_scale(limit, timeline_max_bytes(run));
  }
  std::vector<LegendEntry> legend;
  for (int ph = 0; ph < kPhaseCount; ++ph) {
    if (!phases_seen[ph]) continue;
    legend.push_back(
        {std::string("peak in ") + phase_name(static_cast<Phase>(ph)), kPhaseColors[ph]});
  }
  legend.push_back({"allocated at phase boundaries", kInk, LegendEntry::Kind::kLine});
  if (any_limit) {
    legend.push_back({"limit " + format_bytes(limit), kBad, LegendEntry::Kind::kDashedLine});
  }

  const double left = Panel{}.left;
  const double right = kChartWidth - kRightMargin;
  double top = 14 + draw_legend(nullptr, left, 18, right, legend) + 10;
  const double height = top + static_cast<double>(picks.size()) * kTimelinePanelHeight +
                        static_cast<double>(picks.size() - 1) * kTimelinePanelGap + 6;

  Svg svg("Allocated memory through one optimizer step");
  draw_legend(&svg, left, 18, right, legend);
  for (const TimelinePick& pick : picks) {
    std::string roles;
    for (const std::string& r : pick.roles) roles += (roles.empty() ? "" : ", ") + r;
    draw_timeline_panel(svg, result.runs[static_cast<std::size_t>(pick.index)], roles,
                        result.recommendation.best_index == pick.index, limit, top);
    top += kTimelinePanelHeight + kTimelinePanelGap;
  }
  return svg.finish(kChartWidth, height);
}

// ---------------------------------------------------------------------------------------------
// Page sections

std::string title_line(const SweepContext& c) {
  std::string t = c.model.empty() ? "unnamed model" : c.model;
  t += " \u00b7 seq len " + std::to_string(c.seq_len) + " \u00b7 batch " + std::to_string(c.batch);
  if (!c.device_name.empty() || !c.device.empty())
    t += " \u00b7 " + (c.device_name.empty() ? c.device : c.device_name);
  if (c.world_size > 1) t += " \u00d7 " + std::to_string(c.world_size) + " ranks";
  return t;
}

std::string kpi(const std::string& key, const std::string& value) {
  return "<div class=\"kpi\"><div class=\"k\">" + html_escape(key) + "</div><div class=\"v\">" +
         html_escape(value) + "</div></div>";
}

std::string recommendation_section(const SweepResult& result, const std::vector<Slot>& slots) {
  const Recommendation& rec = result.recommendation;
  const bool has_best =
      rec.best_index >= 0 && rec.best_index < static_cast<int>(result.runs.size());
  std::string h = std::string("<section class=\"card recommendation") + (has_best ? "" : " none") +
                  "\" id=\"recommendation\">";
  if (!has_best) {
    h += "<div class=\"rec-kicker\">No recommendation</div><div class=\"rec-label\">No split "
         "completed</div>";
    h += "<p class=\"rec-reason\">" +
         html_escape(rec.reason.empty() ? "Every configuration failed; see the table below."
                                        : rec.reason) +
         "</p>";
    return h + "</section>\n";
  }
  const RunResult& best = result.runs[static_cast<std::size_t>(rec.best_index)];
  h += "<div class=\"rec-kicker\">Recommended split (micro-batch \u00d7 accumulation steps)</div>";
  h += "<div class=\"rec-label\">" + html_escape(best.config.label()) + "</div>";
  if (!rec.reason.empty()) h += "<p class=\"rec-reason\">" + html_escape(rec.reason) + "</p>";

  std::string ties;
  for (int i : rec.tied_indices) {
    if (i == rec.best_index || i < 0 || i >= static_cast<int>(result.runs.size())) continue;
    ties += (ties.empty() ? "" : ", ") + result.runs[static_cast<std::size_t>(i)].config.label();
  }
  if (!ties.empty()) {
    h += "<p class=\"rec-ties\">Within the measurement noise of the fastest: " + html_escape(ties) +
         " (the lower peak memory wins a tie).</p>";
  }

  h += "<div class=\"kpis\">";
  h += kpi("median step", format_duration(best.step_seconds.median));
  h += kpi("tokens / s", format_compact(best.tokens_per_second));
  if (finite(best.mfu)) h += kpi("MFU", format_mfu(best.mfu));
  const int64_t limit = memory_limit(result.context);
  h += kpi("peak memory", format_bytes(best.peak_allocated_bytes) +
                              (limit > 0 ? " of " + format_bytes(limit) : ""));
  double slowest = kNotMeasured;
  for (const Slot& s : slots) {
    const double m = s.run->step_seconds.median;
    if (s.ok && finite(m) && !(m <= slowest)) slowest = m;
  }
  const double median = best.step_seconds.median;
  if (finite(slowest) && finite(median) && median > 0 && slowest > median * 1.0005) {
    h += kpi("vs slowest split", text::format_ratio(slowest / median, 2) + " faster");
  }
  h += kpi("timed steps per split", std::to_string(best.step_seconds.count));
  h += "</div></section>\n";
  return h;
}

std::string chart_section(const std::string& id, const std::string& title, const std::string& note,
                          const std::string& svg) {
  return "<section class=\"card\"><h2>" + html_escape(title) + "</h2><p class=\"note\">" +
         html_escape(note) + "</p><figure class=\"chart\" id=\"" + id + "\">" + svg +
         "</figure></section>\n";
}

std::string cell(const std::string& content, const std::string& cls = "") {
  return "<td" + (cls.empty() ? "" : " class=\"" + cls + "\"") + ">" + html_escape(content) +
         "</td>";
}

std::string bytes_cell(int64_t bytes) { return cell(bytes >= 0 ? format_bytes(bytes) : kDash); }

std::string table_section(const std::vector<Slot>& slots) {
  int phase_columns = 0;
  for (int ph = 0; ph < kPhaseCount; ++ph) phase_columns += phase_shown(slots, ph) ? 1 : 0;
  // Columns from "median" to "peak reserved": a failed run's error spans them.
  const int measured_columns = 5 + phase_columns + 6;
  double max_median = 0;
  for (const Slot& s : slots) {
    if (s.ok && finite(s.run->step_seconds.median))
      max_median = std::max(max_median, s.run->step_seconds.median);
  }
  const Unit t = time_unit(max_median > 0 ? max_median : 1);
  const auto time_cell = [&](double seconds) {
    return cell(finite(seconds) ? text::format_significant(seconds / t.divisor, 4) : kDash);
  };

  std::string h =
      "<section class=\"card table-card\"><h2>All numbers</h2><p class=\"note\">Times in " +
      t.name +
      " per optimizer step; phase columns are medians over the timed steps (other = step "
      "median minus the timed phases). Memory is 1024-based. A failed run shows its error "
      "in place of the measurements.</p>";
  h += "<div class=\"table-wrap\"><table id=\"results-table\"><thead><tr>";
  std::vector<std::string> headers = {"split", "status",  "median",  "min",
                                      "mean",  "std dev", "interval"};
  for (int ph = 0; ph < kPhaseCount; ++ph) {
    if (phase_shown(slots, ph)) headers.push_back(phase_name(static_cast<Phase>(ph)));
  }
  for (const char* c : {"tokens/s", "samples/s", "TFLOP/s", "MFU", "peak allocated",
                        "peak reserved", "predicted", "predicted vs measured", "fits"}) {
    headers.push_back(c);
  }
  for (const std::string& name : headers) {
    h += (name == "status" || name == "fits" ? "<th class=\"text\">" : "<th>") + html_escape(name) +
         "</th>";
  }
  h += "</tr></thead><tbody>";

  for (const Slot& s : slots) {
    const RunResult& r = *s.run;
    std::string cls = s.recommended ? "recommended" : (!s.ok ? "failed" : "");
    h += cls.empty() ? "<tr>" : "<tr class=\"" + cls + "\">";
    h += "<td>" + html_escape(s.label);
    if (s.recommended)
      h += "<span class=\"badge\">best</span>";
    else if (s.tied)
      h += "<span class=\"badge tie\">tie</span>";
    h += "</td>";
    h += cell(run_status_name(r.status), s.ok ? "text status-ok" : "text status-bad");
    if (!s.ok) {
      // A failed run has no measurements: its error takes their place.
      h += "<td class=\"error\" colspan=\"" + std::to_string(measured_columns) + "\">" +
           html_escape(r.error.empty() ? "no error message was recorded" : r.error) + "</td>";
    } else {
      const Summary& st = r.step_seconds;
      h += time_cell(st.median) + time_cell(st.min) + time_cell(st.mean) + time_cell(st.stddev);
      h += cell(finite(st.ci_low) && finite(st.ci_high)
                    ? text::format_significant(st.ci_low / t.divisor, 4) + " \u2013 " +
                          text::format_significant(st.ci_high / t.divisor, 4)
                    : kDash);
      const StepBar bar = step_bar(r);
      for (int ph = 0; ph < kPhaseCount; ++ph) {
        if (!phase_shown(slots, ph)) continue;
        const bool other = static_cast<Phase>(ph) == Phase::kOther;
        h += time_cell(other ? bar.segments[ph] : r.phase_median_seconds[ph]);
      }
      h += cell(text::format_count(r.tokens_per_second));
      h += cell(sig(r.samples_per_second, 4));
      h += cell(sig(r.achieved_tflops, 3));
      h += cell(format_mfu(r.mfu));
      h += bytes_cell(r.peak_allocated_bytes);
      h += bytes_cell(r.peak_reserved_bytes);
    }
    h += bytes_cell(r.predicted_peak_bytes);
    if (s.ok && r.predicted_peak_bytes >= 0 && r.peak_allocated_bytes > 0) {
      const double error = static_cast<double>(r.predicted_peak_bytes) /
                               static_cast<double>(r.peak_allocated_bytes) -
                           1;
      h += cell((error >= 0 ? "+" : "") + text::format_percent(error, 1));
    } else {
      h += cell(kDash);
    }
    h += cell(r.fits ? "yes" : "no", r.fits ? "text" : "text status-bad");
    h += "</tr>";
  }
  h += "</tbody></table></div></section>\n";
  return h;
}

std::string context_entry(const std::string& key, const std::string& value) {
  return "<dt>" + html_escape(key) + "</dt><dd>" + html_escape(value.empty() ? kDash : value) +
         "</dd>";
}

std::string bytes_with_unit(int64_t bytes, const std::string& zero_means) {
  if (bytes <= 0) return std::to_string(bytes) + " (" + zero_means + ")";
  return text::format_count(bytes) + " B (" + format_bytes(bytes) + ")";
}

std::string context_section(const SweepResult& result) {
  const SweepContext& c = result.context;
  std::string h =
      "<section class=\"card context-card\" id=\"context\"><h2>Context</h2><p class=\"note\">"
      "Everything needed to reproduce and interpret these numbers.</p><dl class=\"context\">";
  h += context_entry("json_schema_version", std::to_string(c.json_schema_version));
  h += context_entry("date", c.date);
  h += context_entry("host", c.host);
  h += context_entry("device", c.device);
  h += context_entry("device_name", c.device_name);
  h += context_entry("device_memory_bytes", bytes_with_unit(c.device_memory_bytes, "unknown"));
  h += context_entry("driver", c.driver);
  h += context_entry("libtorch_version", c.libtorch_version);
  h += context_entry("build_type", c.build_type);
  h += context_entry("git_commit", c.git_commit);
  h += context_entry("threads", std::to_string(c.threads));
  h += context_entry("model", c.model);
  h += context_entry("parameters", text::format_count(c.parameters));
  h += context_entry("seq_len", std::to_string(c.seq_len));
  h += context_entry("batch", std::to_string(c.batch) + " sequences");
  h += context_entry("flops_per_token", text::format_count(c.flops_per_token));
  h += context_entry("peak_tflops", finite(c.peak_tflops)
                                        ? text::format_significant(c.peak_tflops, 4)
                                        : "unknown (no MFU)");
  h += context_entry("memory_limit_bytes", bytes_with_unit(c.memory_limit_bytes, "unlimited"));
  h += context_entry("world_size", c.world_size > 1 ? std::to_string(c.world_size) + " ranks (" +
                                                          c.distributed_backend + "; rank 0's times and memory)"
                                                    : "1 (one process)");
  h += "</dl><h3>Options</h3>";
  if (c.options.empty()) {
    h += "<p class=\"note\">none recorded</p>";
  } else {
    h += "<dl class=\"context options\">";
    for (const auto& [name, value] : c.options) h += context_entry(name, value);
    h += "</dl>";
  }
  return h + "</section>\n";
}

}  // namespace

void HtmlReporter::report(const SweepResult& result, std::ostream& out) const {
  const SweepContext& c = result.context;
  const std::vector<Slot> slots = make_slots(result);

  std::string steps_note =
      "Median seconds per optimizer step, split into phases (medians over the timed "
      "steps). Whiskers: bootstrap interval of the median, or min\u2013max of the timed "
      "steps where no interval was computed.";
  std::string throughput_note = "Non-ignored target tokens per second of wall time.";
  throughput_note += any_mfu(slots)
                         ? " MFU = achieved model FLOP/s \u00f7 device peak (" +
                               text::format_significant(c.peak_tflops, 4) + " TFLOP/s)."
                         : " MFU is not shown: the peak FLOP/s of this device is unknown.";
  const int64_t limit = memory_limit(c);
  std::string memory_note =
      "Peak allocated bytes during a timed step, split by what held them at the peak.";
  if (limit > 0) {
    memory_note += std::string(c.memory_limit_bytes > 0 ? " Dashed line: the memory limit "
                                                        : " Dashed line: device memory ") +
                   format_bytes(limit) + ".";
  }
  memory_note += " Diamonds: the memory plan's prediction.";

  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += "<meta name=\"generator\" content=\"accumbench\">\n";
  page += "<title>accumbench \u2014 " + html_escape(title_line(c)) + "</title>\n";
  page += "<style>\n" + std::string(html::kReportCss) + "</style>\n</head>\n<body>\n<main>\n";
  page +=
      "<header><h1>accumbench \u00b7 " + html_escape(c.model.empty() ? "sweep" : c.model) + "</h1>";
  page += "<p class=\"subtitle\">" + html_escape(title_line(c)) +
          (c.date.empty() ? "" : " \u00b7 " + html_escape(c.date)) + "</p></header>\n";
  page += recommendation_section(result, slots);
  page +=
      chart_section("chart-step-time", "Step time by phase", steps_note, step_time_chart(slots));
  page += chart_section("chart-throughput", "Throughput", throughput_note, throughput_chart(slots));
  page += chart_section("chart-memory", "Peak memory", memory_note, memory_chart(result, slots));
  page +=
      chart_section("chart-timeline", "Memory through one optimizer step",
                    "Allocated bytes across the last timed step, phase by phase: each block is the "
                    "peak inside that phase, the line joins the values at the phase boundaries. "
                    "Each panel has its own memory scale.",
                    timeline_chart(result));
  page += table_section(slots);
  page += context_section(result);
  page += "<footer>Generated by accumbench \u00b7 JSON schema v" +
          std::to_string(c.json_schema_version) +
          " \u00b7 the data of this page is embedded below as JSON (#accumbench-data)</footer>\n";
  page += "</main>\n<script type=\"application/json\" id=\"accumbench-data\">" +
          json_for_script(to_json(result)) + "</script>\n</body>\n</html>\n";
  out << page;
}

}  // namespace accumbench
