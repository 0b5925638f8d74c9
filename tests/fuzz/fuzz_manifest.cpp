// libFuzzer target: the shard directory's manifest.json reader. Accepted
// manifests keep their invariants (plain file names, token counts that add
// up); refused ones name the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "data/shard_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = tera::parse_manifest(std::string_view(reinterpret_cast<const char*>(data), size), "manifest.json");
  if (!m.ok()) {
    if (m.error().rfind("manifest.json: ", 0) != 0) std::abort();
    return 0;
  }
  for (const auto& [name, split] : m->splits) {
    int64_t sum = 0;
    for (const auto& e : split.shards) {
      if (e.file.empty() || e.file.find('/') != std::string::npos || e.tokens < 0) std::abort();
      sum += e.tokens;
    }
    if (sum != split.tokens) std::abort();
  }
  return 0;
}
