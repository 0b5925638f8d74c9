// Elementwise ops and reductions: residual add, bias + residual, AdamW (one
// range, and the multi-tensor entry with its dry run), sums of squares,
// non-finite counts and the loss sum. Each pass over a rank's parameters
// or gradients (many tensors) is one parallel region, not one per tensor.
// AdamW follows torch.optim.AdamW (decoupled decay applied to p before the
// Adam update; bias corrections folded into step size and denominator). The
// multi-tensor entry is one pass over a rank's shard: one parallel region in
// which each thread updates one contiguous share of the segments' elements
// (the bf16 compute copy written by the same pass), not a region per
// segment. Every element's arithmetic is the same however it is split.
#include <algorithm>
#include <cmath>
#include <vector>

#include <omp.h>

#include "core/check.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_ops.h"

namespace tera::cpu {

template <typename T>
void residual_forward(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void bias_residual(T* out, const T* a, const T* bias, const T* residual, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T* o = out + n * C;
    const T* x = a + n * C;
    const T* r = residual != nullptr ? residual + n * C : nullptr;
    if (bias != nullptr && r != nullptr) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = x[c] + bias[c] + r[c];
    } else if (bias != nullptr) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = x[c] + bias[c];
    } else if (r != nullptr) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = x[c] + r[c];
    } else if (o != x) {
      for (int64_t c = 0; c < C; ++c) o[c] = x[c];
    }
  }
}

namespace {

// The per-call scalars of the AdamW update (ops.h), shared by the update and
// its dry run so that both compute exactly the same values.
template <typename T>
struct AdamWScalars {
  T decay, step_size, inv_sqrt_bc2, b1, b2, eps, gs, omb1, omb2;
  AdamWScalars(const AdamWArgs& a, float wd) {
    const double bc1 = 1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(a.step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(a.step));
    decay = static_cast<T>(1.0 - static_cast<double>(a.lr) * wd);
    step_size = static_cast<T>(a.lr / bc1);
    inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(bc2));
    b1 = a.beta1;
    b2 = a.beta2;
    eps = a.eps;
    gs = a.grad_scale;
    omb1 = T(1) - b1;
    omb2 = T(1) - b2;
  }
};

// The update of elements [i0, i1) of one range, on the calling thread.
template <typename T>
void adamw_span(T* param, const T* grad, T* m, T* v, int64_t i0, int64_t i1, const AdamWScalars<T>& k,
                uint16_t* param_bf16) {
#pragma omp simd
  for (int64_t i = i0; i < i1; ++i) {
    const T g = grad[i] * k.gs;
    const T mi = k.b1 * m[i] + k.omb1 * g;
    const T vi = k.b2 * v[i] + k.omb2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const T p = param[i] * k.decay - k.step_size * mi / (std::sqrt(vi) * k.inv_sqrt_bc2 + k.eps);
    param[i] = p;
    if (param_bf16 != nullptr) param_bf16[i] = to_bf16(static_cast<float>(p));  // the bf16 compute copy
  }
}

// How many elements of [i0, i1) the update would make non-finite.
int64_t nonfinite_span(const float* param, const float* grad, const float* m, const float* v, int64_t i0, int64_t i1,
                       const AdamWScalars<float>& k) {
  int64_t bad = 0;
#pragma omp simd reduction(+ : bad)
  for (int64_t i = i0; i < i1; ++i) {
    const float g = grad[i] * k.gs;
    const float mi = k.b1 * m[i] + k.omb1 * g;
    const float vi = k.b2 * v[i] + k.omb2 * g * g;
    const float pi = param[i] * k.decay - k.step_size * mi / (std::sqrt(vi) * k.inv_sqrt_bc2 + k.eps);
    bad += !(std::isfinite(mi) && std::isfinite(vi) && std::isfinite(pi));
  }
  return bad;
}

