// manifest.json of a token-shard directory (written last by `tera tokenize
// encode`, so a directory with a manifest is complete): the tokenizer file and
// fingerprint, and for each split ("train", "val") its shards in stream order
// with their token counts and payload checksums, plus the source bytes and
// document count behind them (for bytes-per-token statistics).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tera {

inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kShardFormat = "tera-token-shards";
inline constexpr int kShardManifestVersion = 1;

struct ShardEntry {
  std::string file;  // plain name inside the directory
  int64_t tokens = 0;
  uint32_t crc32 = 0;  // of the payload, as in the shard's header
};

struct SplitInfo {
  std::vector<ShardEntry> shards;
  int64_t tokens = 0;
  int64_t bytes = 0;      // source text bytes encoded into this split
  int64_t documents = 0;  // (file, part) pieces, each closed by end-of-text
};

struct ShardManifest {
  std::string tokenizer_file = "tokenizer.json";  // inside the directory
  uint64_t tokenizer_fingerprint = 0;
  int64_t vocab_size = 0;
  int32_t eot = -1;
  std::map<std::string, SplitInfo> splits;
  std::vector<std::string> inputs;
};

bool is_shard_dir(const std::string& dir);  // holds a manifest.json
Expected<ShardManifest> read_manifest(const std::string& dir);
// The same check on manifest text; `what` names it in errors.
Expected<ShardManifest> parse_manifest(std::string_view text, const std::string& what);
Status write_manifest(const std::string& dir, const ShardManifest& m);  // atomic

}  // namespace tera
