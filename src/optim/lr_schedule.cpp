// Warmup + cosine decay; see lr_schedule.h for the formula.
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace tera {

float LrSchedule::at(int64_t step) const {
  if (step < warmup) return lr * static_cast<float>(step + 1) / static_cast<float>(warmup);
  const int64_t span = std::max<int64_t>(1, total - 1 - warmup);
  const double p = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(span));
  return static_cast<float>(min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * p)));
}

}  // namespace tera
