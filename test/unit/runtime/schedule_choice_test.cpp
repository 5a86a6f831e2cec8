// The fast executor's choice between two schedules by measured cost (lib/src/runtime/fast/schedule_choice.h).
#include <doctest/doctest.h>

#include <array>
#include <cstddef>

#include "../../../lib/src/runtime/fast/schedule_choice.h"

namespace {

using qgru::fast::ScheduleChoice;

// Runs `runs` rounds of next()/record() with the given cost per schedule; returns how often each ran.
std::array<int, 2> drive(ScheduleChoice& choice, int runs, double cost0, double cost1) {
  std::array<int, 2> count{0, 0};
  for (int i = 0; i < runs; ++i) {
    const int s = choice.next();
    REQUIRE((s == 0 || s == 1));
    ++count[static_cast<std::size_t>(s)];
    choice.record(s, s == 0 ? cost0 : cost1);
  }
  return count;
}

std::array<int, 3> drive3(ScheduleChoice& choice, int runs, const std::array<double, 3>& cost) {
  std::array<int, 3> count{0, 0, 0};
  for (int i = 0; i < runs; ++i) {
    const int s = choice.next();
    REQUIRE((s >= 0 && s < 3));
    ++count[static_cast<std::size_t>(s)];
    choice.record(s, cost[static_cast<std::size_t>(s)]);
  }
  return count;
}

}  // namespace

TEST_CASE("schedule choice: the preferred schedule runs first, then both alternate until each is measured") {
  for (int preferred : {0, 1}) {
    CAPTURE(preferred);
    ScheduleChoice choice(2, preferred);
    const int warm = ScheduleChoice::kTurns;
    for (int i = 0; i < 2 * warm; ++i) {
      const int s = choice.next();
      CHECK(s == (i % 2 == 0 ? preferred : 1 - preferred));
      choice.record(s, 1.0);
    }
  }
}

TEST_CASE("schedule choice: the cheaper schedule wins whichever is preferred, the other is re-measured now and then") {
  for (int preferred : {0, 1}) {
    for (int cheaper : {0, 1}) {
      CAPTURE(preferred);
      CAPTURE(cheaper);
      ScheduleChoice choice(2, preferred);
      drive(choice, 2 * (ScheduleChoice::kTurns), cheaper == 0 ? 1.0 : 1.25, cheaper == 0 ? 1.25 : 1.0);
      CHECK(choice.leader() == cheaper);
      // The other costs 1.25 a run: re-measured once the leader has run 64 · 1.25 = 80 runs since the last time.
      const int runs = 10 * 81;
      const std::array<int, 2> count = drive(choice, runs, cheaper == 0 ? 1.0 : 1.25, cheaper == 0 ? 1.25 : 1.0);
      CHECK(count[static_cast<std::size_t>(1 - cheaper)] == 10);
      CHECK(count[static_cast<std::size_t>(cheaper)] == runs - 10);
      CHECK(choice.average(cheaper) == doctest::Approx(1.0));
      CHECK(choice.average(1 - cheaper) == doctest::Approx(1.25));
    }
  }
}

TEST_CASE("schedule choice: re-measuring a schedule that became 100x slower (a busy core) costs ~1/64 of the time, not 100/64") {
  ScheduleChoice choice(2, 1, 1u);  // schedule 0 on the caller's thread alone
  drive(choice, 2 * (ScheduleChoice::kTurns), 1.0, 0.8);  // the two-thread schedule (1) leads while the machine is idle
  REQUIRE(choice.leader() == 1);
  // Another process takes the second core: every run of schedule 1 now waits a time slice for its helper,
  // 100x a run of schedule 0 (whose cost is unchanged). The leader changes at the first such run...
  std::array<int, 2> count = drive(choice, 16, 1.0, 100.0);
  CHECK(count[1] == 1);
  CHECK(choice.leader() == 0);
  // ...and from then on schedule 1 is re-measured once schedule 0 has run 64 x 100 runs since the last time:
  // the time spent re-measuring stays near 1/64 of the total.
  const int runs = 6 * (ScheduleChoice::kExploreEvery * 100 + 1);
  count = drive(choice, runs, 1.0, 100.0);
  CHECK(count[1] >= 5);
  CHECK(count[1] <= 7);
  const double explore_time = 100.0 * count[1], total = explore_time + 1.0 * count[0];
  CHECK(explore_time / total < 2.0 / ScheduleChoice::kExploreEvery);
  // The core is free again: the next re-measurement (after 64 x 100 runs, the last one took 100) sees it, and
  // schedule 1 leads again once its re-measurements have pushed the slow runs out of its window of 64 runs
  // (one every 64 x 0.8 runs of schedule 0).
  count = drive(choice, 8 * ScheduleChoice::kExploreEvery * 100, 1.0, 0.8);
  CHECK(choice.leader() == 1);
  CHECK(count[0] < ScheduleChoice::kExploreEvery * 100 + ScheduleChoice::kWindowRuns * ScheduleChoice::kExploreEvery);
}

