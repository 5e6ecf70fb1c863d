// The "All numbers" section of the HTML report: one row per run, every number the charts show
// and the ones they do not. Private to src/report/html/.
//
//   page += table_section(result, make_slots(result));
#pragma once

#include <string>
#include <vector>

#include "report/html/frame.hpp"

namespace accumbench::html {

// The whole <section>, a failed run's error spanning its measurement columns.
std::string table_section(const SweepResult& result, const std::vector<Slot>& slots);

}  // namespace accumbench::html
