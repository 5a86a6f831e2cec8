#pragma once
// Text taken from files and command lines (paths, tensor names, ZIP member names, header text) goes into
// one-line messages. printable() keeps valid UTF-8 as it is and shows every control character and every byte
// that is not part of a valid UTF-8 sequence as \xNN, so a message stays one line of valid text whatever a
// path or a file holds (a path may hold a newline or bytes of another encoding and still be a valid path).
#include <string>

namespace qgru {

std::string printable(const std::string& text);

}  // namespace qgru
