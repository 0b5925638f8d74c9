// AdamW segments and the update over them.
#include "optim/adamw.h"

#include <cmath>

#include <algorithm>

#include "core/check.h"

namespace tera {

AdamW::AdamW(AdamWConfig cfg, std::vector<Segment> segments, const Backend& be, RankMemory& memory)
    : cfg_(cfg), segments_(std::move(segments)), be_(be) {
  int64_t n = 0;
  for (const auto& s : segments_) {
    TERA_ASSERT(s.begin <= s.end);
    state_offset_.push_back(n);
    n += s.end - s.begin;
  }
  const DeviceArena& opt = memory.arena(MemoryClass::optimizer);
  TERA_ASSERT(opt.count("adam_m") == n && opt.count("adam_v") == n,
              "the memory plan's Adam moments hold " + std::to_string(opt.count("adam_m")) + " floats; the segments " +
                  std::to_string(n));
  m_ = opt.get<float>("adam_m");
  v_ = opt.get<float>("adam_v");
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

AdamWArgs AdamW::args(float lr, float grad_scale, int64_t step) const {
  return AdamWArgs{.lr = lr, .beta1 = cfg_.beta1, .beta2 = cfg_.beta2, .eps = cfg_.eps, .grad_scale = grad_scale, .step = step};
}

std::vector<AdamWSegment> AdamW::batch(const std::vector<Span>& spans) const {
  TERA_ASSERT(spans.size() == segments_.size());
  std::vector<AdamWSegment> out;
  out.reserve(segments_.size());
  for (size_t i = 0; i < segments_.size(); ++i) {
    const Segment& s = segments_[i];
    out.push_back({spans[i].param, spans[i].grad, m_ + state_offset_[i], v_ + state_offset_[i], s.end - s.begin,
                   s.decay ? cfg_.weight_decay : 0.0f, spans[i].param_bf16});
  }
  return out;
}

void AdamW::step(const std::vector<Span>& spans, float lr, float grad_scale, int64_t step) {
  const std::vector<AdamWSegment> segs = batch(spans);
  be_.adamw(segs.data(), static_cast<int64_t>(segs.size()), args(lr, grad_scale, step), nullptr);
}

bool AdamW::update_certainly_finite(float lr, float grad_scale, double grad_norm, int64_t step) const {
  const double b1 = cfg_.beta1, b2 = cfg_.beta2;
  if (!(b1 < std::sqrt(b2)) || !(b2 < 1)) return false;
  if (!(grad_norm * grad_scale < 1e18)) return false;
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(step));
  const double ratio = (1 - b1) / (std::sqrt(1 - b2) * (1 - b1 / std::sqrt(b2)));
  const double u = static_cast<double>(lr) * std::sqrt(bc2) / bc1 * ratio;
  const double decay = 1.0 - static_cast<double>(lr) * cfg_.weight_decay;
  return u <= 1e30 && std::abs(decay) <= 1.0;
}

void AdamW::count_nonfinite_update(const std::vector<Span>& spans, float lr, float grad_scale, int64_t step,
                                   double* nonfinite) const {
  const std::vector<AdamWSegment> segs = batch(spans);
  be_.adamw(segs.data(), static_cast<int64_t>(segs.size()), args(lr, grad_scale, step), nonfinite);
}

}  // namespace tera
