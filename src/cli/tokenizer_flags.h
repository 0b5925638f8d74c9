// --pattern and --special beside a command's --tokenizer: a tiktoken rank
// file holds neither its pre-tokenizer nor its special tokens, so the
// command line names them (as data.tokenizer_pattern and
// data.tokenizer_specials do in a config). Header-only.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "data/tokenizer_file.h"

namespace tera::cli {

struct TokenizerFlags {
  std::string pattern;
  std::vector<std::string> specials;  // TEXT=ID each
};

inline void add_tokenizer_flags(CLI::App* app, TokenizerFlags& f) {
  app->add_option("--pattern", f.pattern,
                  "Pre-tokenizer of a tiktoken rank file given as --tokenizer: gpt2, cl100k (Llama 3: also llama3) "
                  "or qwen2");
  app->add_option("--special", f.specials,
                  "A special token of a tiktoken rank file, TEXT=ID (repeatable), e.g. --special '<|endoftext|>=100257'");
}

inline TokenizerSpec tokenizer_spec(const TokenizerFlags& f, const std::string& path) {
  std::string list;
  for (const auto& s : f.specials) list += (list.empty() ? "" : ",") + s;
  return TokenizerSpec{path, f.pattern, list};
}

}  // namespace tera::cli
