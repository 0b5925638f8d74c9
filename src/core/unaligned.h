// Fields of a file image (a shard header, a Megatron index) read and written
// at any alignment, in the machine's byte order (the readers that use them
// check it is the file's).
#pragma once

#include <cstdint>
#include <cstring>

namespace tera {

template <typename T>
T load_unaligned(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void store_unaligned(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

}  // namespace tera
