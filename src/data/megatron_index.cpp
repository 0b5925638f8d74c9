// Megatron index parsing (every field checked against the file sizes) and the
// streaming .bin/.idx writer; see megatron_index.h for the layout.
#include "data/megatron_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/check.h"
#include "core/unaligned.h"

namespace tera {

static_assert(std::endian::native == std::endian::little, "Megatron indices are little-endian; so is this reader");

namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

}  // namespace

size_t megatron_dtype_bytes(MegatronDtype d) {
  switch (d) {
    case MegatronDtype::uint8:
    case MegatronDtype::int8: return 1;
    case MegatronDtype::int16:
    case MegatronDtype::uint16: return 2;
    case MegatronDtype::int32:
    case MegatronDtype::float32: return 4;
    case MegatronDtype::int64:
    case MegatronDtype::float64: return 8;
  }
  return 0;
}

const char* megatron_dtype_name(MegatronDtype d) {
  switch (d) {
    case MegatronDtype::uint8: return "uint8";
    case MegatronDtype::int8: return "int8";
    case MegatronDtype::int16: return "int16";
    case MegatronDtype::int32: return "int32";
    case MegatronDtype::int64: return "int64";
    case MegatronDtype::float64: return "float64";
    case MegatronDtype::float32: return "float32";
    case MegatronDtype::uint16: return "uint16";
  }
  return "?";
}

int32_t MegatronIndex::length(uint64_t i) const { return load_unaligned<int32_t>(lengths + 4 * i); }
int64_t MegatronIndex::pointer(uint64_t i) const { return load_unaligned<int64_t>(pointers + 8 * i); }
int64_t MegatronIndex::document_start(uint64_t i) const { return load_unaligned<int64_t>(doc_idx + 8 * i); }

Expected<MegatronIndex> parse_megatron_index(const uint8_t* data, size_t size, const std::string& what,
                                             uint64_t bin_bytes) {
  auto err = [&](const std::string& m) { return Status::error(what + ": " + m); };
  if (size < kMegatronHeaderBytes) {
    return err(fmt::format("truncated: {} bytes, shorter than the {}-byte MMIDIDX header", size,
                           kMegatronHeaderBytes));
  }
  if (std::memcmp(data, kMegatronMagic, sizeof(kMegatronMagic)) != 0) {
    return err("magic: not a Megatron indexed-dataset index (expected \"MMIDIDX\\0\\0\")");
  }
  const auto version = load_unaligned<uint64_t>(data + 9);
  if (version != kMegatronVersion) {
    return err(fmt::format("version: {} is not supported (this tera reads version {})", version, kMegatronVersion));
  }
  const uint8_t code = data[17];
  if (code < 1 || code > 8) return err(fmt::format("dtype: unknown dtype code {} (Megatron's codes are 1..8)", code));
  MegatronIndex ix;
  ix.dtype = static_cast<MegatronDtype>(code);
  if (ix.dtype == MegatronDtype::float32 || ix.dtype == MegatronDtype::float64) {
    return err(fmt::format("dtype: {} (code {}) holds no token ids; tera reads integer dtypes only",
                           megatron_dtype_name(ix.dtype), code));
  }
  ix.sequences = load_unaligned<uint64_t>(data + 18);
  ix.doc_entries = load_unaligned<uint64_t>(data + 26);
  // Sizes in uint64 with the counts bounded first, so nothing overflows.
  const uint64_t room = size - kMegatronHeaderBytes;
  if (ix.sequences > room / 12 || ix.doc_entries > room / 8 ||
      12 * ix.sequences + 8 * ix.doc_entries != room) {
    const bool sane = ix.sequences <= room && ix.doc_entries <= room;
    return err(fmt::format(
        "{}: {} bytes, but sequence count {} and document count {} need {}{} (lengths int32 [S], pointers int64 "
        "[S], document indices int64 [D])",
        sane && 12 * ix.sequences + 8 * ix.doc_entries > room ? "truncated" : "size", size, ix.sequences,
        ix.doc_entries, kMegatronHeaderBytes, sane ? fmt::format(" + {} bytes", 12 * ix.sequences + 8 * ix.doc_entries)
                                                   : std::string(" + more bytes than the file holds")));
  }
  ix.lengths = data + kMegatronHeaderBytes;
  ix.pointers = ix.lengths + 4 * ix.sequences;
  ix.doc_idx = ix.pointers + 8 * ix.sequences;
  const uint64_t item = megatron_dtype_bytes(ix.dtype);
  uint64_t at = 0;  // byte offset where the next sequence must start
  for (uint64_t i = 0; i < ix.sequences; ++i) {
    const int32_t len = ix.length(i);
    const int64_t ptr = ix.pointer(i);
    if (len < 0) return err(fmt::format("lengths[{}]: {} is negative", i, len));
    if (ptr < 0 || (bin_bytes != UINT64_MAX && static_cast<uint64_t>(ptr) + item * static_cast<uint64_t>(len) >
                                                   bin_bytes)) {
      return err(fmt::format("pointers[{}]: sequence at byte {} of {} tokens ({} bytes) runs past the end of the "
                             ".bin ({} bytes)",
                             i, ptr, len, item * static_cast<uint64_t>(len), bin_bytes));
    }
    if (static_cast<uint64_t>(ptr) != at) {
      return err(fmt::format("pointers[{}]: byte {} disagrees with lengths (the sequences before it end at byte {}); "
                             "tera reads sequences stored back to back",
                             i, ptr, at));
    }
    at += item * static_cast<uint64_t>(len);
    ix.total_tokens += static_cast<uint64_t>(len);
  }
  if (bin_bytes != UINT64_MAX && at != bin_bytes) {
    return err(fmt::format("lengths: the sequences hold {} tokens ({} bytes of {}), but the .bin holds {} bytes", 
                           ix.total_tokens, at, megatron_dtype_name(ix.dtype), bin_bytes));
  }
  if (ix.doc_entries == 0) return err("document_indices: empty (the first entry must be 0)");
  int64_t prev = 0;
  for (uint64_t i = 0; i < ix.doc_entries; ++i) {
    const int64_t d = ix.document_start(i);
    if ((i == 0 && d != 0) || d < prev || static_cast<uint64_t>(d) > ix.sequences) {
      return err(fmt::format("document_indices[{}]: {} (they must run from 0 up to the sequence count {})", i, d,
                             ix.sequences));
    }
    prev = d;
  }
  if (static_cast<uint64_t>(prev) != ix.sequences) {
    return err(fmt::format("document_indices: the last entry is {}, not the sequence count {}", prev, ix.sequences));
  }
  return ix;
}

