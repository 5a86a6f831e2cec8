#!/usr/bin/env python3
"""Whole runs through the Python package (so the runtime C API): float input against int32 codes.

  build/python-venv/bin/python scripts/bench_python_run.py [--H 256] [--T 100] [--N 64] [--threads 2] [--rounds 5]

Runs from the venv scripts/test_python.sh installs the package into (build/python-venv). A random one-layer GRU
(C = H) quantized with the int8 preset from a slice of its own input; per round the median wall time of 20 runs
of Artifact.run on float32 x (the C API's qgru_rt_run: x quantized inside) and on its int32 codes
(qgru_rt_run_codes), after 5 warm-up runs; prints the median over rounds of each and their ratio.
"""
import argparse
import statistics
import time

import numpy as np

import qgru


def timed(fn, runs=20):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--H", type=int, default=256)
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--N", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    H = args.H
    weights = {"weight_ih_l0": (3 * H, H), "weight_hh_l0": (3 * H, H), "bias_ih_l0": (3 * H,), "bias_hh_l0": (3 * H,)}
    weights = {k: (rng.standard_normal(shape) * 0.06).astype(np.float32) for k, shape in weights.items()}
    x = rng.standard_normal((args.T, args.N, H)).astype(np.float32)
    artifact = qgru.quantize(weights, qgru.calibrate(weights, x[:, : min(8, args.N)]), config="int8")
    codes = artifact.quantize_input(x)
    for _ in range(5):
        artifact.run(x, threads=args.threads)
        artifact.run(codes, threads=args.threads)
    floats, ints = [], []
    for _ in range(args.rounds):
        floats.append(timed(lambda: artifact.run(x, threads=args.threads)))
        ints.append(timed(lambda: artifact.run(codes, threads=args.threads)))
    f, c = statistics.median(floats), statistics.median(ints)
    print("H=%d T=%d N=%d threads=%d (%s): float x %.2f ms, int32 codes %.2f ms per run (medians of %d rounds), "
          "float/codes %.2f" % (H, args.T, args.N, args.threads, artifact.executor(threads=args.threads), f, c,
                                args.rounds, f / c))


if __name__ == "__main__":
    main()
