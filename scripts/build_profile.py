#!/usr/bin/env python3
"""Where a build's time went, from a Ninja build folder's .ninja_log: seconds per target (the objects of
CMakeFiles/<target>.dir and the target's link), the slowest files, and the sum, i.e. the compile and link time on
one core (a parallel build's wall time is about that over the number of jobs, when the machine is otherwise idle).
Only the newest entry of each output counts (a rebuilt file replaces its earlier time).

Usage: scripts/build_profile.py BUILD_DIR [--top N]
"""
import argparse
import collections
import os
import re
import sys


def read_log(path):
    """{output: seconds} from a .ninja_log (format v5: start_ms end_ms mtime output hash)."""
    newest = {}
    with open(path, encoding="utf-8") as f:
        header = f.readline()
        if not header.startswith("# ninja log v"):
            raise SystemExit(f"build_profile: {path} is not a Ninja log (first line {header.strip()!r})")
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 4:
                continue
            start, end, output = int(fields[0]), int(fields[1]), fields[3]
            newest[output] = (end - start) / 1000.0
    return newest


def target_of(output):
    """The CMake target an output belongs to: CMakeFiles/<target>.dir/... for objects, the file name otherwise."""
    match = re.search(r"CMakeFiles/([^/]+)\.dir/", output)
    if match:
        return match.group(1)
    name = os.path.basename(output)
    return re.sub(r"^lib|\.(a|so(\.\d+)*)$", "", name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--top", type=int, default=15, help="how many targets and files to list (default 15)")
    args = parser.parse_args()
    log = os.path.join(args.build_dir, ".ninja_log")
    if not os.path.isfile(log):
        sys.exit(f"build_profile: no {log} (a build folder made with -G Ninja, as scripts/build.sh makes a new one)")
    outputs = read_log(log)
    per_target = collections.Counter()
    for output, seconds in outputs.items():
        per_target[target_of(output)] += seconds
    total = sum(outputs.values())
    print(f"{len(outputs)} outputs, {total:.0f} s on one core")
    print(f"\n{'target':<32} {'seconds':>8} {'share':>6}")
    for target, seconds in per_target.most_common(args.top):
        print(f"{target:<32} {seconds:8.1f} {100 * seconds / total:5.1f}%")
    print(f"\n{'file':<72} {'seconds':>8}")
    for output, seconds in sorted(outputs.items(), key=lambda item: -item[1])[: args.top]:
        print(f"{output[-72:]:<72} {seconds:8.1f}")


if __name__ == "__main__":
    main()
