// Rotary embedding frequencies, one definition for every backend: the CPU
// kernel, the GPU kernel (nvcc, hipcc and the gpu-emu host compile of the
// same header) and the tests' fp64 references all call rope_inv_freq, so no
// two of them can disagree about a frequency. Plain data (passed by value to
// GPU kernels).
//
// Pair i of a head of size hs (i in [0, hs/2)) turns by pos * inv_freq(i),
//   inv_freq(i) = theta^(-2i/hs),
// and with Llama 3.1's "llama3" rope_scaling (Meta's reference, Hugging
// Face's _compute_llama3_parameters), with wavelen = 2 pi / inv_freq,
// low = original / low_freq_factor, high = original / high_freq_factor:
//   wavelen < high:   inv_freq                    (high frequencies kept)
//   wavelen > low:    inv_freq / factor           (low frequencies stretched)
//   otherwise:        (1 - s) inv_freq / factor + s inv_freq,
//                     s = (original / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
// factor = 1 is no scaling: inv_freq exactly, as before scaling existed.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define TERA_ROPE_HD __host__ __device__ inline
#else
#define TERA_ROPE_HD inline
#endif

namespace tera {

struct RopeParams {
  double theta = 10000;                  // rotary base (model.rope_theta)
  double factor = 1;                     // llama3 scaling; 1: none
  double low_freq_factor = 1;            // llama3: wavelengths above original / this are divided by factor
  double high_freq_factor = 4;           // llama3: wavelengths below original / this are kept
  double original_max_positions = 8192;  // llama3: the context length the model was pretrained with
};

// Angle per position of pair i of a head of size hs (see the header comment).
TERA_ROPE_HD double rope_inv_freq(const RopeParams& p, int64_t i, int64_t hs) {
  const double inv = pow(p.theta, -2.0 * static_cast<double>(i) / static_cast<double>(hs));
  if (p.factor == 1.0) return inv;
  const double kTwoPi = 6.283185307179586476925286766559;
  const double wavelen = kTwoPi / inv;
  if (wavelen < p.original_max_positions / p.high_freq_factor) return inv;
  if (wavelen > p.original_max_positions / p.low_freq_factor) return inv / p.factor;
  const double s = (p.original_max_positions / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
  return (1.0 - s) * inv / p.factor + s * inv;
}

}  // namespace tera
