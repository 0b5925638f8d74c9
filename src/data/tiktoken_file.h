// tiktoken rank files: one token per line, its bytes in base64, a space and
// its rank ("IQ== 0"), as tiktoken's own encodings and Llama 3's
// tokenizer.model are written. The file holds no pre-tokenizer and no
// special tokens: the caller names both (TokenizerSpec in tokenizer_file.h).
//
// Encoding equals tiktoken's: a piece that is a token is taken whole;
// otherwise the adjacent pair whose concatenation has the lowest rank merges
// first (leftmost on a tie), until no concatenation is a token. As a merge
// list for BpeTokenizer that is every split of every token into two tokens,
// ranked by the token they make.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "data/bpe_tokenizer.h"
#include "data/pretokenize.h"

namespace tera {

struct TiktokenSpecial {
  std::string text;
  int32_t id = -1;
};

// `what` names the file. Rank ids no line names are unused ids.
Expected<BpeTokenizer> parse_tiktoken(std::string_view text, Pretokenizer pattern,
                                      const std::vector<TiktokenSpecial>& specials, const std::string& what);

// "TEXT=ID,TEXT=ID" (the last '=' of each item splits it); `what` names the flag or key.
Expected<std::vector<TiktokenSpecial>> parse_special_list(std::string_view list, const std::string& what);

// True when the first line reads as "BASE64 RANK".
bool looks_like_tiktoken(std::string_view text);

}  // namespace tera
