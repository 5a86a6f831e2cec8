#pragma once
// One rule for the files a command names, so that no output ever destroys anything (docs/HARDENING.md,
// "Outputs never destroy anything"). Every subcommand lists its inputs and its outputs, derived files
// included (an artifact's tensor file, the quantize_config.json beside a GPTQ checkpoint), and calls
// check_command_files once, before it reads or writes anything. It refuses with a qgru::UsageError (exit 2),
// one line naming the flag and the file:
//  - an input that exists and is not a regular file: a FIFO would block the read forever, a device yields
//    endless or interactive bytes (the readers refuse them too: qgru/base/input_file.h);
//  - an output that exists and is not a regular file (a device node, a FIFO, a directory): an output is
//    written beside its path and renamed over it, which would replace a device node (as root) or fail late;
//  - an output whose folder does not exist or cannot be written into, before the work rather than after;
//  - an output that is one of the inputs, or another output of the same command. Two names are the same file
//    when their absolute paths, normalized with symbolic links resolved, are equal (./x.npy, x.npy,
//    d/../x.npy, a link to x.npy), or when both exist with the same device and inode (a hard link).
// A missing input passes: its reader says that it is missing, in its own words.
#include <string>
#include <vector>

namespace qgru {

struct CommandFile {
  std::string flag;  // how the command line named it: "--output", "-o (its tensor file)"
  std::string path;  // empty: the option was not given, nothing to check
};

void check_command_files(const std::vector<CommandFile>& inputs, const std::vector<CommandFile>& outputs);

}  // namespace qgru
