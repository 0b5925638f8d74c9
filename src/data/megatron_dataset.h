// A Megatron indexed dataset (PREFIX.bin + PREFIX.idx, see megatron_index.h)
// as a TokenDataset: its sequences (documents, each ending with its
// end-of-document token as Megatron's preprocessing appends it) concatenated
// in order into one token stream, one segment, the way tera's own shards
// hold the same documents. Both files are memory-mapped, never read whole;
// opening checks the index against the .bin and scans every token once
// (ids must be >= 0 and below max_vocab).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/dataset.h"
#include "data/megatron_index.h"

namespace tera {

// Whether PREFIX.idx exists (so `path` names a Megatron dataset, not a file).
bool is_megatron_prefix(const std::string& path);

class MegatronDataset final : public TokenDataset {
 public:
  // Errors name PREFIX.idx or PREFIX.bin and the field. Token ids must lie in
  // [0, max_vocab); max_vocab_what names where the limit comes from
  // (e.g. "model.vocab = 512").
  static Expected<std::unique_ptr<MegatronDataset>> open(const std::string& prefix, int64_t max_vocab,
                                                         const std::string& max_vocab_what);
  MegatronDataset(const MegatronDataset&) = delete;
  MegatronDataset& operator=(const MegatronDataset&) = delete;
  ~MegatronDataset() override;

  int64_t num_tokens() const override { return static_cast<int64_t>(index_.total_tokens); }
  // The largest token id + 1 (a Megatron dataset names no tokenizer).
  int64_t vocab() const override { return max_id_ + 1; }
  void read(int64_t offset, int64_t n, int32_t* out) const override;
  std::string describe() const override;
  uint64_t fingerprint() const override { return fingerprint_; }
  const MegatronIndex& index() const { return index_; }

 private:
  MegatronDataset() = default;
  std::string prefix_;
  void* idx_map_ = nullptr;
  size_t idx_bytes_ = 0;
  void* bin_map_ = nullptr;
  size_t bin_bytes_ = 0;
  MegatronIndex index_;
  int64_t max_id_ = -1;
  uint64_t fingerprint_ = 0;
};

}  // namespace tera
