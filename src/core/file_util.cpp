// Atomic writes (tmp + fsync + rename + dir fsync) and checked reads.
#include "core/file_util.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tera {

namespace fs = std::filesystem;

uint32_t crc32_of(const void* data, size_t bytes, uint32_t crc) {
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), bytes));
}

Expected<AtomicFile> AtomicFile::create(const std::string& path) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Status::error(path + ": cannot create (" + std::strerror(errno) + ")");
  return AtomicFile(path, tmp, f);
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : path_(std::move(o.path_)), tmp_(std::move(o.tmp_)), f_(o.f_), crc_(o.crc_), written_(o.written_),
      committed_(o.committed_) {
  o.f_ = nullptr;
  o.committed_ = true;
}

AtomicFile::~AtomicFile() {
  if (f_ != nullptr) std::fclose(f_);
  if (!committed_ && !tmp_.empty()) std::remove(tmp_.c_str());
}

Status AtomicFile::write(const void* data, size_t bytes) {
  if (bytes == 0) return Status::ok();
  if (std::fwrite(data, 1, bytes, f_) != bytes) {
    return Status::error(path_ + ": write failed (" + std::strerror(errno) + ")");
  }
  crc_ = crc32_of(data, bytes, crc_);
  written_ += bytes;
  return Status::ok();
}

Status AtomicFile::commit() {
  if (std::fflush(f_) != 0 || fsync(fileno(f_)) != 0) {
    return Status::error(path_ + ": flush failed (" + std::strerror(errno) + ")");
  }
  std::fclose(f_);
  f_ = nullptr;
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    return Status::error(path_ + ": rename from temporary failed (" + std::strerror(errno) + ")");
  }
  committed_ = true;
  const fs::path parent = fs::path(path_).parent_path();
  return fsync_dir(parent.empty() ? "." : parent.string());
}

Status fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return Status::error(dir + ": cannot open directory (" + std::strerror(errno) + ")");
  const int rc = fsync(fd);
  ::close(fd);
  if (rc != 0) return Status::error(dir + ": fsync failed (" + std::strerror(errno) + ")");
  return Status::ok();
}

Expected<std::vector<uint8_t>> read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::error(path + ": cannot open (" + std::strerror(errno) + ")");
  std::vector<uint8_t> out;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (!ec) out.reserve(static_cast<size_t>(size));  // one allocation for regular files
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.insert(out.end(), buf, buf + n);
  const bool err = std::ferror(f) != 0;
  std::fclose(f);
  if (err) return Status::error(path + ": read error");
  return out;
}

Expected<uint32_t> crc32_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::error(path + ": cannot open (" + std::strerror(errno) + ")");
  std::vector<uint8_t> buf(size_t{4} << 20);
  uint32_t crc = 0;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) crc = crc32_of(buf.data(), n, crc);
  const bool err = std::ferror(f) != 0;
  std::fclose(f);
  if (err) return Status::error(path + ": read error");
  return crc;
}

}  // namespace tera
