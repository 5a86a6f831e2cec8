#!/usr/bin/env python3
"""Per-frame latency of streaming at N = 1: qgru's step beside onnxruntime's GRU run one frame at a time.

  scripts/bench_stream.py [--build build] [--frames 10000] [--warmup 1000] [--rounds 2] [--sizes 64,256,1024]

For each H (one layer, C = H, batch 1) and round: the bench_stream binary (scripts/bench_stream.cpp: the C
API's qgru_rt_step, one frame of float input to its dequantized output, int8 artifact, fast executor, the
calling thread only), then onnxruntime (the private venv of scripts/bench_cpu.py, one intra-op thread)
running an ONNX GRU (linear_before_reset = 1, the same variant) on one frame [1, 1, H] with the previous
Y_h fed back as initial_h, the way a streaming user must call it. Each frame is timed alone after the warm-up
frames; median, p99 and max per frame in microseconds, and the load average (uptime) before each process.
onnxruntime is timed through its Python binding (session.run per frame): that call's own overhead is part
of what a Python user pays and is included.
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cpu  # noqa: E402  (ensure_venv, VENV)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ort_worker(H, frames, warmup):
    import numpy as np
    import onnxruntime as ort
    model = bench_cpu.onnx_gru_model(H, 1, 1, initial_h=True)
    rng = np.random.default_rng(0)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    xs = [rng.standard_normal((1, 1, H)).astype(np.float32) for _ in range(64)]
    h = np.zeros((1, 1, H), np.float32)
    times = []
    for f in range(warmup + frames):
        t0 = time.perf_counter_ns()
        _, h = sess.run(None, {"X": xs[f % 64], "initial_h": h})
        t1 = time.perf_counter_ns()
        if f >= warmup:
            times.append((t1 - t0) / 1e3)
    times.sort()
    pct = lambda p: times[min(len(times) - 1, int(p * len(times)))]  # noqa: E731
    print(json.dumps({"H": H, "median_us": pct(0.5), "p90_us": pct(0.9), "p99_us": pct(0.99), "max_us": times[-1],
                      "executor": "onnxruntime %s GRU fp32, 1 thread" % ort.__version__}))


def load():
    return os.getloadavg()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--frames", type=int, default=10000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sizes", default="64,256,1024")
    ap.add_argument("--ort-worker", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ort_worker:
        return ort_worker(args.ort_worker, args.frames, args.warmup)
    subprocess.run(["cmake", "--build", args.build, "--target", "bench_stream"], check=True, stdout=subprocess.DEVNULL)
    if not bench_cpu.ensure_venv():
        sys.exit("could not install %s into %s" % (", ".join(bench_cpu.VENV_PACKAGES), bench_cpu.VENV))
    py = os.path.join(bench_cpu.VENV, "bin", "python")
    binary = os.path.join(args.build, "test", "bench_stream")
    print("| H | round | qgru step median / p99 / max µs (load) | onnxruntime median / p99 / max µs (load) | median ratio | qgru p99 / median |")
    print("|---:|---:|---|---|---:|---:|")
    for H in [int(s) for s in args.sizes.split(",")]:
        for r in range(args.rounds):
            l1 = load()
            q = json.loads(subprocess.run([binary, str(H), str(args.frames), str(args.warmup)], check=True,
                                          capture_output=True, text=True).stdout)
            l2 = load()
            o = json.loads(subprocess.run([py, __file__, "--ort-worker", str(H), "--frames", str(args.frames), "--warmup",
                                           str(args.warmup)], check=True, capture_output=True, text=True).stdout)
            print("| %d | %d | %.2f / %.2f / %.0f (%.1f) | %.2f / %.2f / %.0f (%.1f) | %.1f× | %.2f |" % (
                H, r + 1, q["median_us"], q["p99_us"], q["max_us"], l1, o["median_us"], o["p99_us"], o["max_us"], l2,
                o["median_us"] / q["median_us"], q["p99_us"] / q["median_us"]), flush=True)
    print("\nqgru: %s; %s" % (q["executor"], o["executor"]))


if __name__ == "__main__":
    main()
