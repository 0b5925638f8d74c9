// Token datasets and the batch sampler the trainer reads through.
// A TokenDataset is a flat token stream; a Sampler turns a global sample index
// into one training window (T inputs + T shifted targets). Sample i of a run
// depends only on (seed, i), so the global batch of step s is the samples
// [s*G, (s+1)*G) whatever the process layout (DESIGN.md invariant 1); a
// data-parallel rank reads a contiguous slice of it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace tera {

class TokenDataset {
 public:
  virtual ~TokenDataset() = default;
  virtual int64_t num_tokens() const = 0;
  virtual int64_t vocab() const = 0;
  // Copies tokens [offset, offset + n) into out.
  virtual void read(int64_t offset, int64_t n, int32_t* out) const = 0;
  virtual std::string describe() const = 0;  // for logs: file and size
};

// Raw bytes of a text file as tokens (vocab 256). Holds the bytes in memory.
class ByteDataset final : public TokenDataset {
 public:
  // Whole file, or the byte range [begin, end) of it.
  static Expected<std::unique_ptr<ByteDataset>> open(const std::string& path, double begin_fraction = 0.0,
                                                     double end_fraction = 1.0);
  int64_t num_tokens() const override { return static_cast<int64_t>(bytes_.size()); }
  int64_t vocab() const override { return 256; }
  void read(int64_t offset, int64_t n, int32_t* out) const override;
  std::string describe() const override;

 private:
  std::string path_;
  std::vector<uint8_t> bytes_;
};

// Training windows drawn uniformly at random by global sample index.
class RandomWindowSampler {
 public:
  RandomWindowSampler(const TokenDataset& data, int64_t seq_len, uint64_t seed);
  // tokens[count, T] and targets[count, T] for samples [first, first + count).
  void fill(int64_t first, int64_t count, int32_t* tokens, int32_t* targets) const;

 private:
  const TokenDataset& data_;
  int64_t T_;
  uint64_t seed_;
};

// Evaluation windows: sample i is the i-th consecutive, non-overlapping
// window (wrapping around a short dataset), so every eval sees the same data.
void fill_sequential_windows(const TokenDataset& data, int64_t seq_len, int64_t first, int64_t count,
                             int32_t* tokens, int32_t* targets);

// Checks a dataset can supply windows of seq_len + 1 tokens; the message names
// `what` (e.g. "data.train = corpus.txt") and the fix.
Status check_dataset_fits(const TokenDataset& data, int64_t seq_len, const std::string& what);

}  // namespace tera
