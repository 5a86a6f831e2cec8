// The fast executor's persistent threads and spinning barrier (contracts in worker_team.h).
#include "worker_team.h"

#include <chrono>

namespace qgru::fast {

namespace {
// How long a helper spins on the next job before it sleeps: covers the gap between the phases of one run
// and between back-to-back runs, and costs one core this long after the last run.
constexpr int64_t kSpinMicros = 2000;
}  // namespace

WorkerTeam::WorkerTeam(int helpers) {
  threads_.reserve(static_cast<size_t>(helpers > 0 ? helpers : 0));
  for (int i = 1; i <= helpers; ++i) threads_.emplace_back([this, i] { helper_loop(i); });
}

WorkerTeam::~WorkerTeam() {
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    stop_ = true;
  }
  epoch_.fetch_add(1, std::memory_order_release);  // a spinning helper sees the change, then stop_
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerTeam::run(int parts, const std::function<void(int)>& fn) {
  if (parts <= 1 || threads_.empty()) {
    fn(0);
    return;
  }
  if (parts > size()) parts = size();
  {
    // Under the mutex, so that a helper deciding to sleep either sees the new epoch or is woken below.
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    job_ = &fn;
    parts_ = parts;
    unfinished_.store(parts - 1, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  fn(0);
  spin_until([this] { return unfinished_.load(std::memory_order_acquire) == 0; });
}

void WorkerTeam::helper_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Wait for the next epoch: spin for kSpinMicros, then sleep.
    const auto spin_end = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
    uint64_t now_epoch = epoch_.load(std::memory_order_acquire);
    for (int spins = 0; now_epoch == seen; ++spins) {
      spin_pause();
      if ((spins & 63) == 63 && (park_epoch_.load(std::memory_order_relaxed) == seen ||
                                 std::chrono::steady_clock::now() > spin_end)) {
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        sleeping_.fetch_add(1, std::memory_order_relaxed);
        wake_.wait(lock, [&] { return stop_ || epoch_.load(std::memory_order_acquire) != seen; });
        sleeping_.fetch_sub(1, std::memory_order_relaxed);
      }
      now_epoch = epoch_.load(std::memory_order_acquire);
    }
    const std::function<void(int)>* job;
    int parts;
    {
      // The job and its epoch read together: a helper that skipped an epoch in which it had no part runs the
      // newest job once and then waits for the epoch after it.
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      if (stop_) return;
      seen = epoch_.load(std::memory_order_relaxed);
      job = job_;
      parts = parts_;
    }
    if (index < parts) {
      (*job)(index);
      unfinished_.fetch_sub(1, std::memory_order_release);
    }
  }
}

void SpinBarrier::wait() {
  const int generation = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == count_) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  spin_until([&] { return generation_.load(std::memory_order_acquire) != generation; });
}

}  // namespace qgru::fast
