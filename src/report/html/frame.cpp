// The chart frame of the HTML report (frame.hpp).
#include "report/html/frame.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "accumbench/decision.hpp"
#include "accumbench/statistics.hpp"
#include "accumbench/report.hpp"
#include "report/format.hpp"
#include "report/html/text.hpp"

namespace accumbench::html {


// ---------------------------------------------------------------------------------------------
// Units and axes

Unit time_unit(double max_seconds) {
  if (max_seconds >= 1.0) return {1.0, "s"};
  if (max_seconds >= 1e-3) return {1e-3, "ms"};
  return {1e-6, "\u00b5s"};
}

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

Axis nice_axis(double max_value, int target_ticks) {
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
// Slots

std::vector<Slot> make_slots(const SweepResult& result) {
  std::vector<Slot> slots;
  for (std::size_t i = 0; i < result.runs.size(); ++i) {
    Slot s;
    s.run = &result.runs[i];
    s.index = static_cast<int>(i);
    s.label = run_label(*s.run, result.runs);
    s.ok = s.run->status == RunStatus::kOk;
    s.recommended = result.recommendation.best_index == s.index;
    const auto& tied = result.recommendation.tied_indices;
    s.tied = std::find(tied.begin(), tied.end(), s.index) != tied.end();
    slots.push_back(std::move(s));
  }
  return slots;
}

bool phase_shown(const std::vector<Slot>& slots, int ph) {
  if (static_cast<Phase>(ph) != Phase::kAllReduce) return true;
  for (const Slot& s : slots) {
    if (s.run->config.world_size > 1) return true;
  }
  return false;
}

int64_t memory_limit(const SweepContext& c) {
  if (c.memory_limit_bytes > 0) return c.memory_limit_bytes;
  return c.device_memory_bytes > 0 ? c.device_memory_bytes : 0;
}

bool limit_within_scale(int64_t limit, double max_bytes) {
  return limit > 0 && static_cast<double>(limit) <= max_bytes * 1.6;
}

// ---------------------------------------------------------------------------------------------
// Legend

namespace {

constexpr double kLegendTop = 18;

// Calls `place` with each entry's position (the baseline of its label row); returns the height.
double lay_out_legend(const std::vector<LegendEntry>& entries,
                      const std::function<void(const LegendEntry&, double, double)>& place) {
  const double max_x = kChartWidth - kRightMargin;
  double x = kPlotLeft;
  double y = kLegendTop;
  for (const LegendEntry& e : entries) {
    const double w = 20 + text_width(e.label) + 20;  // symbol, label, gap
    if (x + w > max_x && x > kPlotLeft) {
      x = kPlotLeft;
      y += 20;
    }
    place(e, x, y);
    x += w;
  }
  return entries.empty() ? 0 : y - kLegendTop + 20;
}

void draw_legend_symbol(Svg& svg, const LegendEntry& e, double x, double y) {
  using Kind = LegendEntry::Kind;
  switch (e.kind) {
    case Kind::kSwatch:
      svg.rect(x, y - 10, 13, 13, e.color, {{"rx", "2"}});
      break;
    case Kind::kLine:
      svg.line(x, y - 3.5, x + 14, y - 3.5, e.color, 2);
      break;
    case Kind::kDashedLine:
      svg.line(x, y - 3.5, x + 14, y - 3.5, e.color, 2, {{"stroke-dasharray", "4 2"}});
      break;
    case Kind::kWhisker:
      svg.line(x + 7, y - 10, x + 7, y + 3, e.color, 1.3);
      svg.line(x + 3, y - 10, x + 11, y - 10, e.color, 1.3);
      svg.line(x + 3, y + 3, x + 11, y + 3, e.color, 1.3);
      break;
    case Kind::kMarker:
      svg.path("M" + num(x + 7) + ' ' + num(y - 9) + " l5 5.5 -5 5.5 -5 -5.5z",
               {{"fill", e.color}});
      break;
  }
}

}  // namespace

double legend_height(const std::vector<LegendEntry>& entries) {
  return lay_out_legend(entries, [](const LegendEntry&, double, double) {});
}

void draw_legend(Svg& svg, const std::vector<LegendEntry>& entries) {
  lay_out_legend(entries, [&](const LegendEntry& e, double x, double y) {
    draw_legend_symbol(svg, e, x, y);
    svg.text(x + 20, y + 1, e.label, {{"class", "legend"}});
  });
}

// ---------------------------------------------------------------------------------------------
// Panels

double Panel::y(double v) const {
  const double clamped = std::max(0.0, std::min(v, axis.top));
  return bottom() - height * clamped / axis.top;
}

double Panel::slot_width() const {
  return width / static_cast<double>(std::max<std::size_t>(1, slots));
}

double Panel::bar_width() const { return std::min(58.0, slot_width() * 0.62); }

namespace {

std::string slot_label(const Slot& s) { return s.recommended ? "\u2605 " + s.label : s.label; }

double widest_slot_label(const std::vector<Slot>& slots) {
  double widest = 0;
  for (const Slot& s : slots) widest = std::max(widest, text_width(slot_label(s)));
  return widest;
}

bool labels_rotated(const std::vector<Slot>& slots, const Panel& p) {
  return widest_slot_label(slots) + 8 > p.slot_width();
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

std::string rotation(double degrees, double x, double y) {
  return "rotate(" + num(degrees) + ' ' + num(x) + ' ' + num(y) + ")";
}

}  // namespace

double label_band(const std::vector<Slot>& slots, const Panel& p) {
  if (!labels_rotated(slots, p)) return 30;
  return 22 + widest_slot_label(slots) * 0.6;  // rotated by 35°: sin(35°) ≈ 0.57
}

void draw_value_axis(Svg& svg, const Panel& p, const std::string& title) {
  for (int k = 0;; ++k) {
    const double v = k * p.axis.step;
    if (v > p.axis.top * (1 + 1e-9)) break;
    const double y = p.y(v);
    svg.line(p.left, y, p.right(), y, k == 0 ? "#9aa1ab" : "#e7e9ee", 1);
    svg.text(p.left - 8, y + 4, text::format_fixed(v, p.axis.decimals),
             {{"text-anchor", "end"}, {"class", "tick"}});
  }
  const double cx = p.left - 56;
  const double cy = p.top + p.height / 2;
  svg.text(
      cx, cy, title,
      {{"text-anchor", "middle"}, {"class", "axis-title"}, {"transform", rotation(-90, cx, cy)}});
}

void draw_panel_frame(Svg& svg, const std::vector<Slot>& slots, const Panel& p,
                      const std::string& axis_title) {
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].recommended) continue;
    const double w = std::min(p.slot_width(), p.bar_width() + 24);
    svg.rect(p.center(i) - w / 2, p.top - 4, w, p.height + 4, "#eaf1fd", {{"rx", "6"}});
  }
  draw_value_axis(svg, p, axis_title);
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
               {{"text-anchor", "end"}, {"class", cls}, {"transform", rotation(-35, x + 4, y)}});
    } else {
      svg.text(x, y, slot_label(s), {{"text-anchor", "middle"}, {"class", cls}});
    }
  }
}

