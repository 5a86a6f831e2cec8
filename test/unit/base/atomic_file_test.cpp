#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"

namespace fs = std::filesystem;

namespace {
fs::path scratch_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("qgru_test_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}
size_t count_files(const fs::path& dir) {
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++count;
  return count;
}
}  // namespace

TEST_CASE("uncommitted atomic file leaves neither target nor temporary behind") {
  const fs::path dir = scratch_dir("uncommitted");
  {
    qgru::AtomicFile file((dir / "out.bin").string());
    file.write("partial");
    CHECK(fs::exists(file.temp_path()));
  }
  CHECK(count_files(dir) == 0);
  fs::remove_all(dir);
}

TEST_CASE("committed atomic file replaces the target whole") {
  const fs::path dir = scratch_dir("commit");
  const std::string target = (dir / "out.txt").string();
  qgru::write_file_atomic(target, std::string("first version"));
  qgru::write_file_atomic(target, std::string("second"));
  CHECK(qgru::read_file_text(target) == "second");
  CHECK(count_files(dir) == 1);
  fs::remove_all(dir);
}

TEST_CASE("group commit writes nothing when one member fails before commit") {
  const fs::path dir = scratch_dir("group");
  try {
    qgru::AtomicFileGroup group;
    group.add((dir / "a.json").string()).write("{}");
    group.add((dir / "b.bin").string()).write("x");
    throw qgru::Error("simulated failure between staging and commit");
  } catch (const qgru::Error&) {
  }
  CHECK(count_files(dir) == 0);
  fs::remove_all(dir);
}

TEST_CASE("reading a missing file names the file") {
  CHECK_THROWS_WITH_AS(qgru::read_file_bytes("/nonexistent/qgru/file.bin"),
                       doctest::Contains("/nonexistent/qgru/file.bin"), qgru::Error);
}
