// One split ("train" or "val") of a token-shard directory as a TokenDataset:
// its shards memory-mapped in manifest order, each checked in full and
// against the manifest when opened. Each shard is one segment.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/shard_manifest.h"
#include "data/token_shard.h"

namespace tera {

class ShardDataset final : public TokenDataset {
 public:
  static Expected<std::unique_ptr<ShardDataset>> open(const std::string& dir, const std::string& split);

  int64_t num_tokens() const override { return total_; }
  int64_t vocab() const override { return manifest_.vocab_size; }
  void read(int64_t offset, int64_t n, int32_t* out) const override;
  std::string describe() const override;
  std::vector<int64_t> segments() const override;
  uint64_t fingerprint() const override { return fingerprint_; }
  const ShardManifest& manifest() const { return manifest_; }
  const std::string& split() const { return split_; }

 private:
  std::string dir_, split_;
  ShardManifest manifest_;
  std::vector<TokenShard> shards_;
  std::vector<int64_t> starts_;  // stream offset of each shard
  int64_t total_ = 0;
  uint64_t fingerprint_ = 0;
};

}  // namespace tera
