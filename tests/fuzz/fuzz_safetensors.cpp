// libFuzzer target: the safetensors tensor-file reader (checkpoint shard
// files, imported weights). Every accepted tensor lies inside the input with
// bytes = elements x dtype size; refused input gets a message naming the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <vector>

#include "ckpt/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<tera::StTensorRef> tensors;
  std::map<std::string, std::string> meta;
  const tera::Status st = tera::parse_safetensors(data, size, "shard.safetensors", &tensors, &meta);
  if (!st) {
    if (st.message().rfind("shard.safetensors", 0) != 0) std::abort();
    return 0;
  }
  for (const auto& t : tensors) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    if (p < data || p + t.bytes > data + size) std::abort();
    if (static_cast<int64_t>(t.bytes) != tera::numel(t.shape) * tera::safetensors_dtype_bytes(t.dtype)) std::abort();
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < t.bytes; i += 4096) sink = sink + p[i];  // touch the data
  }
  return 0;
}
