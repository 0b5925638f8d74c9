// A scaling curve as a hand-written SVG a person reads at a glance: GPUs on a
// log2 x axis (ticks at powers of two), scaling efficiency in percent on the
// y axis, the ideal 100% as a dashed line, one polyline with markers per
// series, each point labelled with its model TFLOP/s per GPU, and a legend.
// Pure text; the caller writes it (AtomicFile).
#pragma once

#include <string>
#include <vector>

#include "plan/scaling.h"

namespace tera {

struct PlotSeries {
  std::string label;
  std::vector<double> gpus, efficiency, tflops_per_gpu;  // one entry per point
};

PlotSeries plot_series(const SweepResult& r, const std::string& label);
std::string scaling_svg(const std::vector<PlotSeries>& series, const std::string& title);

}  // namespace tera
