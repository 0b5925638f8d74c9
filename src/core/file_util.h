// Files are untrusted input and writes are atomic (DESIGN.md invariant 7).
// AtomicFile writes to "<target>.tmp.<pid>", and commit() flushes, fsyncs and
// renames it over <target>, then fsyncs the directory: a reader sees the old
// file or the new one, never a torn one. Abandoned temporaries are removed.
// <target> is the path with its symbolic links followed: a link to a regular
// file is written through (its target replaced, never the link). A path that
// is (or links to) something other than a regular file or a directory (a
// character device, a FIFO) is written in place and never renamed over.
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
  bool in_place() const { return tmp_.empty(); }  // a device or FIFO: no temporary, no rename

 private:
  AtomicFile(std::string path, std::string tmp, std::FILE* f) : path_(std::move(path)), tmp_(std::move(tmp)), f_(f) {}
  std::string path_, tmp_;  // path_: the target (symlinks followed); tmp_ empty when written in place
  std::FILE* f_ = nullptr;
  uint32_t crc_ = 0;
  uint64_t written_ = 0;
  bool committed_ = false;
};

Expected<std::vector<uint8_t>> read_file(const std::string& path);
Status fsync_dir(const std::string& dir);
// CRC-32 (zlib's; `crc` continues a running value). crc32_portable is the
// same function without zlib, used where zlib is absent (a GPU node's build).
uint32_t crc32_of(const void* data, size_t bytes, uint32_t crc = 0);
uint32_t crc32_portable(const void* data, size_t bytes, uint32_t crc = 0);
// CRC-32 of a whole file, streamed (constant memory).
Expected<uint32_t> crc32_file(const std::string& path);

// Untrusted input paths (a path read from a file, or given by a user): the
// file must be a regular file of at most max_bytes; a directory, FIFO,
// device (/dev/zero) or an oversized file is refused with a message naming
// the path and what it is. `what` names the role ("tokenizer", "--config").
Status check_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes);
// Maps the regular file `path` read-only (*map, *bytes; an empty file maps
// to nullptr; the caller munmaps). A directory, device or FIFO is refused
// (opened without waiting for a FIFO's writer), `hint` appended to that
// message ("; a token shard is a file").
Status map_file_readonly(const std::string& path, void** map, size_t* bytes, const std::string& hint = "");
// read_file, after check_regular_file.
Expected<std::vector<uint8_t>> read_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes);
// A path named inside `container` (a meta.json, a manifest), resolved
// relative to the directory holding that file unless it is absolute.
std::string resolve_beside(const std::string& container, const std::string& path);

// Output paths, checked before any work (so a run never fails at its end).
// probe_output_dir: creates the directory (and parents) if needed and proves
// it writable by creating and removing a file in it. probe_output_file: the
// file's directory must exist and be writable (it is created if
// create_parent), and the path must not be a directory; an existing file is
// left untouched. `what` names the flag or key ("--trace", "out.dir").
Status probe_output_dir(const std::string& dir, const std::string& what);
// A path that names (or links to) a device or FIFO is checked for writing
// only: it is written in place.
Status probe_output_file(const std::string& path, const std::string& what, bool create_parent = false);
// `path` with every symbolic link along its last component followed (a
// dangling link gives the path it points to); other paths unchanged.
std::string follow_symlinks(const std::string& path);
// Whether `path` (links followed) exists and is neither a regular file nor a
// directory: a device, a FIFO or a socket, written in place.
bool is_special_file(const std::string& path);
// Whether two paths name the same file (after symlinks; false when either
// does not exist): an output must never be one of the inputs.
bool same_file(const std::string& a, const std::string& b);

}  // namespace tera
