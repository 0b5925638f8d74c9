// safetensors reader/writer with full validation of untrusted headers.
#include "ckpt/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/safetensors_index.h"
#include "core/bf16.h"
#include "core/file_util.h"

namespace tera {

using json = nlohmann::json;

int64_t safetensors_dtype_bytes(const std::string& d) {
  if (d == "F32" || d == "I32") return 4;
  if (d == "F64" || d == "I64") return 8;
  if (d == "BF16" || d == "F16" || d == "I16") return 2;
  if (d == "U8" || d == "I8" || d == "BOOL") return 1;
  return 0;
}

Expected<uint32_t> write_safetensors(const std::string& path, const std::vector<StTensorRef>& tensors,
                                     const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    TERA_ASSERT(static_cast<int64_t>(t.bytes) == numel(t.shape) * safetensors_dtype_bytes(t.dtype), t.name);
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // align the data section to 8 bytes
  auto file = AtomicFile::create(path);
  if (!file) return file.status();
  uint8_t len[8];
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  TERA_RETURN_IF_ERROR(file->write(len, 8));
  TERA_RETURN_IF_ERROR(file->write(h.data(), h.size()));
  // Tensors in header order = offset order (nlohmann sorts keys, offsets do not depend on it).
  for (const auto& t : tensors) TERA_RETURN_IF_ERROR(file->write(t.data, t.bytes));
  const uint32_t crc = file->crc32();
  TERA_RETURN_IF_ERROR(file->commit());
  return crc;
}

namespace {

// What a file that is not safetensors looks like, for the message: a JSON
// file, text (its first line), or binary data.
std::string describe_other_file(const uint8_t* data, size_t size) {
  size_t i = 0;
  while (i < size && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t')) ++i;
  if (i < size && (data[i] == '{' || data[i] == '[')) return "a JSON file";
  const size_t head = std::min<size_t>(size, 60);
  const bool text = std::all_of(data, data + head, [](uint8_t c) { return c >= 0x20 || c == '\n' || c == '\r' || c == '\t'; });
  if (!text) return "binary data of another format";
  std::string first(reinterpret_cast<const char*>(data) + i, std::min<size_t>(head - std::min(i, head), 40));
  first = first.substr(0, first.find('\n'));
  return "a text file (it begins \"" + first + "\")";
}

}  // namespace

Status parse_safetensors(const uint8_t* data, size_t size, const std::string& what,
                         std::vector<StTensorRef>* tensors, std::map<std::string, std::string>* metadata) {
  if (size < 8) return Status::error(what + ": too short for a safetensors header (" + std::to_string(size) + " bytes)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(data[i]) << (8 * i);
  if (n > size - 8 || n > (uint64_t{100} << 20) || (n > 0 && data[8] != '{')) {
    // A safetensors file begins with its header's length, then the JSON header.
    return Status::error(what + ": not a safetensors file: it is " + describe_other_file(data, size) +
                         (n <= size - 8 ? std::string() : fmt::format(" (read as safetensors, its header would be {} "
                                                                      "bytes of a {}-byte file)", n, size)) +
                         "; name a .safetensors file (or a checkpoint directory)");
  }
  json header;
  try {
    header = json::parse(reinterpret_cast<const char*>(data) + 8, reinterpret_cast<const char*>(data) + 8 + n);
  } catch (const json::exception& e) {
    return Status::error(what + ": header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object()) return Status::error(what + ": header is not a JSON object");
  const uint8_t* base = data + 8 + n;
  const uint64_t data_size = size - 8 - n;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  tensors->clear();
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return Status::error(what + ": __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) return Status::error(what + ": __metadata__." + m.key() + " is not a string");
        if (metadata != nullptr) (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = what + ": tensor '" + name + "'";
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets")) {
      return Status::error(where + " lacks dtype, shape or data_offsets");
    }
    if (!v["dtype"].is_string()) return Status::error(where + ": dtype is not a string");
    const std::string dtype = v["dtype"].get<std::string>();
    const int64_t esize = safetensors_dtype_bytes(dtype);
    if (esize == 0) return Status::error(where + ": unknown dtype '" + dtype + "'");
    if (!v["shape"].is_array()) return Status::error(where + ": shape is not an array");
    Shape shape;
    int64_t count = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) return Status::error(where + ": shape has a non-integer or negative entry");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > (uint64_t{1} << 40) || (dim > 0 && static_cast<uint64_t>(count) > (uint64_t{1} << 40) / dim)) {
        return Status::error(where + ": shape is too large");
      }
      count *= static_cast<int64_t>(dim);
      shape.push_back(static_cast<int64_t>(dim));
    }
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return Status::error(where + ": data_offsets is not [begin, end]");
    }
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > data_size) {
      return Status::error(where + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                           "] lie outside the data section (" + std::to_string(data_size) +
                           " bytes); the file is truncated or corrupt");
    }
    if (e - b != static_cast<uint64_t>(count * esize)) {
      return Status::error(where + ": holds " + std::to_string(e - b) + " bytes but shape " + shape_str(shape) +
                           " of " + dtype + " needs " + std::to_string(count * esize));
    }
    ranges.emplace_back(b, e);
    tensors->push_back(StTensorRef{name, dtype, shape, base + b, static_cast<size_t>(e - b)});
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return Status::error(what + ": tensors overlap in the data section");
  }
  // Keep the writer's order (by offset) so iteration is deterministic.
  std::sort(tensors->begin(), tensors->end(),
            [](const StTensorRef& a, const StTensorRef& b) { return a.data < b.data; });
  return ok_status();
}

