#include "qgru/io/strict_json.h"

#include <cstring>
#include <set>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/base/message_text.h"

namespace qgru {
namespace {

using nlohmann::json;

constexpr int kMaxJsonDepth = 128;

[[noreturn]] void refuse(const std::string& source, const std::string& what) {
  throw Error(source + ": not valid JSON (" + printable(what) + ")");
}

// Before parsing: the library recurses per level while it frees a value, so millions of '[' would exhaust the
// stack; the reference parsers stop at 128 levels.
void check_depth(const char* begin, const char* end, const std::string& source) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char* p = begin; p != end; ++p) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (*p == '\\') {
        escaped = true;
      } else if (*p == '"') {
        in_string = false;
      }
    } else if (*p == '"') {
      in_string = true;
    } else if (*p == '[' || *p == '{') {
      if (++depth > kMaxJsonDepth) refuse(source, "nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
    } else if (*p == ']' || *p == '}') {
      --depth;
    }
  }
}

// One open object or array while parsing: its name in its parent, and for an object the keys seen so far.
struct Frame {
  bool is_object = false;
  std::string name;  // the parent object's key, or "[]" inside an array
  std::string last_key;
  std::set<std::string> keys;
};

std::string location(const std::vector<Frame>& frames) {
  std::string path;
  for (size_t i = 1; i < frames.size(); ++i) {
    if (frames[i].name != "[]" && !path.empty()) path += '.';
    path += frames[i].name;
  }
  return path.empty() ? "at the top level" : "inside '" + path + "'";
}

}  // namespace

json parse_strict_json(const char* begin, const char* end, const std::string& source) {
  const void* nul = std::memchr(begin, 0, static_cast<size_t>(end - begin));
  if (nul != nullptr) {
    refuse(source, "a NUL byte at offset " + std::to_string(static_cast<const char*>(nul) - begin) +
                       "; only whitespace may follow the value");
  }
  check_depth(begin, end, source);
  std::vector<Frame> frames;
  std::string duplicate;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) {
      Frame frame;
      frame.is_object = event == json::parse_event_t::object_start;
      if (!frames.empty()) frame.name = frames.back().is_object ? frames.back().last_key : "[]";
      frames.push_back(std::move(frame));
    } else if (event == json::parse_event_t::object_end || event == json::parse_event_t::array_end) {
      if (!frames.empty()) frames.pop_back();
    } else if (event == json::parse_event_t::key && !frames.empty() && parsed.is_string()) {
      Frame& frame = frames.back();
      frame.last_key = parsed.get<std::string>();
      if (!frame.keys.insert(frame.last_key).second && duplicate.empty()) {
        duplicate = "key '" + frame.last_key + "' appears twice in one object " + location(frames) +
                    "; readers could take either value";
      }
    }
    return true;
  };
  json value;
  try {
    value = json::parse(begin, end, callback, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {  // parse errors and out-of-range numbers (1e999) alike
    std::string message = e.what();
    const size_t bracket = message.find("] ");
    if (message.rfind("[json.exception", 0) == 0 && bracket != std::string::npos) message = message.substr(bracket + 2);
    refuse(source, message);
  }
  if (!duplicate.empty()) refuse(source, duplicate);
  return value;
}

json parse_strict_json(const std::string& text, const std::string& source) {
  return parse_strict_json(text.data(), text.data() + text.size(), source);
}

std::string json_text(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

std::string json_text(const nlohmann::ordered_json& value, int indent) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace qgru
