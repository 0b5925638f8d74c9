// A corpus as a stream of text chunks. Input files are read in order. A text
// file is one document, cut into chunks of about chunk_bytes at safe
// pre-token boundaries (see pretokenize.h), so chunks can be tokenised
// independently and concatenated: the result is the same for any chunk size
// and thread count. A JSONL file (jsonl.h) gives one document per line and
// key, each one chunk; its lines are parsed on the workers. Workers process
// batches of about chunk_bytes (many small documents, or one chunk) in
// parallel; the caller consumes the chunks in input order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/jsonl.h"

namespace tera {

struct TextChunk {
  size_t file = 0;     // index into the file list
  int part = 0;        // 0: train; 1: held out (a text file's tail, or a JSONL line; see ChunkOptions)
  bool last = false;   // the last chunk of its document: a text file's (file, part), or a JSONL document
  int64_t offset = 0;  // of text within the file (text input; 0 for JSONL)
  int key = 0;         // JSONL: index into ChunkOptions::jsonl.keys of the key the text is the value of
  int64_t line = 0;    // JSONL: 1-based line of the document; 0 for text input
  std::string text;
  std::vector<int32_t> tokens;  // for the worker's output
};

struct ChunkOptions {
  int threads = 1;
  size_t chunk_bytes = size_t{1} << 20;
  // Fraction of each text file, its tail from about (1 - hold_out) * size (a
  // safe boundary near it, else a UTF-8 character boundary; never empty when
  // the fraction asks for data), delivered as part 1. In a JSONL file, whole
  // lines are held out, spread evenly: line n (1-based) when
  // floor(n * hold_out) > floor((n - 1) * hold_out), so every (1/hold_out)-th.
  double hold_out = 0;
  // False: a file's head (and its tail) is one chunk, for a tokenizer whose
  // added tokens hold a space (BpeTokenizer::splits_at_spaces).
  bool split_at_spaces = true;
  JsonlOptions jsonl;  // which files are JSONL, and how they are read
};

// What reading met besides the text: JSONL lines and malformed lines skipped.
struct ChunkReport {
  int64_t jsonl_lines = 0;  // lines read from JSONL files
  int64_t bad_lines = 0;    // malformed JSONL lines skipped (jsonl.skip_bad_lines)
  std::string first_bad;    // "file:line: what is wrong" of the first
};

// Expands files and directories (recursively; sorted by path; entries whose
// name starts with '.' skipped) into the list of regular files.
Expected<std::vector<std::string>> list_input_files(const std::vector<std::string>& inputs);

using ChunkWork = std::function<void(TextChunk&, int thread)>;
using ChunkConsume = std::function<Status(TextChunk&)>;
using ByteProgress = std::function<void(int64_t done, int64_t total)>;

// Runs work on every chunk (on opts.threads threads) and consume on each, in
// order, on the calling thread. Empty files and "" JSONL values yield no
// chunk. A text file that starts with the gzip magic is refused (gzip is
// read only as JSONL). Stops at the first read error, malformed JSONL line
// (unless skipped) or failed consume and returns it; progress counts bytes of
// the files as stored (compressed ones for gzip).
Expected<ChunkReport> process_text_chunks(const std::vector<std::string>& files, const ChunkOptions& opts, const ChunkWork& work,
                           const ChunkConsume& consume, const ByteProgress& progress = {});

}  // namespace tera
