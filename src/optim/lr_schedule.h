// Learning rate per step (0-based step s, S total steps, W warmup steps):
//   s <  W: lr * (s + 1) / W                                   (linear warmup)
//   s >= W: min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2,    p = (s - W) / max(1, S - 1 - W)
// so the last step runs at min_lr; W = 0 starts at lr. A pure function of the
// step: a resumed run continues the same curve.
#pragma once

#include <cstdint>

namespace tera {

struct LrSchedule {
  float lr = 3e-4f;
  float min_lr = 3e-5f;
  int64_t warmup = 0;
  int64_t total = 1;
  float at(int64_t step) const;
};

}  // namespace tera
