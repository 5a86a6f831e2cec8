// qgru: the command-line front end. Wires the registered subcommands (apps/qgru/cmd_*.cpp) into CLI11,
// maps errors to exit codes and prints every failure as one line on stderr.
#include <algorithm>
#include <iostream>

#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/base/message_text.h"
#include "qgru/version.h"
#include "subcommand.h"
#include "subcommand_name.h"

#ifdef QGRU_WITH_CUDA
#include "qgru_cuda/device.h"
#endif

namespace qgru::cli {

std::vector<SubcommandEntry>& subcommand_registry() {
  static std::vector<SubcommandEntry> registry;
  return registry;
}

}  // namespace qgru::cli

namespace {

std::string version_text() {
  std::string text = std::string("qgru ") + QGRU_VERSION_STRING;
#ifdef QGRU_WITH_CUDA
  text += "\nCUDA: " + qgru::cuda::build_description();
#else
  text += "\nCUDA: none (CPU only: built without CUDA)";
#endif
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  qgru::install_interrupt_cleanup();
  CLI::App app{"qgru: fixed-point GRU quantization toolchain (calibrate, quantize, run, verify, export, gptq)"};
  app.footer(
      "Exit codes: 0 success, 1 bad input or failure (one line on stderr says what and where), 2 usage error\n"
      "(bad options, or files named so that an output would replace an input, another output or a device).\n"
      "Logs and progress go to stderr; results go to stdout and to the files you name.\n"
      "Run 'qgru <subcommand> --help' for the options of each subcommand.\n"
      "Examples:\n"
      "  qgru calibrate --model gru.safetensors --data calib.npy -o stats.json\n"
      "  qgru quantize --model gru.safetensors --stats stats.json --config int8 -o model.qgru.json");
  app.set_version_flag("--version", version_text());
  // Usage errors are one line too, as every other error (set before the subcommands, which inherit it).
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "qgru: error: " + qgru::printable(e.what()) + " (see --help)\n";
  });
  app.require_subcommand(1);
  int verbosity = 1;
  app.add_flag_callback("-q,--quiet", [&] { verbosity = 0; }, "Only warnings and errors on stderr");
  app.add_flag_callback("-v,--verbose", [&] { verbosity = 2; }, "Debug output on stderr");

  auto entries = qgru::cli::subcommand_registry();
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  std::function<int()> runner;
  for (auto& entry : entries) {
    CLI::App* command = app.add_subcommand(entry.name, entry.description);
    auto run = entry.setup(*command);
    command->callback([&runner, run] { runner = run; });
  }

  // CLI11 would say only "A subcommand is required" for a word that names none (a typo).
  if (const auto word = qgru::cli::subcommand_word(argc, argv)) {
    std::vector<std::string> names;
    for (const auto& entry : entries) names.push_back(entry.name);
    const std::string message = qgru::cli::unknown_subcommand_message(*word, names);
    if (!message.empty()) {
      std::cerr << "qgru: error: " << qgru::printable(message) << " (see --help)" << std::endl;
      return qgru::kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return qgru::kExitUsage;
  }

  qgru::set_log_verbosity(verbosity);
  // One line on stderr whatever a message holds (a path with a newline or bytes that are not UTF-8).
  auto report = [](const char* what, int code) {
    std::cerr << "qgru: error: " << qgru::printable(what) << std::endl;
    return code;
  };
  try {
    return runner ? runner() : qgru::kExitUsage;
  } catch (const qgru::UsageError& e) {
    return report(e.what(), qgru::kExitUsage);
  } catch (const qgru::Error& e) {
    return report(e.what(), qgru::kExitFailure);
  } catch (const std::bad_alloc&) {
    return report("out of memory", qgru::kExitFailure);
  } catch (const std::exception& e) {
    return report(e.what(), qgru::kExitFailure);
  }
}
