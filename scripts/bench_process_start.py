#!/usr/bin/env python3
"""Process start cost of two qgru binaries, side by side (docs/BENCHMARKS.md, "Starting a qgru process").

Usage: bench_process_start.py BEFORE AFTER ROUNDS RUNS [ARGS...]   (ARGS default: --version)

Runs each binary RUNS times per round with ARGS, the two alternating which goes first each round (the machine
may be shared: compare the rounds' ranges, not one figure). Per run: wall time from fork to wait4, and the
child's CPU time (user + system) from wait4's resource usage; per round the median of each. Output: one line per
round and binary, then per binary the median of the rounds' medians and their range. A run that exits non-zero
stops the benchmark.
"""
import os
import statistics
import sys
import time


def time_runs(path, args, runs):
    walls, cpus = [], []
    devnull = os.open(os.devnull, os.O_WRONLY)
    for _ in range(runs):
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.execv(path, [path] + args)
        _, status, usage = os.wait4(pid, 0)
        walls.append(time.perf_counter() - start)
        cpus.append(usage.ru_utime + usage.ru_stime)
        if status != 0:
            sys.exit(f"bench_process_start: {path} {' '.join(args)} exited with status {status}")
    os.close(devnull)
    return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__.strip().splitlines()[2])
    binaries = {"before": sys.argv[1], "after": sys.argv[2]}
    rounds, runs = int(sys.argv[3]), int(sys.argv[4])
    args = sys.argv[5:] or ["--version"]
    medians = {name: {"wall": [], "cpu": []} for name in binaries}
    for r in range(rounds):
        order = list(binaries.items()) if r % 2 == 0 else list(reversed(binaries.items()))
        for name, path in order:
            wall, cpu = time_runs(path, args, runs)
            medians[name]["wall"].append(wall)
            medians[name]["cpu"].append(cpu)
            print(f"round {r} {name}: median wall {wall:.1f} ms, cpu {cpu:.1f} ms", flush=True)
    for name in binaries:
        wall, cpu = medians[name]["wall"], medians[name]["cpu"]
        print(f"{name}: wall {statistics.median(wall):.1f} ms (rounds {min(wall):.1f}-{max(wall):.1f}), "
              f"cpu {statistics.median(cpu):.1f} ms (rounds {min(cpu):.1f}-{max(cpu):.1f})")


if __name__ == "__main__":
    main()
