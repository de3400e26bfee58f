// memscale/detail/printable.hpp: user text made safe to print inside a one-line message.
//
// Error messages echo what the user gave (an option's value, a JSON key, a path), and a
// program prints them on a terminal. Bytes a terminal acts on (ESC sequences that retitle
// the window or clear the screen, a C1 CSI, a bidirectional override, a line break) and
// bytes that are not UTF-8 are written as escapes instead, and a quoted value is cut to a
// readable length. memscale::error applies printable() to every message it is given, so
// what() is safe to print whatever a caller put into it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memscale::detail {

// One character of UTF-8 text: its code point and its length in bytes; size 0 when the
// bytes at that place are not UTF-8 (a stray continuation byte, a cut or overlong
// sequence, a surrogate, a code point above U+10FFFF).
struct utf8_char {
  char32_t code = 0;
  std::size_t size = 0;
};

inline utf8_char decode_utf8(std::string_view text, std::size_t at) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return {lead, 1};
  // The lead byte gives the length, its payload bits, and the smallest code point of
  // that length (below it the sequence is overlong).
  std::size_t size = 0;
  char32_t code = 0;
  char32_t smallest = 0;
  if ((lead & 0xE0) == 0xC0) {
    size = 2;
    code = static_cast<char32_t>(lead & 0x1F);
    smallest = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    size = 3;
    code = static_cast<char32_t>(lead & 0x0F);
    smallest = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    size = 4;
    code = static_cast<char32_t>(lead & 0x07);
    smallest = 0x10000;
  } else {
    return {};
  }
  if (at + size > text.size()) return {};
  for (std::size_t i = 1; i < size; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80) return {};
    code = (code << 6) | static_cast<char32_t>(byte(at + i) & 0x3F);
  }
  if (code < smallest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return {};
  return {code, size};
}

// Code points a terminal acts on instead of showing: C0 controls and DEL, C1 controls
// (U+0080-U+009F: U+009B is an 8-bit CSI), the line and paragraph separators, and the
// bidirectional embeddings, overrides and isolates (they reorder the text after them).
constexpr bool acts_on_terminal(char32_t c) noexcept {
  return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x2028 || c == 0x2029 || (c >= 0x202A && c <= 0x202E) ||
         (c >= 0x2066 && c <= 0x2069);
}

namespace printable_detail {

inline void append_hex(std::string& out, char32_t value, int digits) {
  constexpr std::string_view hex = "0123456789abcdef";
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out += hex[(value >> shift) & 0xF];
}

// The escape of the character at text[at] if it needs one ("" otherwise), and its length.
inline std::string escape_at(std::string_view text, std::size_t at, std::size_t& consumed, bool quoting) {
  const utf8_char c = decode_utf8(text, at);
  std::string out;
  if (c.size == 0) {  // not UTF-8: the byte itself
    consumed = 1;
    out = "\\x";
    append_hex(out, static_cast<unsigned char>(text[at]), 2);
    return out;
  }
  consumed = c.size;
  if (quoting && (c.code == '"' || c.code == '\\')) return std::string("\\") + static_cast<char>(c.code);
  if (!acts_on_terminal(c.code)) return out;
  if (c.code == '\n') return "\\n";
  if (c.code == '\r') return "\\r";
  if (c.code == '\t') return "\\t";
  if (c.code < 0x80) {
    out = "\\x";
    append_hex(out, c.code, 2);
  } else {
    out = "\\u";
    append_hex(out, c.code, 4);
  }
  return out;
}

}  // namespace printable_detail

// `text` with every character a terminal acts on, and every byte that is not UTF-8,
// escaped (\n, \t, \r, \xNN, \uNNNN); everything else, backslashes included, is kept, so
// applying it twice changes nothing.
inline std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    std::size_t consumed = 1;
    const std::string escape = printable_detail::escape_at(text, at, consumed, false);
    if (escape.empty()) out.append(text.substr(at, consumed));
    else out += escape;
    at += consumed;
  }
  return out;
}

// How long a quoted value may be, in characters: a message stays one readable line even
// when the value is a 10 MB string.
inline constexpr std::size_t max_quoted_chars = 80;

// How a message shows a value as given: "text" in double quotes, escaped as printable()
// does and with \" and \\ for quotes and backslashes inside; a value longer than
// `max_chars` characters is cut there and followed by "...(N bytes)", N its whole length.
inline std::string quoted(std::string_view text, std::size_t max_chars = max_quoted_chars) {
  std::string out = "\"";
  std::size_t shown_chars = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t consumed = 1;
    const std::string escape = printable_detail::escape_at(text, at, consumed, true);
    const std::size_t width = escape.empty() ? 1 : escape.size();
    if (shown_chars + width > max_chars) break;
    if (escape.empty()) out.append(text.substr(at, consumed));
    else out += escape;
    shown_chars += width;
    at += consumed;
  }
  out += '"';
  if (at < text.size()) out += "...(" + std::to_string(text.size()) + " bytes)";
  return out;
}

// How a message shows a file path: quoted() keeps the start of a long value, but a path's
// file name is at its end, and a deep folder would push it out of the message. A path
// longer than `max_chars` characters keeps its last characters after "...", followed by
// "(N bytes)", N its whole length; escaped as quoted() does.
inline std::string quoted_path(std::string_view text, std::size_t max_chars = max_quoted_chars) {
  struct piece {
    std::size_t at, size;
    std::string escape;
  };
  std::vector<piece> pieces;
  std::size_t width = 0;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t consumed = 1;
    std::string escape = printable_detail::escape_at(text, at, consumed, true);
    width += escape.empty() ? 1 : escape.size();
    pieces.push_back({at, consumed, std::move(escape)});
    at += consumed;
  }
  if (width <= max_chars) return quoted(text, max_chars);
  static constexpr std::string_view elided = "...";
  const std::size_t room = max_chars > elided.size() ? max_chars - elided.size() : 0;
  std::size_t first = pieces.size();
  for (std::size_t shown = 0; first > 0;) {
    const piece& p = pieces[first - 1];
    const std::size_t w = p.escape.empty() ? 1 : p.escape.size();
    if (shown + w > room) break;
    shown += w;
    --first;
  }
  std::string out = "\"";
  out += elided;
  for (std::size_t i = first; i < pieces.size(); ++i) {
    if (pieces[i].escape.empty()) out.append(text.substr(pieces[i].at, pieces[i].size));
    else out += pieces[i].escape;
  }
  out += "\"(" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace memscale::detail

namespace memscale {

// Public: the escaping every memscale message applies, for callers that print text of their own.
using detail::printable;

}  // namespace memscale
