// The four charts of the HTML report, each an <svg> element built on frame.hpp, one file each.
// Private to src/report/html/.
//
//   const std::vector<Slot> slots = make_slots(result);
//   page += step_time_chart(slots);
#pragma once

#include <string>
#include <vector>

#include "accumbench/result.hpp"
#include "report/columns.hpp"
#include "report/html/frame.hpp"

namespace accumbench::html {

// Median step time per split, stacked by phase, with the spread as a whisker
// (step_time_chart.cpp).
// `table`: what the table's "vs fastest" compares (TableContext::of): the label over each column is
// its ratio to the decided fastest split's, as that column reads it.
std::string step_time_chart(const std::vector<Slot>& slots, const report::TableContext& table);

// Tokens/s per split, and MFU per split where the device peak is known (throughput_chart.cpp).
std::string throughput_chart(const std::vector<Slot>& slots);
// Whether any run that completed has an MFU, i.e. whether the MFU panel is drawn.
bool any_mfu(const std::vector<Slot>& slots);

// Peak memory per split, stacked by category, with the limit and the prediction
// (memory_chart.cpp).
std::string memory_chart(const SweepResult& result, const std::vector<Slot>& slots);

// Allocated memory through one optimizer step, phase by phase, for the recommended split and the
// extremes of micro-batch size (timeline_chart.cpp).
std::string timeline_chart(const SweepResult& result);

// One column of the step-time chart; the table shows the same "other" (step_time_chart.cpp).
struct StepBar {
  PhaseSeconds medians{};   // each phase's median (0 where not measured)
  PhaseSeconds segments{};  // the medians' shares of their sum, drawn at the step's median
  double total = 0;
  double whisker_low = kNotMeasured;
  double whisker_high = kNotMeasured;
  bool whisker_is_interval = false;  // bootstrap interval of the median, else min..max of steps
  bool means = false;  // steps of many sizes: their means (typical_step_seconds), the mean's interval
};

StepBar step_bar(const RunResult& run);

}  // namespace accumbench::html
