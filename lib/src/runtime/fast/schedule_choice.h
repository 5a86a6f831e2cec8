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
// Contract: ScheduleChoice(count, preferred, alone_mask) chooses among schedules 0 .. count - 1 (count in [1, 3]);
// next() names the schedule to run; record(s, cost, steps) reports a run of s that took cost per step over
// `steps` steps (lower is better: wall µs per time step; the run took cost·steps µs). Until each schedule has
// kTurns = kWarmup + 1 reports they take turns, `preferred` first, then the others from the highest index
// down; the first kWarmup reports of each are dropped (a cold run pays for starting threads and faulting
// pages), so the warm-up costs two runs per schedule, most of them on the slower ones. Then the schedule with
// the lowest average cost runs, and one of the others (in turn) is re-measured once the runs of the leader
// since the last re-measurement have taken kExploreEvery times as long as that other schedule's last run:
// re-measuring costs about 1/kExploreEvery of the time whatever the other schedule costs now. Where the
// schedules cost about the same that is every kExploreEvery-th run, so a change of the machine is followed
// within a few hundred runs; where another process keeps a core busy and a two-thread run waits a whole
// scheduler time slice for its helper (a few ms against a 30 µs run), that schedule is re-measured a few
// times a second instead of every 64th run (which would cost the one-thread leader 2-3x its time).
//
// How a schedule's runs are averaged depends on whether it waits on other threads. A schedule that runs on
// the caller's thread alone (`alone_mask`, bit s for schedule s) is slowed only by what slows every schedule
// (the caller's thread preempted): its average is a moving one of 3/4 the old and 1/4 the new, where a report
// above twice the average counts as twice the average (a preempted run moves the average by at most 25 %).
// A schedule that waits on a helper pays for every time slice the helper spends off its CPU: its average is
// its mean cost per step over its last kWindowRuns = 64 kept runs, every run counted whole. Why whole: with
// another process spinning on the second CPU, a two-thread run took 230 µs (H = 256, T = 100) while the
// helper had the CPU and 4.3 ms in the one run of about seventeen during which the helper waited out the
// other process's time slice: 466 µs per run on average against 348 µs on one thread. An average that clips
// such runs at twice the average (this class's first form) keeps the two-thread schedule; one that counts them moves
// to one thread at the first stall or two, and since any 64 of its runs hold three or four stalls, its
// re-measurements (one run each, a few times a second) do not bring it back while the other process spins.
// Why runs and not time: a window of the last 100 ms faded the stalls between the sparse re-measurements and
// let the schedule lead again every few of them. Why not whole for the one-thread schedule: the caller's own
// preemptions (4.4 ms, seen in one-thread runs beside the same spinning process) would make it look as slow
// as the stalling one and hand the lead back to a schedule that stalls every few ms. A lone stall on an
// otherwise idle machine (one in 64 runs: +64 µs a run at H = 256 against the 118 µs two threads save)
// changes nothing. Once the other process stops, the re-measurements push the stalls out of the window: the
// two-thread schedule leads again after about 64 of them (about a second at H = 256).
//
// record_cold(s, cost, steps) reports a run of s that first had to wake a sleeping thread: the first such
// report after a kept one is dropped and next() names s again (a schedule re-measured after a stretch of
// one-thread runs finds the team asleep, which it would not be had it run back to back); a second in a row is
// kept (the runs come too far apart for the team to stay awake, so the wake-up is part of their cost). A cold
// run that took more than kWakeMicros (500 µs) over the schedule's average is kept at once: waking a thread
// takes tens of µs, while with another process spinning on the second CPU a cold two-thread run took 42 ms
// (H = 256, T = 100: the woken helper was placed on the caller's CPU), and running it again at once cost
// another 42 ms, 8 % of a 0.5 s benchmark.
// leader() names the schedule with the lowest average. Not thread-safe: the executor calls it under its
// team's mutex.
#include <cstdint>

namespace qgru::fast {

class ScheduleChoice {
 public:
  static constexpr int kMaxSchedules = 3;
  static constexpr int kWarmup = 1;
  static constexpr int kTurns = kWarmup + 1;  // reports per schedule before the choice starts
  static constexpr int kExploreEvery = 64;
  static constexpr int kWindowRuns = 64;
  static constexpr double kWakeMicros = 500.0;  // the most a cold run may cost over the usual one and be dropped

  explicit ScheduleChoice(int count = 2, int preferred = 1, unsigned alone_mask = 0) : alone_mask_(alone_mask) {
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
    const double step_count = static_cast<double>(steps > 0 ? steps : 1);
    const double run = cost * step_count;
    if (reports_[schedule] >= kTurns && schedule == leader()) leader_time_ += run;
    last_run_[schedule] = run;
    const int64_t n = ++reports_[schedule];
    if (n <= kWarmup) return;
    if (alone(schedule)) {
      if (n == kWarmup + 1) {
        moving_[schedule] = cost;
        return;
      }
      const double clipped = cost > 2.0 * moving_[schedule] ? 2.0 * moving_[schedule] : cost;
      moving_[schedule] = 0.75 * moving_[schedule] + 0.25 * clipped;
      last_run_[schedule] = clipped * step_count;  // a preempted run does not put off its re-measurement
      return;
    }
    // The ring of its last kWindowRuns kept runs: the oldest replaced.
    const int slot = static_cast<int>((n - kWarmup - 1) % kWindowRuns);
    ring_time_[schedule][slot] = run;
    ring_steps_[schedule][slot] = step_count;
  }

  void record_cold(int schedule, double cost, int64_t steps = 1) {
    if (schedule < 0 || schedule >= count_) return;
    const double step_count = static_cast<double>(steps > 0 ? steps : 1);
    // More than kWakeMicros over the schedule's usual run is not the wake-up: the helper did not get a CPU.
    const bool wake_only = reports_[schedule] < kTurns || (cost - average(schedule)) * step_count <= kWakeMicros;
    if (!cold_dropped_[schedule] && wake_only) {
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
      if (average(order_[k]) < average(best)) best = order_[k];
    }
    return best;
  }

  // The average cost per step of schedule s (moving, or windowed mean: see above); 0 before its first kept
  // report.
  double average(int s) const {
    if (s < 0 || s >= count_) return 0.0;
    if (alone(s)) return moving_[s];
    double time = 0.0, steps = 0.0;  // unfilled slots hold zeros
    for (int k = 0; k < kWindowRuns; ++k) {
      time += ring_time_[s][k];
      steps += ring_steps_[s][k];
    }
    return steps > 0.0 ? time / steps : 0.0;
  }

 private:
  bool alone(int s) const { return ((alone_mask_ >> s) & 1u) != 0; }

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
  unsigned alone_mask_;                               // bit s: schedule s runs on the caller's thread alone
  double moving_[kMaxSchedules] = {0.0, 0.0, 0.0};    // the moving average of an alone schedule
  double ring_time_[kMaxSchedules][kWindowRuns] = {};   // µs of the last kept runs of a helper-waiting schedule
  double ring_steps_[kMaxSchedules][kWindowRuns] = {};  // their steps
  bool cold_dropped_[kMaxSchedules] = {false, false, false};  // the last report of s was a dropped cold one
  int again_ = -1;  // the schedule next() names once more (after a dropped cold report), or -1
};

}  // namespace qgru::fast