TEST_CASE("schedule choice: a two-thread schedule that stalls in one run of seventeen loses to one thread; a lone stall does not") {
  // Measured with another process spinning on the second CPU (H = 256, T = 100, µs per run): two threads
  // 230 while the helper runs, 4300 in the run that waits out the other process's time slice, about every
  // seventeenth run; one thread 348. On average the two-thread schedule costs 466: it must lose.
  // The caller's thread is itself preempted now and then (4.4 ms in one run of about eleven was seen beside
  // the same spinning process), whichever schedule runs: the one-thread schedule (0, on the caller's thread
  // alone) clips those runs, and must still win.
  for (const int caller_stall_every : {0, 11}) {
    CAPTURE(caller_stall_every);
    ScheduleChoice choice(2, 1, 1u);
    for (int i = 0; i < 2 * ScheduleChoice::kTurns; ++i) {  // warm-up, runs of 100 steps as below
      const int s = choice.next();
      choice.record(s, s == 0 ? 3.48 : 2.30, 100);
    }
    REQUIRE(choice.leader() == 1);
    std::array<int, 2> count{0, 0};
    int since_stall = 0;
    double total = 0.0, one_thread_total = 0.0;  // µs: this choice's runs; the same runs all on one thread
    for (int i = 0; i < 20000; ++i) {
      const int s = choice.next();
      ++count[static_cast<std::size_t>(s)];
      double cost = 348.0;
      if (s == 1) cost = ++since_stall % 17 == 0 ? 4300.0 : 230.0;
      const double caller_stall = caller_stall_every > 0 && i % caller_stall_every == 0 ? 4050.0 : 0.0;
      total += cost + caller_stall;
      one_thread_total += 348.0 + caller_stall;
      choice.record(s, (cost + caller_stall) / 100.0, 100);
    }
    CHECK(choice.leader() == 0);
    // The one-thread schedule ran nearly all the time, and the whole costs at most a few percent more than
    // one thread alone (the re-measurements: one run in about 40, a stall in one of those 17).
    CHECK(count[0] > 30 * count[1]);
    CHECK(total < 1.05 * one_thread_total);
  }

  // Idle: the same two-thread schedule stalls once in 100 ms of runs (a lone preemption). It keeps the lead.
  ScheduleChoice idle(2, 1, 1u);
  for (int i = 0; i < 2 * ScheduleChoice::kTurns; ++i) {
    const int s = idle.next();
    idle.record(s, s == 0 ? 3.48 : 2.30, 100);
  }
  std::array<int, 2> count{0, 0};
  for (int i = 0; i < 4000; ++i) {
    const int s = idle.next();
    ++count[static_cast<std::size_t>(s)];
    const double cost = s == 0 ? 348.0 : i % 435 == 434 ? 4300.0 : 230.0;
    idle.record(s, cost / 100.0, 100);
  }
  CHECK(idle.leader() == 1);
  CHECK(count[1] > 3900);
}

TEST_CASE("schedule choice: the cost of a re-measurement counts the run's steps, not the number of runs") {
  ScheduleChoice choice(2, 0);
  for (int i = 0; i < 2 * ScheduleChoice::kTurns; ++i) {
    const int s = choice.next();
    choice.record(s, s == 0 ? 1.0 : 2.0, 100);  // µs per step, 100 steps: runs of 100 and 200 µs
  }
  // Schedule 1's last run took 200 µs: re-measured after 64 · 200 µs of the leader's runs of 100 µs each.
  int s = choice.next();
  int runs = 0;
  while (s == 0 && runs < 1000) {
    choice.record(0, 1.0, 100);
    ++runs;
    s = choice.next();
  }
  CHECK(runs == 2 * ScheduleChoice::kExploreEvery);
  CHECK(s == 1);
}

TEST_CASE("schedule choice: a change of the machine is followed, one slow run is not") {
  ScheduleChoice choice(2, 1, 1u);
  drive(choice, 2 * (ScheduleChoice::kTurns), 2.0, 1.0);  // split (1) cheaper
  std::array<int, 2> count = drive(choice, 2000, 2.0, 1.0);
  CHECK(count[0] <= 2000 / ScheduleChoice::kExploreEvery + 1);
  // One preempted run of the winner, 20x its cost (a 4.3 ms time slice against a 230 µs run), among its last 64
  // runs: the average rises 19/64, the winner stays.
  CHECK(choice.next() == 1);
  choice.record(1, 20.0);
  CHECK(choice.average(1) == doctest::Approx(1.0 + 19.0 / 64.0));
  count = drive(choice, ScheduleChoice::kExploreEvery - 2, 2.0, 1.0);
  CHECK(count[0] <= 1);
  // The machine changes: schedule 1 now costs 3, schedule 0 still 2. The average crosses 2 once about half of
  // the window's runs are new; from then on schedule 0 runs, schedule 1 re-measured every 64 · 3 / 2 = 96.
  count = drive(choice, 400, 2.0, 3.0);
  CHECK(choice.leader() == 0);
  count = drive(choice, 4 * 97, 2.0, 3.0);
  CHECK(count[1] >= 3);
  CHECK(count[1] <= 5);
  // And back: schedule 1 at 1 again, seen at its next re-measurements (every 64 · 1 / 2 = 32 runs of schedule
  // 0), which pull its average below 2 once the runs at 3 are the older half of its window.
  count = drive(choice, 48 * ScheduleChoice::kExploreEvery, 2.0, 1.0);
  CHECK(choice.leader() == 1);
  CHECK(count[1] > 24 * ScheduleChoice::kExploreEvery);
}

