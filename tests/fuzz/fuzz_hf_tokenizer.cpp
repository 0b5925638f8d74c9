// libFuzzer target: the Hugging Face tokenizer.json reader. A file that
// loads must encode and decode any text exactly (special and added tokens
// found in the text included), and write a tokenizer.json that reads back to
// the same tokenizer; one that does not load is refused by name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "data/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto tok = tera::parse_hf_tokenizer(in, "tokenizer.json");
  if (!tok.ok()) {
    if (tok.error().rfind("tokenizer.json: ", 0) != 0) std::abort();
    return 0;
  }
  for (const std::string_view text : {std::string_view("Hello, world! It's 2024 \xff\xfe caf\xc3\xa9  \n\n<|endoftext|>"),
                                      in.substr(0, 2048)}) {
    const auto ids = tok->encode(text);
    for (const int32_t id : ids) {
      if (id < 0 || id >= tok->vocab_size() || tok->token(id).empty()) std::abort();
    }
    if (tok->decode(ids, true) != text) std::abort();
  }
  auto back = tera::parse_hf_tokenizer(tera::hf_tokenizer_json(*tok), "written.json");
  if (!back.ok() || back->fingerprint() != tok->fingerprint()) std::abort();
  return 0;
}
