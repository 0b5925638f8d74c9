// libFuzzer target: encoding with a trained tokenizer. Every byte string,
// invalid UTF-8 included, encodes to valid non-special ids that decode back
// to exactly the input, and cutting at a safe split point changes nothing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/bpe_trainer.h"
#include "data/pretokenize.h"

namespace {

const tera::BpeTokenizer& tokenizer() {
  static const tera::BpeTokenizer tok = [] {
    std::string text;
    for (int i = 0; i < 400; ++i) {
      text += "the cat's hat, 42 times; naïve café \t\n  ";
      text += static_cast<char>('a' + i % 26);
      text += "ing\xff ";
    }
    tera::WordCounts wc;
    tera::for_each_pretoken(text, [&](std::string_view p) { wc.add(p); });
    tera::BpeTrainOptions opt;
    opt.vocab_size = 400;
    return std::move(tera::train_bpe(wc, opt)).value();
  }();
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto& tok = tokenizer();
  const std::vector<int32_t> ids = tok.encode(text);
  for (const int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size() || tok.is_special(id)) std::abort();
  }
  if (tok.decode(ids) != text) std::abort();
  const size_t cut = tera::find_safe_split(text, size / 2);
  if (cut != std::string_view::npos) {
    std::vector<int32_t> parts = tok.encode(text.substr(0, cut));
    const auto right = tok.encode(text.substr(cut));
    parts.insert(parts.end(), right.begin(), right.end());
    if (parts != ids) std::abort();
  }
  return 0;
}
