// Chart 1 of the HTML report: median step time per split (the mean of steps of many sizes), stacked by phase, with the spread as a
// whisker and the distance to the fastest split over each column.
#include <algorithm>
#include <string>
#include <vector>

#include "accumbench/statistics.hpp"
#include "report/format.hpp"
#include "report/html/charts.hpp"
#include "report/html/text.hpp"

namespace accumbench::html {

StepBar step_bar(const RunResult& run) {
  StepBar bar;
  double sum = 0;
  // Steps of many sizes draw their means (typical_step_seconds), as the table reads them.
  const bool means = steps_differ_in_size(run);
  const PhaseSeconds phases = typical_phase_seconds(run);
  for (int ph = 0; ph < kPhaseCount; ++ph) {
    const double v = phases[ph];
    bar.medians[ph] = finite(v) && v > 0 ? v : 0;
    sum += bar.medians[ph];
  }
  // Medians of parts need not add up to the median of the whole: the bar draws each phase's
  // share of their sum at the step's median, rather than inventing an "other" for the gap.
  const double median = typical_step_seconds(run);
  const double scale = finite(median) && sum > 0 ? median / sum : 1.0;
  for (int ph = 0; ph < kPhaseCount; ++ph) bar.segments[ph] = bar.medians[ph] * scale;
  bar.total = finite(median) ? median : sum;

  const Summary& s = run.step_seconds;
  const double low = means ? run.mean_seconds.low : s.ci_low;
  const double high = means ? run.mean_seconds.high : s.ci_high;
  bar.means = means;
  if (finite(low) && finite(high)) {
    bar.whisker_low = low;
    bar.whisker_high = high;
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

namespace {

std::string bar_tooltip(const std::vector<Slot>& slots, const Slot& s, const StepBar& bar) {
  const RunResult& run = *s.run;
  std::string tooltip = s.label + (bar.means ? ": mean " : ": median ") + format_duration(bar.total) +
                        " over " + std::to_string(run.step_seconds.count) + " timed steps";
  for (const PhaseInfo& info : phase_table()) {  // timeline order
    const int ph = static_cast<int>(info.phase);
    if (!phase_shown(slots, ph)) continue;
    tooltip += std::string("\n") + phase_name(static_cast<Phase>(ph)) + " " +
               format_duration(bar.medians[ph]);
  }
  if (finite(bar.whisker_low)) {
    tooltip += std::string("\n") +
               (bar.whisker_is_interval ? (bar.means ? "interval of the mean " : "interval of the median ")
                                        : "min\u2013max ") +
               format_duration(bar.whisker_low) + " \u2013 " + format_duration(bar.whisker_high);
  }
  return tooltip;
}

// The stacked phases and the whisker of column `i`; returns the y its value label sits above.
double draw_bar(Svg& svg, const Panel& p, std::size_t i, const StepBar& bar, const Unit& unit) {
  const double w = p.bar_width();
  const double x = p.center(i) - w / 2;
  double acc = 0;
  for (const PhaseInfo& info : phase_table()) {  // timeline order
    const int ph = static_cast<int>(info.phase);
    const double v = bar.segments[ph] / unit.divisor;
    if (v <= 0) continue;
    const double y_top = p.y(acc + v);
    svg.rect(x, y_top, w, p.y(acc) - y_top, phase_colour(ph));
    acc += v;
  }
  double label_y = p.y(bar.total / unit.divisor);
  if (finite(bar.whisker_low)) {
    const double y_low = p.y(bar.whisker_low / unit.divisor);
    const double y_high = p.y(bar.whisker_high / unit.divisor);
    const double cx = p.center(i);
    svg.line(cx, y_low, cx, y_high, kInk, 1.3, {{"class", "whisker"}});
    svg.line(cx - 6, y_low, cx + 6, y_low, kInk, 1.3);
    svg.line(cx - 6, y_high, cx + 6, y_high, kInk, 1.3);
    label_y = std::min(label_y, y_high);
  }
  return label_y;
}

// The median over the column, and under it "fastest" (the decided fastest split, the table's) or
// its distance from it, "+26%" ("-3%" for a split whose own median is lower: the decision ranks
// the rounds' paired means), where the columns are wide enough; per real token where the table
// compares so, and with the framework's time where --framework-overhead added it (the table's
// "vs fastest").
void draw_value(Svg& svg, const Panel& p, std::size_t i, const Slot& s, double label_y,
                const report::TableContext& table) {
  const double median = typical_step_seconds(*s.run);
  const double compared = table.compared_seconds(*s.run);
  const double fastest = table.fastest != nullptr ? table.compared_seconds(*table.fastest) : kNotMeasured;
  std::string relative;
  if (finite(compared) && finite(fastest) && fastest > 0 && p.slot_width() >= 56) {
    const double percent = (compared / fastest - 1) * 100;
    relative = s.run == table.fastest ? "fastest"
               : percent >= 0         ? "+" + text::format_significant(percent, 2) + "%"
                                      : "\u2212" + text::format_significant(-percent, 2) + "%";
  }
  const double value_y = label_y - (relative.empty() ? 7 : 21);
  svg.text(p.center(i), value_y, format_duration(median),
           {{"text-anchor", "middle"},
            {"class", std::string("value") + (s.recommended ? " recommended" : "")}});
  if (!relative.empty()) {
    svg.text(p.center(i), value_y + 14, relative,
             {{"text-anchor", "middle"}, {"class", "value-sub"}});
  }
}

std::vector<LegendEntry> step_legend(const std::vector<Slot>& slots) {
  std::vector<LegendEntry> legend;
  for (const PhaseInfo& info : phase_table()) {  // timeline order
    const int ph = static_cast<int>(info.phase);
    if (phase_shown(slots, ph))
      legend.push_back({phase_name(static_cast<Phase>(ph)), phase_colour(ph)});
  }
  legend.push_back({"spread", kInk, LegendEntry::Kind::kWhisker});
  return legend;
}

}  // namespace

std::string step_time_chart(const std::vector<Slot>& slots, const report::TableContext& table) {
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
  const bool per_token = table.per_token;
  // A split whose steps differ in size is drawn at its mean (typical_step_seconds), and said so.
  const bool means = std::any_of(slots.begin(), slots.end(), [](const Slot& s) { return s.ok && steps_differ_in_size(*s.run); });
  const std::string title = std::string("Median step time per split") +
                            (means ? " (the mean for a split whose steps differ in size)" : "") + ", stacked by phase";
  ColumnChart chart = start_column_chart(
      title + (per_token ? " (the % above each: per real token against the fastest, as the packings and orders are compared)"
                         : " (the % above each: against the fastest, as the table's vs fastest)"),
      "hatch-step", step_legend(slots), slots,
      nice_axis(max_seconds / unit.divisor * 1.12), "step time (" + unit.name + ")");
  Svg& svg = chart.svg;
  const Panel& p = chart.panel;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].ok) {
      draw_gap(svg, p, i, slots[i], "hatch-step");
      continue;
    }
    svg.open_group({{"class", "bar"}}, bar_tooltip(slots, slots[i], bars[i]));
    const double label_y = draw_bar(svg, p, i, bars[i], unit);
    svg.close_group();
    draw_value(svg, p, i, slots[i], label_y, table);
  }
  return finish_column_chart(chart, slots);
}

}  // namespace accumbench::html
