#pragma once
// Private to the fast executor (qgru/quant/fast_executor.h): picks one of two schedules of the same
// computation (both compute the same codes) by the wall time measured on the caller's earlier runs.
//
// Why: whether a batch-1 time step gains from being split over two cores depends on how the two cores share
// the work, and on a VM that changes while a process runs. The same binary and model (H = 512, T = 100, N = 1,
// two threads, median of 15 runs, AMD EPYC 2-core VM) took 0.83 ms split over units against 0.93 ms on one
// core with B-1 pipelined beside it while a cache line made a core-to-core round trip in 110-130 ns, but
// 1.33 against 0.99 ms while the round trip took about 500 ns (virtual CPUs placed apart), and 1.57 against
// 1.34 ms at about 60 ns (two hyperthreads of one core, sharing its vector units). No fixed threshold is right
// for all three, so the executor times the runs it makes anyway.
//
// Contract: next() names the schedule (0 or 1) to run; record(s, cost) reports the cost of a run of s (lower
// is better: wall µs per time step). Until each schedule has kWarmup + 2 reports they alternate, `preferred`
// first; the first kWarmup reports of each are dropped (a cold run pays for starting threads and faulting
// pages). Then the schedule with the lower moving average runs, and every kExploreEvery-th run the other
// one, so that a change of the machine is followed within a few tens of runs. A report above twice the
// schedule's average counts as twice the average (a preempted run moves the average by at most 25 %).
// Not thread-safe: the executor calls it under the mutex of its thread team.
#include <cstdint>

namespace qgru::fast {

class ScheduleChoice {
 public:
  static constexpr int kWarmup = 1;
  static constexpr int kExploreEvery = 32;

  explicit ScheduleChoice(int preferred = 1) : preferred_(preferred == 0 ? 0 : 1) {}

  int next() {
    ++runs_;
    if (reports_[0] < kWarmup + 2 || reports_[1] < kWarmup + 2) {
      // alternate: the schedule with fewer reports, the preferred one on a tie
      if (reports_[0] == reports_[1]) return preferred_;
      return reports_[0] < reports_[1] ? 0 : 1;
    }
    const int better = average_[0] < average_[1] ? 0 : average_[1] < average_[0] ? 1 : preferred_;
    return runs_ % kExploreEvery == 0 ? 1 - better : better;
  }

  void record(int schedule, double cost) {
    const int s = schedule == 0 ? 0 : 1;
    const int64_t n = ++reports_[s];
    if (n <= kWarmup) return;
    if (n == kWarmup + 1) {
      average_[s] = cost;
      return;
    }
    const double clipped = cost > 2.0 * average_[s] ? 2.0 * average_[s] : cost;
    average_[s] = 0.75 * average_[s] + 0.25 * clipped;
  }

  // The moving average of schedule s; 0 before its first kept report.
  double average(int s) const { return average_[s == 0 ? 0 : 1]; }

 private:
  int preferred_;
  int64_t runs_ = 0;
  int64_t reports_[2] = {0, 0};
  double average_[2] = {0.0, 0.0};
};

}  // namespace qgru::fast
