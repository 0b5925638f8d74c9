// Files are untrusted input and writes are atomic (DESIGN.md invariant 7).
// AtomicFile writes to "<path>.tmp.<pid>", and commit() flushes, fsyncs and
// renames it over <path>, then fsyncs the directory: a reader sees the old
// file or the new one, never a torn one. Abandoned temporaries are removed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/status.h"

namespace tera {

class AtomicFile {
 public:
  static Expected<AtomicFile> create(const std::string& path);
  AtomicFile(AtomicFile&& o) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary unless committed

  Status write(const void* data, size_t bytes);
  Status commit();
  uint32_t crc32() const { return crc_; }  // of everything written
  uint64_t bytes_written() const { return written_; }

 private:
  AtomicFile(std::string path, std::string tmp, std::FILE* f) : path_(std::move(path)), tmp_(std::move(tmp)), f_(f) {}
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  uint32_t crc_ = 0;
  uint64_t written_ = 0;
  bool committed_ = false;
};

Expected<std::vector<uint8_t>> read_file(const std::string& path);
Status fsync_dir(const std::string& dir);
uint32_t crc32_of(const void* data, size_t bytes, uint32_t crc = 0);
// CRC-32 of a whole file, streamed (constant memory).
Expected<uint32_t> crc32_file(const std::string& path);

}  // namespace tera
