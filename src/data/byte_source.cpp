// Plain and gzip byte streams; see byte_source.h. The gzip source inflates
// one member after another (a .gz may be several concatenated members, as
// `cat a.gz b.gz` or pigz write) and refuses a stream cut short or followed by
// bytes that are not another member.
#include "data/byte_source.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#ifdef TERA_HAVE_ZLIB
#include <zlib.h>
#endif

namespace tera {

bool has_gzip_magic(std::string_view head) {
  return head.size() >= 2 && static_cast<uint8_t>(head[0]) == 0x1f && static_cast<uint8_t>(head[1]) == 0x8b;
}

bool gzip_supported() {
#ifdef TERA_HAVE_ZLIB
  return true;
#else
  return false;
#endif
}

namespace {

class FileSource : public ByteSource {
 public:
  FileSource(std::string path, std::FILE* f) : path_(std::move(path)), f_(f) {}
  ~FileSource() override { std::fclose(f_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  Expected<size_t> read(char* buf, size_t n) override {
    const size_t got = std::fread(buf, 1, n, f_);
    if (std::ferror(f_) != 0) return Status::error(path_ + ": read error (" + std::strerror(errno) + ")");
    raw_ += static_cast<int64_t>(got);
    return got;
  }
  int64_t raw_bytes() const override { return raw_; }

 private:
  std::string path_;
  std::FILE* f_;
  int64_t raw_ = 0;
};

class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::string_view data) : data_(data) {}
  Expected<size_t> read(char* buf, size_t n) override {
    const size_t got = std::min(n, data_.size() - at_);
    std::memcpy(buf, data_.data() + at_, got);
    at_ += got;
    return got;
  }
  int64_t raw_bytes() const override { return static_cast<int64_t>(at_); }

 private:
  std::string_view data_;
  size_t at_ = 0;
};

#ifdef TERA_HAVE_ZLIB
class GzipSource : public ByteSource {
 public:
  GzipSource(std::string name, std::unique_ptr<ByteSource> raw) : name_(std::move(name)), raw_(std::move(raw)) {
    std::memset(&z_, 0, sizeof(z_));
    // 16 + MAX_WBITS: a gzip wrapper (header and CRC-32 trailer), nothing else.
    ok_ = inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK;
  }
  ~GzipSource() override {
    if (ok_) inflateEnd(&z_);
  }
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;

  Expected<size_t> read(char* buf, size_t n) override {
    if (!ok_) return Status::error(name_ + ": cannot start the gzip decoder (out of memory)");
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    const uInt asked = z_.avail_out;
    while (z_.avail_out == asked && !(ended_ && eof_)) {
      if (z_.avail_in == 0 && !eof_) TERA_RETURN_IF_ERROR(refill());
      if (ended_) {
        if (z_.avail_in == 0) continue;  // at eof_ now: the stream ends cleanly after a member
        inflateReset(&z_);               // bytes after a member: the next member
        ended_ = false;
      }
      const int r = inflate(&z_, Z_NO_FLUSH);
      if (r == Z_STREAM_END) {
        ended_ = true;
      } else if (r == Z_BUF_ERROR && z_.avail_in == 0 && eof_) {
        return Status::error(fmt::format("{}: truncated gzip data (the stream ends inside a member after {} "
                                         "compressed bytes); re-create or re-download the file",
                                         name_, raw_->raw_bytes()));
      } else if (r != Z_OK && r != Z_BUF_ERROR) {
        return Status::error(fmt::format("{}: corrupt gzip data near compressed byte {} ({}); re-create or "
                                         "re-download the file",
                                         name_, raw_->raw_bytes() - static_cast<int64_t>(z_.avail_in),
                                         z_.msg != nullptr ? z_.msg : "inflate failed"));
      }
    }
    return static_cast<size_t>(asked - z_.avail_out);
  }
  int64_t raw_bytes() const override { return raw_->raw_bytes() - static_cast<int64_t>(z_.avail_in); }

 private:
  Status refill() {
    auto got = raw_->read(in_.data(), in_.size());
    if (!got) return got.status();
    z_.next_in = reinterpret_cast<Bytef*>(in_.data());
    z_.avail_in = static_cast<uInt>(*got);
    eof_ = *got == 0;
    return ok_status();
  }

  std::string name_;
  std::unique_ptr<ByteSource> raw_;
  std::vector<char> in_ = std::vector<char>(size_t{1} << 16);
  z_stream z_;
  bool ok_ = false, ended_ = false, eof_ = false;
};
#endif

// raw itself, or raw gunzipped when it starts with the gzip magic.
Expected<std::unique_ptr<ByteSource>> maybe_gunzip(std::unique_ptr<ByteSource> raw, bool gzip,
                                                   const std::string& name) {
  if (!gzip) return raw;
#ifdef TERA_HAVE_ZLIB
  return std::unique_ptr<ByteSource>(std::make_unique<GzipSource>(name, std::move(raw)));
#else
  return Status::error(name + ": is gzip-compressed, and this build of tera has no zlib; gunzip it first, or "
                              "build tera with zlib (zlib1g-dev)");
#endif
}

}  // namespace

Expected<std::unique_ptr<ByteSource>> open_byte_source(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::error(path + ": cannot open (" + std::strerror(errno) + ")");
  char head[2] = {0, 0};
  const size_t got = std::fread(head, 1, 2, f);
  const bool gzip = has_gzip_magic(std::string_view(head, got));
  if (std::fseek(f, 0, SEEK_SET) != 0) {
    std::fclose(f);
    return Status::error(path + ": cannot seek back to its start (a pipe?); name a regular file");
  }
  return maybe_gunzip(std::make_unique<FileSource>(path, f), gzip, path);
}

Expected<std::unique_ptr<ByteSource>> open_memory_source(std::string_view data, const std::string& name) {
  return maybe_gunzip(std::make_unique<MemorySource>(data), has_gzip_magic(data), name);
}

}  // namespace tera
