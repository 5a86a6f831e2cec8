#include <doctest/doctest.h>

#include "qgru/base/message_text.h"

TEST_CASE("printable keeps text one line: control bytes and bytes that are not UTF-8 become \\xNN, UTF-8 stays") {
  CHECK(qgru::printable("plain/path.npy") == "plain/path.npy");
  CHECK(qgru::printable("a\nb\rc\td") == "a\\x0ab\\x0dc\\x09d");
  CHECK(qgru::printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(qgru::printable("x\xffy") == "x\\xffy");                // never valid in UTF-8
  CHECK(qgru::printable("\xc0\x80") == "\\xc0\\x80");           // overlong form of NUL
  CHECK(qgru::printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a UTF-16 surrogate
  CHECK(qgru::printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  CHECK(qgru::printable("end\xe2\x82") == "end\\xe2\\x82");     // cut short
  CHECK(qgru::printable(std::string("nul\0x", 5)) == "nul\\x00x");
  CHECK(qgru::printable("\x7f") == "\\x7f");
  CHECK(qgru::printable(qgru::printable("a\nb\xff")) == qgru::printable("a\nb\xff"));  // escaping twice changes nothing
}
