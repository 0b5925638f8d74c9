// Opening a split of a shard directory; reads may cross shard boundaries.
#include "data/shard_dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace tera {

namespace fs = std::filesystem;

Expected<std::unique_ptr<ShardDataset>> ShardDataset::open(const std::string& dir, const std::string& split) {
  auto m = read_manifest(dir);
  if (!m) return m.status();
  auto it = m->splits.find(split);
  if (it == m->splits.end()) {
    return Status::error(fmt::format("{}: has no '{}' split (see its manifest.json)", dir, split));
  }
  auto ds = std::unique_ptr<ShardDataset>(new ShardDataset());
  ds->dir_ = dir;
  ds->split_ = split;
  uint64_t fp = m->tokenizer_fingerprint;
  for (const ShardEntry& e : it->second.shards) {
    const std::string path = (fs::path(dir) / e.file).string();
    auto shard = TokenShard::open(path);
    if (!shard) return shard.status();
    const ShardHeader& h = shard->header();
    std::string problem;
    if (h.vocab_size != static_cast<uint64_t>(m->vocab_size)) {
      problem = fmt::format("vocabulary size {} differs from the manifest's {}", h.vocab_size, m->vocab_size);
    } else if (h.tokenizer_fingerprint != m->tokenizer_fingerprint) {
      problem = "it was written with a different tokenizer than the manifest names";
    } else if (h.num_tokens != static_cast<uint64_t>(e.tokens) || h.payload_crc32 != e.crc32) {
      problem = fmt::format("it holds {} tokens (crc32 {:08x}), the manifest lists {} (crc32 {:08x})", h.num_tokens,
                            h.payload_crc32, e.tokens, e.crc32);
    }
    if (!problem.empty()) {
      return Status::error(path + ": does not match " + kManifestFile + ": " + problem +
                           "; re-run tera tokenize encode into a fresh directory");
    }
    ds->starts_.push_back(ds->total_);
    ds->total_ += shard->size();
    fp = (fp ^ h.payload_crc32 ^ (h.num_tokens << 32)) * 0x100000001b3ull;
    ds->shards_.push_back(std::move(*shard));
  }
  ds->fingerprint_ = fp;
  ds->manifest_ = std::move(*m);
  return ds;
}

void ShardDataset::read(int64_t offset, int64_t n, int32_t* out) const {
  TERA_ASSERT(offset >= 0 && n >= 0 && offset + n <= total_, "shard dataset read out of range");
  auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
  auto s = static_cast<size_t>(it - starts_.begin()) - 1;
  while (n > 0) {
    const int64_t local = offset - starts_[s];
    const int64_t take = std::min(n, shards_[s].size() - local);
    shards_[s].read(local, take, out);
    out += take;
    offset += take;
    n -= take;
    ++s;
  }
}

std::string ShardDataset::describe() const {
  return fmt::format("{} [{}] ({} shard{}, {} tokens, vocab {})", dir_, split_, shards_.size(),
                     shards_.size() == 1 ? "" : "s", total_, manifest_.vocab_size);
}

std::vector<int64_t> ShardDataset::segments() const {
  std::vector<int64_t> out;
  for (const auto& s : shards_) out.push_back(s.size());
  return out;
}

}  // namespace tera
