#pragma once
// Private to the fast executor (qgru/runtime/fast_executor.h): picks one of a few schedules of the same
// computation (all compute the same codes) by the wall time measured on the caller's earlier runs.
//
// Why: whether a batch-1 time step gains from being split over two cores depends on how the two cores share
// the work, and on a VM that changes while a process runs. The same binary and model (H = 512, T = 100, N = 1,
// two threads, median of 15 runs, AMD EPYC 2-core VM) took 0.83 ms split over units against 0.93 ms on one
// core with B-1 pipelined beside it while a cache line made a core-to-core round trip in 110-130 ns, but
// 1.33 against 0.99 ms while the round trip took about 500 ns (virtual CPUs placed apart), and 1.57 against
// 1.34 ms at about 60 ns (two hyperthreads of one core, sharing its vector units). No fixed threshold is right
// for all three, so the executor times the runs it makes anyway. The one-thread schedule stays a candidate:
// in some phases of the same VM a recurrence thread waiting on B-1 from the other core took 2.4 ms per run at
// H = 64 against 33 µs alone.
//
// Contract: ScheduleChoice(count, preferred) chooses among schedules 0 .. count - 1 (count in [1, 3]); next()
// names the schedule to run; record(s, cost, steps) reports a run of s that took cost per step over `steps`
// steps (lower is better: wall µs per time step; the run took cost·steps). Until each schedule has kTurns =
// kWarmup + 1 reports they take turns, `preferred` first, then the others from the highest index down; the
// first kWarmup reports of each are dropped (a cold run pays for starting threads and faulting pages), so the
// warm-up costs two runs per schedule, most of them on the slower ones. Then the schedule with the lowest
// moving average of its per-step costs runs, and one of the others (in turn) is re-measured once the runs of
// the leader since the last re-measurement have taken kExploreEvery times as long as that other schedule's
// last run: re-measuring costs about 1/kExploreEvery of the time whatever the other schedule costs now. Where
// the schedules cost about the same that is every kExploreEvery-th run, so a change of the machine is followed
// within a few hundred runs; where another process keeps a core busy and a two-thread run waits a whole
// scheduler time slice for its helper (a few ms against a 30 µs run), that schedule is re-measured a few
// times a second instead of every 64th run (which would cost the one-thread leader 2-3x its time). A report
// above twice the schedule's average counts as twice the average (a preempted run moves the average by at
// most 25 %). record_cold(s, cost, steps) reports a run of s that first had to wake a sleeping thread: the
// first such report after a kept one is dropped and next() names s again (a schedule re-measured after a
// stretch of one-thread runs finds the team asleep, which it would not be had it run back to back); a second
// in a row is kept (the runs come too far apart for the team to stay awake, so the wake-up is part of their
// cost). leader() names the schedule with the lowest average. Not thread-safe: the executor calls it under its
// team's mutex.
#include <cstdint>

namespace qgru::fast {

class ScheduleChoice {
 public:
  static constexpr int kMaxSchedules = 3;
  static constexpr int kWarmup = 1;
  static constexpr int kTurns = kWarmup + 1;  // reports per schedule before the choice starts
  static constexpr int kExploreEvery = 64;

  explicit ScheduleChoice(int count = 2, int preferred = 1) {
    count_ = count < 1 ? 1 : count > kMaxSchedules ? kMaxSchedules : count;
    preferred = preferred < 0 ? 0 : preferred >= count_ ? count_ - 1 : preferred;
    // the order of turns and of ties: preferred, then the others from the highest index down
    order_[0] = preferred;
    int k = 1;
    for (int s = count_ - 1; s >= 0; --s) {
      if (s != preferred) order_[k++] = s;
    }
  }

  int count() const { return count_; }

  int next() {
    ++runs_;
    if (again_ >= 0) {
      const int s = again_;
      again_ = -1;
      return s;
    }
    int fewest = order_[0];
    for (int k = 1; k < count_; ++k) {
      if (reports_[order_[k]] < reports_[fewest]) fewest = order_[k];
    }
    if (reports_[fewest] < kTurns) return fewest;  // warm-up: the schedule with the fewest reports
    const int lead = leader();
    if (count_ == 1) return lead;
    // re-measure one of the others, in turn, once the leader's runs have paid for it
    const int other = nth_other(lead, static_cast<int>(explored_ % (count_ - 1)));
    if (leader_time_ >= kExploreEvery * last_run_[other]) {
      ++explored_;
      leader_time_ = 0.0;
      return other;
    }
    return lead;
  }

  void record(int schedule, double cost, int64_t steps = 1) {
    if (schedule < 0 || schedule >= count_) return;
    cold_dropped_[schedule] = false;
    const double run = cost * static_cast<double>(steps > 0 ? steps : 1);
    if (reports_[schedule] >= kTurns && schedule == leader()) leader_time_ += run;
    last_run_[schedule] = run;
    const int64_t n = ++reports_[schedule];
    if (n <= kWarmup) return;
    if (n == kWarmup + 1) {
      average_[schedule] = cost;
      return;
    }
    const double clipped = cost > 2.0 * average_[schedule] ? 2.0 * average_[schedule] : cost;
    average_[schedule] = 0.75 * average_[schedule] + 0.25 * clipped;
  }

  void record_cold(int schedule, double cost, int64_t steps = 1) {
    if (schedule < 0 || schedule >= count_) return;
    if (!cold_dropped_[schedule]) {
      cold_dropped_[schedule] = true;
      last_run_[schedule] = cost * static_cast<double>(steps > 0 ? steps : 1);
      again_ = schedule;
      return;
    }
    record(schedule, cost, steps);
  }

  // The schedule with the lowest average once every schedule is measured (ties: the order of turns); during
  // the warm-up, the one the turns name next.
  int leader() const {
    int best = order_[0];
    for (int k = 1; k < count_; ++k) {
      if (average_[order_[k]] < average_[best]) best = order_[k];
    }
    return best;
  }

  // The moving average of schedule s; 0 before its first kept report.
  double average(int s) const { return s >= 0 && s < count_ ? average_[s] : 0.0; }

 private:
  // The k-th schedule other than `skip`, in the order of turns.
  int nth_other(int skip, int k) const {
    for (int i = 0; i < count_; ++i) {
      if (order_[i] == skip) continue;
      if (k-- == 0) return order_[i];
    }
    return skip;
  }

  int count_ = 2;
  int order_[kMaxSchedules] = {0, 0, 0};
  int64_t runs_ = 0;
  int64_t explored_ = 0;      // re-measurements so far (whose turn is next)
  double leader_time_ = 0.0;  // cost·steps of the leader's runs since the last re-measurement
  double last_run_[kMaxSchedules] = {0.0, 0.0, 0.0};  // cost·steps of each schedule's last run
  int64_t reports_[kMaxSchedules] = {0, 0, 0};
  double average_[kMaxSchedules] = {0.0, 0.0, 0.0};
  bool cold_dropped_[kMaxSchedules] = {false, false, false};  // the last report of s was a dropped cold one
  int again_ = -1;  // the schedule next() names once more (after a dropped cold report), or -1
};

}  // namespace qgru::fast
