// GPT-2's reversible byte <-> character mapping, which lets a token's bytes be
// written as printable text (vocab.json, merges.txt, tera's tokenizer file):
// the printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for
// themselves; the other 68 bytes map, in byte order, to U+0100, U+0101, ...
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tera {

// The code point byte b is written as.
uint32_t byte_to_char(uint8_t b);
// The byte written as code point cp, or -1 when cp is not in the mapping.
int char_to_byte(uint32_t cp);

// bytes -> UTF-8 text of the mapped characters.
std::string bytes_to_printable(std::string_view bytes);
// The inverse; false when s is not valid UTF-8 or holds a character outside the mapping.
bool printable_to_bytes(std::string_view s, std::string& bytes);

}  // namespace tera
