// A corpus as a stream of text chunks. Input files are read in order and cut
// into chunks of about chunk_bytes at safe pre-token boundaries (see
// pretokenize.h), so chunks can be tokenised independently and concatenated:
// the result is the same for any chunk size and thread count. Workers process
// chunks in parallel; the caller consumes them in input order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace tera {

struct TextChunk {
  size_t file = 0;     // index into the file list
  int part = 0;        // 0: the head of the file; 1: its held-out tail
  bool last = false;   // the last chunk of its (file, part)
  int64_t offset = 0;  // of text within the file
  std::string text;
  std::vector<int32_t> tokens;  // for the worker's output
};

struct ChunkOptions {
  int threads = 1;
  size_t chunk_bytes = size_t{1} << 20;
  // Fraction of each file, its tail from about (1 - hold_out) * size (a safe
  // boundary near it, else a UTF-8 character boundary; never empty when the
  // fraction asks for data), delivered as part 1.
  double hold_out = 0;
  // False: a file's head (and its tail) is one chunk, for a tokenizer whose
  // added tokens hold a space (BpeTokenizer::splits_at_spaces).
  bool split_at_spaces = true;
};

// Expands files and directories (recursively; sorted by path; entries whose
// name starts with '.' skipped) into the list of regular files.
Expected<std::vector<std::string>> list_input_files(const std::vector<std::string>& inputs);

using ChunkWork = std::function<void(TextChunk&, int thread)>;
using ChunkConsume = std::function<Status(TextChunk&)>;
using ByteProgress = std::function<void(int64_t done, int64_t total)>;

// Runs work on every chunk (on opts.threads threads) and consume on each, in
// order, on the calling thread. Empty files yield no chunk. Stops at the
// first read error or failed consume and returns it.
Status process_text_chunks(const std::vector<std::string>& files, const ChunkOptions& opts, const ChunkWork& work,
                           const ChunkConsume& consume, const ByteProgress& progress = {});

}  // namespace tera
