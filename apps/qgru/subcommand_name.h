#pragma once
// The first word after `qgru` and its global flags names a subcommand; a word that names none is a usage
// error that says so, lists the subcommands and suggests the nearest name when it is close (a typo).
#include <optional>
#include <string>
#include <vector>

namespace qgru::cli {

// Edit distance (insert, delete, substitute, swap two neighbours: each costs 1; the optimal string alignment
// distance), bytes compared as they are.
std::size_t edit_distance(const std::string& a, const std::string& b);

// The word in argv[1..argc) that CLI11 would take as the subcommand: the first argument that does not start
// with '-' (qgru's global options, -q/--quiet and -v/--verbose, take no value), or nothing when there is none.
std::optional<std::string> subcommand_word(int argc, const char* const* argv);

// When `word` is not one of `names`: the one-line message "'word' is not a qgru subcommand (did you mean
// 'x'?); the subcommands are a, b, c", the suggestion only when the nearest name is within a third of its
// length (at least 1, at most 3 edits). Empty when `word` is a subcommand.
std::string unknown_subcommand_message(const std::string& word, const std::vector<std::string>& names);

}  // namespace qgru::cli
