// SVG layout: a 760 x 460 canvas, the plot area inside fixed margins; x maps
// log2(gpus) linearly, y maps efficiency percent linearly from 0.
#include "plan/scaling_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tera {

namespace {

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '&') o += "&amp;";
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

std::string gpu_label(double n) {
  if (n >= 1024 * 1024) return fmt::format("{:g}Mi", n / (1024.0 * 1024.0));
  if (n >= 16384) return fmt::format("{:g}Ki", n / 1024.0);
  return fmt::format("{:g}", n);
}

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

}  // namespace

PlotSeries plot_series(const SweepResult& r, const std::string& label) {
  PlotSeries s;
  s.label = label;
  for (const SweepPoint& p : r.points) {
    s.gpus.push_back(static_cast<double>(p.gpus));
    s.efficiency.push_back(100 * p.efficiency);
    s.tflops_per_gpu.push_back(p.eval.tflops_per_gpu);
  }
  return s;
}

std::string scaling_svg(const std::vector<PlotSeries>& series, const std::string& title) {
  const double W = 760, H = 460, left = 80, right = 30, top = 60, bottom = 70;
  const double pw = W - left - right, ph = H - top - bottom;
  double xmin = 1e300, xmax = 0, ymax = 110;
  for (const auto& s : series) {
    for (size_t i = 0; i < s.gpus.size(); ++i) {
      xmin = std::min(xmin, s.gpus[i]);
      xmax = std::max(xmax, s.gpus[i]);
      ymax = std::max(ymax, std::ceil(s.efficiency[i] / 10 + 1) * 10);
    }
  }
  if (xmax <= 0) xmin = xmax = 1;
  double lx0 = std::floor(std::log2(xmin)), lx1 = std::ceil(std::log2(xmax));
  if (lx1 <= lx0) lx1 = lx0 + 1;
  auto X = [&](double n) { return left + (std::log2(n) - lx0) / (lx1 - lx0) * pw; };
  auto Y = [&](double pct) { return top + ph - pct / ymax * ph; };

  std::string o = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">{3}</text>\n",
      W, H, W / 2, xml_escape(title));
  // Grid, ticks and tick labels.
  const double ystep = ymax > 150 ? 25 : (ymax > 60 ? 10 : 5);
  for (double v = 0; v <= ymax + 1e-9; v += ystep) {
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e0e0e0\"/>\n", left, Y(v),
                     left + pw, Y(v));
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"black\"/>\n", left - 5,
                     Y(v), left, Y(v));
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", left - 8, Y(v) + 4, v);
  }
  const int nticks = static_cast<int>(lx1 - lx0);
  const int every = nticks > 12 ? 2 : 1;
  for (int e = static_cast<int>(lx0); e <= static_cast<int>(lx1); e += every) {
    const double n = std::ldexp(1.0, e), x = X(n);
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e0e0e0\"/>\n", x, top, x,
                     top + ph);
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"black\"/>\n", x, top + ph,
                     x, top + ph + 5);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x, top + ph + 20,
                     gpu_label(n));
  }
  // Axes and their titles (with units).
  o += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"black\"/>\n",
                   left, top, pw, ph);
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">GPUs (log2 scale; Ki = 1024)</text>\n",
                   left + pw / 2, H - 22);
  o += fmt::format("<text x=\"18\" y=\"{:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {:.1f})\">"
                   "scaling efficiency (%, per-GPU throughput vs first point)</text>\n",
                   top + ph / 2, top + ph / 2);
  // Ideal line.
  o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#555\" stroke-width=\"1.5\" "
                   "stroke-dasharray=\"6,4\"/>\n",
                   left, Y(100), left + pw, Y(100));
  // Series.
  for (size_t k = 0; k < series.size(); ++k) {
    const PlotSeries& s = series[k];
    const char* color = kColors[k % (sizeof(kColors) / sizeof(kColors[0]))];
    std::string pts;
    for (size_t i = 0; i < s.gpus.size(); ++i) pts += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", X(s.gpus[i]), Y(s.efficiency[i]));
    o += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", pts, color);
    for (size_t i = 0; i < s.gpus.size(); ++i) {
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"><title>{:g} GPUs: {:.1f}%, {:.1f} "
                       "TFLOP/s per GPU</title></circle>\n",
                       X(s.gpus[i]), Y(s.efficiency[i]), color, s.gpus[i], s.efficiency[i], s.tflops_per_gpu[i]);
      o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"10\" fill=\"{}\">{:.1f}</text>\n",
                       X(s.gpus[i]), Y(s.efficiency[i]) - 9 - 12.0 * static_cast<double>(k), color, s.tflops_per_gpu[i]);
    }
  }
  // Legend, bottom right inside the plot.
  const double lh = 18, lw = 330, lx = left + pw - lw - 10;
  const double ly = top + ph - 10 - lh * static_cast<double>(series.size() + 2);
  o += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"white\" stroke=\"#999\"/>\n",
                   lx, ly, lw, lh * static_cast<double>(series.size() + 2) + 4);
  double yy = ly + lh;
  for (size_t k = 0; k < series.size(); ++k, yy += lh) {
    const char* color = kColors[k % (sizeof(kColors) / sizeof(kColors[0]))];
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                     lx + 8, yy - 4, lx + 36, yy - 4, color);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", lx + 44, yy, xml_escape(series[k].label));
  }
  o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#555\" stroke-width=\"1.5\" "
                   "stroke-dasharray=\"6,4\"/>\n<text x=\"{:.1f}\" y=\"{:.1f}\">ideal (100%)</text>\n",
                   lx + 8, yy - 4, lx + 36, yy - 4, lx + 44, yy);
  yy += lh;
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\">point labels: model TFLOP/s per GPU</text>\n",
                   lx + 8, yy);
  o += "</svg>\n";
  return o;
}

}  // namespace tera
