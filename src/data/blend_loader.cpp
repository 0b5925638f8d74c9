// The weighted blend's period table and sample lookup; see blend_loader.h.
#include "data/blend_loader.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>

#include "core/check.h"

namespace tera {

Expected<std::unique_ptr<BlendLoader>> BlendLoader::create(std::vector<BlendSource> sources, int64_t seq_len,
                                                           uint64_t seed) {
  TERA_ASSERT(seq_len > 0);
  if (sources.empty()) return Status::error("data.blend: names no dataset");
  double total = 0;
  for (const BlendSource& s : sources) {
    if (!(s.weight > 0) || !std::isfinite(s.weight)) {
      return Status::error(fmt::format("{}: weight {} is not positive; every data.blend weight must be > 0", s.what,
                                       s.weight));
    }
    total += s.weight;
  }
  auto b = std::unique_ptr<BlendLoader>(new BlendLoader());
  b->T_ = seq_len;
  b->seed_ = seed;
  const size_t S = sources.size();
  uint64_t fp = 0xcbf29ce484222325ull;
  auto mix = [&fp](uint64_t v) { fp = (fp ^ v) * 0x100000001b3ull; };
  for (size_t s = 0; s < S; ++s) {
    b->shares_.push_back(sources[s].weight / total);
    const uint64_t source_seed = seed ^ (static_cast<uint64_t>(s) * 0x9E3779B97F4A7C15ull);
    auto l = TokenLoader::create(*sources[s].data, seq_len, source_seed, sources[s].what);
    if (!l) return l.status();
    b->loaders_.push_back(std::move(*l));
    mix(sources[s].data->fingerprint());
    mix(std::bit_cast<uint64_t>(b->shares_[s]));
  }
  b->fingerprint_ = fp;
  // Megatron's greedy choice over one period.
  b->per_period_.assign(S, 0);
  b->src_.resize(static_cast<size_t>(kPeriod));
  b->rank_.resize(static_cast<size_t>(kPeriod));
  for (int64_t j = 0; j < kPeriod; ++j) {
    const double at = std::max<double>(static_cast<double>(j), 1.0);
    size_t best = 0;
    double best_err = b->shares_[0] * at - static_cast<double>(b->per_period_[0]);
    for (size_t s = 1; s < S; ++s) {
      const double e = b->shares_[s] * at - static_cast<double>(b->per_period_[s]);
      if (e > best_err) {
        best_err = e;
        best = s;
      }
    }
    b->src_[static_cast<size_t>(j)] = static_cast<uint32_t>(best);
    b->rank_[static_cast<size_t>(j)] = b->per_period_[best]++;
  }
  b->sources_ = std::move(sources);
  return b;
}

BlendLoader::Pick BlendLoader::pick(int64_t g) const {
  TERA_ASSERT(g >= 0);
  const int64_t q = g / kPeriod, r = g % kPeriod;
  const uint32_t s = src_[static_cast<size_t>(r)];
  return {static_cast<int64_t>(s), q * per_period_[s] + rank_[static_cast<size_t>(r)]};
}

void BlendLoader::fill(int64_t first, int64_t count, int32_t* tokens, int32_t* targets) const {
  for (int64_t i = 0; i < count; ++i) {
    const Pick p = pick(first + i);
    loaders_[static_cast<size_t>(p.source)]->fill(p.sample, 1, tokens + i * T_, targets + i * T_);
  }
}

LoaderState BlendLoader::state(int64_t next_sample) const { return LoaderState{next_sample, seed_, T_, fingerprint_}; }

Expected<int64_t> BlendLoader::resume(const LoaderState& s, const std::string& what) const {
  if (s.seed != seed_ || s.seq_len != T_) {
    return Status::error(
        fmt::format("{}: saved with train.seed = {} and model.seq_len = {}, but this run has {} and {}; "
                    "resume with the saved values",
                    what, s.seed, s.seq_len, seed_, T_));
  }
  if (s.data_fingerprint != fingerprint_) {
    return Status::error(fmt::format("{}: saved while reading different training data (fingerprint {:016x}, now "
                                     "{:016x}); resume on the same data.blend (prefixes and weights)",
                                     what, s.data_fingerprint, fingerprint_));
  }
  return s.next_sample;
}

}  // namespace tera
