// Words and numbers of the HTML report (text.hpp).
#include "report/html/text.hpp"

#include "report/format.hpp"

namespace accumbench::html {

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

std::string sig(double v, int digits) {
  return finite(v) ? text::format_significant(v, digits) : kDash;
}

std::string format_duration(double seconds) {
  if (!finite(seconds)) return kDash;
  const double a = std::fabs(seconds);
  if (a >= 1.0 || a == 0.0) return text::format_significant(seconds, 3) + " s";
  if (a >= 1e-3) return text::format_significant(seconds * 1e3, 3) + " ms";
  return text::format_significant(seconds * 1e6, 3) + " \u00b5s";
}

std::string format_compact(double v) {
  if (!finite(v)) return kDash;
  const double a = std::fabs(v);
  if (a >= 1e9) return text::format_significant(v / 1e9, 3) + "G";
  if (a >= 1e6) return text::format_significant(v / 1e6, 3) + "M";
  if (a >= 1e3) return text::format_significant(v / 1e3, 3) + "k";
  return text::format_significant(v, 3);
}

std::string format_mfu(double mfu) { return finite(mfu) ? text::format_percent(mfu, 1) : kDash; }

double text_width(const std::string& s, double font_size) {
  return static_cast<double>(text::display_width(s)) * font_size * 0.56;
}

std::string notes_card(const std::vector<std::string>& notes) {
  if (notes.empty()) return "";
  std::string h = "<section class=\"card notes\" id=\"notes\"><h2>Notes</h2><ul>";
  for (const std::string& note : notes) h += "<li>" + html_escape(note) + "</li>";
  return h + "</ul></section>\n";
}

}  // namespace accumbench::html
