// libFuzzer target: the Megatron .idx reader (parse_megatron_index). Input:
// one flags byte, then the index bytes. Flag bit 0 checks the index against a
// .bin whose size the index itself implies (so the fuzzer reaches the checks
// behind that one); otherwise against a .bin of (flags >> 1) * 64 bytes. Any
// byte string either parses into an index whose every promise holds (counts
// that fit the file, sequences back to back filling the .bin, document
// indices from 0 to the sequence count) or is refused with a message naming
// the file; it never crashes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "data/megatron_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // Copy: the reader must not rely on anything past the end of the input.
  const std::vector<uint8_t> buf(data + 1, data + size);
  uint64_t bin_bytes = static_cast<uint64_t>(data[0] >> 1) * 64;
  if (data[0] & 1) {
    auto loose = tera::parse_megatron_index(buf.data(), buf.size(), "fuzz.idx", UINT64_MAX);
    if (!loose.ok()) {
      if (loose.error().rfind("fuzz.idx: ", 0) != 0) std::abort();
      return 0;
    }
    bin_bytes = loose->total_tokens * tera::megatron_dtype_bytes(loose->dtype);
  }
  auto ix = tera::parse_megatron_index(buf.data(), buf.size(), "fuzz.idx", bin_bytes);
  if (!ix.ok()) {
    if (ix.error().rfind("fuzz.idx: ", 0) != 0) std::abort();
    return 0;
  }
  if (tera::kMegatronHeaderBytes + 12 * ix->sequences + 8 * ix->doc_entries != buf.size()) std::abort();
  if (ix->total_tokens * tera::megatron_dtype_bytes(ix->dtype) != bin_bytes) std::abort();
  uint64_t at = 0;
  for (uint64_t i = 0; i < ix->sequences; ++i) {
    if (ix->length(i) < 0 || static_cast<uint64_t>(ix->pointer(i)) != at) std::abort();
    at += static_cast<uint64_t>(ix->length(i)) * tera::megatron_dtype_bytes(ix->dtype);
  }
  if (ix->document_start(0) != 0 || static_cast<uint64_t>(ix->document_start(ix->doc_entries - 1)) != ix->sequences) {
    std::abort();
  }
  return 0;
}
