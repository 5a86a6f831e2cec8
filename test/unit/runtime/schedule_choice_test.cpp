// The fast executor's choice between two schedules by measured cost (lib/src/runtime/schedule_choice.h).
#include <doctest/doctest.h>

#include <array>
#include <cstddef>

#include "../../../lib/src/runtime/schedule_choice.h"

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
  ScheduleChoice choice(2, 1);
  drive(choice, 2 * (ScheduleChoice::kTurns), 1.0, 0.8);  // the two-thread schedule (1) leads while the machine is idle
  REQUIRE(choice.leader() == 1);
  // Another process takes the second core: every run of schedule 1 now waits a time slice for its helper,
  // 100x a run of schedule 0 (whose cost is unchanged). The leader changes within a few runs...
  std::array<int, 2> count = drive(choice, 16, 1.0, 100.0);
  CHECK(count[1] <= 4);
  CHECK(choice.leader() == 0);
  // ...and from then on schedule 1 is re-measured once schedule 0 has run 64 x 100 runs since the last time:
  // the time spent re-measuring stays near 1/64 of the total.
  const int runs = 6 * (ScheduleChoice::kExploreEvery * 100 + 1);
  count = drive(choice, runs, 1.0, 100.0);
  CHECK(count[1] >= 5);
  CHECK(count[1] <= 7);
  const double explore_time = 100.0 * count[1], total = explore_time + 1.0 * count[0];
  CHECK(explore_time / total < 2.0 / ScheduleChoice::kExploreEvery);
  // The core is free again: the next re-measurement sees it, and schedule 1 leads again within a few of them.
  count = drive(choice, 8 * ScheduleChoice::kExploreEvery * 100, 1.0, 0.8);
  CHECK(choice.leader() == 1);
  CHECK(count[1] > 4 * ScheduleChoice::kExploreEvery * 100);
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
  ScheduleChoice choice(2, 1);
  drive(choice, 2 * (ScheduleChoice::kTurns), 2.0, 1.0);  // split (1) cheaper
  // One preempted run of the winner, 100x its cost: it moves the average by at most 25 % and the winner stays.
  CHECK(choice.next() == 1);
  choice.record(1, 100.0);
  CHECK(choice.average(1) == doctest::Approx(1.25));
  std::array<int, 2> count = drive(choice, ScheduleChoice::kExploreEvery - 2, 2.0, 1.0);
  CHECK(count[0] <= 1);
  // The machine changes: schedule 1 now costs 3, schedule 0 still 2. The moving average of the runs made
  // crosses 2 within a few runs; from then on schedule 0 runs, schedule 1 re-measured every 64 · 3 / 2 = 96.
  count = drive(choice, 8, 2.0, 3.0);
  CHECK(count[1] <= 4);
  count = drive(choice, 4 * 97, 2.0, 3.0);
  CHECK(count[1] >= 3);
  CHECK(count[1] <= 5);
  // And back: schedule 1 at 1 again, seen at its next re-measurements, which pull its average below 2.
  count = drive(choice, 8 * ScheduleChoice::kExploreEvery, 2.0, 1.0);
  CHECK(count[1] > 6 * ScheduleChoice::kExploreEvery);
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
  CHECK(choice.average(1) == doctest::Approx(0.75 * 2.0 + 0.25 * 0.5));
  // Two cold runs in a row: the second is kept (clipped to twice the average).
  CHECK(choice.next() == 0);
  choice.record(0, 1.0);
  ScheduleChoice gappy(2, 1);
  drive(gappy, 2 * (ScheduleChoice::kTurns), 1.0, 1.0);
  const int first = gappy.next();
  gappy.record_cold(first, 50.0);
  CHECK(gappy.next() == first);
  gappy.record_cold(first, 50.0);
  CHECK(gappy.average(first) == doctest::Approx(0.75 * 1.0 + 0.25 * 2.0));
}
