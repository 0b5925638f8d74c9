// libFuzzer target: the tiktoken rank file reader. The first byte picks the
// pattern; the input up to the first NUL byte (after it) is the special-token
// list ("TEXT=ID,..."), the rest the rank file. A file that loads must encode
// and decode any text exactly; one that does not load is refused by name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "data/tiktoken_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const tera::Pretokenizer pattern = static_cast<tera::Pretokenizer>(data[0] % 3);
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = in.find('\0');
  auto specials = tera::parse_special_list(cut == std::string_view::npos ? "" : in.substr(0, cut), "--special");
  if (!specials.ok()) {
    if (specials.error().rfind("--special: ", 0) != 0) std::abort();
    return 0;
  }
  if (cut != std::string_view::npos) in.remove_prefix(cut + 1);
  auto tok = tera::parse_tiktoken(in, pattern, *specials, "ranks.tiktoken");
  if (!tok.ok()) {
    if (tok.error().rfind("ranks.tiktoken", 0) != 0) std::abort();
    return 0;
  }
  for (const std::string_view text : {std::string_view("Hello, world! It's 2024 \xff\xfe caf\xc3\xa9  \n\n"),
                                      in.substr(0, 2048)}) {
    const auto ids = tok->encode(text);
    for (const int32_t id : ids) {
      if (id < 0 || id >= tok->vocab_size() || tok->token(id).empty()) std::abort();
    }
    if (tok->decode(ids, true) != text) std::abort();
  }
  return 0;
}
