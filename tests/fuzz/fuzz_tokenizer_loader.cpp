// libFuzzer target: the tokenizer loaders. The first byte picks a JSON file
// (tokenizer.json or tera's earlier format) or GPT-2's vocab.json +
// merges.txt (split at the first NUL byte). A tokenizer that loads must
// encode and decode any text exactly, the input itself included; one that
// does not load is refused by name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "data/tokenizer_file.h"

namespace {

void check_round_trip(const tera::BpeTokenizer& tok, std::string_view text) {
  const auto ids = tok.encode(text);
  for (const int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) std::abort();
    if (tok.is_special(id) && (!tok.rules().specials_in_text || tok.token(id).empty())) std::abort();
  }
  if (tok.decode(ids, true) != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  tera::Expected<tera::BpeTokenizer> tok = tera::Status::error("unset");
  std::string who;
  if (data[0] % 2 == 0) {
    who = "tok.json";
    tok = tera::parse_tokenizer_json(in, who);
  } else {
    const size_t cut = in.find('\0');
    who = "vocab.json";
    tok = tera::parse_gpt2_tokenizer(in.substr(0, cut), cut == std::string_view::npos ? "" : in.substr(cut + 1), who,
                                     "merges.txt");
  }
  if (!tok.ok()) {
    if (tok.error().find(who) != 0 && tok.error().find("merges.txt") != 0) std::abort();
    return 0;
  }
  check_round_trip(*tok, "Hello, world! It's 2024 \xff\xfe caf\xc3\xa9  \n\n");
  check_round_trip(*tok, in.substr(0, 4096));
  return 0;
}
