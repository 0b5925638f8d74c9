// libFuzzer target: the sharded-safetensors index reader
// (parse_safetensors_index, ckpt/safetensors_index.h). Any byte string either
// parses into an index whose every promise holds (a non-empty weight_map, each
// tensor once, each shard a plain .safetensors file name in the index's own
// directory, the shard list exactly the distinct values of the map) or is
// refused with a message naming the file; it never crashes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "ckpt/safetensors_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy: the reader must not rely on anything past the end of the input.
  const std::vector<uint8_t> buf(data, data + size);
  auto ix = tera::parse_safetensors_index(buf.data(), buf.size(), "fuzz.index.json");
  if (!ix.ok()) {
    if (ix.error().rfind("fuzz.index.json: ", 0) != 0) std::abort();
    return 0;
  }
  if (ix->weight_map.empty() || ix->shards.empty() || ix->shards.size() > tera::kMaxSafetensorsShards) std::abort();
  std::set<std::string> values;
  for (const auto& [tensor, shard] : ix->weight_map) values.insert(shard);
  if (values != std::set<std::string>(ix->shards.begin(), ix->shards.end())) std::abort();
  const std::string suffix = ".safetensors";
  for (const std::string& s : ix->shards) {
    if (s.find('/') != std::string::npos || s.find('\\') != std::string::npos || s.find('\0') != std::string::npos) {
      std::abort();
    }
    if (s == "." || s == ".." || s.size() < suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0) {
      std::abort();
    }
  }
  return 0;
}
