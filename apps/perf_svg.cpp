#include "apps/perf_svg.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "apps/perf_error.hpp"

namespace troupe::apps {

namespace {

constexpr double width = 720, height = 480;
constexpr double left = 90, right = 30, top = 50, bottom = 60;  // margins around the plot
constexpr double plot_w = width - left - right, plot_h = height - top - bottom;

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
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
      default:
        out += c;
    }
  }
  return out;
}

// A round tick step (1, 2 or 5 times a power of ten) giving about five ticks up to `max`.
double tick_step(double max) {
  const double raw = max / 5;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * power) return m * power;
  return 10 * power;
}

// The axis' upper end: a whole number of ticks at or above the largest value.
double axis_max(double largest) {
  if (!(largest > 0)) return 1;
  const double step = tick_step(largest * 1.05);
  return std::ceil(largest * 1.05 / step) * step;
}

// A tick label; in thousands ("15k") on an axis that reaches 10000.
std::string number(double v, double axis_max) {
  if (axis_max >= 10000 && v > 0) return fmt::format("{:g}k", v / 1000);
  return fmt::format("{:g}", v);
}

}  // namespace

void write_svg(const std::string& path, const std::vector<LevelRow>& rows,
               const std::string& title) {
  double max_x = 0, max_y = 0;
  for (const LevelRow& r : rows) {
    max_x = std::max(max_x, r.throughput);
    max_y = std::max(max_y, r.p99_us);
  }
  const double x_max = axis_max(max_x), y_max = axis_max(max_y);
  auto px = [&](double v) { return left + v / x_max * plot_w; };
  auto py = [&](double v) { return top + plot_h - v / y_max * plot_h; };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"28\" text-anchor=\"middle\" font-size=\"15\">{3}</text>\n",
      width, height, width / 2, xml_escape(title));

  // Grid and ticks.
  for (double v = 0; v <= x_max * 1.0001; v += tick_step(x_max))
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#e0e0e0\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        px(v), top, top + plot_h, top + plot_h + 18, number(v, x_max));
  for (double v = 0; v <= y_max * 1.0001; v += tick_step(y_max))
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#e0e0e0\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        left, py(v), left + plot_w, left - 8, py(v) + 4, number(v, y_max));
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">Throughput (inferences/s)</text>\n"
      "<text transform=\"translate(22,{}) rotate(-90)\" text-anchor=\"middle\">"
      "p99 latency (&#181;s)</text>\n",
      left, top, plot_w, plot_h, left + plot_w / 2, height - 16, top + plot_h / 2);

  // The curve, its points and their concurrency labels.
  std::string points;
  for (const LevelRow& r : rows)
    points += fmt::format("{:.1f},{:.1f} ", px(r.throughput), py(r.p99_us));
  if (!points.empty()) points.pop_back();
  svg += fmt::format(
      "<polyline points=\"{}\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n", points);
  for (const LevelRow& r : rows)
    svg += fmt::format(
        "<circle cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"4\" fill=\"#1f77b4\"/>"
        "<text x=\"{2:.1f}\" y=\"{3:.1f}\">c={4}</text>\n",
        px(r.throughput), py(r.p99_us), px(r.throughput) + 6, py(r.p99_us) - 6, r.concurrency);
  svg += "</svg>\n";

  std::ofstream file(path);
  if (!file || !(file << svg) || !file.flush())
    throw PerfError("cannot write the SVG file '" + path + "'");
}

}  // namespace troupe::apps
