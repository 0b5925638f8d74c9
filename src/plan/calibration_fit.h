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

// t = overhead + bytes / bw, as the cost model prices memory-bound ops and
// (with a latency for the overhead) collectives. Weighted least squares on
// the relative error (small and large samples count alike); a negative
// intercept is clamped to 0 and bw refitted alone.
struct TimedBytes {
  double bytes;    // bytes the cost model counts for the op
  double seconds;  // measured
};
struct OverheadBandwidthFit {
  double overhead = 0;     // seconds per op
  double bytes_per_s = 0;  // effective bandwidth
  double rms_rel_error = 0;
};
OverheadBandwidthFit fit_overhead_bandwidth(const std::vector<TimedBytes>& samples);

// Attention without a fused kernel: the cost model prices its matmuls at
// `efficiency * peak`, the rest (softmax, per-op overhead) separately. Per
// sample the efficiency that explains the measured time,
//   flops / (peak * eff) + other_seconds = measured_seconds,
// and the median over samples (robust to one disturbed measurement). Samples
// measured faster than their other work alone are skipped; 0 if none is left.
struct AttentionSample {
  double flops;          // attention matmul FLOPs in the cost model's op table
  double other_seconds;  // the cost model's time for everything else in the same kernels
  double measured_seconds;
};
double fit_attention_efficiency(const std::vector<AttentionSample>& samples, double peak);

// Attention with a per-score cost as well: from two or more samples of
// different shapes (head sizes), least squares for u and v in
//   measured - overhead = flops * u + softmax_bytes * v,
// u = 1 / (peak * attention), v = 1 / (bandwidth * softmax). Returns false
// (outputs untouched) when the samples do not determine both positively.
struct AttentionSample2 {
  double flops, softmax_bytes, overhead_seconds, measured_seconds;
};
bool fit_attention_two(const std::vector<AttentionSample2>& samples, double peak, double bandwidth, double* attention,
                       double* softmax);

}  // namespace tera
