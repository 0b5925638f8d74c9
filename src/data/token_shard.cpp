// Token shard reading (mmap + full check) and writing (atomic); see token_shard.h.
// Header layout (bytes): 0 magic[8] | 8 version u32 | 12 token_bytes u32 |
// 16 num_tokens u64 | 24 vocab_size u64 | 32 tokenizer_fingerprint u64 |
// 40 payload_crc32 u32 | 44 eot i32 | 48..59 zero | 60 header_crc32 u32 (of bytes 0..59).
#include "data/token_shard.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/file_util.h"
#include "core/unaligned.h"

namespace tera {

static_assert(std::endian::native == std::endian::little, "token shards are little-endian; so is this reader");

namespace {

constexpr char kMagic[8] = {'T', 'E', 'R', 'A', 'T', 'O', 'K', 'S'};


}  // namespace

Expected<ShardHeader> parse_shard(const uint8_t* data, size_t size, const std::string& what) {
  auto err = [&](const std::string& m) { return Status::error(what + ": " + m); };
  if (size < kShardHeaderBytes) {
    return err(fmt::format("truncated: {} bytes, shorter than the {}-byte shard header", size, kShardHeaderBytes));
  }
  if (std::memcmp(data, kMagic, sizeof(kMagic)) != 0) return err("not a tera token shard (wrong magic)");
  if (crc32_of(data, 60) != load_unaligned<uint32_t>(data + 60)) return err("header checksum mismatch; the header is corrupt");
  const auto version = load_unaligned<uint32_t>(data + 8);
  if (version != kShardVersion) {
    return err(fmt::format("unsupported shard version {} (this tera reads version {})", version, kShardVersion));
  }
  ShardHeader h;
  h.token_bytes = load_unaligned<uint32_t>(data + 12);
  h.num_tokens = load_unaligned<uint64_t>(data + 16);
  h.vocab_size = load_unaligned<uint64_t>(data + 24);
  h.tokenizer_fingerprint = load_unaligned<uint64_t>(data + 32);
  h.payload_crc32 = load_unaligned<uint32_t>(data + 40);
  h.eot = load_unaligned<int32_t>(data + 44);
  for (size_t i = 48; i < 60; ++i) {
    if (data[i] != 0) return err("reserved header bytes are not zero");
  }
  if (h.vocab_size == 0 || h.vocab_size > (uint64_t{1} << 31)) {
    return err(fmt::format("vocabulary size {} is out of range", h.vocab_size));
  }
  if (h.token_bytes != shard_token_bytes(static_cast<int64_t>(h.vocab_size))) {
    return err(fmt::format("token width {} bytes does not match vocabulary size {}", h.token_bytes, h.vocab_size));
  }
  if (h.eot < -1 || (h.eot >= 0 && static_cast<uint64_t>(h.eot) >= h.vocab_size)) {
    return err(fmt::format("end-of-text id {} is outside the vocabulary", h.eot));
  }
  const uint64_t payload = size - kShardHeaderBytes;
  if (h.num_tokens > payload / h.token_bytes || payload != h.num_tokens * h.token_bytes) {
    return err(
        fmt::format("truncated or padded: the header promises {} tokens of {} bytes but the payload holds {} "
                    "bytes",
                    h.num_tokens, h.token_bytes, payload));
  }
  const uint8_t* p = data + kShardHeaderBytes;
  if (crc32_of(p, payload) != h.payload_crc32) {
    return err("checksum mismatch: the token payload is corrupt (CRC-32 differs from the header's)");
  }
  const uint64_t n = h.num_tokens;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t t = h.token_bytes == 2 ? load_unaligned<uint16_t>(p + 2 * i) : load_unaligned<uint32_t>(p + 4 * i);
    if (t >= h.vocab_size) {
      return err(fmt::format("token id {} at position {} is >= the vocabulary size {}", t, i, h.vocab_size));
    }
  }
  return h;
}

