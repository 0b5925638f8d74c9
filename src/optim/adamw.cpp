// AdamW segments and the update over them.
#include "optim/adamw.h"

#include <algorithm>

#include "core/check.h"

namespace tera {

AdamW::AdamW(AdamWConfig cfg, std::vector<Segment> segments) : cfg_(cfg), segments_(std::move(segments)) {
  int64_t n = 0;
  for (const auto& s : segments_) {
    TERA_ASSERT(s.begin <= s.end);
    state_offset_.push_back(n);
    n += s.end - s.begin;
  }
  ArenaLayout layout;
  layout.add("adam_state", n);
  m_ = Arena(layout);
  v_ = Arena(layout);
}

std::vector<AdamW::Segment> AdamW::segments_of(const ParamTable& table) {
  return segments_of(table, {{0, table.total_floats()}});
}

std::vector<AdamW::Segment> AdamW::segments_of(const ParamTable& table,
                                               const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  std::vector<Segment> out;
  for (const auto& [rb, re] : ranges) {
    table.for_each([&](const ParamEntry& e) {
      const int64_t b = std::max(rb, e.offset), x = std::min(re, e.offset + e.count);
      if (b < x) out.push_back({b, x, e.info->weight_decay, e.tp_split()});
    });
  }
  return out;
}

void AdamW::step(const Backend& be, const std::vector<Span>& spans, float lr, float grad_scale, int64_t step) {
  TERA_ASSERT(spans.size() == segments_.size());
  for (size_t i = 0; i < segments_.size(); ++i) {
    const Segment& s = segments_[i];
    const AdamWArgs args{.lr = lr,
                         .beta1 = cfg_.beta1,
                         .beta2 = cfg_.beta2,
                         .eps = cfg_.eps,
                         .weight_decay = s.decay ? cfg_.weight_decay : 0.0f,
                         .grad_scale = grad_scale,
                         .step = step};
    be.adamw(spans[i].param, spans[i].grad, m_.base() + state_offset_[i], v_.base() + state_offset_[i],
             s.end - s.begin, args);
  }
}

}  // namespace tera
