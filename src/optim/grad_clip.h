// Global gradient-norm clipping, as torch.nn.utils.clip_grad_norm_:
//   coef = min(1, max_norm / (norm + 1e-6)), applied to every gradient.
// The norm is over the whole model; callers with sharded gradients sum their
// local squares across ranks before calling clip_coefficient.
#pragma once

#include <cmath>

namespace tera {

// max_norm <= 0 disables clipping.
inline float clip_coefficient(double grad_norm, float max_norm) {
  if (max_norm <= 0.0f || !std::isfinite(grad_norm)) return 1.0f;
  const double coef = static_cast<double>(max_norm) / (grad_norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

}  // namespace tera
