// GPT-2 byte <-> character mapping; see byte_unicode.h.
#include "data/byte_unicode.h"

#include <array>

#include "data/unicode_class.h"

namespace tera {

namespace {

bool prints_as_itself(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct Tables {
  std::array<uint32_t, 256> to_char{};
  std::array<int16_t, 512> to_byte{};  // every mapped code point is < 0x144
};

const Tables& tables() {
  static const Tables t = [] {
    Tables x;
    x.to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      x.to_char[static_cast<size_t>(b)] = prints_as_itself(b) ? static_cast<uint32_t>(b) : next++;
      x.to_byte[x.to_char[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
    }
    return x;
  }();
  return t;
}

void append_utf8(std::string& out, uint32_t cp) {  // cp < 0x800 here
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

uint32_t byte_to_char(uint8_t b) { return tables().to_char[b]; }

int char_to_byte(uint32_t cp) { return cp < 512 ? tables().to_byte[cp] : -1; }

std::string bytes_to_printable(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_to_char(static_cast<uint8_t>(c)));
  return out;
}

bool printable_to_bytes(std::string_view s, std::string& bytes) {
  bytes.clear();
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const Utf8Unit u = utf8_next(p + i, s.size() - i);
    const int b = u.cp == kInvalidCodePoint ? -1 : char_to_byte(u.cp);
    if (b < 0) return false;
    bytes += static_cast<char>(b);
    i += u.len;
  }
  return true;
}

}  // namespace tera
