// Hugging Face tokenizer.json, the byte-level BPE subset: model "BPE" over
// GPT-2's printable byte characters (byte_unicode.h), its ignore_merges, the
// ByteLevel pre-tokenizer (GPT-2's pattern) or Split with a pattern
// pretokenize.h implements followed by ByteLevel without its regex (Llama 3,
// Qwen2 style), added tokens (special or not; matched in the text, never
// split), and a TemplateProcessing post-processor that puts one special
// token before the text (Llama 3's <|begin_of_text|>).
//
// Anything else is refused by name rather than encoded differently from
// Hugging Face: WordPiece, Unigram and WordLevel models, byte_fallback
// (SentencePiece-style BPE), normalizers (NFC, ...), add_prefix_space,
// added tokens with lstrip/rstrip/single_word, other pre-tokenizers.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "data/bpe_tokenizer.h"

namespace tera {

// True when the JSON object looks like a tokenizer.json (it has "model").
bool looks_like_hf_tokenizer(std::string_view text);

// `what` names the file in error messages.
Expected<BpeTokenizer> parse_hf_tokenizer(std::string_view text, const std::string& what);

// A tokenizer.json Hugging Face's libraries load into the same encoding;
// parse_hf_tokenizer reads it back to the same tokenizer (fingerprint
// included). Unused ids (holes) are left out. One difference Hugging Face
// cannot express: a tokenizer whose special tokens are never found in the
// text (EncodingRules::specials_in_text false: tera's earlier files, GPT-2's
// vocab.json + merges.txt) carries "tera_special_tokens_are_not_text": true,
// which tera reads and other libraries ignore (they match the special tokens).
std::string hf_tokenizer_json(const BpeTokenizer& tok);

}  // namespace tera
