#pragma once
// Writing outputs so that a reader never sees a partial file: bytes go to a temporary file in the same
// folder (TARGET.tmp.PID.RANDOM), are flushed and fsync'd, and the temporary file is renamed over the target
// (rename is atomic within a file system), then the folder is fsync'd so the rename is durable too. A
// temporary file not committed is removed: on destruction, on an exception, and on SIGINT/SIGTERM
// (install_interrupt_cleanup()). A target that is not a regular file when the rename comes (a FIFO or a
// device made there meanwhile) is refused, never replaced; qgru/base/output_policy.h refuses it earlier,
// before any work.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace qgru {

class AtomicFile {
 public:
  explicit AtomicFile(std::string target_path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  void write(const std::string& text) { write(text.data(), text.size()); }
  // Flush, fsync and rename over the target. Throws qgru::Error on failure (the target is untouched).
  void commit();
  // commit() in two halves, for groups: make the bytes durable (fsync, close), then rename into place.
  void prepare();
  void publish();

  const std::string& target_path() const { return target_path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  std::string target_path_;
  std::string temp_path_;
  int fd_ = -1;
  bool prepared_ = false;
  bool committed_ = false;
};

// Convenience: write a whole buffer atomically.
void write_file_atomic(const std::string& path, const void* data, size_t size);
void write_file_atomic(const std::string& path, const std::string& text);

// Serializes the writers of file groups in the same folders: an exclusive flock(2) on each folder (the
// folder itself, opened read-only: no lock file is created, so none is left behind), taken in (device,
// inode) order so that two writers of overlapping folders cannot deadlock, released on destruction. The lock
// is advisory: it orders qgru's group writers (and any program that flocks the folder), nobody else. Where a
// folder cannot be opened or locked (no read permission; a file system without flock, such as some NFS
// mounts) the group is written without it and a debug line says so. A writer that waits longer than
// `timeout_seconds` gives up with a qgru::Error naming the folder.
class FolderLock {
 public:
  explicit FolderLock(const std::vector<std::string>& file_paths, double timeout_seconds = 120.0);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  // fsync every locked folder: renames made under the lock become durable.
  void sync_folders() const;

 private:
  void release();
  std::vector<int> folder_fds_;
};

// Several outputs that must appear together or not at all (an artifact's JSON and tensor file, the outputs of
// one run, statistics and their report): stage each, then commit_all() makes every member durable (fsync),
// takes the FolderLock of their folders, renames them back to back and fsyncs the folders. Two processes
// writing the same group therefore leave one writer's complete group, never a mix. `under_lock`, when given,
// runs once the lock is held and before the first rename: a check of what the folders already hold (a file
// the group must agree with) that no other group writer can change between the check and the renames. When
// it throws, nothing is renamed.
class AtomicFileGroup {
 public:
  AtomicFile& add(const std::string& target_path);
  void commit_all(const std::function<void()>& under_lock = nullptr);
 private:
  std::vector<std::unique_ptr<AtomicFile>> files_;
};

// The folder a file path lives in: "." for a bare name, "/" for a file at the root.
std::string folder_of(const std::string& file_path);

// Read a whole file; throws qgru::Error naming the file when it cannot be opened or read, or is not a regular
// file (refused before it is opened for reading: qgru/base/input_file.h).
std::vector<uint8_t> read_file_bytes(const std::string& path);
std::string read_file_text(const std::string& path);

// Remove every uncommitted temporary file and re-raise the signal's default action on SIGINT/SIGTERM.
void install_interrupt_cleanup();

}  // namespace qgru
