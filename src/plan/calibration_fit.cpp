// Least-squares fit of the GEMM efficiency curve (see calibration_fit.h). The
// error is relative (each sample weighs the same whatever its rate).
#include "plan/calibration_fit.h"

#include <cmath>

#include "core/check.h"

namespace tera {

GemmFit fit_gemm_curve(const std::vector<GemmSample>& samples) {
  TERA_ASSERT(!samples.empty(), "fit_gemm_curve needs samples");
  GemmFit best;
  double best_err = 1e300;
  for (double h = 0; h <= 4096; h += h < 64 ? 1 : (h < 512 ? 4 : 16)) {
    // Minimise sum ((P F_i - r_i) / r_i)^2 over P: P = sum(F_i / r_i) / sum(F_i^2 / r_i^2).
    double num = 0, den = 0;
    for (const auto& s : samples) {
      const double F = s.m / (s.m + h) * s.n / (s.n + h) * s.k / (s.k + h);
      num += F / s.flops_per_s;
      den += F * F / (s.flops_per_s * s.flops_per_s);
    }
    const double P = num / den;
    double err = 0;
    for (const auto& s : samples) {
      const double F = s.m / (s.m + h) * s.n / (s.n + h) * s.k / (s.k + h);
      err += std::pow((P * F - s.flops_per_s) / s.flops_per_s, 2);
    }
    if (err < best_err) {
      best_err = err;
      best = {P, h, std::sqrt(err / static_cast<double>(samples.size()))};
    }
  }
  return best;
}

}  // namespace tera
