// A token shard: a 64-byte little-endian header, then the tokens as uint16
// (vocabularies up to 65536) or uint32. Header: magic "TERATOKS", format
// version, token width, token count, vocabulary size, tokenizer fingerprint,
// CRC-32 of the payload, end-of-text id, CRC-32 of the header itself. A shard
// is trusted only after every one of these and every token id is checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace tera {

inline constexpr uint32_t kShardVersion = 1;
inline constexpr size_t kShardHeaderBytes = 64;

struct ShardHeader {
  uint32_t token_bytes = 2;  // 2 or 4
  uint64_t num_tokens = 0;
  uint64_t vocab_size = 0;
  uint64_t tokenizer_fingerprint = 0;
  uint32_t payload_crc32 = 0;
  int32_t eot = -1;  // end-of-text id, -1 when the tokenizer has none
};

// 2 when every id of the vocabulary fits in uint16, else 4.
inline uint32_t shard_token_bytes(int64_t vocab) { return vocab <= 65536 ? 2 : 4; }

// Checks a whole shard image (header, size, checksum, every token < vocab).
// `what` (the file name) starts every error message.
Expected<ShardHeader> parse_shard(const uint8_t* data, size_t size, const std::string& what);

// Writes tokens[0, n) as a shard, atomically; returns the payload's CRC-32.
// Every token must be < vocab.
Expected<uint32_t> write_shard(const std::string& path, const int32_t* tokens, int64_t n, int64_t vocab,
                               uint64_t fingerprint, int32_t eot);

// A checked shard, memory-mapped read-only.
class TokenShard {
 public:
  static Expected<TokenShard> open(const std::string& path);
  TokenShard(TokenShard&& o) noexcept;
  TokenShard& operator=(TokenShard&& o) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;
  ~TokenShard();

  const ShardHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  int64_t size() const { return static_cast<int64_t>(header_.num_tokens); }
  // Copies tokens [offset, offset + n) to out.
  void read(int64_t offset, int64_t n, int32_t* out) const;

 private:
  TokenShard() = default;
  std::string path_;
  ShardHeader header_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
};

}  // namespace tera
