// A weighted blend of training datasets, as Megatron's --data-path 0.3 A 0.7 B
// (config: data.blend = [[0.3, "A"], [0.7, "B"]]). Weights are normalised to
// shares w_s. Each global sample g is drawn from one source, chosen as
// Megatron's BlendedDataset builds its index: sample j goes to the source
// whose achieved count is furthest below its share, i.e. the first s with the
// largest  w_s * max(j, 1) - count_s(j)  (count_s(j): samples of s among the
// first j). That choice is computed once for a period of P = 65536 samples
// and repeated, so sample g = q*P + r comes from source s = src[r] as that
// source's sample number  q * n_s + rank[r]  (n_s: samples of s per period,
// rank[r]: samples of s before r in the period). Within a source, samples are
// drawn by the source's own TokenLoader (token_loader.h), seeded with
// train.seed ^ (s * 0x9E3779B97F4A7C15) (source 0: train.seed itself, so a
// one-source blend reads what data.train = that prefix reads).
// Like TokenLoader, the blend keeps no cursor: sample g depends only on
// (sources, weights, seq_len, seed, g), so a run resumes at the same window
// from next_sample alone; the checkpoint's fingerprint covers every source's
// fingerprint and weight.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/token_loader.h"

namespace tera {

struct BlendSource {
  double weight = 0;                    // > 0; normalised over the blend
  std::unique_ptr<TokenDataset> data;   // the source's training stream
  std::string what;                     // names it in errors: data.blend[i] = "A"
};

class BlendLoader final : public SampleLoader {
 public:
  static constexpr int64_t kPeriod = int64_t{1} << 16;

  // Errors (a weight not > 0, a source without a window) name the source.
  static Expected<std::unique_ptr<BlendLoader>> create(std::vector<BlendSource> sources, int64_t seq_len,
                                                       uint64_t seed);

  struct Pick {
    int64_t source, sample;  // the source, and the sample index within it
  };
  Pick pick(int64_t g) const;
  const std::vector<double>& shares() const { return shares_; }
  const TokenDataset& source(size_t s) const { return *sources_[s].data; }

  void fill(int64_t first, int64_t count, int32_t* tokens, int32_t* targets) const override;
  LoaderState state(int64_t next_sample) const override;
  Expected<int64_t> resume(const LoaderState& s, const std::string& what) const override;

 private:
  BlendLoader() = default;
  std::vector<BlendSource> sources_;
  std::vector<std::unique_ptr<TokenLoader>> loaders_;  // one per source
  std::vector<double> shares_;                         // normalised weights [S]
  std::vector<int64_t> per_period_;                    // n_s [S]
  std::vector<uint32_t> src_;                          // [P]
  std::vector<int64_t> rank_;                          // [P]
  int64_t T_ = 0;
  uint64_t seed_ = 0, fingerprint_ = 0;
};

}  // namespace tera
