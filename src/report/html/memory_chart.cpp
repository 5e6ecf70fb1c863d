// Chart 3 of the HTML report: peak memory per split, stacked by what held it at the peak, with
// the memory plan's prediction as a marker and the memory limit as a dashed line.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "accumbench/report.hpp"
#include "report/html/charts.hpp"
#include "report/html/text.hpp"

namespace accumbench::html {
namespace {

constexpr int kMemorySegments = 6;
struct MemorySegment {
  const char* name;
  const char* color;
};
// In the order of memory_segments' values, bottom to top.
const MemorySegment kMemory[kMemorySegments] = {
    {"parameters", "#4e79a7"},  {"gradients", "#f28e2b"},       {"optimizer state", "#b07aa1"},
    {"activations", "#76b7b2"}, {"allocator slack", "#d3cdc6"}, {"not broken down", "#9c9c9c"},
};
using Segments = std::array<double, kMemorySegments>;

Segments memory_segments(const RunResult& run) {
  const MemoryBreakdown& b = run.peak_breakdown;
  Segments v{static_cast<double>(b.parameters_bytes),      static_cast<double>(b.gradients_bytes),
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

// What the columns hold, and how far the scale must reach for them.
struct MemoryColumns {
  std::vector<Segments> segments;  // zeros for a failed run
  std::array<bool, kMemorySegments> used{};
  bool any_prediction = false;
  double max_bytes = 0;
};

MemoryColumns memory_columns(const std::vector<Slot>& slots) {
  MemoryColumns columns;
  for (const Slot& s : slots) {
    columns.segments.push_back(s.ok ? memory_segments(*s.run) : Segments{});
    double total = 0;
    for (int k = 0; k < kMemorySegments; ++k) {
      total += columns.segments.back()[k];
      columns.used[k] = columns.used[k] || columns.segments.back()[k] > 0;
    }
    columns.max_bytes = std::max(columns.max_bytes, total);
    if (s.run->predicted_peak_bytes >= 0) {
      columns.any_prediction = true;
      columns.max_bytes =
          std::max(columns.max_bytes, static_cast<double>(s.run->predicted_peak_bytes));
    }
  }
  return columns;
}

std::vector<LegendEntry> memory_legend(const SweepContext& context, const MemoryColumns& columns,
                                       int64_t limit, bool limit_on_scale) {
  std::vector<LegendEntry> legend;
  for (int k = 0; k < kMemorySegments; ++k) {
    if (columns.used[k]) legend.push_back({kMemory[k].name, kMemory[k].color});
  }
  if (columns.any_prediction)
    legend.push_back({"predicted peak (plan)", kInk, LegendEntry::Kind::kMarker});
  if (limit > 0) {
    legend.push_back(
        {std::string(context.memory_limit_bytes > 0 ? "memory limit" : "device memory") + " " +
             format_bytes(limit) + (limit_on_scale ? "" : " (off scale)"),
         kBad, LegendEntry::Kind::kDashedLine});
  }
  return legend;
}

// The stacked categories of column `i` in a group with their exact sizes; returns its top.
double draw_stack(Svg& svg, const Panel& p, std::size_t i, const Slot& s, const Segments& segments,
                  const Unit& unit) {
  const RunResult& run = *s.run;
  std::string tooltip = s.label + ": peak allocated " + format_bytes(run.peak_allocated_bytes) +
                        ", reserved " + format_bytes(run.peak_reserved_bytes);
  for (int k = 0; k < kMemorySegments; ++k) {
    if (segments[k] > 0) {
      tooltip += std::string("\n") + kMemory[k].name + " " +
                 format_bytes(static_cast<int64_t>(segments[k]));
    }
  }
  svg.open_group({{"class", "bar"}}, tooltip);
  const double w = p.bar_width();
  double acc = 0;
  for (int k = 0; k < kMemorySegments; ++k) {
    const double v = segments[k] / unit.divisor;
    if (v <= 0) continue;
    const double y = p.y(acc + v);
    svg.rect(p.center(i) - w / 2, y, w, p.y(acc) - y, kMemory[k].color);
    acc += v;
  }
  svg.close_group();
  return p.y(acc);
}

// The plan's prediction across column `i`, a diamond at its right end; returns its y.
double draw_prediction(Svg& svg, const Panel& p, std::size_t i, const Slot& s, const Unit& unit) {
  const int64_t predicted = s.run->predicted_peak_bytes;
  const double w = p.bar_width();
  const double x = p.center(i) - w / 2;
  const double y = p.y(static_cast<double>(predicted) / unit.divisor);
  svg.open_group({{"class", "predicted"}}, s.label + ": predicted peak " + format_bytes(predicted));
  svg.line(x - 3, y, x + w + 3, y, kInk, 1.5, {{"stroke-dasharray", "3 2"}});
  svg.path("M" + num(x + w + 3) + ' ' + num(y - 5.5) + " l5.5 5.5 -5.5 5.5 -5.5 -5.5z",
           {{"fill", kInk}});
  svg.close_group();
  return y;
}

void draw_column(Svg& svg, const Panel& p, std::size_t i, const Slot& s, const Segments& segments,
                 const Unit& unit) {
  const RunResult& run = *s.run;
  double top_y = p.bottom() - p.height * 0.42;  // a gap's top
  if (s.ok) {
    top_y = draw_stack(svg, p, i, s, segments, unit);
  } else {
    draw_gap(svg, p, i, s, "hatch-mem");
  }
  if (run.predicted_peak_bytes >= 0) top_y = std::min(top_y, draw_prediction(svg, p, i, s, unit));
  if (!s.ok) return;
  std::string cls = "value";
  if (s.recommended) cls += " recommended";
  if (!run.fits) cls += " bad";
  svg.text(p.center(i), top_y - 9,
           format_bytes(run.peak_allocated_bytes) + (run.fits ? "" : " \u2717"),
           {{"text-anchor", "middle"}, {"class", cls}});
}

}  // namespace

std::string memory_chart(const SweepResult& result, const std::vector<Slot>& slots) {
  if (slots.empty()) return empty_chart("No runs in this sweep");
  const MemoryColumns columns = memory_columns(slots);
  const int64_t limit = memory_limit(result.context);
  const bool limit_on_scale = limit_within_scale(limit, columns.max_bytes);
  const double scale_bytes =
      limit_on_scale ? std::max(columns.max_bytes, static_cast<double>(limit)) : columns.max_bytes;
  const Unit unit = byte_unit(scale_bytes);
  ColumnChart chart = start_column_chart(
      "Peak memory per split, stacked by category", "hatch-mem",
      memory_legend(result.context, columns, limit, limit_on_scale), slots,
      nice_axis(scale_bytes / unit.divisor * 1.1), "peak memory (" + unit.name + ")");
  const Panel& p = chart.panel;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    draw_column(chart.svg, p, i, slots[i], columns.segments[i], unit);
  }
  if (limit > 0 && limit_on_scale) {
    const double y = p.y(static_cast<double>(limit) / unit.divisor);
    chart.svg.line(p.left, y, p.right(), y, kBad, 1.6,
                   {{"stroke-dasharray", "6 4"}, {"class", "limit-line"}});
    chart.svg.text(p.right() - 4, y - 6, "limit " + format_bytes(limit),
                   {{"text-anchor", "end"}, {"class", "limit-label"}, {"fill", kBad}});
  }
  return finish_column_chart(chart, slots);
}

}  // namespace accumbench::html
