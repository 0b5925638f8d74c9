// Fits the GEMM efficiency curve of a cluster preset to measured GEMM rates:
// rate(m, n, k) = P * f(m) f(n) f(k), f(d) = d / (d + h), the same curve the
// cost model uses. h is found by a search over [0, 4096], P by least squares
// for each h. Used by `tera calibrate` for the `local` preset.
#pragma once

#include <vector>

namespace tera {

struct GemmSample {
  double m, n, k;
  double flops_per_s;  // measured
};

struct GemmFit {
  double peak = 0;      // P, FLOP/s (asymptotic rate of large GEMMs)
  double half_dim = 0;  // h
  double rms_rel_error = 0;  // of the fitted rates against the samples
};

GemmFit fit_gemm_curve(const std::vector<GemmSample>& samples);

}  // namespace tera
