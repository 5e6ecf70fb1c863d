// Chart 2 of the HTML report: tokens per second per split and, where the device's peak FLOP/s is
// known, MFU per split in a second panel under it.
#include <algorithm>
#include <string>
#include <vector>

#include "report/format.hpp"
#include "report/html/charts.hpp"
#include "report/html/text.hpp"

namespace accumbench::html {
namespace {

// What one panel of single-colour columns shows.
struct SimplePanelSpec {
  std::string title;  // the axis's, with its unit
  std::string what;   // a value's tooltip, after the value: "tokens per second"
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

void draw_column(Svg& svg, const Panel& p, std::size_t i, const Slot& s,
                 const SimplePanelSpec& spec) {
  const double v = spec.value(*s.run);
  const double w = p.bar_width();
  if (!finite(v)) {
    svg.text(p.center(i), p.bottom() - 8, kDash,
             {{"text-anchor", "middle"}, {"class", "value-sub"}});
    return;
  }
  svg.open_group({{"class", "bar"}}, s.label + ": " + spec.label(v) + " " + spec.what);
  const double y = p.y(v / spec.unit.divisor);
  svg.rect(p.center(i) - w / 2, y, w, p.bottom() - y, spec.color, {{"rx", "1.5"}});
  svg.close_group();
  svg.text(p.center(i), y - 7, spec.label(v),
           {{"text-anchor", "middle"},
            {"class", std::string("value") + (s.recommended ? " recommended" : "")}});
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
  p.top = top;
  p.height = height;
  p.slots = slots.size();
  p.axis = nice_axis(max_value / spec.unit.divisor * 1.1);
  draw_panel_frame(svg, slots, p, spec.title);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].ok) {
      draw_column(svg, p, i, slots[i], spec);
    } else {
      draw_gap(svg, p, i, slots[i], pattern);
    }
  }
  draw_slot_labels(svg, slots, p);
  return p.bottom() + label_band(slots, p);
}

}  // namespace

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
      "tokens per second" + (rate.name.empty() ? "" : " (" + rate.name + ")"), "tokens per second", "#4e79a7", rate,
      tokens_per_second_of, label_rate};
  const SimplePanelSpec mfu{
      "MFU (% of device peak)", "MFU", "#59a14f", {1, "%"}, mfu_percent_of, label_percent};
  const bool with_mfu = any_mfu(slots);

  Svg svg(with_mfu ? "Tokens per second and MFU per split" : "Tokens per second per split");
  draw_hatch_pattern(svg, "hatch-tput");
  svg.text(kPlotLeft, 16, "Tokens per second", {{"class", "panel-title"}});
  double bottom = draw_simple_panel(svg, slots, 40, 240, tokens, "hatch-tput");
  if (with_mfu) {
    svg.text(kPlotLeft, bottom + 24, "Model FLOPs utilization", {{"class", "panel-title"}});
    bottom = draw_simple_panel(svg, slots, bottom + 48, 170, mfu, "hatch-tput");
  }
  return svg.finish(kChartWidth, bottom + 6);
}

}  // namespace accumbench::html
