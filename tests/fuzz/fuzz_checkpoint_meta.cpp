// libFuzzer target: a checkpoint's meta.json reader. Accepted metadata keeps
// its invariants (plain file names, non-negative sizes and steps, a valid
// model); refused metadata gets a message naming the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "ckpt/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto info = tera::parse_checkpoint_meta(data, size, "meta.json");
  if (!info.ok()) {
    if (info.error().rfind("meta.json", 0) != 0) std::abort();
    return 0;
  }
  if (info->step < 0 || info->consumed_samples < 0 || info->files.empty()) std::abort();
  for (const auto& f : info->files) {
    if (f.name.empty() || f.name.find('/') != std::string::npos || f.name[0] == '.' || f.bytes < 0) std::abort();
  }
  if (!tera::validate_model_config(info->model).is_ok()) std::abort();
  return 0;
}
