// libFuzzer target: the token-shard reader. Any byte string either parses
// into a header whose every promise (size, checksum, token ids < vocab) holds,
// or is refused with a message naming the file; it never crashes. The first
// input byte can ask for the checksums to be made consistent first, so the
// fuzzer also reaches the checks behind them.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/file_util.h"
#include "data/token_shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // Copy: the reader must not rely on anything past the end of the input.
  std::vector<uint8_t> buf(data + 1, data + size);
  if (buf.size() >= tera::kShardHeaderBytes) {
    if (data[0] & 1) {
      const uint32_t c = tera::crc32_of(buf.data() + 64, buf.size() - 64);
      std::memcpy(buf.data() + 40, &c, 4);
    }
    if (data[0] & 2) {
      const uint32_t c = tera::crc32_of(buf.data(), 60);
      std::memcpy(buf.data() + 60, &c, 4);
    }
  }
  auto h = tera::parse_shard(buf.data(), buf.size(), "fuzz.tok");
  if (!h.ok()) {
    if (h.error().rfind("fuzz.tok: ", 0) != 0) std::abort();
    return 0;
  }
  if (tera::kShardHeaderBytes + h->num_tokens * h->token_bytes != buf.size()) std::abort();
  return 0;
}
