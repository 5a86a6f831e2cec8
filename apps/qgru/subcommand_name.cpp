#include "subcommand_name.h"

#include <algorithm>
#include <cstring>

namespace qgru::cli {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  // The (|a| + 1) x (|b| + 1) table, d[i][j] the distance between a's first i bytes and b's first j.
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);  // two neighbours swapped ("gtpq")
      }
    }
  }
  return d[a.size()][b.size()];
}

std::optional<std::string> subcommand_word(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-') return std::string(argv[i]);
    if (std::strcmp(argv[i], "--") == 0) return i + 1 < argc ? std::optional<std::string>(argv[i + 1]) : std::nullopt;
  }
  return std::nullopt;
}

std::string unknown_subcommand_message(const std::string& word, const std::vector<std::string>& names) {
  if (std::find(names.begin(), names.end(), word) != names.end()) return "";
  std::string nearest;
  std::size_t nearest_distance = 0;
  for (const std::string& name : names) {
    const std::size_t distance = edit_distance(word, name);
    if (nearest.empty() || distance < nearest_distance) {
      nearest = name;
      nearest_distance = distance;
    }
  }
  const std::size_t allowed = std::min<std::size_t>(3, std::max<std::size_t>(1, nearest.size() / 3));
  std::string message = "'" + word + "' is not a qgru subcommand";
  if (!nearest.empty() && nearest_distance <= allowed) message += " (did you mean '" + nearest + "'?)";
  message += "; the subcommands are ";
  for (std::size_t i = 0; i < names.size(); ++i) message += (i ? ", " : "") + names[i];
  return message;
}

}  // namespace qgru::cli
