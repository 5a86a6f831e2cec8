#pragma once
// Names taken from files (tensor names, ZIP member names, header text) go into one-line error messages:
// control characters are shown as \xNN so that a message stays one line whatever the file holds.
#include <string>

namespace qgru::io_detail {

inline std::string printable(const std::string& text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace qgru::io_detail
