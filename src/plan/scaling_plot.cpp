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

namespace {

// The plot area and its scales: x is log2 of the GPU count, y the
// efficiency in percent.
struct PlotFrame {
  double W = 760, H = 460, left = 80, right = 30, top = 60, bottom = 70;
  double pw = W - left - right, ph = H - top - bottom;
  double lx0 = 0, lx1 = 1, ymax = 110;
  double X(double n) const { return left + (std::log2(n) - lx0) / (lx1 - lx0) * pw; }
  double Y(double pct) const { return top + ph - pct / ymax * ph; }
};

// The scales that hold every point: whole powers of two across, 110% or
// the next 10% above the highest point up.
PlotFrame frame_for(const std::vector<PlotSeries>& series) {
  PlotFrame f;
  double xmin = 1e300, xmax = 0;
  for (const auto& s : series) {
    for (size_t i = 0; i < s.gpus.size(); ++i) {
      xmin = std::min(xmin, s.gpus[i]);
      xmax = std::max(xmax, s.gpus[i]);
      f.ymax = std::max(f.ymax, std::ceil(s.efficiency[i] / 10 + 1) * 10);
    }
  }
  if (xmax <= 0) xmin = xmax = 1;
  f.lx0 = std::floor(std::log2(xmin));
  f.lx1 = std::ceil(std::log2(xmax));
  if (f.lx1 <= f.lx0) f.lx1 = f.lx0 + 1;
  return f;
}

// Grid, ticks and their labels, the axes with their titles, the ideal line.
std::string svg_axes(const PlotFrame& f) {
  std::string o;
  // Grid, ticks and tick labels.
  const double ystep = f.ymax > 150 ? 25 : (f.ymax > 60 ? 10 : 5);
  for (double v = 0; v <= f.ymax + 1e-9; v += ystep) {
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e0e0e0\"/>\n", f.left, f.Y(v),
                     f.left + f.pw, f.Y(v));
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"black\"/>\n", f.left - 5,
                     f.Y(v), f.left, f.Y(v));
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", f.left - 8, f.Y(v) + 4, v);
  }
  const int nticks = static_cast<int>(f.lx1 - f.lx0);
  const int every = nticks > 12 ? 2 : 1;
  for (int e = static_cast<int>(f.lx0); e <= static_cast<int>(f.lx1); e += every) {
    const double n = std::ldexp(1.0, e), x = f.X(n);
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e0e0e0\"/>\n", x, f.top, x,
                     f.top + f.ph);
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"black\"/>\n", x, f.top + f.ph,
                     x, f.top + f.ph + 5);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x, f.top + f.ph + 20,
                     gpu_label(n));
  }
  // Axes and their titles (with units).
  o += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"black\"/>\n",
                   f.left, f.top, f.pw, f.ph);
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">GPUs (log2 scale; Ki = 1024)</text>\n",
                   f.left + f.pw / 2, f.H - 22);
  o += fmt::format("<text x=\"18\" y=\"{:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {:.1f})\">"
                   "scaling efficiency (%, per-GPU throughput vs first point)</text>\n",
                   f.top + f.ph / 2, f.top + f.ph / 2);
  // Ideal line.
  o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#555\" stroke-width=\"1.5\" "
                   "stroke-dasharray=\"6,4\"/>\n",
                   f.left, f.Y(100), f.left + f.pw, f.Y(100));
  return o;
}

// Each series: its line, its points (with a tooltip) and their TFLOP/s labels.
std::string svg_series(const PlotFrame& f, const std::vector<PlotSeries>& series) {
  std::string o;
  // Series.
  for (size_t k = 0; k < series.size(); ++k) {
    const PlotSeries& s = series[k];
    const char* color = kColors[k % (sizeof(kColors) / sizeof(kColors[0]))];
    std::string pts;
    for (size_t i = 0; i < s.gpus.size(); ++i) pts += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", f.X(s.gpus[i]), f.Y(s.efficiency[i]));
    o += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", pts, color);
    for (size_t i = 0; i < s.gpus.size(); ++i) {
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"><title>{:g} GPUs: {:.1f}%, {:.1f} "
                       "TFLOP/s per GPU</title></circle>\n",
                       f.X(s.gpus[i]), f.Y(s.efficiency[i]), color, s.gpus[i], s.efficiency[i], s.tflops_per_gpu[i]);
      o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"10\" fill=\"{}\">{:.1f}</text>\n",
                       f.X(s.gpus[i]), f.Y(s.efficiency[i]) - 9 - 12.0 * static_cast<double>(k), color, s.tflops_per_gpu[i]);
    }
  }
  return o;
}

// The legend, bottom right inside the plot.
std::string svg_legend(const PlotFrame& f, const std::vector<PlotSeries>& series) {
  std::string o;
  const double lh = 18, lw = 330, lx = f.left + f.pw - lw - 10;
  const double ly = f.top + f.ph - 10 - lh * static_cast<double>(series.size() + 2);
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
  return o;
}

}  // namespace

std::string scaling_svg(const std::vector<PlotSeries>& series, const std::string& title) {
  const PlotFrame f = frame_for(series);
  std::string o = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">{3}</text>\n",
      f.W, f.H, f.W / 2, xml_escape(title));
  o += svg_axes(f);
  o += svg_series(f, series);
  o += svg_legend(f, series);
  o += "</svg>\n";
  return o;
}

}  // namespace tera
