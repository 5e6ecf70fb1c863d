// Chart 4 of the HTML report: allocated memory through one optimizer step, phase by phase and
// micro-step by micro-step, one panel per picked split (the recommended one and the extremes of
// micro-batch size).
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "accumbench/report.hpp"
#include "report/format.hpp"
#include "report/html/charts.hpp"
#include "report/html/text.hpp"

namespace accumbench::html {
namespace {

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
  const auto run = [&](int i) -> const RunResult& {
    return result.runs[static_cast<std::size_t>(i)];
  };
  const auto usable = [&](int i) {
    return run(i).status == RunStatus::kOk && !run(i).timeline.empty();
  };
  int smallest = -1;
  int largest = -1;
  for (int i = 0; i < static_cast<int>(result.runs.size()); ++i) {
    if (!usable(i)) continue;
    const int64_t mb = run(i).config.micro_batch;
    if (smallest < 0 || mb < run(smallest).config.micro_batch) smallest = i;
    if (largest < 0 || mb > run(largest).config.micro_batch) largest = i;
  }
  const int best = result.recommendation.best_index;
  if (best >= 0 && best < static_cast<int>(result.runs.size()) && usable(best))
    add(best, "recommended");
  // "that ran" where a larger (or smaller) micro-batch was listed but has no timeline (oom, an error).
  const auto beyond = [&](int pick, bool larger) {
    for (const RunResult& r : result.runs) {
      if (larger ? r.config.micro_batch > run(pick).config.micro_batch : r.config.micro_batch < run(pick).config.micro_batch)
        return true;
    }
    return false;
  };
  if (smallest >= 0) add(smallest, beyond(smallest, false) ? "smallest micro-batch that ran" : "smallest micro-batch");
  if (largest >= 0) add(largest, beyond(largest, true) ? "largest micro-batch that ran" : "largest micro-batch");
  std::stable_sort(picks.begin(), picks.end(), [&](const TimelinePick& a, const TimelinePick& b) {
    return run(a.index).config.micro_batch < run(b.index).config.micro_batch;
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

// One run's panel: its spans in time order, a time axis over the whole step and a memory axis of
// its own.
struct TimelinePanel {
  std::vector<PhaseSpan> spans;
  double last_end = 0;  // of the last recorded phase
  double step_end = 0;  // of the step's wall time
  int64_t peak = 0;
  Unit time_unit;
  Axis time_axis;
  Unit byte_unit;
  bool show_limit = false;
  Panel plot;

  double x(double seconds) const {
    return plot.left + plot.width * (seconds / time_unit.divisor) / time_axis.top;
  }
  double y(int64_t bytes) const { return plot.y(static_cast<double>(bytes) / byte_unit.divisor); }
};

TimelinePanel lay_out_panel(const RunResult& run, int64_t limit, double top) {
  TimelinePanel t;
  t.spans = run.timeline;
  std::stable_sort(t.spans.begin(), t.spans.end(), [](const PhaseSpan& a, const PhaseSpan& b) {
    return a.start_seconds < b.start_seconds;
  });
  for (const PhaseSpan& s : t.spans) {
    t.last_end = std::max(t.last_end, span_end(s));
    t.peak = std::max(t.peak, s.peak_bytes);
  }
  t.step_end = run.steps.empty() ? t.last_end : std::max(t.last_end, run.steps.back().step_seconds);
  t.time_unit = time_unit(t.step_end);
  t.time_axis = nice_axis(t.step_end / t.time_unit.divisor, 6);
  const double max_bytes = timeline_max_bytes(run);
  t.show_limit = limit_within_scale(limit, max_bytes);
  const double scale_bytes =
      t.show_limit ? std::max(max_bytes, static_cast<double>(limit)) : max_bytes;
  t.byte_unit = byte_unit(scale_bytes);
  t.plot.top = top + 34;
  t.plot.height = kTimelinePlotHeight;
  t.plot.axis = nice_axis(scale_bytes / t.byte_unit.divisor * 1.08, 4);
  return t;
}

// The split's label, what it was picked as, and its step in numbers.
void draw_panel_title(Svg& svg, const TimelinePanel& t, const RunResult& run, const std::string& label,
                      const std::string& roles, bool recommended, double top) {
  svg.text(t.plot.left, top + 16, label,
           {{"class", std::string("panel-title") + (recommended ? " recommended" : "")}});
  svg.text(t.plot.left + text_width(label, 14) + 12, top + 16,
           roles + (run.steps.empty() ? " \u00b7 warm-up step (no timed step) " : " \u00b7 step ") +
               format_duration(t.step_end) + " \u00b7 peak " +
               format_bytes(t.peak) + " \u00b7 " + std::to_string(run.config.accum_steps) +
               " micro-step" + (run.config.accum_steps == 1 ? "" : "s"),
           {{"class", "panel-sub"}});
}

// Ticks under the plot; the unit rides on the last tick.
void draw_time_axis(Svg& svg, const TimelinePanel& t) {
  const Panel& p = t.plot;
  const Axis& axis = t.time_axis;
  for (int k = 0;; ++k) {
    const double v = k * axis.step;
    if (v > axis.top * (1 + 1e-9)) break;
    const double x = p.left + p.width * v / axis.top;
    const bool last = (k + 1) * axis.step > axis.top * (1 + 1e-9);
    svg.line(x, p.bottom(), x, p.bottom() + 4, "#9aa1ab", 1);
    svg.text(x, p.bottom() + 17,
             text::format_fixed(v, axis.decimals) + (last ? " " + t.time_unit.name : ""),
             {{"text-anchor", last     ? "end"
                              : k == 0 ? "start"
                                       : "middle"},
              {"class", "tick"}});
  }
}

struct Window {  // one micro-step (or the optimizer, micro_step -1) in time
  int micro_step;
  double start, end;
};

std::vector<Window> micro_step_windows(const std::vector<PhaseSpan>& spans) {
  std::vector<Window> windows;
  for (const PhaseSpan& s : spans) {
    if (!windows.empty() && windows.back().micro_step == s.micro_step) {
      windows.back().end = std::max(windows.back().end, span_end(s));
    } else {
      windows.push_back({s.micro_step, s.start_seconds, span_end(s)});
    }
  }
  return windows;
}

// Separators between micro-steps and their numbers above the plot. With many micro-steps only
// every stride-th is numbered (a power of two: accumulation counts usually are one), and
// separators are drawn only where they stay apart.
void draw_windows(Svg& svg, const TimelinePanel& t) {
  const Panel& p = t.plot;
  const std::vector<Window> windows = micro_step_windows(t.spans);
  double narrowest = p.width;
  int last_micro_step = 0;
  for (const Window& w : windows) {
    if (w.micro_step < 0) continue;
    narrowest = std::min(narrowest, t.x(w.end) - t.x(w.start));
    last_micro_step = std::max(last_micro_step, w.micro_step + 1);
  }
  const double number_width = text_width(std::to_string(last_micro_step), 10) + 8;
  int stride = 1;
  while (stride * std::max(narrowest, 0.01) < number_width) stride *= 2;
  const bool every_separator = narrowest >= 8;

  for (std::size_t w = 0; w < windows.size(); ++w) {
    const double x0 = t.x(windows[w].start);
    const double x1 = t.x(windows[w].end);
    const bool optimizer = windows[w].micro_step < 0;
    const int number = windows[w].micro_step + 1;
    const bool numbered = !optimizer && number % stride == 0;
    if (w > 0 && (every_separator || numbered || optimizer)) {
      svg.line(x0, p.top - 2, x0, p.bottom(), "#c5cad3", 1, {{"stroke-dasharray", "2 3"}});
    }
    if (optimizer) {
      const std::string name = x1 - x0 > 70 ? "optimizer" : "opt";
      if (x1 - x0 >= text_width(name, 10) + 4) {
        svg.text((x0 + x1) / 2, p.top + 10, name,
                 {{"text-anchor", "middle"}, {"class", "window-label"}});
      }
    } else if (numbered) {
      const bool spelled = stride == 1 && narrowest > 90;
      svg.text(stride == 1 ? (x0 + x1) / 2 : x1, p.top + 10,
               (spelled ? "micro-step " : "") + std::to_string(number),
               {{"text-anchor", stride == 1 ? "middle" : "end"}, {"class", "window-label"}});
    }
  }
}

// Wall time after the last recorded phase: the step's untimed "other".
void draw_untimed_rest(Svg& svg, const TimelinePanel& t) {
  if (!(t.step_end > t.last_end)) return;
  const Panel& p = t.plot;
  const double x0 = t.x(t.last_end);
  const double x1 = t.x(t.step_end);
  svg.rect(x0, p.top, x1 - x0, p.height, phase_colour(static_cast<int>(Phase::kOther)),
           {{"fill-opacity", "0.16"}});
  if (x1 - x0 >= text_width("other", 10) + 4) {
    svg.text((x0 + x1) / 2, p.top + 10, "other",
             {{"text-anchor", "middle"}, {"class", "window-label"}});
  }
  svg.line(x1, p.top - 2, x1, p.bottom(), "#9aa1ab", 1);
}

std::string span_tooltip(const PhaseSpan& s) {
  const std::string where =
      s.phase == Phase::kAllReduce ? "after the micro-steps"
      : s.micro_step < 0           ? "optimizer step"
                                   : "micro-step " + std::to_string(s.micro_step + 1);
  return where + " \u00b7 " + phase_name(s.phase) + " " + format_duration(s.duration_seconds) +
         "\nallocated " + format_bytes(s.bytes_at_start) + " \u2192 " +
         format_bytes(s.bytes_at_end) + ", peak " + format_bytes(s.peak_bytes);
}

// A block per phase up to its peak, and the line through the boundary values.
void draw_spans(Svg& svg, const TimelinePanel& t) {
  std::string path;
  for (const PhaseSpan& s : t.spans) {
    const double x0 = t.x(s.start_seconds);
    const double x1 = std::max(t.x(span_end(s)), x0 + 1.2);  // a 1 µs phase stays visible
    const double y = t.y(s.peak_bytes);
    const int ph = std::max(0, std::min(kPhaseCount - 1, static_cast<int>(s.phase)));
    svg.open_group({{"class", "span"}}, span_tooltip(s));
    svg.rect(x0, y, x1 - x0, t.plot.bottom() - y, phase_colour(ph), {{"fill-opacity", "0.8"}});
    svg.close_group();
    path += (path.empty() ? "M" : " L") + num(x0) + ' ' + num(t.y(s.bytes_at_start));
    path += " L" + num(x1) + ' ' + num(t.y(s.bytes_at_end));
  }
  svg.path(path, {{"fill", "none"},
                  {"stroke", kInk},
                  {"stroke-width", "1.6"},
                  {"stroke-linejoin", "round"},
                  {"class", "boundary-line"}});
}

void draw_timeline_panel(Svg& svg, const RunResult& run, const std::string& label, const std::string& roles,
                         bool recommended, int64_t limit, double top) {
  const TimelinePanel t = lay_out_panel(run, limit, top);
  draw_panel_title(svg, t, run, label, roles, recommended, top);
  draw_value_axis(svg, t.plot, "allocated (" + t.byte_unit.name + ")");
  draw_time_axis(svg, t);
  draw_windows(svg, t);
  draw_untimed_rest(svg, t);
  draw_spans(svg, t);
  if (t.show_limit) {
    svg.line(t.plot.left, t.y(limit), t.plot.right(), t.y(limit), kBad, 1.4,
             {{"stroke-dasharray", "6 4"}, {"class", "limit-line"}});
  }
}

std::vector<LegendEntry> timeline_legend(const SweepResult& result,
                                         const std::vector<TimelinePick>& picks, int64_t limit) {
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
  for (const PhaseInfo& info : phase_table()) {  // timeline order
    const int ph = static_cast<int>(info.phase);
    if (!phases_seen[ph]) continue;
    legend.push_back(
        {std::string("peak in ") + phase_name(static_cast<Phase>(ph)), phase_colour(ph)});
  }
  legend.push_back({"allocated at phase boundaries", kInk, LegendEntry::Kind::kLine});
  if (any_limit) {
    legend.push_back({"limit " + format_bytes(limit), kBad, LegendEntry::Kind::kDashedLine});
  }
  return legend;
}

}  // namespace

// Each panel has its own memory scale: on a shared one the smallest micro-batch would be a flat
// line, and its shape (gradients held across the micro-steps) is the point of this chart. The
// peak-memory chart compares the peaks on one scale.
std::string timeline_chart(const SweepResult& result) {
  const std::vector<TimelinePick> picks = timeline_picks(result);
  if (picks.empty()) return empty_chart("No memory timeline was recorded (no successful run)");
  const int64_t limit = memory_limit(result.context);
  const std::vector<LegendEntry> legend = timeline_legend(result, picks, limit);
  double top = 14 + legend_height(legend) + 10;
  const double height = top + static_cast<double>(picks.size()) * kTimelinePanelHeight +
                        static_cast<double>(picks.size() - 1) * kTimelinePanelGap + 6;

  Svg svg("Allocated memory through one optimizer step");
  draw_legend(svg, legend);
  for (const TimelinePick& pick : picks) {
    std::string roles;
    for (const std::string& r : pick.roles) roles += (roles.empty() ? "" : ", ") + r;
    const RunResult& run = result.runs[static_cast<std::size_t>(pick.index)];
    draw_timeline_panel(svg, run, run_label(run, result.runs), roles, result.recommendation.best_index == pick.index,
                        limit, top);
    top += kTimelinePanelHeight + kTimelinePanelGap;
  }
  return svg.finish(kChartWidth, height);
}

}  // namespace accumbench::html