TEST_CASE("schedule choice over three schedules: turns from the preferred one down, then the cheapest, the others re-measured in turn") {
  ScheduleChoice choice(3, 2);
  REQUIRE(choice.count() == 3);
  const int expected_turns[] = {2, 1, 0};
  const std::array<double, 3> cost{1.5, 1.0, 1.25};  // schedule 1 cheapest
  for (int i = 0; i < 3 * (ScheduleChoice::kTurns); ++i) {
    const int s = choice.next();
    CHECK(s == expected_turns[i % 3]);
    choice.record(s, cost[static_cast<std::size_t>(s)]);
  }
  // The others in turn, 2 then 0: after 64 · 1.25 = 80 and 64 · 1.5 = 96 runs of schedule 1 respectively.
  const int runs = 6 * (80 + 96 + 2);
  const std::array<int, 3> count = drive3(choice, runs, cost);
  CHECK(count[2] == 6);
  CHECK(count[0] == 6);
  CHECK(count[1] == runs - 12);
  // A one-schedule choice always names it.
  ScheduleChoice single(1, 0);
  for (int i = 0; i < 100; ++i) {
    CHECK(single.next() == 0);
    single.record(0, 1.0 + i);
  }
}

TEST_CASE("schedule choice: a cold run (the team had to be woken) is measured again, twice in a row it counts") {
  ScheduleChoice choice(2, 1);
  drive(choice, 2 * (ScheduleChoice::kTurns), 1.0, 2.0);  // schedule 0 cheaper
  // Run until the re-measurement of schedule 1 comes up.
  int s = choice.next();
  int guard = 0;
  while (s != 1 && guard++ < 4 * ScheduleChoice::kExploreEvery) {
    choice.record(s, 1.0);
    s = choice.next();
  }
  REQUIRE(s == 1);
  // It found the team asleep: 40x the cost. Dropped; schedule 1 runs again next, measured warm at 0.5.
  choice.record_cold(1, 80.0);
  CHECK(choice.average(1) == doctest::Approx(2.0));
  CHECK(choice.next() == 1);
  choice.record(1, 0.5);
  CHECK(choice.average(1) == doctest::Approx((2.0 + 0.5) / 2.0));  // the mean of its two kept runs
  // Two cold runs in a row: the second is kept, whole.
  CHECK(choice.next() == 0);
  choice.record(0, 1.0);
  ScheduleChoice gappy(2, 1);
  drive(gappy, 2 * (ScheduleChoice::kTurns), 1.0, 1.0);
  const int first = gappy.next();
  gappy.record_cold(first, 50.0);
  CHECK(gappy.next() == first);
  gappy.record_cold(first, 50.0);
  CHECK(gappy.average(first) == doctest::Approx((1.0 + 50.0) / 2.0));
}

TEST_CASE("schedule choice: a cold run far slower than a wake-up is kept at once, not run again") {
  // µs per step, 100 steps: schedule 1 (two threads) 2.5 a step, 250 µs a run; schedule 0 3.5.
  ScheduleChoice choice(2, 1, 1u);
  for (int i = 0; i < 2 * ScheduleChoice::kTurns; ++i) {
    const int s = choice.next();
    choice.record(s, s == 0 ? 3.5 : 2.5, 100);
  }
  REQUIRE(choice.leader() == 1);
  // A wake-up's cost (300 µs over the usual run) is dropped, once, as before.
  CHECK(choice.next() == 1);
  choice.record_cold(1, 5.5, 100);
  CHECK(choice.average(1) == doctest::Approx(2.5));
  CHECK(choice.next() == 1);
  choice.record(1, 2.5, 100);
  // 42 ms (the helper placed on the caller's CPU by another process): kept, whole; schedule 0 leads and
  // schedule 1 is re-measured only after 64 x 42 ms of its runs.
  CHECK(choice.next() == 1);
  choice.record_cold(1, 420.0, 100);
  CHECK(choice.average(1) > 3.5);
  CHECK(choice.leader() == 0);
  int runs = 0;
  while (choice.next() == 0 && runs < 100000) {
    choice.record(0, 3.5, 100);
    ++runs;
  }
  // (the 42 ms run itself counts toward the wait: schedule 1 led when it ran)
  CHECK(runs <= static_cast<int>(ScheduleChoice::kExploreEvery * 42000.0 / 350.0));
  CHECK(runs >= static_cast<int>((ScheduleChoice::kExploreEvery - 1) * 42000.0 / 350.0));
}
