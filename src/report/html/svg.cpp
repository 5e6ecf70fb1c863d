// The SVG writer of the HTML report (svg.hpp).
#include "report/html/svg.hpp"

#include <algorithm>
#include <cstdio>

#include "report/html/text.hpp"

namespace accumbench::html {
namespace {

std::string attribute_text(const Attributes& attributes) {
  std::string out;
  for (const auto& [name, value] : attributes) out += ' ' + name + "=\"" + html_escape(value) + '"';
  return out;
}

Attributes joined(Attributes first, const Attributes& then) {
  first.insert(first.end(), then.begin(), then.end());
  return first;
}

}  // namespace

std::string num(double v) {
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.2f", v);
  std::string s = buffer;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

void Svg::element(const std::string& name, const Attributes& attributes) {
  out_ += '<' + name + attribute_text(attributes) + "/>";
}

void Svg::open(const std::string& name, const Attributes& attributes) {
  out_ += '<' + name + attribute_text(attributes) + '>';
}

void Svg::close(const std::string& name) { out_ += "</" + name + '>'; }

void Svg::rect(double x, double y, double width, double height, const std::string& fill,
               const Attributes& extra) {
  element("rect", joined({{"x", num(x)},
                          {"y", num(y)},
                          {"width", num(std::max(0.0, width))},
                          {"height", num(std::max(0.0, height))},
                          {"fill", fill}},
                         extra));
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& stroke,
               double stroke_width, const Attributes& extra) {
  element("line", joined({{"x1", num(x1)},
                          {"y1", num(y1)},
                          {"x2", num(x2)},
                          {"y2", num(y2)},
                          {"stroke", stroke},
                          {"stroke-width", num(stroke_width)}},
                         extra));
}

void Svg::path(const std::string& d, const Attributes& extra) {
  element("path", joined({{"d", d}}, extra));
}

void Svg::text(double x, double y, const std::string& content, const Attributes& extra) {
  open("text", joined({{"x", num(x)}, {"y", num(y)}}, extra));
  out_ += html_escape(content);
  close("text");
}

void Svg::open_group(const Attributes& attributes, const std::string& tooltip) {
  open("g", attributes);
  out_ += "<title>" + html_escape(tooltip) + "</title>";
}

std::string Svg::finish(double width, double height) const {
  const Attributes root = {{"xmlns", "http://www.w3.org/2000/svg"},
                           {"viewBox", "0 0 " + num(width) + ' ' + num(height)},
                           {"role", "img"},
                           {"aria-label", label_},
                           {"font-size", "12"}};
  return "<svg" + attribute_text(root) + '>' + out_ + "</svg>";
}

}  // namespace accumbench::html
