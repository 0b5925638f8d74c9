// Elementwise ops and reductions: residual add, bias + residual, AdamW (one
// range, and the multi-tensor entry with its dry run), sums of squares,
// non-finite counts and the loss sum.
// AdamW follows torch.optim.AdamW (decoupled decay applied to p before the
// Adam update; bias corrections folded into step size and denominator).
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

}  // namespace

template <typename T>
void adamw(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWArgs& a, float wd, uint16_t* param_bf16) {
  const AdamWScalars<T> k(a, wd);
  TERA_ASSERT(param_bf16 == nullptr || sizeof(T) == 4, "adamw: a bf16 copy of fp64 parameters");
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
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

int64_t adamw_nonfinite(const float* param, const float* grad, const float* m, const float* v, int64_t n,
                        const AdamWArgs& a, float wd) {
  const AdamWScalars<float> k(a, wd);
  int64_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * k.gs;
    const float mi = k.b1 * m[i] + k.omb1 * g;
    const float vi = k.b2 * v[i] + k.omb2 * g * g;
    const float pi = param[i] * k.decay - k.step_size * mi / (std::sqrt(vi) * k.inv_sqrt_bc2 + k.eps);
    bad += !(std::isfinite(mi) && std::isfinite(vi) && std::isfinite(pi));
  }
  return bad;
}

template <typename T>
double sum_squares(const T* x, int64_t n) {
  // Per-thread partials in double, combined in thread order (deterministic).
  const int nt = omp_get_max_threads();
  std::vector<double> part(static_cast<size_t>(nt), 0.0);
#pragma omp parallel num_threads(nt)
  {
    double acc = 0;
#pragma omp for schedule(static)
    for (int64_t i0 = 0; i0 < n; i0 += 4096) {
      const int64_t i1 = i0 + 4096 < n ? i0 + 4096 : n;
      T s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = i0; i < i1; ++i) s += x[i] * x[i];
      acc += static_cast<double>(s);
    }
    part[static_cast<size_t>(omp_get_thread_num())] = acc;
  }
  double total = 0;
  for (double p : part) total += p;
  return total;
}

int64_t count_nonfinite(const float* x, int64_t n) {
  int64_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static)
  for (int64_t i = 0; i < n; ++i) bad += !std::isfinite(x[i]);
  return bad;
}

void accumulate_sum(double* acc, const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  acc[0] += s;
}

void sum_squares_segments(double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups) {
  for (int64_t g = 0; g < groups; ++g) out[g] = 0;
  for (int64_t k = 0; k < nsegs; ++k) out[segs[k].group] += sum_squares<float>(segs[k].data, segs[k].n);
}

void count_nonfinite_segments(double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups) {
  for (int64_t g = 0; g < groups; ++g) out[g] = 0;
  for (int64_t k = 0; k < nsegs; ++k) out[segs[k].group] += static_cast<double>(count_nonfinite(segs[k].data, segs[k].n));
}

void adamw_segments(const AdamWSegment* segs, int64_t nsegs, const AdamWArgs& a, double* nonfinite) {
  if (nonfinite != nullptr) {
    int64_t bad = 0;
    for (int64_t k = 0; k < nsegs; ++k) {
      const AdamWSegment& s = segs[k];
      bad += adamw_nonfinite(s.param, s.grad, s.m, s.v, s.n, a, s.weight_decay);
    }
    nonfinite[0] = static_cast<double>(bad);
    return;
  }
  for (int64_t k = 0; k < nsegs; ++k) {
    const AdamWSegment& s = segs[k];
    adamw<float>(s.param, s.grad, s.m, s.v, s.n, a, s.weight_decay, s.param_bf16);
  }
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
