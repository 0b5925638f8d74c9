// Least-squares fit of the GEMM efficiency curve (see calibration_fit.h). The
// error is relative (each sample weighs the same whatever its rate).
#include "plan/calibration_fit.h"

#include <algorithm>
#include <array>
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

namespace {

// Least squares for (u, v) in  u x1_i + v x2_i = 1  over rows (x1_i, x2_i):
// the relative-error fits below divide each equation by its measured time.
// False when the rows do not determine both (singular normal equations).
bool solve_two(const std::vector<std::array<double, 2>>& rows, double* u, double* v) {
  double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
  for (const auto& x : rows) {
    s11 += x[0] * x[0];
    s12 += x[0] * x[1];
    s22 += x[1] * x[1];
    r1 += x[0];
    r2 += x[1];
  }
  const double det = s11 * s22 - s12 * s12;
  if (!(std::fabs(det) > 1e-12 * s11 * s22)) return false;
  *u = (r1 * s22 - r2 * s12) / det;
  *v = (s11 * r2 - s12 * r1) / det;
  return true;
}

}  // namespace

OverheadBandwidthFit fit_overhead_bandwidth(const std::vector<TimedBytes>& samples) {
  TERA_ASSERT(!samples.empty(), "fit_overhead_bandwidth needs samples");
  // Minimise sum ((o + beta b_i - t_i) / t_i)^2: rows (1/t_i, b_i/t_i), target 1.
  std::vector<std::array<double, 2>> rows;
  for (const auto& s : samples) rows.push_back({1 / s.seconds, s.bytes / s.seconds});
  double o = 0, beta = 0;
  if (!solve_two(rows, &o, &beta) || o < 0 || beta <= 0) {
    // No (or a negative) intercept: beta alone.
    double num = 0, den = 0;
    for (const auto& x : rows) {
      num += x[1];
      den += x[1] * x[1];
    }
    o = 0;
    beta = num / den;
  }
  OverheadBandwidthFit f;
  f.overhead = o;
  f.bytes_per_s = 1 / beta;
  double err = 0;
  for (const auto& s : samples) err += std::pow((o + beta * s.bytes - s.seconds) / s.seconds, 2);
  f.rms_rel_error = std::sqrt(err / static_cast<double>(samples.size()));
  return f;
}

double fit_attention_efficiency(const std::vector<AttentionSample>& samples, double peak) {
  std::vector<double> eff;
  for (const auto& s : samples) {
    const double matmul = s.measured_seconds - s.other_seconds;
    if (matmul > 0 && s.flops > 0) eff.push_back(s.flops / (peak * matmul));
  }
  if (eff.empty()) return 0;
  std::sort(eff.begin(), eff.end());
  const size_t n = eff.size();
  return n % 2 == 1 ? eff[n / 2] : 0.5 * (eff[n / 2 - 1] + eff[n / 2]);
}

bool fit_attention_two(const std::vector<AttentionSample2>& samples, double peak, double bandwidth, double* attention,
                       double* softmax) {
  if (samples.size() < 2) return false;
  // Relative least squares: rows (f/y, b/y) . (u, v) = 1 with y the time left after overheads.
  std::vector<std::array<double, 2>> rows;
  for (const auto& s : samples) {
    const double y = s.measured_seconds - s.overhead_seconds;
    if (y <= 0) return false;
    rows.push_back({s.flops / y, s.softmax_bytes / y});
  }
  double u = 0, v = 0;
  if (!solve_two(rows, &u, &v) || u <= 0 || v <= 0) return false;
  *attention = 1 / (peak * u);
  *softmax = 1 / (bandwidth * v);
  return true;
}

}  // namespace tera
