// Softmax + cross-entropy in three phases (see kernels/ops.h), so that a
// vocabulary split across tensor-parallel ranks can reduce the row max and the
// row sum between phases; on one rank the fused cross_entropy composes them.
// Row n: m = max_j l_j, Z = sum_j exp(l_j - m), loss = log Z + m - l_y,
// dl_j = dloss * (exp(l_j - m) / Z - [j == y]); padding columns are excluded
// from the softmax and get gradient 0. Sums are accumulated in double.
#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vec_math.h"

namespace tera::cpu {

template <typename T>
void ce_max(T* rowmax, const T* logits, int64_t N, int64_t valid, int64_t ld) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* row = logits + n * ld;
    T mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < valid; ++j) mx = row[j] > mx ? row[j] : mx;
    rowmax[n] = mx;
  }
}

template <typename T>
void ce_exp_sum(T* sums, T* target_logit, T* logits, const int32_t* targets, const T* rowmax, int64_t N, int64_t valid,
                int64_t ld, int64_t v0) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T* row = logits + n * ld;
    const int64_t y = static_cast<int64_t>(targets[n]) - v0;
    target_logit[n] = (targets[n] >= 0 && y >= 0 && y < valid) ? row[y] : T(0);
    const T mx = rowmax[n];
    double Z = 0;
    // Float partials per block of 1024 entries, added in double.
    for (int64_t j0 = 0; j0 < valid; j0 += 1024) {
      const int64_t j1 = j0 + 1024 < valid ? j0 + 1024 : valid;
      T z = 0;
#pragma omp simd reduction(+ : z)
      for (int64_t j = j0; j < j1; ++j) {
        row[j] = exp_v<T>(row[j] - mx);
        z += row[j];
      }
      Z += static_cast<double>(z);
    }
    for (int64_t j = valid; j < ld; ++j) row[j] = 0;
    sums[n] = static_cast<T>(Z);
  }
}

template <typename T>
void ce_finalize(T* losses, T* logits, const int32_t* targets, const T* rowmax, const T* sums, const T* target_logit,
                 int64_t N, int64_t valid, int64_t ld, int64_t v0, T dloss) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T* row = logits + n * ld;
    if (targets[n] < 0) {
      losses[n] = 0;
      for (int64_t j = 0; j < ld; ++j) row[j] = 0;
      continue;
    }
    const double Z = static_cast<double>(sums[n]);
    losses[n] = static_cast<T>(std::log(Z) + static_cast<double>(rowmax[n]) - static_cast<double>(target_logit[n]));
    const T scale = static_cast<T>(static_cast<double>(dloss) / Z);
#pragma omp simd
    for (int64_t j = 0; j < valid; ++j) row[j] *= scale;
    const int64_t y = static_cast<int64_t>(targets[n]) - v0;
    if (y >= 0 && y < valid) row[y] -= dloss;
  }
}

template <typename T>
void cross_entropy(T* losses, T* logits, const int32_t* targets, int64_t N, int64_t V, int64_t Vp, T dloss) {
  std::vector<T> rowmax(static_cast<size_t>(N)), sums(static_cast<size_t>(N)), ly(static_cast<size_t>(N));
  ce_max<T>(rowmax.data(), logits, N, V, Vp);
  ce_exp_sum<T>(sums.data(), ly.data(), logits, targets, rowmax.data(), N, V, Vp, 0);
  ce_finalize<T>(losses, logits, targets, rowmax.data(), sums.data(), ly.data(), N, V, Vp, 0, dloss);
}

template <typename T>
void softmax_row(T* probs, const T* logits, int64_t V, T temperature) {
  T mx = -INFINITY;
  for (int64_t j = 0; j < V; ++j) mx = logits[j] > mx ? logits[j] : mx;
  double Z = 0;
  for (int64_t j = 0; j < V; ++j) {
    probs[j] = static_cast<T>(std::exp(static_cast<double>((logits[j] - mx) / temperature)));
    Z += probs[j];
  }
  for (int64_t j = 0; j < V; ++j) probs[j] = static_cast<T>(probs[j] / Z);
}

template void ce_max<float>(float*, const float*, int64_t, int64_t, int64_t);
template void ce_max<double>(double*, const double*, int64_t, int64_t, int64_t);
template void ce_exp_sum<float>(float*, float*, float*, const int32_t*, const float*, int64_t, int64_t, int64_t, int64_t);
template void ce_exp_sum<double>(double*, double*, double*, const int32_t*, const double*, int64_t, int64_t, int64_t,
                                 int64_t);
template void ce_finalize<float>(float*, float*, const int32_t*, const float*, const float*, const float*, int64_t,
                                 int64_t, int64_t, int64_t, float);
template void ce_finalize<double>(double*, double*, const int32_t*, const double*, const double*, const double*,
                                  int64_t, int64_t, int64_t, int64_t, double);
template void cross_entropy<float>(float*, float*, const int32_t*, int64_t, int64_t, int64_t, float);
template void cross_entropy<double>(double*, double*, const int32_t*, int64_t, int64_t, int64_t, double);
template void softmax_row<float>(float*, const float*, int64_t, float);
template void softmax_row<double>(double*, const double*, int64_t, double);

}  // namespace tera::cpu