void draw_hatch_pattern(Svg& svg, const std::string& id) {
  svg.open("defs", {});
  svg.open("pattern", {{"id", id},
                       {"width", "7"},
                       {"height", "7"},
                       {"patternUnits", "userSpaceOnUse"},
                       {"patternTransform", "rotate(45)"}});
  svg.element("rect", {{"width", "7"}, {"height", "7"}, {"fill", "#fdf4f3"}});
  svg.line(0, 0, 0, 7, "#f1cdc8", 2.5);
  svg.close("pattern");
  svg.close("defs");
}

void draw_gap(Svg& svg, const Panel& p, std::size_t i, const Slot& s, const std::string& pattern) {
  const double w = p.bar_width();
  const double x = p.center(i) - w / 2;
  const double h = p.height * 0.42;
  svg.open_group({{"class", "gap"}}, gap_tooltip(s));
  svg.rect(x, p.bottom() - h, w, h, "url(#" + pattern + ")",
           {{"stroke", "#e3a59d"}, {"stroke-dasharray", "4 3"}, {"rx", "2"}});
  const auto words = gap_words(s.run->status);
  const double y = p.bottom() - h / 2 + (words.second.empty() ? 5 : -2);
  svg.text(p.center(i), y, words.first,
           {{"text-anchor", "middle"}, {"class", "gap-label"}, {"fill", kBad}});
  if (!words.second.empty()) {
    svg.text(p.center(i), y + 14, words.second,
             {{"text-anchor", "middle"}, {"class", "gap-sub"}, {"fill", kBad}});
  }
  svg.close_group();
}

std::string empty_chart(const std::string& message) {
  Svg svg(message);
  svg.text(kChartWidth / 2, 45, message, {{"text-anchor", "middle"}, {"class", "note-text"}});
  return svg.finish(kChartWidth, 80);
}

// ---------------------------------------------------------------------------------------------
// A legend over one column panel

ColumnChart start_column_chart(const std::string& label, const std::string& pattern,
                               const std::vector<LegendEntry>& legend,
                               const std::vector<Slot>& slots, Axis axis,
                               const std::string& axis_title) {
  ColumnChart chart{Svg(label), Panel{}, 0};
  Panel& p = chart.panel;
  p.top = 14 + legend_height(legend) + 26;
  p.height = 300;
  p.axis = axis;
  p.slots = slots.size();
  chart.height = p.bottom() + label_band(slots, p) + 6;
  draw_hatch_pattern(chart.svg, pattern);
  draw_legend(chart.svg, legend);
  draw_panel_frame(chart.svg, slots, p, axis_title);
  return chart;
}

std::string finish_column_chart(ColumnChart& chart, const std::vector<Slot>& slots) {
  draw_slot_labels(chart.svg, slots, chart.panel);
  return chart.svg.finish(kChartWidth, chart.height);
}

bool any_means(const std::vector<Slot>& slots) {
  return std::any_of(slots.begin(), slots.end(), [](const Slot& s) { return s.ok && steps_differ_in_size(*s.run); });
}

}  // namespace accumbench::html
