#include "qgru/base/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include "qgru/base/error.h"
#include "qgru/base/input_file.h"
#include "qgru/base/log.h"

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

// fsync a folder so that a rename in it is durable. Best effort: a file system that cannot sync a folder
// (EINVAL) has nothing more to offer, and the rename itself was atomic.
void sync_folder_of(const std::string& path) {
  const int fd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

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
  // The output policy refused a target that is not a regular file before any work; this catches one made
  // since (a FIFO or device node created at the path), which rename would silently replace.
  struct stat info {};
  if (::stat(target_path_.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    throw Error(target_path_ + ": is " + file_type_name(info.st_mode) + " now, not a regular file: not replaced");
  }
  if (::rename(temp_path_.c_str(), target_path_.c_str()) != 0) {
    throw Error(target_path_ + ": cannot rename the temporary file into place (" + errno_text() + ")");
  }
  committed_ = true;
  unregister_pending(temp_path_);
}

void AtomicFile::commit() {
  prepare();
  publish();
  sync_folder_of(target_path_);
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

std::string folder_of(const std::string& file_path) {
  const size_t slash = file_path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : file_path.substr(0, slash);
}

FolderLock::FolderLock(const std::vector<std::string>& file_paths, double timeout_seconds) {
  struct Folder {
    dev_t device;
    ino_t inode;
    int fd;
    std::string path;
  };
  std::vector<Folder> folders;
  for (const std::string& file : file_paths) {
    const std::string folder = folder_of(file);
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat info {};
    if (fd < 0 || ::fstat(fd, &info) != 0) {
      log()->debug("{}: cannot open the folder to lock it ({}); writing without the lock", folder, errno_text());
      if (fd >= 0) ::close(fd);
      continue;
    }
    const bool seen = std::any_of(folders.begin(), folders.end(), [&](const Folder& f) {
      return f.device == info.st_dev && f.inode == info.st_ino;
    });
    if (seen) {
      ::close(fd);
      continue;
    }
    folders.push_back({info.st_dev, info.st_ino, fd, folder});
  }
  // One global order (device, inode): two writers that need the same folders take them in the same order.
  std::sort(folders.begin(), folders.end(), [](const Folder& a, const Folder& b) {
    return std::tie(a.device, a.inode) < std::tie(b.device, b.inode);
  });
  for (const Folder& folder : folders) folder_fds_.push_back(folder.fd);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  try {
    for (const Folder& folder : folders) {
      while (::flock(folder.fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        if (errno != EWOULDBLOCK) {
          log()->debug("{}: cannot lock the folder ({}); writing without the lock", folder.path, errno_text());
          break;
        }
        if (std::chrono::steady_clock::now() > deadline) {
          char waited[32];
          std::snprintf(waited, sizeof waited, "%g", timeout_seconds);
          throw Error(folder.path + ": another writer has held the folder's lock for more than " + waited +
                      " s; nothing was written");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
  } catch (...) {
    release();  // the destructor of a constructor that throws never runs
    throw;
  }
}

void FolderLock::release() {
  for (const int fd : folder_fds_) {
    ::flock(fd, LOCK_UN);  // released now, even where a forked child still holds a copy of the descriptor
    ::close(fd);
  }
  folder_fds_.clear();
}

FolderLock::~FolderLock() { release(); }

void FolderLock::sync_folders() const {
  for (const int fd : folder_fds_) ::fsync(fd);
}

void AtomicFileGroup::commit_all(const std::function<void()>& under_lock) {
  for (auto& file : files_) file->prepare();  // every member durable before any is renamed
  std::vector<std::string> targets;
  for (const auto& file : files_) targets.push_back(file->target_path());
  const FolderLock lock(targets);
  if (under_lock) under_lock();
  for (auto& file : files_) file->publish();
  lock.sync_folders();
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  const InputFile file(path);
  std::vector<uint8_t> bytes(static_cast<size_t>(file.size()));
  file.read_at(0, bytes.data(), bytes.size(), "contents");
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
