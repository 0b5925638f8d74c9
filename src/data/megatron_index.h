// Megatron-LM's indexed dataset (a PREFIX.bin of tokens and a PREFIX.idx
// describing it), as written by Megatron's preprocess_data.py and read by its
// indexed_dataset.py. The index, little-endian, version 1:
//   magic    "MMIDIDX\0\0"            9 bytes
//   version  uint64 = 1
//   dtype    uint8  code of the .bin's token type (1 uint8, 2 int8, 3 int16,
//                   4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)
//   S        uint64 sequence count
//   D        uint64 document-index count
//   lengths  int32  [S]  tokens in each sequence
//   pointers int64  [S]  byte offset of each sequence in the .bin
//   doc_idx  int64  [D]  sequence index where each document starts; the first
//                        is 0 and the last is S (so D - 1 documents)
// Megatron's GPT preprocessing stores each document as one sequence with its
// end-of-document token appended (preprocess_data --append-eod; with
// sentence splitting a document spans several sequences, the token after
// the last), so the .bin read front to back is the same token stream tera's
// shards hold: document, end-of-text, document, end-of-text, ...
// tera reads only indices whose sequences lie back to back from byte 0 of the
// .bin and fill it exactly (what Megatron's writer and merge produce); float
// dtypes are refused, token ids are checked when the .bin is opened.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/status.h"

namespace tera {

inline constexpr char kMegatronMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kMegatronVersion = 1;
inline constexpr size_t kMegatronHeaderBytes = 9 + 8 + 1 + 8 + 8;  // 34

// Token dtype codes of the index (Megatron's DType enum).
enum class MegatronDtype : uint8_t {
  uint8 = 1, int8 = 2, int16 = 3, int32 = 4, int64 = 5, float64 = 6, float32 = 7, uint16 = 8
};
// Bytes per token of a dtype code 1..8.
size_t megatron_dtype_bytes(MegatronDtype d);
const char* megatron_dtype_name(MegatronDtype d);

// A checked index. Views point into the caller's buffer (the mapped .idx),
// so they live as long as it; values are read with memcpy (unaligned-safe).
struct MegatronIndex {
  MegatronDtype dtype = MegatronDtype::uint16;
  uint64_t sequences = 0, doc_entries = 0;
  const uint8_t* lengths = nullptr;   // int32 [sequences]
  const uint8_t* pointers = nullptr;  // int64 [sequences]
  const uint8_t* doc_idx = nullptr;   // int64 [doc_entries]
  uint64_t total_tokens = 0;          // sum of lengths

  int32_t length(uint64_t i) const;
  int64_t pointer(uint64_t i) const;
  int64_t document_start(uint64_t i) const;
  uint64_t documents() const { return doc_entries > 0 ? doc_entries - 1 : 0; }
};

// Checks an index image of `size` bytes: header, dtype (integer types only),
// the counts against the file size, every length >= 0, the pointers back to
// back from 0, the document indices (0 first, S last, non-decreasing).
// bin_bytes: the .bin's size, which the sequences must fill exactly
// (UINT64_MAX skips that check, for the fuzzer). Errors start with `what`
// (the .idx's path) and name the field.
Expected<MegatronIndex> parse_megatron_index(const uint8_t* data, size_t size, const std::string& what,
                                             uint64_t bin_bytes);

// Writes PREFIX.bin and PREFIX.idx, each atomically (AtomicFile; the .idx is
// committed last, so a reader never finds a new .idx over an old .bin): the
// tokens stream into the .bin, one sequence per document (its end-of-text
// included, if any), and the .idx is written at finish() from the lengths kept
// in memory (4 bytes a document). The dtype is uint16 when the vocab fits
// (<= 65536), else int32. Every token must lie in [0, vocab).
class MegatronWriter {
 public:
  static Expected<MegatronWriter> create(const std::string& prefix, int64_t vocab);
  MegatronWriter(MegatronWriter&&) noexcept = default;
  // Appends tokens to the current document.
  Status add(const int32_t* tokens, size_t n);
  // Closes the current document (an empty one is recorded too).
  void end_document();
  // Commits the .bin, then writes and commits the .idx.
  Status finish();
  MegatronDtype dtype() const { return dtype_; }
  uint64_t tokens() const { return tokens_; }
  uint64_t documents() const { return lengths_.size(); }

 private:
  MegatronWriter() = default;
  std::string prefix_;
  std::optional<AtomicFile> bin_;
  MegatronDtype dtype_ = MegatronDtype::uint16;
  int64_t vocab_ = 0;
  int64_t current_ = 0;  // tokens of the open document
  uint64_t tokens_ = 0;
  std::vector<int32_t> lengths_;
};

// The .bin and .idx paths of a prefix.
inline std::string megatron_bin(const std::string& prefix) { return prefix + ".bin"; }
inline std::string megatron_idx(const std::string& prefix) { return prefix + ".idx"; }

}  // namespace tera
