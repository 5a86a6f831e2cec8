#pragma once
// The one JSON parser of qgru's readers (statistics, bit-width configs, artifacts, GPTQ manifests,
// quantize_config.json, the safetensors header): RFC 8259 JSON, read strictly. Refused, with one line
// "SOURCE: not valid JSON (...)":
//  - anything after the value but whitespace, a NUL byte included (the JSON library would stop reading at a
//    NUL and ignore the rest);
//  - a key that appears twice in one object (the library keeps the last one; another reader may keep the
//    first, so the file has no single meaning); the message says where ("inside 'model'");
//  - nesting deeper than 128 levels (the library recurses per level when it frees a value);
//  - text that is not UTF-8, and numbers beyond double's range (1e999).
#include <string>

#include <nlohmann/json.hpp>

namespace qgru {

nlohmann::json parse_strict_json(const char* begin, const char* end, const std::string& source);
nlohmann::json parse_strict_json(const std::string& text, const std::string& source);

// Paths and names that are not UTF-8 are valid paths: written into JSON (provenance, reports) each byte that
// is not part of valid UTF-8 becomes U+FFFD instead of making the writer throw.
std::string json_text(const nlohmann::json& value, int indent = -1);
std::string json_text(const nlohmann::ordered_json& value, int indent = -1);

}  // namespace qgru
