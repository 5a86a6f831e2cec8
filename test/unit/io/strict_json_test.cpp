#include <doctest/doctest.h>

#include <string>

#include "qgru/base/error.h"
#include "qgru/io/strict_json.h"

namespace {

std::string refusal(const std::string& text) {
  try {
    qgru::parse_strict_json(text, "f.json");
  } catch (const qgru::Error& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("strict JSON: a key twice in one object is refused, saying where; the same key in two objects is not") {
  CHECK(refusal(R"({"a": 1, "a": 2})") ==
        "f.json: not valid JSON (key 'a' appears twice in one object at the top level; readers could take either value)");
  CHECK(refusal(R"({"model": {"sha256": "x", "sha256": "y"}})").find("key 'sha256' appears twice in one object inside 'model'") !=
        std::string::npos);
  CHECK(refusal(R"({"tensors": [{"min": 1}, {"min": 2, "max": 3, "min": 4}]})")
            .find("key 'min' appears twice in one object inside 'tensors[]'") != std::string::npos);
  const nlohmann::json same_key_apart = qgru::parse_strict_json(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 3}, {"k": 4}]})", "f.json");
  CHECK(same_key_apart["c"][1]["k"] == 4);
}

TEST_CASE("strict JSON: nothing but whitespace may follow the value, a NUL byte included") {
  CHECK(refusal("{} x").find("f.json: not valid JSON (") == 0);
  CHECK(refusal(std::string("{}\0", 3)) == "f.json: not valid JSON (a NUL byte at offset 2; only whitespace may follow the value)");
  CHECK(refusal(std::string("{\"a\": 1}\0{\"a\": 2}", 17)).find("a NUL byte at offset 8") != std::string::npos);
  CHECK(refusal(std::string("{\"a\"\0: 1}", 9)).find("a NUL byte at offset 4") != std::string::npos);
  CHECK(qgru::parse_strict_json("{\"a\": 1}  \n\t\r\n", "f.json")["a"] == 1);
}

TEST_CASE("strict JSON: deep nesting, numbers beyond double and text that is not UTF-8 are refused in one line") {
  CHECK(refusal(std::string(200, '[') + std::string(200, ']')).find("nested more than 128 levels deep") != std::string::npos);
  CHECK(qgru::parse_strict_json(std::string(128, '[') + std::string(128, ']'), "f.json").is_array());
  CHECK(refusal(R"({"a": 1e999})").find("f.json: not valid JSON (") == 0);
  const std::string not_utf8 = refusal("{\"a\": \"\xff\n\"}");
  CHECK(not_utf8.find("f.json: not valid JSON (") == 0);
  CHECK(not_utf8.find('\n') == std::string::npos);
}

TEST_CASE("json_text writes a path that is not UTF-8 instead of throwing (each bad byte becomes U+FFFD)") {
  const nlohmann::json value = {{"path", std::string("data/\xff\xfe.npy")}};
  const std::string text = qgru::json_text(value);
  CHECK(text == "{\"path\":\"data/\xef\xbf\xbd\xef\xbf\xbd.npy\"}");
  CHECK(qgru::parse_strict_json(text, "f.json")["path"] == "data/\xef\xbf\xbd\xef\xbf\xbd.npy");
}
