#include "qgru/base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

#include "qgru/base/error.h"

namespace qgru {
namespace {

// Registry of temporary paths not yet committed, for the signal handler. The handler only reads the
// fixed-size array below (async-signal-safe); the set is the owner.
constexpr int kMaxPending = 64;
char g_pending_paths[kMaxPending][4096];
std::atomic<bool> g_pending_used[kMaxPending];
std::mutex g_registry_mutex;

int register_pending(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  if (path.size() >= sizeof(g_pending_paths[0])) return -1;
  for (int i = 0; i < kMaxPending; ++i) {
    if (!g_pending_used[i].load()) {
      std::memcpy(g_pending_paths[i], path.c_str(), path.size() + 1);
      g_pending_used[i].store(true);
      return i;
    }
  }
  return -1;
}

void unregister_pending(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  for (int i = 0; i < kMaxPending; ++i) {
    if (g_pending_used[i].load() && path == g_pending_paths[i]) {
      g_pending_used[i].store(false);
      return;
    }
  }
}

extern "C" void cleanup_on_signal(int signal_number) {
  for (int i = 0; i < kMaxPending; ++i) {
    if (g_pending_used[i].load()) unlink(g_pending_paths[i]);
  }
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

AtomicFile::AtomicFile(std::string target_path) : target_path_(std::move(target_path)) {
  std::random_device device;
  std::ostringstream name;
  name << target_path_ << ".tmp." << getpid() << "." << std::hex << device();
  temp_path_ = name.str();
  register_pending(temp_path_);
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    unregister_pending(temp_path_);
    throw Error(target_path_ + ": cannot create a temporary file beside it (" + errno_text() + ")");
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) {
    ::unlink(temp_path_.c_str());
    unregister_pending(temp_path_);
  }
}

void AtomicFile::write(const void* data, size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd_, bytes, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      throw Error(target_path_ + ": write failed (" + errno_text() + ")");
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

void AtomicFile::prepare() {
  if (prepared_) return;
  if (::fsync(fd_) != 0) throw Error(target_path_ + ": fsync failed (" + errno_text() + ")");
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw Error(target_path_ + ": close failed (" + errno_text() + ")");
  }
  fd_ = -1;
  prepared_ = true;
}

void AtomicFile::publish() {
  if (committed_) return;
  prepare();
  if (::rename(temp_path_.c_str(), target_path_.c_str()) != 0) {
    throw Error(target_path_ + ": cannot rename the temporary file into place (" + errno_text() + ")");
  }
  committed_ = true;
  unregister_pending(temp_path_);
}

void AtomicFile::commit() {
  prepare();
  publish();
}

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  AtomicFile file(path);
  file.write(data, size);
  file.commit();
}

void write_file_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, text.data(), text.size());
}

AtomicFile& AtomicFileGroup::add(const std::string& target_path) {
  files_.push_back(std::make_unique<AtomicFile>(target_path));
  return *files_.back();
}

void AtomicFileGroup::commit_all() {
  for (auto& file : files_) file->prepare();
  for (auto& file : files_) file->publish();
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw Error(path + ": cannot open (" + errno_text() + ")");
  if (S_ISDIR(info.st_mode)) throw Error(path + ": is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open (" + errno_text() + ")");
  std::vector<uint8_t> bytes(static_cast<size_t>(info.st_size));
  if (!bytes.empty()) in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) throw Error(path + ": read failed");
  return bytes;
}

std::string read_file_text(const std::string& path) {
  auto bytes = read_file_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

void install_interrupt_cleanup() {
  std::signal(SIGINT, cleanup_on_signal);
  std::signal(SIGTERM, cleanup_on_signal);
}

}  // namespace qgru
