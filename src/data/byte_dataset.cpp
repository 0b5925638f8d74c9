// Byte-level dataset (vocab 256: token = byte value), the raw-bytes mode.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/file_util.h"
#include "data/dataset.h"

namespace tera {

Expected<std::unique_ptr<ByteDataset>> ByteDataset::open(const std::string& path, double begin_fraction,
                                                         double end_fraction) {
  // A device (/dev/zero) or FIFO would be read without end: regular files only.
  TERA_RETURN_IF_ERROR(check_regular_file(path, "text file", std::numeric_limits<uint64_t>::max()));
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::error(path + ": cannot open (" + std::strerror(errno) + ")");
  std::vector<uint8_t> all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return Status::error(path + ": read error");
  const auto n = static_cast<double>(all.size());
  const auto b = static_cast<size_t>(n * begin_fraction), e = static_cast<size_t>(n * end_fraction);
  auto ds = std::unique_ptr<ByteDataset>(new ByteDataset());
  ds->path_ = path;
  ds->bytes_.assign(all.begin() + static_cast<std::ptrdiff_t>(b), all.begin() + static_cast<std::ptrdiff_t>(e));
  ds->fingerprint_ = (static_cast<uint64_t>(ds->bytes_.size()) << 32) ^ crc32_of(ds->bytes_.data(), ds->bytes_.size());
  return ds;
}

void ByteDataset::read(int64_t offset, int64_t n, int32_t* out) const {
  TERA_ASSERT(offset >= 0 && offset + n <= num_tokens());
  for (int64_t i = 0; i < n; ++i) out[i] = bytes_[static_cast<size_t>(offset + i)];
}

std::string ByteDataset::describe() const {
  return path_ + " (" + std::to_string(bytes_.size()) + " bytes as byte tokens)";
}

}  // namespace tera
