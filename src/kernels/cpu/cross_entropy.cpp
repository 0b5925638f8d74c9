// Fused softmax + cross-entropy with the gradient written over the logits.
// Row n: m = max_{j<V} l_j, Z = sum_{j<V} exp(l_j - m), loss = log Z + m - l_y,
// dl_j = dloss * (exp(l_j - m) / Z - [j == y]) for j < V; padded columns j >= V
// get 0 and never enter the softmax. The loss is accumulated in double.
#include <cmath>

#include "core/check.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vec_math.h"

namespace tera::cpu {

template <typename T>
void cross_entropy(T* losses, T* logits, const int32_t* targets, int64_t N, int64_t V, int64_t Vp, T dloss) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T* row = logits + n * Vp;
    const int32_t y = targets[n];
    TERA_DASSERT(y < V, "target id out of range");
    if (y < 0) {
      losses[n] = 0;
      for (int64_t j = 0; j < Vp; ++j) row[j] = 0;
      continue;
    }
    T mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < V; ++j) mx = row[j] > mx ? row[j] : mx;
    const T ly = row[y];
    double Z = 0;
    // Block the sum: float partials per 1024 entries, added in double.
    for (int64_t j0 = 0; j0 < V; j0 += 1024) {
      const int64_t j1 = j0 + 1024 < V ? j0 + 1024 : V;
      T z = 0;
#pragma omp simd reduction(+ : z)
      for (int64_t j = j0; j < j1; ++j) {
        row[j] = exp_v<T>(row[j] - mx);
        z += row[j];
      }
      Z += static_cast<double>(z);
    }
    losses[n] = static_cast<T>(std::log(Z) + static_cast<double>(mx) - static_cast<double>(ly));
    const T scale = static_cast<T>(static_cast<double>(dloss) / Z);
#pragma omp simd
    for (int64_t j = 0; j < V; ++j) row[j] *= scale;
    row[y] -= dloss;
    for (int64_t j = V; j < Vp; ++j) row[j] = 0;
  }
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

template void cross_entropy<float>(float*, float*, const int32_t*, int64_t, int64_t, int64_t, float);
template void cross_entropy<double>(double*, double*, const int32_t*, int64_t, int64_t, int64_t, double);
template void softmax_row<float>(float*, const float*, int64_t, float);
template void softmax_row<double>(double*, const double*, int64_t, double);

}  // namespace tera::cpu