Expected<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  return is_safetensors_index_path(path) ? open_sharded(path) : open_one(path);
}

Expected<SafetensorsFile> SafetensorsFile::open_one(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; only a regular file is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status::error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::error(path + ": cannot stat (" + std::strerror(errno) + ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": not a regular file (a directory, device or FIFO); name a .safetensors file");
  }
  SafetensorsFile f;
  f.path_ = path;
  f.maps_.push_back({path, nullptr, static_cast<size_t>(st.st_size)});
  Mapping& m = f.maps_.back();
  if (m.size > 0) {
    // Populated up front: every byte is read anyway, and one bulk read is
    // cheaper than a page fault per 4 KiB (measured: checkpoint load 12 s ->
    // 8 s for 1.4 GB on a 2-core VM, bench/ckpt_bench.py).
    m.map = mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (m.map == MAP_FAILED) {
      m.map = nullptr;
      ::close(fd);
      return Status::error(path + ": mmap failed (" + std::strerror(errno) + ")");
    }
  }
  ::close(fd);
  TERA_RETURN_IF_ERROR(parse_safetensors(static_cast<const uint8_t*>(m.map), m.size, path, &f.tensors_, &f.metadata_));
  return f;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept { *this = std::move(o); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    unmap();
    path_ = std::move(o.path_);
    maps_ = std::move(o.maps_);
    tensors_ = std::move(o.tensors_);
    metadata_ = std::move(o.metadata_);
    o.maps_.clear();
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() {
  for (Mapping& m : maps_) {
    if (m.map != nullptr) munmap(m.map, m.size);
  }
  maps_.clear();
}

const std::string& SafetensorsFile::path_of(const StTensorRef& t) const {
  const auto* p = static_cast<const uint8_t*>(t.data);
  for (const Mapping& m : maps_) {
    const auto* b = static_cast<const uint8_t*>(m.map);
    if (b != nullptr && p >= b && p <= b + m.size) return m.path;
  }
  return path_;
}

std::vector<std::string> SafetensorsFile::shard_paths() const {
  std::vector<std::string> out;
  if (!is_safetensors_index_path(path_)) return out;
  for (const Mapping& m : maps_) out.push_back(m.path);
  return out;
}

const StTensorRef* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

uint32_t SafetensorsFile::crc32() const {
  uint32_t crc = 0;
  for (const Mapping& m : maps_) crc = crc32_of(m.map, m.size, crc);
  return crc;
}

namespace {

// IEEE half to float (subnormals, infinities and NaN included).
float f16_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant == 0 ? INFINITY : NAN;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

}  // namespace

Status read_tensor_f32(const SafetensorsFile& file, const StTensorRef& t, float* out) {
  const auto n = static_cast<size_t>(numel(t.shape));
  if (t.dtype == "F32") {
    std::memcpy(out, t.data, n * sizeof(float));
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    const bool bf = t.dtype == "BF16";
    const auto* src = static_cast<const uint8_t*>(t.data);
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, sizeof h);  // little-endian on every host tera builds for
      out[i] = bf ? bf16_widen(h) : f16_to_float(h);
    }
  } else {
    return Status::error(file.path_of(t) + ": '" + t.name + "' is " + t.dtype + "; tera imports F32, BF16 or F16 weights");
  }
  // A model with nan or inf weights is damaged: refused by name, never trained on.
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < n; ++i) {
    if (std::isfinite(out[i])) continue;
    if (bad++ == 0) first = static_cast<int64_t>(i);
  }
  if (bad > 0) {
    return Status::error(fmt::format("{}: tensor '{}' holds {} non-finite value{} (the first, element {}, is {}); the "
                                     "file is damaged or was saved from a diverged run",
                                     file.path_of(t), t.name, bad, bad == 1 ? "" : "s", first, out[first]));
  }
  return ok_status();
}

}  // namespace tera
