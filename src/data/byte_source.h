// A forward-only stream of bytes from a file or from memory, gunzipped on the
// fly when it starts with the gzip magic 1f 8b (whatever the file's name).
// Memory use is a fixed buffer, whatever the stream's length; raw_bytes()
// counts the bytes taken from the file (compressed ones for gzip), which is
// what a progress line over file sizes needs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tera {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes into buf; 0 at the end of the stream. Errors name the source.
  virtual Expected<size_t> read(char* buf, size_t n) = 0;
  // Bytes taken from the underlying file or memory so far.
  virtual int64_t raw_bytes() const = 0;
};

// True when these bytes open a gzip stream (RFC 1952 magic 1f 8b).
bool has_gzip_magic(std::string_view head);

// Reads the file, gunzipping it when it starts with the gzip magic (every
// member of a multi-member .gz). Fails naming the file when it cannot be
// opened, or, on a build without zlib, when it is gzip-compressed.
Expected<std::unique_ptr<ByteSource>> open_byte_source(const std::string& path);

// The same over bytes in memory (they must outlive the source); name is used
// in messages. For the fuzz target and tests.
Expected<std::unique_ptr<ByteSource>> open_memory_source(std::string_view data, const std::string& name);

// True when this build reads gzip (zlib was found).
bool gzip_supported();

}  // namespace tera
