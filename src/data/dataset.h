// Token datasets: what the loader and evaluation read. A TokenDataset is a
// flat token stream, cut into segments (one per shard) that training windows
// never cross. Three kinds: a text file's bytes (byte tokens, vocab 256),
// tokens held in memory, and token shards (shard_dataset.h), plus slices.
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
  // Copies tokens [offset, offset + n) of the whole stream into out.
  virtual void read(int64_t offset, int64_t n, int32_t* out) const = 0;
  virtual std::string describe() const = 0;  // for logs: file and size
  // Segment sizes, in stream order; they sum to num_tokens().
  virtual std::vector<int64_t> segments() const { return {num_tokens()}; }
  // Identity of the content (a resumed run checks it is reading the same data).
  virtual uint64_t fingerprint() const = 0;
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
  uint64_t fingerprint() const override { return fingerprint_; }

 private:
  std::string path_;
  std::vector<uint8_t> bytes_;
  uint64_t fingerprint_ = 0;
};

// Tokens held in memory (a text file encoded at startup).
class VectorDataset final : public TokenDataset {
 public:
  VectorDataset(std::vector<int32_t> tokens, int64_t vocab, std::string description);
  int64_t num_tokens() const override { return static_cast<int64_t>(tokens_.size()); }
  int64_t vocab() const override { return vocab_; }
  void read(int64_t offset, int64_t n, int32_t* out) const override;
  std::string describe() const override { return description_; }
  uint64_t fingerprint() const override { return fingerprint_; }

 private:
  std::vector<int32_t> tokens_;
  int64_t vocab_;
  std::string description_;
  uint64_t fingerprint_;
};

// Tokens [begin, end) of another dataset (a held-out tail, or all but it).
class SliceDataset final : public TokenDataset {
 public:
  SliceDataset(std::shared_ptr<const TokenDataset> base, int64_t begin, int64_t end, std::string description);
  int64_t num_tokens() const override { return end_ - begin_; }
  int64_t vocab() const override { return base_->vocab(); }
  void read(int64_t offset, int64_t n, int32_t* out) const override;
  std::string describe() const override { return description_; }
  std::vector<int64_t> segments() const override;
  uint64_t fingerprint() const override;

 private:
  std::shared_ptr<const TokenDataset> base_;
  int64_t begin_, end_;
  std::string description_;
};

// Evaluation windows: sample i is the i-th consecutive, non-overlapping
// window (wrapping around a short dataset), so every eval sees the same data.
void fill_sequential_windows(const TokenDataset& data, int64_t seq_len, int64_t first, int64_t count, int32_t* tokens,
                             int32_t* targets);

// Checks a dataset can supply windows of seq_len + 1 tokens; the message names
// `what` (e.g. "data.train = corpus.txt") and the fix.
Status check_dataset_fits(const TokenDataset& data, int64_t seq_len, const std::string& what);

}  // namespace tera
