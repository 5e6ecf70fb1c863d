// A small SVG writer for the report's charts: elements with attributes, every attribute value and
// every text escaped on the way out, the root element's size given once the layout is known.
// Private to src/report/html/.
//
//   Svg svg("Median step time per split");                  // the chart's accessible label
//   svg.rect(76, 40, 36, 120, "#4e79a7", {{"rx", "2"}});
//   svg.text(94, 32, "2×2", {{"text-anchor", "middle"}});   // text content is plain text
//   std::string markup = svg.finish(/*width=*/960, /*height=*/380);
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace accumbench::html {

// (name, value) in document order; values are plain text and are escaped when written.
using Attributes = std::vector<std::pair<std::string, std::string>>;

// A coordinate or length: two decimals are far below a device pixel; trailing zeros dropped.
std::string num(double v);

class Svg {
 public:
  explicit Svg(std::string label) : label_(std::move(label)) {}

  // <name a="v"/>, <name a="v"> and </name>: what the shapes below are made of.
  void element(const std::string& name, const Attributes& attributes);
  void open(const std::string& name, const Attributes& attributes);
  void close(const std::string& name);

  // Negative sizes are drawn as 0.
  void rect(double x, double y, double width, double height, const std::string& fill,
            const Attributes& extra = {});
  void line(double x1, double y1, double x2, double y2, const std::string& stroke,
            double stroke_width, const Attributes& extra = {});
  void path(const std::string& d, const Attributes& extra);
  void text(double x, double y, const std::string& content, const Attributes& extra = {});

  // A group whose <title> (the browser's tooltip) is `tooltip`; ended by close_group().
  void open_group(const Attributes& attributes, const std::string& tooltip);
  void close_group() { close("g"); }

  // The whole <svg> element, viewBox 0 0 width height.
  std::string finish(double width, double height) const;

 private:
  std::string label_;
  std::string out_;
};

}  // namespace accumbench::html