Expected<uint32_t> write_shard(const std::string& path, const int32_t* tokens, int64_t n, int64_t vocab,
                               uint64_t fingerprint, int32_t eot) {
  TERA_ASSERT(n >= 0 && vocab > 0);
  const uint32_t tb = shard_token_bytes(vocab);
  constexpr int64_t kBlock = int64_t{1} << 20;
  std::vector<uint8_t> buf(static_cast<size_t>(kBlock) * tb);
  // Converts tokens [b, b + m) into buf.
  auto pack = [&](int64_t b, int64_t m) {
    for (int64_t i = 0; i < m; ++i) {
      const int32_t t = tokens[b + i];
      TERA_ASSERT(t >= 0 && t < vocab, "token id out of range while writing a shard");
      if (tb == 2) {
        store_unaligned(buf.data() + 2 * i, static_cast<uint16_t>(t));
      } else {
        store_unaligned(buf.data() + 4 * i, static_cast<uint32_t>(t));
      }
    }
    return static_cast<size_t>(m) * tb;
  };
  uint32_t crc = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const size_t bytes = pack(b, std::min(kBlock, n - b));
    crc = crc32_of(buf.data(), bytes, crc);
  }
  uint8_t h[kShardHeaderBytes] = {};
  std::memcpy(h, kMagic, sizeof(kMagic));
  store_unaligned(h + 8, kShardVersion);
  store_unaligned(h + 12, tb);
  store_unaligned(h + 16, static_cast<uint64_t>(n));
  store_unaligned(h + 24, static_cast<uint64_t>(vocab));
  store_unaligned(h + 32, fingerprint);
  store_unaligned(h + 40, crc);
  store_unaligned(h + 44, eot);
  store_unaligned(h + 60, crc32_of(h, 60));
  auto f = AtomicFile::create(path);
  if (!f) return f.status();
  TERA_RETURN_IF_ERROR(f->write(h, sizeof(h)));
  for (int64_t b = 0; b < n; b += kBlock) TERA_RETURN_IF_ERROR(f->write(buf.data(), pack(b, std::min(kBlock, n - b))));
  TERA_RETURN_IF_ERROR(f->commit());
  return crc;
}

Expected<TokenShard> TokenShard::open(const std::string& path) {
  void* m = nullptr;
  size_t bytes = 0;
  TERA_RETURN_IF_ERROR(map_file_readonly(path, &m, &bytes, "; a token shard is a file"));
  if (bytes < kShardHeaderBytes) {
    if (m != nullptr) ::munmap(m, bytes);
    return Status::error(
        fmt::format("{}: truncated: {} bytes, shorter than the {}-byte shard header", path, bytes, kShardHeaderBytes));
  }
  TokenShard s;
  s.path_ = path;
  s.map_ = m;
  s.map_bytes_ = bytes;
  auto h = parse_shard(static_cast<const uint8_t*>(m), bytes, path);
  if (!h) return h.status();  // s unmaps
  s.header_ = *h;
  return s;
}

TokenShard::TokenShard(TokenShard&& o) noexcept
    : path_(std::move(o.path_)), header_(o.header_), map_(o.map_), map_bytes_(o.map_bytes_) {
  o.map_ = nullptr;
  o.map_bytes_ = 0;
}

TokenShard& TokenShard::operator=(TokenShard&& o) noexcept {
  if (this != &o) {
    if (map_ != nullptr) ::munmap(map_, map_bytes_);
    path_ = std::move(o.path_);
    header_ = o.header_;
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    o.map_ = nullptr;
    o.map_bytes_ = 0;
  }
  return *this;
}

TokenShard::~TokenShard() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

void TokenShard::read(int64_t offset, int64_t n, int32_t* out) const {
  TERA_ASSERT(offset >= 0 && n >= 0 && offset + n <= size(), "shard read out of range");
  const uint8_t* p = static_cast<const uint8_t*>(map_) + kShardHeaderBytes;
  if (header_.token_bytes == 2) {
    for (int64_t i = 0; i < n; ++i) out[i] = load_unaligned<uint16_t>(p + 2 * (offset + i));
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(load_unaligned<uint32_t>(p + 4 * (offset + i)));
  }
}

}  // namespace tera
