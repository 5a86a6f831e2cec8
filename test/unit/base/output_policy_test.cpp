#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "qgru/base/error.h"
#include "qgru/base/output_policy.h"

namespace fs = std::filesystem;

namespace {

struct Folder {
  fs::path dir;
  explicit Folder(const std::string& name) {
    dir = fs::temp_directory_path() / ("qgru_policy_" + name + "_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Folder() { fs::remove_all(dir); }
  std::string file(const std::string& name, const std::string& contents = "") const {
    const std::string path = (dir / name).string();
    if (!contents.empty()) std::ofstream(path) << contents;
    return path;
  }
};

// The policy's message, or "" when it lets the files through; only qgru::UsageError counts as a refusal.
std::string refusal(const std::vector<qgru::CommandFile>& inputs, const std::vector<qgru::CommandFile>& outputs) {
  try {
    qgru::check_command_files(inputs, outputs);
  } catch (const qgru::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an output that is an input is refused under every name of the file") {
  const Folder folder("same");
  const std::string x = folder.file("x.npy", "data");
  CHECK(refusal({{"--input", x}}, {{"--output", x}}) ==
        "--output " + x + " is the same file as --input " + x + ": an output must never replace an input; name another file");
  const std::string dotted = (folder.dir / "." / "x.npy").string();
  CHECK(refusal({{"--input", x}}, {{"--output", dotted}}).find("is the same file as --input") != std::string::npos);
  const std::string around = (folder.dir / "sub" / ".." / "x.npy").string();
  fs::create_directory(folder.dir / "sub");
  CHECK(refusal({{"--input", x}}, {{"--output", around}}).find("is the same file as --input") != std::string::npos);
  fs::create_hard_link(x, folder.dir / "hard.npy");
  CHECK(refusal({{"--input", x}}, {{"--output", folder.file("hard.npy")}}).find("is the same file as --input") != std::string::npos);
  fs::create_symlink(x, folder.dir / "link.npy");
  CHECK(refusal({{"--input", folder.file("link.npy")}}, {{"--output", x}}).find("is the same file as --input") != std::string::npos);
  // A relative name from inside the folder.
  const fs::path before = fs::current_path();
  fs::current_path(folder.dir);
  CHECK(refusal({{"--input", "x.npy"}}, {{"--output", "./x.npy"}}).find("--output ./x.npy is the same file as --input x.npy") == 0);
  fs::current_path(before);
  // Another file with the same contents is another file.
  CHECK(refusal({{"--input", x}}, {{"--output", folder.file("copy.npy", "data")}}).empty());
}

TEST_CASE("two outputs of one command on one file are refused, also before either exists") {
  const Folder folder("two_outputs");
  const std::string y = folder.file("y.npy");
  CHECK(refusal({}, {{"--output", y}, {"--hn", (folder.dir / "." / "y.npy").string()}}) ==
        "--hn " + (folder.dir / "." / "y.npy").string() + " is the same file as --output " + y +
            ": two outputs of one command need two files");
  CHECK(refusal({}, {{"--output", y}, {"--hn", folder.file("hn.npy")}}).empty());
  CHECK(refusal({}, {{"--output", y}, {"--codes", ""}, {"--hn", ""}}).empty());  // options not given
}

TEST_CASE("outputs that are not regular files are refused: a device, a FIFO, a directory, a missing folder") {
  const Folder folder("kinds");
  CHECK(refusal({}, {{"--output", "/dev/null"}}).find("--output /dev/null: is a character device;") == 0);
  const std::string fifo = folder.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(refusal({}, {{"--output", fifo}}).find(": is a FIFO;") != std::string::npos);
  CHECK(refusal({}, {{"-o", folder.dir.string()}}).find(": is a directory;") != std::string::npos);
  CHECK(refusal({}, {{"-o", folder.file("missing/y.npy")}}).find("its folder " + folder.file("missing") + " does not exist") !=
        std::string::npos);
  CHECK(refusal({}, {{"-o", folder.file("y.npy", "old")}}).empty());  // a regular file is replaced, as asked
}

TEST_CASE("inputs that are not regular files are refused before anything opens them; a missing input is the reader's") {
  const Folder folder("inputs");
  const std::string fifo = folder.file("x.npy");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(refusal({{"--input", fifo}}, {}) ==
        "--input " + fifo + ": is a FIFO; qgru reads only regular files (a FIFO or a device could block or never end)");
  CHECK(refusal({{"--model", "/dev/zero"}}, {}).find("--model /dev/zero: is a character device;") == 0);
  CHECK(refusal({{"--model", folder.file("absent.safetensors")}}, {}).empty());
}

TEST_CASE("a path that is not UTF-8 is a valid path, and a message about it stays one line") {
  const Folder folder("bytes");
  const std::string odd = folder.file("x\xff\n.npy", "data");
  CHECK(refusal({{"--input", odd}}, {{"--output", folder.file("y\xfe.npy")}}).empty());
  const std::string message = refusal({{"--input", odd}}, {{"--output", odd}});
  CHECK(message.find("x\\xff\\x0a.npy is the same file as --input") != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}
