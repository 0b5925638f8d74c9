// AdamW segments: the parameter table intersected with the owned range.
#include "optim/adamw.h"

#include <algorithm>

#include "core/check.h"

namespace tera {

AdamW::AdamW(const ParamTable& table, AdamWConfig cfg, int64_t begin, int64_t end)
    : cfg_(cfg), begin_(begin), end_(end) {
  TERA_ASSERT(0 <= begin && begin <= end && end <= table.total_floats());
  table.for_each([&](const ParamEntry& e) {
    const int64_t b = std::max(begin, e.offset), x = std::min(end, e.offset + e.count);
    if (b < x) segments_.push_back({b, x, e.info->weight_decay});
  });
  ArenaLayout layout;
  layout.add("adam_state", end - begin);
  m_ = Arena(layout);
  v_ = Arena(layout);
}

void AdamW::step(const Backend& be, float* params, const float* grads, float lr, float grad_scale, int64_t step) {
  for (const auto& s : segments_) {
    const AdamWArgs args{.lr = lr,
                         .beta1 = cfg_.beta1,
                         .beta2 = cfg_.beta2,
                         .eps = cfg_.eps,
                         .weight_decay = s.decay ? cfg_.weight_decay : 0.0f,
                         .grad_scale = grad_scale,
                         .step = step};
    const int64_t local = s.begin - begin_;
    be.adamw(params + s.begin, grads + s.begin, m_.base() + local, v_.base() + local, s.end - s.begin, args);
  }
}

}  // namespace tera