// Inside a parallel region: the calling thread's share of the elements of
// ranges laid end to end (starts: the ranges' first elements in that
// order, then the total), cut at multiples of 16 elements (whole cache
// lines of floats); f(range, i0, i1) on each piece of the share.
template <typename F>
void for_my_share(const std::vector<int64_t>& starts, F f) {
  const int64_t total = starts.back(), nt = omp_get_num_threads(), t = omp_get_thread_num();
  auto cut = [&](int64_t k) { return k == nt ? total : std::min(total, total * k / nt / 16 * 16); };
  const int64_t lo = cut(t), hi = cut(t + 1);
  if (lo >= hi) return;
  const int64_t ranges = static_cast<int64_t>(starts.size()) - 1;
  int64_t r = std::upper_bound(starts.begin(), starts.end(), lo) - starts.begin() - 1;
  for (; r < ranges && starts[static_cast<size_t>(r)] < hi; ++r) {
    const int64_t s = starts[static_cast<size_t>(r)];
    const int64_t i0 = std::max(lo, s) - s, i1 = std::min(hi, starts[static_cast<size_t>(r) + 1]) - s;
    if (i0 < i1) f(r, i0, i1);
  }
}

}  // namespace

template <typename T>
void adamw(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWArgs& a, float wd, uint16_t* param_bf16) {
  const AdamWScalars<T> k(a, wd);
  TERA_ASSERT(param_bf16 == nullptr || sizeof(T) == 4, "adamw: a bf16 copy of fp64 parameters");
  const std::vector<int64_t> starts = {0, n};
#pragma omp parallel
  for_my_share(starts, [&](int64_t, int64_t i0, int64_t i1) { adamw_span(param, grad, m, v, i0, i1, k, param_bf16); });
}

int64_t adamw_nonfinite(const float* param, const float* grad, const float* m, const float* v, int64_t n,
                        const AdamWArgs& a, float wd) {
  const AdamWScalars<float> k(a, wd);
  const std::vector<int64_t> starts = {0, n};
  int64_t bad = 0;
#pragma omp parallel reduction(+ : bad)
  for_my_share(starts, [&](int64_t, int64_t i0, int64_t i1) { bad += nonfinite_span(param, grad, m, v, i0, i1, k); });
  return bad;
}

namespace {

// The reductions over parameter-sized ranges: chunks of kChunk elements of
// the ranges, all of them in one parallel loop (not a parallel region per
// range: each region's barrier waits for the slowest thread), each chunk's
// result kept and the chunks combined in order, so the result depends on
// the ranges only, not on the thread count. part_of(range, i0, i1) -> the
// chunk's value; returns the values, chunk c of range k at first[k] + c.
constexpr int64_t kChunk = 4096;

template <typename V, typename Part>
std::vector<V> chunk_values(const std::vector<int64_t>& n, std::vector<int64_t>& first, Part part_of) {
  first.assign(n.size() + 1, 0);
  for (size_t k = 0; k < n.size(); ++k) first[k + 1] = first[k] + (n[k] + kChunk - 1) / kChunk;
  std::vector<V> part(static_cast<size_t>(first.back()));
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < first.back(); ++c) {
    const size_t k = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), c) - first.begin() - 1);
    const int64_t i0 = (c - first[k]) * kChunk;
    part[static_cast<size_t>(c)] = part_of(k, i0, std::min(n[k], i0 + kChunk));
  }
  return part;
}

template <typename T>
double squares(const T* x, int64_t i0, int64_t i1) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = i0; i < i1; ++i) s += x[i] * x[i];
  return static_cast<double>(s);
}

int64_t nonfinite(const float* x, int64_t i0, int64_t i1) {
  int64_t bad = 0;
#pragma omp simd reduction(+ : bad)
  for (int64_t i = i0; i < i1; ++i) bad += !std::isfinite(x[i]);
  return bad;
}

}  // namespace

