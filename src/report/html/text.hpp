// Words and numbers as the HTML report shows them, and the escaping every outside text goes
// through. Private to src/report/html/.
//
//   html_escape("a<b")          // "a&lt;b"
//   format_duration(0.238)      // "238 ms"
//   format_compact(342737)      // "343k"
#pragma once

#include <cmath>
#include <string>
#include <vector>

namespace accumbench::html {

// For text content and attribute values alike: & < > " ' become entities.
std::string html_escape(const std::string& s);

// A command's notes as a card (id "notes") of a list, escaped; "" without notes (the sweep's page,
// under its recommendation, and plan's, under its header).
std::string notes_card(const std::vector<std::string>& notes);

inline constexpr char kDash[] = "\u2014";  // shown for a number that was not measured

inline bool finite(double v) { return std::isfinite(v); }

// `digits` significant digits, or kDash.
std::string sig(double v, int digits = 3);

// 0.238 → "238 ms", 1.47 → "1.47 s", 0.00085 → "850 µs".
std::string format_duration(double seconds);

// 342737 → "343k", 1.5e6 → "1.50M".
std::string format_compact(double v);

// 0.171 → "17.1 %", or kDash.
std::string format_mfu(double mfu);

// Rough advance width of `s` at `font_size` in a sans-serif face; lays out legends and labels.
double text_width(const std::string& s, double font_size = 12);

}  // namespace accumbench::html