Expected<MegatronWriter> MegatronWriter::create(const std::string& prefix, int64_t vocab) {
  MegatronWriter w;
  w.prefix_ = prefix;
  w.vocab_ = vocab;
  w.dtype_ = vocab <= 65536 ? MegatronDtype::uint16 : MegatronDtype::int32;
  auto f = AtomicFile::create(megatron_bin(prefix));
  if (!f) return f.status();
  w.bin_.emplace(std::move(*f));
  return w;
}

Status MegatronWriter::add(const int32_t* tokens, size_t n) {
  constexpr size_t kBlock = 1 << 16;
  std::vector<uint8_t> buf;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t m = std::min(kBlock, n - b);
    buf.clear();
    for (size_t i = b; i < b + m; ++i) {
      const int32_t t = tokens[i];
      TERA_ASSERT(t >= 0 && t < vocab_, "MegatronWriter: token outside the vocabulary");
      if (dtype_ == MegatronDtype::uint16) {
        put(buf, static_cast<uint16_t>(t));
      } else {
        put(buf, t);
      }
    }
    TERA_RETURN_IF_ERROR(bin_->write(buf.data(), buf.size()));
  }
  current_ += static_cast<int64_t>(n);
  tokens_ += n;
  if (current_ > INT32_MAX) {
    return Status::error(fmt::format("{}: a document of more than {} tokens does not fit an int32 sequence length",
                                     megatron_bin(prefix_), INT32_MAX));
  }
  return ok_status();
}

void MegatronWriter::end_document() {
  lengths_.push_back(static_cast<int32_t>(current_));
  current_ = 0;
}

Status MegatronWriter::finish() {
  if (current_ > 0) end_document();
  TERA_RETURN_IF_ERROR(bin_->commit());
  const uint64_t S = lengths_.size();
  std::vector<uint8_t> idx;
  idx.reserve(kMegatronHeaderBytes + 12 * S + 8 * (S + 1));
  idx.insert(idx.end(), kMegatronMagic, kMegatronMagic + sizeof(kMegatronMagic));
  put(idx, kMegatronVersion);
  put(idx, static_cast<uint8_t>(dtype_));
  put(idx, S);
  put(idx, S + 1);  // one document per sequence
  for (const int32_t len : lengths_) put(idx, len);
  int64_t ptr = 0;
  for (const int32_t len : lengths_) {
    put(idx, ptr);
    ptr += static_cast<int64_t>(len) * static_cast<int64_t>(megatron_dtype_bytes(dtype_));
  }
  for (uint64_t d = 0; d <= S; ++d) put(idx, static_cast<int64_t>(d));
  auto f = AtomicFile::create(megatron_idx(prefix_));
  if (!f) return f.status();
  TERA_RETURN_IF_ERROR(f->write(idx.data(), idx.size()));
  return f->commit();
}

}  // namespace tera
