// Atomic writes (tmp + fsync + rename + dir fsync) and checked reads.
#include "core/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(TERA_HAVE_ZLIB)
#include <zlib.h>
#endif

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tera {

namespace fs = std::filesystem;

uint32_t crc32_portable(const void* data, size_t bytes, uint32_t crc) {
  // Byte-at-a-time with a 256-entry table of the reflected polynomial
  // 0xEDB88320 (CRC-32 of zlib, gzip and PNG).
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < bytes; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return ~c;
}

uint32_t crc32_of(const void* data, size_t bytes, uint32_t crc) {
#if defined(TERA_HAVE_ZLIB)
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), bytes));
#else
  return crc32_portable(data, bytes, crc);
#endif
}

std::string follow_symlinks(const std::string& path) {
  fs::path p = path;
  std::error_code ec;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) break;
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  return p.string();
}

bool is_special_file(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  return !ec && st.type() != fs::file_type::not_found && st.type() != fs::file_type::regular &&
         st.type() != fs::file_type::directory;
}

Expected<AtomicFile> AtomicFile::create(const std::string& path) {
  const std::string target = follow_symlinks(path);
  if (is_special_file(target)) {
    // A device or FIFO: renaming a file over it would replace it for every
    // process (root's /dev/null); it takes the bytes as they come.
    std::FILE* f = std::fopen(target.c_str(), "wb");
    if (f == nullptr) return Status::error(path + ": cannot open for writing (" + std::strerror(errno) + ")");
    return AtomicFile(target, "", f);
  }
  const std::string tmp = target + ".tmp." + std::to_string(getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Status::error(path + ": cannot create (" + std::strerror(errno) + ")");
  return AtomicFile(target, tmp, f);
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
  if (bytes == 0) return ok_status();
  if (std::fwrite(data, 1, bytes, f_) != bytes) {
    return Status::error(path_ + ": write failed (" + std::strerror(errno) + ")");
  }
  crc_ = crc32_of(data, bytes, crc_);
  written_ += bytes;
  return ok_status();
}

Status AtomicFile::commit() {
  // fsync of a pipe or a character device fails with EINVAL: nothing to sync.
  if (std::fflush(f_) != 0 || (fsync(fileno(f_)) != 0 && !(in_place() && errno == EINVAL))) {
    return Status::error(path_ + ": flush failed (" + std::strerror(errno) + ")");
  }
  const int closed = std::fclose(f_);
  f_ = nullptr;
  if (in_place()) {
    committed_ = true;
    if (closed != 0) return Status::error(path_ + ": write failed (" + std::strerror(errno) + ")");
    return ok_status();
  }
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
  return ok_status();
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

namespace {

std::string describe_kind(const fs::file_status& st) {
  switch (st.type()) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::regular: return "a regular file";
    default: return "not a regular file";
  }
}

}  // namespace

Status check_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || st.type() == fs::file_type::not_found) return Status::error(what + " " + path + ": not found");
  if (st.type() != fs::file_type::regular) {
    return Status::error(what + " " + path + ": is " + describe_kind(st) + ", not a regular file; name a file");
  }
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return Status::error(what + " " + path + ": cannot read its size (" + ec.message() + ")");
  if (size > max_bytes) {
    return Status::error(what + " " + path + ": " + std::to_string(size) + " bytes, more than the " +
                         std::to_string(max_bytes) + " a " + what + " may have; is this the right file?");
  }
  return ok_status();
}

Status map_file_readonly(const std::string& path, void** map, size_t* bytes, const std::string& hint) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (fstat then refuses it).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status::error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": not a regular file (a directory, device or FIFO)" + hint);
  }
  *bytes = static_cast<size_t>(st.st_size);
  *map = nullptr;
  if (*bytes > 0) {
    void* m = ::mmap(nullptr, *bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      return Status::error(path + ": cannot map (" + std::strerror(errno) + ")");
    }
    *map = m;
  }
  ::close(fd);
  return ok_status();
}

Expected<std::vector<uint8_t>> read_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  TERA_RETURN_IF_ERROR(check_regular_file(path, what, max_bytes));
  auto data = read_file(path);
  if (data && data->size() > max_bytes) {  // it grew between the check and the read
    return Status::error(what + " " + path + ": larger than " + std::to_string(max_bytes) + " bytes");
  }
  return data;
}

std::string resolve_beside(const std::string& container, const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(container).parent_path() / path).lexically_normal().string();
}

namespace {

// Creates and removes a file in dir: the only test of writability that also
// holds for root and for read-only mounts.
Status probe_writable(const std::string& dir, const std::string& what, const std::string& path) {
  const std::string probe = (fs::path(dir) / (".tera-write-probe." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    return Status::error(what + " " + path + ": cannot write in " + dir + " (" + std::strerror(errno) +
                         "); choose a path you can write to");
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return ok_status();
}

}  // namespace

Status probe_output_dir(const std::string& dir, const std::string& what) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (st.type() != fs::file_type::not_found && st.type() != fs::file_type::directory && !ec) {
    return Status::error(what + " " + dir + ": exists and is " + describe_kind(st) + "; name a directory");
  }
  fs::create_directories(dir, ec);
  if (ec) return Status::error(what + " " + dir + ": cannot create the directory (" + ec.message() + ")");
  return probe_writable(dir, what, dir);
}

Status probe_output_file(const std::string& path, const std::string& what, bool create_parent) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::directory) {
    return Status::error(what + " " + path + ": is a directory; name a file");
  }
  const std::string target = follow_symlinks(path);  // a link's target is what is written
  if (is_special_file(target)) {
    if (::access(target.c_str(), W_OK) != 0) {
      return Status::error(what + " " + path + ": is " + describe_kind(fs::status(target, ec)) + " that is not "
                           "writable (" + std::strerror(errno) + ")");
    }
    return ok_status();
  }
  fs::path parent = fs::path(target).parent_path();
  if (parent.empty()) parent = ".";
  if (create_parent) {
    fs::create_directories(parent, ec);
    if (ec) return Status::error(what + " " + path + ": cannot create " + parent.string() + " (" + ec.message() + ")");
  } else if (!fs::is_directory(parent, ec)) {
    return Status::error(what + " " + path + ": directory " + parent.string() + " does not exist; create it first");
  }
  TERA_RETURN_IF_ERROR(probe_writable(parent.string(), what, path));
  if (st.type() != fs::file_type::not_found && ::access(target.c_str(), W_OK) != 0) {
    return Status::error(what + " " + path + ": exists and is not writable (" + std::strerror(errno) + ")");
  }
  return ok_status();
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  const bool same = fs::equivalent(a, b, ec);
  return !ec && same;
}

}  // namespace tera
