#include "qgru/base/output_policy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/base/input_file.h"
#include "qgru/base/message_text.h"

namespace qgru {
namespace {

namespace fs = std::filesystem;

// What tells two names of one file apart from two files.
struct FileIdentity {
  const CommandFile* file = nullptr;
  std::string resolved;  // absolute, normalized, symbolic links of the existing part resolved
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
};

std::string named(const CommandFile& file) { return file.flag + " " + printable(file.path); }

FileIdentity identify(const CommandFile& file) {
  FileIdentity identity;
  identity.file = &file;
  std::error_code error;
  fs::path resolved = fs::weakly_canonical(fs::absolute(file.path, error), error);
  if (error) resolved = fs::absolute(file.path, error).lexically_normal();
  identity.resolved = resolved.string();
  struct stat info {};
  if (::stat(file.path.c_str(), &info) == 0) {
    identity.exists = true;
    identity.device = info.st_dev;
    identity.inode = info.st_ino;
  }
  return identity;
}

bool same_file(const FileIdentity& a, const FileIdentity& b) {
  if (a.resolved == b.resolved) return true;
  return a.exists && b.exists && a.device == b.device && a.inode == b.inode;
}

void check_input(const CommandFile& input) {
  struct stat info {};
  if (::stat(input.path.c_str(), &info) != 0) return;  // missing: the reader says so
  if (!S_ISREG(info.st_mode)) {
    throw UsageError(named(input) + ": is " + file_type_name(info.st_mode) +
                     "; qgru reads only regular files (a FIFO or a device could block or never end)");
  }
}

void check_output(const CommandFile& output) {
  if (!output.path.empty() && output.path.back() == '/') {
    throw UsageError(named(output) + ": names a folder; give a file name");
  }
  struct stat info {};
  if (::stat(output.path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    throw UsageError(named(output) + ": is " + file_type_name(info.st_mode) +
                     "; qgru writes an output beside its path and renames it into place, which would replace it: "
                     "name a regular file or a new path");
  }
  const std::string folder = folder_of(output.path);
  struct stat folder_info {};
  if (::stat(folder.c_str(), &folder_info) != 0 || !S_ISDIR(folder_info.st_mode)) {
    throw UsageError(named(output) + ": its folder " + printable(folder) + " does not exist");
  }
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    throw UsageError(named(output) + ": cannot write into its folder " + printable(folder) + " (" +
                     std::strerror(errno) + ")");
  }
}

}  // namespace

void check_command_files(const std::vector<CommandFile>& inputs, const std::vector<CommandFile>& outputs) {
  std::vector<FileIdentity> input_ids, output_ids;
  for (const CommandFile& input : inputs) {
    if (input.path.empty()) continue;
    check_input(input);
    input_ids.push_back(identify(input));
  }
  for (const CommandFile& output : outputs) {
    if (output.path.empty()) continue;
    check_output(output);
    const FileIdentity id = identify(output);
    for (const FileIdentity& input : input_ids) {
      if (same_file(id, input)) {
        throw UsageError(named(output) + " is the same file as " + named(*input.file) +
                         ": an output must never replace an input; name another file");
      }
    }
    for (const FileIdentity& other : output_ids) {
      if (same_file(id, other)) {
        throw UsageError(named(output) + " is the same file as " + named(*other.file) +
                         ": two outputs of one command need two files");
      }
    }
    output_ids.push_back(id);
  }
}

}  // namespace qgru
