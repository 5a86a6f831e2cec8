#pragma once
// Private to the fast executor (qgru/runtime/fast_executor.h): a team of threads that stays alive between
// runs, and the spinning barrier the time loop waits on.
//
// Why: on the 2-core reference machine starting a std::thread and joining it costs 10 to 140 µs
// (measured), while a batch-1 time step at H = 256 is about 4 µs; a cache line makes a round trip between
// the two cores in about 150 ns. A run that splits its steps over two cores pays for it only when the second
// thread is already running and both wait on each other by spinning on shared memory.
//
// WorkerTeam(helpers) starts `helpers` threads once. run(parts, fn) calls fn(0) on the calling thread and
// fn(i) for 1 <= i < parts on helper i, and returns when every call has returned (what they wrote is then
// visible to the caller: release by each helper, acquire by the caller). A helper that finished a job spins
// on the next one for about kSpinMicros before it sleeps on a condition variable, so that the jobs of one
// run (a phase per cell and layer) and back-to-back runs find it awake; park() sends the helpers waiting for a
// job to sleep at once, when the caller knows its next runs need no helper (a spinning helper takes a CPU that
// the caller's thread or another process could use: a third busy thread on a two-CPU machine preempts the
// caller's). One run at a time: the caller
// serialises (FastQuantGru holds a mutex around it). An exception thrown by fn is not caught: the jobs run
// only the executor's kernels, which do not throw.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qgru::fast {

// One spin-wait iteration: the pause instruction on x86 (frees the core's resources for the other
// hyperthread and saves power), nothing elsewhere.
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class WorkerTeam {
 public:
  explicit WorkerTeam(int helpers);
  ~WorkerTeam();
  WorkerTeam(const WorkerTeam&) = delete;
  WorkerTeam& operator=(const WorkerTeam&) = delete;

  int size() const { return static_cast<int>(threads_.size()) + 1; }
  // parts must lie in [1, size()].
  void run(int parts, const std::function<void(int)>& fn);
  // Whether a helper sleeps now (a run would wake it, tens of µs): read without a lock, a hint.
  bool any_asleep() const { return sleeping_.load(std::memory_order_relaxed) > 0; }
  // Helpers waiting for a job after the last run() go to sleep now instead of spinning (the next run() wakes
  // them). Called by the thread that calls run(), between runs.
  void park() { park_epoch_.store(epoch_.load(std::memory_order_relaxed), std::memory_order_relaxed); }

 private:
  void helper_loop(int index);

  std::vector<std::thread> threads_;
  const std::function<void(int)>* job_ = nullptr;  // set before epoch_ is published
  int parts_ = 0;
  std::atomic<uint64_t> epoch_{0};   // one more per job (release by run, acquire by helpers)
  std::atomic<int> unfinished_{0};   // helpers of the current job still running
  std::atomic<int> sleeping_{0};     // helpers waiting on wake_
  std::atomic<uint64_t> park_epoch_{0};  // helpers that ran (or skipped) this epoch's job sleep at once (park)
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  bool stop_ = false;                // guarded by sleep_mutex_
};

// A reusable barrier for `count` threads that spins (then yields, when the machine is oversubscribed and a
// partner is not running) instead of sleeping: one per time step costs about one cache-line round trip.
class SpinBarrier {
 public:
  explicit SpinBarrier(int count) : count_(count) {}
  void wait();

 private:
  const int count_;
  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<int> generation_{0};
};

// Spin until pred() holds: pause-spins for up to kSpinBeforeYield, then yields the CPU between checks.
//
// Why a time and that one: the partner a spinning thread waits for is normally running on the other CPU and a
// fraction of a step behind (a step is 2 to 40 µs from H = 256 to 1024 at batch 1), so pause-spinning answers
// within a cache-line transfer. But when another process keeps the second CPU busy, the kernel may place the
// partner, woken, on this thread's own CPU, where it runs only when this thread gives the CPU away. Spinning
// 2^14 pauses (about 0.3 ms here) before each yield then cost 0.3 ms a step: a 100-step run of the two-thread
// schedule took 42 ms at H = 256 instead of 0.25 ms. After 20 µs the wait is not a partner slightly behind,
// and yielding at once lets a partner on this CPU run (a yield with nothing else to run returns at once).
template <class Pred>
void spin_until(Pred pred) {
  constexpr int kPausesPerCheck = 64;  // pause instructions between two reads of the clock
  constexpr std::chrono::microseconds kSpinBeforeYield{20};
  if (pred()) return;
  const auto spin_end = std::chrono::steady_clock::now() + kSpinBeforeYield;
  do {
    for (int i = 0; i < kPausesPerCheck; ++i) {
      if (pred()) return;
      spin_pause();
    }
  } while (std::chrono::steady_clock::now() < spin_end);
  while (!pred()) std::this_thread::yield();
}

}  // namespace qgru::fast