template <typename T>
double sum_squares(const T* x, int64_t n) {
  std::vector<int64_t> first;
  const std::vector<double> part =
      chunk_values<double>({n}, first, [&](size_t, int64_t i0, int64_t i1) { return squares(x, i0, i1); });
  double total = 0;
  for (double p : part) total += p;
  return total;
}

void accumulate_sum(double* acc, const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  acc[0] += s;
}

void sum_squares_segments(double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups) {
  std::vector<int64_t> n, first;
  for (int64_t k = 0; k < nsegs; ++k) n.push_back(segs[k].n);
  const std::vector<double> part = chunk_values<double>(
      n, first, [&](size_t k, int64_t i0, int64_t i1) { return squares(segs[k].data, i0, i1); });
  for (int64_t g = 0; g < groups; ++g) out[g] = 0;
  for (int64_t k = 0; k < nsegs; ++k) {
    for (int64_t c = first[static_cast<size_t>(k)]; c < first[static_cast<size_t>(k) + 1]; ++c) {
      out[segs[k].group] += part[static_cast<size_t>(c)];
    }
  }
}

void count_nonfinite_segments(double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups) {
  std::vector<int64_t> n, first;
  for (int64_t k = 0; k < nsegs; ++k) n.push_back(segs[k].n);
  const std::vector<int64_t> part = chunk_values<int64_t>(
      n, first, [&](size_t k, int64_t i0, int64_t i1) { return nonfinite(segs[k].data, i0, i1); });
  for (int64_t g = 0; g < groups; ++g) out[g] = 0;
  for (int64_t k = 0; k < nsegs; ++k) {
    for (int64_t c = first[static_cast<size_t>(k)]; c < first[static_cast<size_t>(k) + 1]; ++c) {
      out[segs[k].group] += static_cast<double>(part[static_cast<size_t>(c)]);
    }
  }
}

void adamw_segments(const AdamWSegment* segs, int64_t nsegs, const AdamWArgs& a, double* nonfinite) {
  std::vector<int64_t> starts(static_cast<size_t>(nsegs) + 1, 0);
  std::vector<AdamWScalars<float>> k;
  k.reserve(static_cast<size_t>(nsegs));
  for (int64_t r = 0; r < nsegs; ++r) {
    starts[static_cast<size_t>(r) + 1] = starts[static_cast<size_t>(r)] + segs[r].n;
    k.emplace_back(a, segs[r].weight_decay);
  }
  if (nonfinite != nullptr) {
    int64_t bad = 0;
#pragma omp parallel reduction(+ : bad)
    for_my_share(starts, [&](int64_t r, int64_t i0, int64_t i1) {
      const AdamWSegment& s = segs[r];
      bad += nonfinite_span(s.param, s.grad, s.m, s.v, i0, i1, k[static_cast<size_t>(r)]);
    });
    nonfinite[0] = static_cast<double>(bad);
    return;
  }
#pragma omp parallel
  for_my_share(starts, [&](int64_t r, int64_t i0, int64_t i1) {
    const AdamWSegment& s = segs[r];
    adamw_span(s.param, s.grad, s.m, s.v, i0, i1, k[static_cast<size_t>(r)], s.param_bf16);
  });
}

template void residual_forward<float>(float*, const float*, const float*, int64_t);
template void residual_forward<double>(double*, const double*, const double*, int64_t);
template void bias_residual<float>(float*, const float*, const float*, const float*, int64_t, int64_t);
template void bias_residual<double>(double*, const double*, const double*, const double*, int64_t, int64_t);
template void adamw<float>(float*, const float*, float*, float*, int64_t, const AdamWArgs&, float, uint16_t*);
template void adamw<double>(double*, const double*, double*, double*, int64_t, const AdamWArgs&, float, uint16_t*);
template double sum_squares<float>(const float*, int64_t);
template double sum_squares<double>(const double*, int64_t);

}  // namespace tera::cpu
