#pragma once
// Subcommand registry. Each apps/qgru/cmd_<name>.cpp fills an options struct from CLI11, calls the library
// once and returns an exit code; it registers itself with QGRU_SUBCOMMAND so main.cpp needs no edit.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace qgru::cli {

// `setup` declares the subcommand's options on `command` and returns the function that runs it.
using SubcommandSetup = std::function<std::function<int()>(CLI::App& command)>;

struct SubcommandEntry {
  std::string name;
  std::string description;
  int order;  // position in `qgru --help`
  SubcommandSetup setup;
};

std::vector<SubcommandEntry>& subcommand_registry();

struct SubcommandRegistrar {
  SubcommandRegistrar(std::string name, std::string description, int order, SubcommandSetup setup) {
    subcommand_registry().push_back({std::move(name), std::move(description), order, std::move(setup)});
  }
};

}  // namespace qgru::cli

#define QGRU_SUBCOMMAND_CONCAT2(a, b) a##b
#define QGRU_SUBCOMMAND_CONCAT(a, b) QGRU_SUBCOMMAND_CONCAT2(a, b)
#define QGRU_SUBCOMMAND(name, description, order, setup)                                           \
  static const ::qgru::cli::SubcommandRegistrar QGRU_SUBCOMMAND_CONCAT(qgru_subcommand_, __LINE__)( \
      name, description, order, setup)
