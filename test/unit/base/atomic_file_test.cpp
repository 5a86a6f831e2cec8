#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
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

TEST_CASE("reading a FIFO or a device is refused without blocking") {
  const fs::path dir = scratch_dir("fifo_read");
  const std::string fifo = (dir / "x.json").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No writer ever opens the FIFO: a reader that opened it for reading would wait forever (ctest's timeout).
  CHECK_THROWS_WITH_AS(qgru::read_file_bytes(fifo), (fifo + ": is a FIFO, expected a regular file").c_str(), qgru::Error);
  CHECK_THROWS_WITH_AS(qgru::read_file_text("/dev/zero"), "/dev/zero: is a character device, expected a regular file",
                       qgru::Error);
  fs::remove_all(dir);
}

TEST_CASE("a FIFO made at the target while the output was written is refused, not replaced") {
  const fs::path dir = scratch_dir("fifo_target");
  const std::string target = (dir / "y.npy").string();
  qgru::AtomicFile file(target);
  file.write("data");
  REQUIRE(::mkfifo(target.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(file.commit(), (target + ": is a FIFO now, not a regular file: not replaced").c_str(), qgru::Error);
  struct stat info {};
  REQUIRE(::stat(target.c_str(), &info) == 0);
  CHECK(S_ISFIFO(info.st_mode));
  fs::remove_all(dir);
}

TEST_CASE("a group writer waits while another holds the folder's lock, and leaves no lock file") {
  const fs::path dir = scratch_dir("group_lock");
  const std::string a = (dir / "a.json").string(), b = (dir / "b.bin").string();
  std::optional<qgru::FolderLock> held(std::in_place, std::vector<std::string>{a});
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // the second writer: stages both files and commits; blocks in commit_all until the lock is free
    try {
      qgru::AtomicFileGroup group;
      group.add(a).write("A");
      group.add(b).write("B");
      group.commit_all();
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  // While the lock is held the child's files stay staged: neither target appears, whatever the scheduling.
  usleep(300 * 1000);
  CHECK_FALSE(fs::exists(a));
  CHECK_FALSE(fs::exists(b));
  held.reset();
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(qgru::read_file_text(a) == "A");
  CHECK(qgru::read_file_text(b) == "B");
  CHECK(count_files(dir) == 2);  // the two outputs; no lock file, no temporary file
  fs::remove_all(dir);
}

TEST_CASE("a writer that cannot get the folder's lock in time gives up naming the folder, writing nothing") {
  const fs::path dir = scratch_dir("lock_timeout");
  const std::string a = (dir / "a.json").string();
  const qgru::FolderLock held({a});
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      const qgru::FolderLock waiting({a}, 0.2);
    } catch (const qgru::Error& e) {
      _exit(std::string(e.what()).find("another writer has held the folder's lock") != std::string::npos ? 0 : 4);
    }
    _exit(5);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  fs::remove_all(dir);
}

TEST_CASE("a group's check under the lock runs while the folder is locked, and its refusal renames nothing") {
  const fs::path dir = scratch_dir("under_lock");
  const std::string a = (dir / "a.json").string(), b = (dir / "b.bin").string();
  bool ran = false;
  try {
    qgru::AtomicFileGroup group;
    group.add(a).write("A");
    group.add(b).write("B");
    group.commit_all([&] {
      ran = true;
      // Another open file description of the folder cannot take the lock now (flock conflicts between
      // descriptions, in one process too): the check sees the folder as no other group writer can change it.
      const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
      REQUIRE(fd >= 0);
      CHECK(::flock(fd, LOCK_EX | LOCK_NB) != 0);
      CHECK(errno == EWOULDBLOCK);
      ::close(fd);
      throw qgru::Error("the folder holds a file this group disagrees with");
    });
    FAIL("commit_all went on after its check refused");
  } catch (const qgru::Error& e) {
    CHECK(std::string(e.what()) == "the folder holds a file this group disagrees with");
  }
  CHECK(ran);
  CHECK(count_files(dir) == 0);  // neither target, no temporary file
  // The lock was released with the refusal: a writer after it gets the folder at once.
  qgru::AtomicFileGroup next;
  next.add(a).write("A2");
  next.commit_all([] {});
  CHECK(qgru::read_file_text(a) == "A2");
  fs::remove_all(dir);
}
