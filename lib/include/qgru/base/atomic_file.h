#pragma once
// Writing outputs so that a reader never sees a partial file: bytes go to a temporary file in the same
// folder, are flushed and fsync'd, and the temporary file is renamed over the target (rename is atomic
// within a file system). A temporary file not committed is removed: on destruction, on an exception, and
// on SIGINT/SIGTERM (install_interrupt_cleanup()).
#include <cstdint>
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

// Several outputs that must appear together or not at all (e.g. an artifact's JSON and tensor file):
// stage each, then commit_all() renames them one after the other only when every one was written.
class AtomicFileGroup {
 public:
  AtomicFile& add(const std::string& target_path);
  void commit_all();
 private:
  std::vector<std::unique_ptr<AtomicFile>> files_;
};

// Read a whole file; throws qgru::Error naming the file when it cannot be opened or read.
std::vector<uint8_t> read_file_bytes(const std::string& path);
std::string read_file_text(const std::string& path);

// Remove every uncommitted temporary file and re-raise the signal's default action on SIGINT/SIGTERM.
void install_interrupt_cleanup();

}  // namespace qgru
