// Byte-level BPE (GPT-2 style): text -> pre-tokenizer pieces -> each
// piece's bytes as byte tokens -> merges applied lowest rank first, every
// occurrence of the chosen pair left to right, exactly as GPT-2's bpe() does.
// Every byte string round-trips: decode(encode(x)) == x, invalid UTF-8 and
// empty input included.
//
// EncodingRules carry what Hugging Face tokenizer.json files and tiktoken
// encodings add to GPT-2's recipe: another pre-tokenizer pattern, a piece
// that is itself a token taken whole before any merge (tokenizer.json's
// ignore_merges; tiktoken always does it), special and added tokens found in
// the text as they are and encoded to their ids (leftmost, longest first;
// never split), and a beginning-of-text token document encoders put before
// each document. With the default rules (tera's own earlier files, GPT-2's
// vocab.json + merges.txt, as OpenAI's encoder) special tokens are never
// produced by encode: they mark structure (document ends) and are written by
// callers. A special token with empty text is an unused id (a hole in a
// vocabulary): never produced, decoded as nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/strings.h"
#include "data/pair_map.h"
#include "data/pretokenize.h"

namespace tera {

inline constexpr const char* kEndOfText = "<|endoftext|>";

struct EncodingRules {
  Pretokenizer pretokenizer = Pretokenizer::gpt2;
  bool whole_piece_first = false;
  bool specials_in_text = false;  // special tokens are found in the text (Hugging Face, tiktoken)
  std::vector<int32_t> matched;   // non-special token ids also found in the text as they are (added tokens)
  int32_t bos = -1;              // prepended to each document by document encoders; -1: none
  bool is_default() const {
    return pretokenizer == Pretokenizer::gpt2 && !whole_piece_first && !specials_in_text && matched.empty() && bos < 0;
  }
};

struct BpeMerge {
  int32_t left, right;  // token ids; the result is the token whose bytes are bytes(left) + bytes(right)
};

// Encoded pieces, reused across calls: most pieces of a text repeat. A cache
// belongs to one tokenizer and one thread.
class EncodeCache {
 public:
  static constexpr size_t kMaxEntries = size_t{1} << 20;  // cleared when full (bounds memory)

 private:
  friend class BpeTokenizer;
  StringMap<std::pair<uint32_t, uint32_t>> map_;  // piece -> (begin, n) in ids_
  std::vector<int32_t> ids_;
  // In front of map_: a direct-mapped table of short pieces (<= 8 bytes) that
  // encode to <= 3 ids, small enough to stay in cache (common words hit here).
  struct Short {
    uint64_t bytes = 0;  // the piece, zero-padded
    uint8_t len = 0;     // 0: empty slot
    uint8_t n = 0;
    int32_t ids[3] = {};
  };
  static constexpr size_t kShortSlots = size_t{1} << 16;
  std::vector<Short> short_;
  // Scratch of the merge loop.
  std::vector<int32_t> sym_, prev_, next_;
  struct Candidate {
    uint32_t rank;
    int32_t pos, left, right;
  };
  std::vector<Candidate> heap_, pending_;
};

class BpeTokenizer {
 public:
  // tokens[id] = the token's bytes. Every byte value must be a (non-special)
  // token, merge results must be tokens, and non-empty token bytes are
  // unique. `what` names the source in error messages.
  // The end-of-text token is the special token spelled <|endoftext|>, else
  // <|end_of_text|> (Llama 3), else </s>.
  static Expected<BpeTokenizer> create(std::vector<std::string> tokens, std::vector<BpeMerge> merges,
                                       std::vector<int32_t> specials, const std::string& what,
                                       EncodingRules rules = {});
  // The byte tokenizer: ids 0..255 are the bytes, no merges, no special tokens.
  static BpeTokenizer bytes();

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::string& token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  const std::vector<BpeMerge>& merges() const { return merges_; }
  const std::vector<int32_t>& specials() const { return specials_; }
  bool is_special(int32_t id) const { return special_flag_[static_cast<size_t>(id)] != 0; }
  int32_t eot() const { return eot_; }  // <|endoftext|>, or -1
  int32_t bos() const { return rules_.bos; }
  const EncodingRules& rules() const { return rules_; }
  // False when a special or added token holds an ASCII space: a text cannot
  // then be cut at is_safe_split points without changing its encoding.
  bool splits_at_spaces() const { return splits_at_spaces_; }
  bool is_bytes() const {
    return merges_.empty() && specials_.empty() && tokens_.size() == 256 && rules_.is_default();
  }
  // Stable 64-bit identity of the vocabulary, merges and special tokens.
  uint64_t fingerprint() const { return fingerprint_; }
  int32_t byte_token(uint8_t b) const { return byte_id_[b]; }

  // Appends the ids of text to out. The cache makes repeated pieces cheap;
  // use one cache per thread.
  void encode(std::string_view text, std::vector<int32_t>& out, EncodeCache& cache) const;
  std::vector<int32_t> encode(std::string_view text) const;
  // Appends the bytes of ids to out; special tokens are skipped unless
  // keep_special. Every id must be < vocab_size().
  void decode(const int32_t* ids, size_t n, std::string& out, bool keep_special = false) const;
  std::string decode(const std::vector<int32_t>& ids, bool keep_special = false) const;

 private:
  struct MergeInfo {
    uint32_t rank;
    int32_t result;
  };
  void encode_text(std::string_view text, std::vector<int32_t>& out, EncodeCache& cache) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& out, EncodeCache& cache) const;
  Status set_rules(EncodingRules rules, const std::unordered_map<std::string_view, int32_t>& by_bytes,
                   const std::string& what);
  void merge_piece(std::string_view piece, EncodeCache& cache) const;  // leaves ids in cache.sym_ (alive ones)
  void remember(std::string_view piece, const int32_t* ids, size_t n, EncodeCache& cache) const;

  std::vector<std::string> tokens_;
  std::vector<BpeMerge> merges_;
  std::vector<int32_t> specials_;
  std::vector<uint8_t> special_flag_;
  PairMap<MergeInfo> merge_table_;
  int32_t byte_id_[256] = {};
  int32_t eot_ = -1;
  uint64_t fingerprint_ = 0;
  EncodingRules rules_;
  StringMap<int32_t> whole_;                                // token bytes -> id (whole_piece_first)
  std::vector<std::vector<int32_t>> matched_by_first_;      // [first byte] -> matched ids, longest first
  bool splits_at_spaces_ = true;
};

}  // namespace tera
