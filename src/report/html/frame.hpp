// The frame every chart of the HTML report is built on: the runs as slots (one column each),
// units and value axes with round ticks, the legend, the plot panel with its split labels, the
// recommended split's band and the hatched gap a failed run leaves. Private to src/report/html/.
//
//   const std::vector<Slot> slots = make_slots(result);
//   ColumnChart chart = start_column_chart("Peak memory", "hatch-mem", legend, slots,
//                                          nice_axis(max_mib * 1.1), "peak memory (MiB)");
//   chart.svg.rect(...);                      // the columns, placed with chart.panel
//   std::string svg = finish_column_chart(chart, slots);
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "accumbench/result.hpp"
#include "report/html/svg.hpp"

namespace accumbench::html {

// ---------------------------------------------------------------------------------------------
// Units and axes

struct Unit {
  double divisor = 1;
  std::string name;
};

Unit time_unit(double max_seconds);  // s, ms or µs
Unit byte_unit(double max_bytes);    // 1024-based, like format_bytes: B, KiB, MiB, GiB
Unit rate_unit(double max_rate);     // "", k or M

// A value axis from 0 with 1-2-2.5-5 steps (Heckbert, "Nice numbers for graph labels",
// Graphics Gems, 1990).
struct Axis {
  double top = 1;
  double step = 0.2;
  int decimals = 1;  // what the tick labels need
};

Axis nice_axis(double max_value, int target_ticks = 5);

// ---------------------------------------------------------------------------------------------
// Colours

// A phase's colour in every chart: the phase table's (result.hpp).
inline const char* phase_colour(int ph) { return phase_info(static_cast<Phase>(ph)).colour; }
inline constexpr char kInk[] = "#1f2430";
inline constexpr char kBad[] = "#c0392b";

// ---------------------------------------------------------------------------------------------
// Slots: the runs in sweep order, one column each

struct Slot {
  const RunResult* run = nullptr;
  int index = 0;
  std::string label;
  bool ok = false;
  bool recommended = false;
  bool tied = false;
};

std::vector<Slot> make_slots(const SweepResult& result);

// Whether some slot's timed steps differ in size (steps_differ_in_size): its row and bars read
// means, which the captions then say.
bool any_means(const std::vector<Slot>& slots);


// The allreduce phase exists only with data parallel (world size > 1); without it, it is left
// out of legends, tooltips and the table rather than shown as zeros.
bool phase_shown(const std::vector<Slot>& slots, int ph);

// The limit the memory chart and the timeline draw: the user's limit, else the device's memory;
// 0 when neither is known.
int64_t memory_limit(const SweepContext& c);

// A limit far above the data (a 140 GiB device, a 40 MiB model) would flatten the chart; it is
// drawn only when within reach, and otherwise named in the legend.
bool limit_within_scale(int64_t limit, double max_bytes);

// ---------------------------------------------------------------------------------------------
// Legend: along the top of a chart, left to right, wrapping at the right margin

struct LegendEntry {
  enum class Kind { kSwatch, kLine, kDashedLine, kWhisker, kMarker };
  std::string label;
  std::string color;
  Kind kind = Kind::kSwatch;
};

double legend_height(const std::vector<LegendEntry>& entries);
void draw_legend(Svg& svg, const std::vector<LegendEntry>& entries);

// ---------------------------------------------------------------------------------------------
// Panels

inline constexpr double kChartWidth = 960;
inline constexpr double kPlotLeft = 76;  // room for the tick labels and the axis title
inline constexpr double kRightMargin = 18;

// One plot rectangle with a value axis from 0 and `slots` columns side by side.
struct Panel {
  double left = kPlotLeft;
  double top = 0;
  double width = kChartWidth - kPlotLeft - kRightMargin;
  double height = 0;
  Axis axis;
  std::size_t slots = 1;

  double bottom() const { return top + height; }
  double right() const { return left + width; }
  double y(double v) const;  // clamped to the axis
  double slot_width() const;
  double center(std::size_t i) const {
    return left + slot_width() * (static_cast<double>(i) + 0.5);
  }
  double bar_width() const;
};

// Height of the band under a panel that holds the split labels.
double label_band(const std::vector<Slot>& slots, const Panel& p);

// Grid lines with tick labels, and the axis title turned along the axis.
void draw_value_axis(Svg& svg, const Panel& p, const std::string& title);
// The recommended split's band behind its column, then the value axis.
void draw_panel_frame(Svg& svg, const std::vector<Slot>& slots, const Panel& p,
                      const std::string& axis_title);
// The split labels under the columns, turned when they would collide.
void draw_slot_labels(Svg& svg, const std::vector<Slot>& slots, const Panel& p);

// The <defs> of a failed run's hatch; ids are per chart, as all the SVGs share one document.
void draw_hatch_pattern(Svg& svg, const std::string& id);
// A run without numbers keeps its column: hatched, outlined, and labelled with its status.
void draw_gap(Svg& svg, const Panel& p, std::size_t i, const Slot& s, const std::string& pattern);

// Stands in for a chart that has nothing to show.
std::string empty_chart(const std::string& message);

// ---------------------------------------------------------------------------------------------
// A legend over one column panel (the step-time and peak-memory charts)

struct ColumnChart {
  Svg svg;
  Panel panel;
  double height = 0;  // of the whole chart
};

// Lays the chart out and draws the hatch, the legend and the panel frame; the caller draws the
// columns on `panel`, then finish_column_chart adds the split labels.
ColumnChart start_column_chart(const std::string& label, const std::string& pattern,
                               const std::vector<LegendEntry>& legend,
                               const std::vector<Slot>& slots, Axis axis,
                               const std::string& axis_title);
std::string finish_column_chart(ColumnChart& chart, const std::vector<Slot>& slots);

}  // namespace accumbench::html
