// AdamW segments and the update over them.
#include "optim/adamw.h"

#include <cmath>

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
  ArenaLayout layout("optimizer state");
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

bool AdamW::update_is_finite(const std::vector<Span>& spans, float lr, float grad_scale, int64_t step) const {
  TERA_ASSERT(spans.size() == segments_.size());
  const double bc1 = 1.0 - std::pow(static_cast<double>(cfg_.beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(cfg_.beta2), static_cast<double>(step));
  const float step_size = static_cast<float>(lr / bc1), inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const float b1 = cfg_.beta1, b2 = cfg_.beta2, eps = cfg_.eps, gs = grad_scale;
  int64_t bad = 0;
  for (size_t k = 0; k < segments_.size(); ++k) {
    const Segment& s = segments_[k];
    const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * (s.decay ? cfg_.weight_decay : 0.0f));
    const float* p = spans[k].param;
    const float* g = spans[k].grad;
    const float* m = m_.base() + state_offset_[k];
    const float* v = v_.base() + state_offset_[k];
    const int64_t n = s.end - s.begin;
#pragma omp parallel for reduction(+ : bad) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i] * gs;
      const float mi = b1 * m[i] + (1 - b1) * gi;
      const float vi = b2 * v[i] + (1 - b2) * gi * gi;
      const float pi = p[i] * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
      bad += !(std::isfinite(mi) && std::isfinite(vi) && std::isfinite(pi));
    }
  }
  return bad == 0;
}

}  // namespace tera
