#!/usr/bin/env python3
"""Per-frame latency of streaming at N = 1: qgru's step beside onnxruntime's GRU run one frame at a time.

  scripts/bench_stream.py [--build build] [--frames 10000] [--warmup 1000] [--rounds 2] [--sizes 64,256,1024]
                          [--pairs python,c] [--venv DIR] [--qgru-python PY] [--work DIR] [--table FILE]
  scripts/bench_stream.py --self-test

For each H (one layer, C = H, batch 1) and round: the bench_stream binary (scripts/bench_stream.cpp: the C
API's qgru_rt_step, one frame of float input to its dequantized output, int8 artifact, fast executor, the
calling thread only), then onnxruntime (the private venv of scripts/bench_cpu.py, one intra-op thread)
running an ONNX GRU (linear_before_reset = 1, the same variant) on one frame [1, 1, H] with the previous
Y_h fed back as initial_h, the way a streaming user must call it. Each frame is timed alone after the warm-up
frames; median, p99 and max per frame in microseconds, and the load average (uptime) before each process.
onnxruntime is timed through its Python binding (session.run per frame): that call's own overhead is part
of what a Python user pays and is included.

--pairs compares like with like instead (each pair through the same kind of call):
  python  qgru's Python package (`Stream.step`, the wheel installed in --qgru-python, default
          <build>/python-venv/bin/python, as scripts/test_python.sh installs it) beside onnxruntime's Python
          `InferenceSession.run`;
  c       the C API's `qgru_rt_step` (bench_stream) beside onnxruntime's C API (scripts/bench_stream_ort.cpp,
          compiled here against the libonnxruntime.so.* of the venv's onnxruntime wheel).
Every runner of one H steps the same model and the same frames: the ONNX GRU onnxruntime runs (written once per
H into --work with 64 frames of standard normal input), and the int8 artifact qgru's package calibrates on
those frames and quantizes from that very ONNX file. The state is carried between calls as a streaming product
carries it; the same warm-up and timed frames for all; each runner in its own process, the pair's order
alternating between rounds (qgru first in odd rounds, onnxruntime first in even ones). Before timing, all four
runners step the same 100 frames, and the C and Python runners of each engine must end in the same state (the sum
of the last output), or the run stops; so must each runner in every round. --table also writes the tables to a
file. --self-test checks the argument parsing and the table writing without onnxruntime or a build.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cpu  # noqa: E402  (ensure_venv, VENV)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def summary(times):
    """Median, p10, p90, p99 and max of per-frame times in microseconds."""
    times = sorted(times)
    pct = lambda p: times[min(len(times) - 1, int(p * len(times)))]  # noqa: E731
    return {"median_us": pct(0.5), "p10_us": pct(0.1), "p90_us": pct(0.9), "p99_us": pct(0.99), "max_us": times[-1]}


def ort_session(model_bytes_or_path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort, ort.InferenceSession(model_bytes_or_path, so, providers=["CPUExecutionProvider"])


def ort_steps(sess, xs, H, frames, warmup):
    """session.run per frame, Y_h fed back as initial_h: (per-frame microseconds after the warm-up, last Y_h)."""
    import numpy as np
    h = np.zeros((1, 1, H), np.float32)
    times = []
    for f in range(warmup + frames):
        t0 = time.perf_counter_ns()
        _, h = sess.run(None, {"X": xs[f % len(xs)], "initial_h": h})
        t1 = time.perf_counter_ns()
        if f >= warmup:
            times.append((t1 - t0) / 1e3)
    return times, h


def ort_worker(H, frames, warmup):
    import numpy as np
    rng = np.random.default_rng(0)
    ort, sess = ort_session(bench_cpu.onnx_gru_model(H, 1, 1, initial_h=True).SerializeToString())
    xs = [rng.standard_normal((1, 1, H)).astype(np.float32) for _ in range(64)]
    times, _ = ort_steps(sess, xs, H, frames, warmup)
    print(json.dumps({"H": H, **summary(times), "executor": "onnxruntime %s GRU fp32, 1 thread" % ort.__version__}))


# --pairs: the shared model and frames of one H, and the Python runners (each run by the right interpreter).
FRAME_COUNT = 64
CHECK_FRAMES = 100  # the frames every runner steps before timing, to show they step the same model


def pair_files(work, H):
    return {k: os.path.join(work, "%s_%d.%s" % (k, H, ext))
            for k, ext in (("gru", "onnx"), ("frames", "f32"), ("model", "qgru.json"))}


def load_frames(path, H):
    import numpy as np
    xs = np.fromfile(path, np.float32)
    if xs.size != FRAME_COUNT * H:
        sys.exit("%s: %d float32 values, expected %d (64 frames of H = %d)" % (path, xs.size, FRAME_COUNT * H, H))
    return xs.reshape(FRAME_COUNT, 1, H)


def worker(kind, H, frames, warmup, work):
    import numpy as np
    files = pair_files(work, H)
    if kind == "export":  # onnxruntime's venv (onnx, numpy): the ONNX GRU and the frames
        with open(files["gru"], "wb") as f:
            f.write(bench_cpu.onnx_gru_model(H, 1, 1, initial_h=True).SerializeToString())
        np.random.default_rng(0).standard_normal((FRAME_COUNT, 1, H)).astype(np.float32).tofile(files["frames"])
        return
    xs = load_frames(files["frames"], H)
    if kind == "quantize":  # qgru's venv: the artifact of that ONNX GRU, calibrated on the frames
        import qgru
        qgru.quantize(files["gru"], qgru.calibrate(files["gru"], xs), "int8").save(files["model"])
        return
    if kind == "qgru-py":
        import qgru
        artifact = qgru.load(files["model"])
        stream = artifact.stream(1, executor="fast")
        frame_list = [np.ascontiguousarray(xs[i]) for i in range(FRAME_COUNT)]  # [1, C] each, float32
        times = []
        y = None
        for f in range(warmup + frames):
            t0 = time.perf_counter_ns()
            y = stream.step(frame_list[f % FRAME_COUNT])
            t1 = time.perf_counter_ns()
            if f >= warmup:
                times.append((t1 - t0) / 1e3)
        executor = "qgru %s Stream.step (%s)" % (qgru.__version__, artifact.executor(executor="fast"))
    elif kind == "ort-py":
        ort, sess = ort_session(files["gru"])
        times, y = ort_steps(sess, [xs[i].reshape(1, 1, H) for i in range(FRAME_COUNT)], H, frames, warmup)
        executor = "onnxruntime %s GRU fp32, Python, 1 thread" % ort.__version__
    else:
        sys.exit("unknown worker %s" % kind)
    y_sum = 0.0  # as the C runners sum it: in order, in double
    for v in np.asarray(y, np.float64).ravel():
        y_sum += float(v)
    print(json.dumps({"H": H, **summary(times), "executor": executor, "y_sum": y_sum}))


def load():
    return os.getloadavg()[0]


ORT_PACKAGES = ["onnxruntime", "onnx"]  # all the venv needs here (bench_cpu.py's peers add OpenVINO)
PAIRS = ("python", "c")
PAIR_RUNNERS = {"python": ("qgru-py", "ort-py"), "c": ("qgru-c", "ort-c")}
RUNNER_NAMES = {"qgru-py": "qgru Python", "ort-py": "onnxruntime Python", "qgru-c": "qgru C API",
                "ort-c": "onnxruntime C API"}
PAIR_HEADER = ["| pair | H | round (first) | qgru median [p10–p90] / p99 µs (load) | "
               "onnxruntime median [p10–p90] / p99 µs (load) | onnxruntime / qgru median |",
               "|---|---:|---|---|---|---:|"]


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("%s: expected a positive integer" % text)
    return value


def size_list(text):
    try:
        sizes = [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("%s: expected comma-separated hidden sizes, e.g. 64,256,1024" % text)
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError("%s: hidden sizes must be positive" % text)
    return sizes


def pair_list(text):
    pairs = []
    for name in text.split(","):
        if name not in PAIRS:
            raise argparse.ArgumentTypeError("%s: expected pairs among %s" % (name, ",".join(PAIRS)))
        if name not in pairs:
            pairs.append(name)
    return pairs


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--frames", type=positive_int, default=10000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--rounds", type=positive_int, default=2)
    ap.add_argument("--sizes", type=size_list, default=size_list("64,256,1024"))
    ap.add_argument("--pairs", type=pair_list, default=[],
                    help="python, c or python,c: like-with-like pairs instead of the C step beside onnxruntime's Python")
    ap.add_argument("--venv", default=bench_cpu.VENV, help="onnxruntime's private venv (made when missing)")
    ap.add_argument("--qgru-python", help="a python with qgru's package (default <build>/python-venv/bin/python)")
    ap.add_argument("--work", help="the models and frames of --pairs (default <build>/bench_stream_work)")
    ap.add_argument("--table", help="also write the tables to this file")
    ap.add_argument("--self-test", action="store_true", help="check argument parsing and table writing, then exit")
    ap.add_argument("--ort-worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--worker", choices=("export", "quantize", "qgru-py", "ort-py"), help=argparse.SUPPRESS)
    ap.add_argument("--H", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.warmup < 0:
        ap.error("--warmup: expected 0 or more")
    args.qgru_python = args.qgru_python or os.path.join(args.build, "python-venv", "bin", "python")
    args.work = args.work or os.path.join(args.build, "bench_stream_work")
    return args


LEGACY_HEADER = ["| H | round | qgru step median / p99 / max µs (load) | onnxruntime median / p99 / max µs (load) | "
                 "median ratio | qgru p99 / median |",
                 "|---:|---:|---|---|---:|---:|"]


def legacy_row(H, rnd, q, o, q_load, o_load):
    """A row of the default table: qgru's C step, then onnxruntime through Python."""
    return "| %d | %d | %.2f / %.2f / %.0f (%.1f) | %.2f / %.2f / %.0f (%.1f) | %.1f× | %.2f |" % (
        H, rnd, q["median_us"], q["p99_us"], q["max_us"], q_load, o["median_us"], o["p99_us"], o["max_us"], o_load,
        o["median_us"] / q["median_us"], q["p99_us"] / q["median_us"])


def spread(r):
    return "%.2f [%.2f–%.2f] / %.2f" % (r["median_us"], r["p10_us"], r["p90_us"], r["p99_us"])


def pair_row(pair, H, rnd, q, o, q_load, o_load):
    """One table row: round rnd (1-based) ran qgru first when odd, onnxruntime first when even."""
    first = "qgru" if rnd % 2 else "onnxruntime"
    return "| %s | %d | %d (%s) | %s (%.1f) | %s (%.1f) | %.1f× |" % (
        pair, H, rnd, first, spread(q), q_load, spread(o), o_load, o["median_us"] / q["median_us"])


def check_states(sums, H):
    """Every runner of one H steps the same frames: each must end in one state in every round, the two qgru
    runners (one artifact) in the same state, the two onnxruntime runners (one ONNX model) in the same state up to
    float rounding. sums: runner -> the y_sum of each of its runs."""
    for runner, values in sums.items():
        if max(values) != min(values):
            sys.exit("bench_stream: H = %d: %s ended in different states across rounds: %s" % (H, runner, values))
    for a, b, tolerance in (("qgru-c", "qgru-py", 1e-9), ("ort-c", "ort-py", 1e-5)):
        if a in sums and b in sums and abs(sums[a][0] - sums[b][0]) > tolerance * (1.0 + abs(sums[a][0])):
            sys.exit("bench_stream: H = %d: %s and %s ended in different states (sums %.9g and %.9g): they did not "
                     "step the same model over the same frames" % (H, a, b, sums[a][0], sums[b][0]))


def write_table(path, lines):
    if path:
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")


def out(lines, line):
    lines.append(line)
    print(line, flush=True)


def build_ort_c(py, build):
    """scripts/bench_stream_ort.cpp compiled against the venv's onnxruntime wheel: (binary, library)."""
    capi = subprocess.run([py, "-c", "import onnxruntime, os; print(os.path.join(os.path.dirname(onnxruntime.__file__), "
                           "'capi'))"], check=True, capture_output=True, text=True).stdout.strip()
    libraries = sorted(glob.glob(os.path.join(capi, "libonnxruntime.so.*")))
    if not libraries:
        sys.exit("%s: no libonnxruntime.so.* (where the onnxruntime wheel keeps its C library)" % capi)
    library = libraries[-1]
    dynamic = subprocess.run(["readelf", "-d", library], check=True, capture_output=True, text=True).stdout
    soname = [line.split("[")[1].rstrip("]") for line in dynamic.splitlines() if "(SONAME)" in line]
    folder = os.path.join(build, "bench_stream_ort")
    os.makedirs(folder, exist_ok=True)
    link = os.path.join(folder, soname[0] if soname else os.path.basename(library))
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(library, link)
    binary = os.path.join(folder, "bench_stream_ort")
    subprocess.run([os.environ.get("CXX", "c++"), "-O2", "-std=c++17", "-Wall", "-Wextra", "-Werror",
                    os.path.join(ROOT, "scripts", "bench_stream_ort.cpp"), "-o", binary, link, "-Wl,-rpath,$ORIGIN"],
                   check=True)
    return binary, library


def run_json(cmd):
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])


def run_pairs(args, lines):
    if not bench_cpu.ensure_venv(ORT_PACKAGES):
        sys.exit("could not install %s into %s" % (", ".join(ORT_PACKAGES), bench_cpu.VENV))
    ort_py = os.path.join(bench_cpu.VENV, "bin", "python")
    if not os.path.exists(args.qgru_python) or subprocess.run([args.qgru_python, "-c", "import qgru"],
                                                              capture_output=True).returncode != 0:
        sys.exit("%s: cannot import qgru (every pair needs qgru's package: it quantizes the ONNX GRU; "
                 "scripts/test_python.sh installs it into <build>/python-venv, --qgru-python names another)"
                 % args.qgru_python)
    os.makedirs(args.work, exist_ok=True)
    qgru_c = os.path.join(args.build, "test", "bench_stream")
    ort_c = build_ort_c(ort_py, args.build)[0]
    executors = {}
    states = []
    out(lines, "Like with like: each pair through the same kind of call (%d timed frames after %d warm-up frames; "
               "µs per frame; load average before each process)." % (args.frames, args.warmup))
    out(lines, "")
    for line in PAIR_HEADER:
        out(lines, line)
    for H in args.sizes:
        files = pair_files(args.work, H)

        def commands(frames, warmup):
            common = ["--H", str(H), "--frames", str(frames), "--warmup", str(warmup), "--work", args.work]
            return {
                "qgru-c": [qgru_c, str(H), str(frames), str(warmup), "fast", files["model"], files["frames"]],
                "qgru-py": [args.qgru_python, __file__, "--worker", "qgru-py"] + common,
                "ort-py": [ort_py, __file__, "--worker", "ort-py"] + common,
                "ort-c": [ort_c, files["gru"], files["frames"], str(H), str(frames), str(warmup)],
            }

        subprocess.run([ort_py, __file__, "--worker", "export", "--H", str(H), "--work", args.work], check=True)
        subprocess.run([args.qgru_python, __file__, "--worker", "quantize", "--H", str(H), "--work", args.work],
                       check=True)
        # Before timing, every runner (both pairs, whichever are timed) steps the same CHECK_FRAMES frames: the C
        # and Python runners of each engine must end in the same state.
        check_sums = {runner: [run_json(command)["y_sum"]] for runner, command in commands(CHECK_FRAMES, 0).items()}
        check_states(check_sums, H)
        states.append("H = %d: %s" % (H, ", ".join("%s %.9g" % (RUNNER_NAMES[r], check_sums[r][0])
                                                   for r in RUNNER_NAMES)))
        timed = commands(args.frames, args.warmup)
        sums = {}
        for rnd in range(1, args.rounds + 1):
            for pair in args.pairs:
                results = {}
                runners = PAIR_RUNNERS[pair] if rnd % 2 else PAIR_RUNNERS[pair][::-1]
                for runner in runners:
                    before = load()
                    results[runner] = (run_json(timed[runner]), before)
                    sums.setdefault(runner, []).append(results[runner][0]["y_sum"])
                    executors[runner] = results[runner][0]["executor"]
                (q, q_load), (o, o_load) = results[PAIR_RUNNERS[pair][0]], results[PAIR_RUNNERS[pair][1]]
                out(lines, pair_row(pair, H, rnd, q, o, q_load, o_load))
        check_states(sums, H)
    out(lines, "")
    for runner, name in RUNNER_NAMES.items():
        if runner in executors:
            out(lines, "- %s: %s" % (name, executors[runner]))
    out(lines, "- the state after %d frames (sum of the last output), equal within each engine: %s"
               % (CHECK_FRAMES, "; ".join(states)))


def self_test():
    """Argument parsing and table writing, checked against values written out by hand; no onnxruntime, no build."""
    import contextlib
    import io
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    a = parse_args([])
    expect(a.pairs == [] and a.sizes == [64, 256, 1024] and (a.frames, a.warmup, a.rounds) == (10000, 1000, 2),
           "defaults: %s" % a)
    expect(a.qgru_python == os.path.join(ROOT, "build", "python-venv", "bin", "python"), "default --qgru-python")
    a = parse_args(["--pairs", "c,python,c", "--sizes", "8,16", "--build", "/b", "--table", "/t.md"])
    expect(a.pairs == ["c", "python"] and a.sizes == [8, 16] and a.work == "/b/bench_stream_work" and
           a.table == "/t.md", "--pairs c,python,c --sizes 8,16 --build /b: %s" % a)
    for bad in (["--pairs", "java"], ["--sizes", "64,x"], ["--sizes", "0"], ["--rounds", "0"], ["--frames", "-1"],
                ["--warmup", "-1"]):
        with contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                parse_args(bad)
                failures.append("%s was accepted" % bad)
            except SystemExit as e:
                expect(e.code == 2 and "error" in err.getvalue(), "%s: exit %s, %r" % (bad, e.code, err.getvalue()))

    q = {"median_us": 2.0, "p10_us": 1.9, "p90_us": 2.5, "p99_us": 3.25, "max_us": 40.0}
    o = {"median_us": 9.0, "p10_us": 8.5, "p90_us": 10.0, "p99_us": 12.0, "max_us": 90.0}
    lines = (PAIR_HEADER + [pair_row("python", 64, 1, q, o, 3.5, 3.75), pair_row("c", 1024, 2, q, o, 1.0, 12.0)] +
             [""] + LEGACY_HEADER + [legacy_row(256, 2, q, o, 0.5, 10.25)])
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "table.md")
        write_table(path, lines)
        with open(path) as f:
            written = f.read()
    expected = ("| pair | H | round (first) | qgru median [p10–p90] / p99 µs (load) | onnxruntime median [p10–p90] / "
                "p99 µs (load) | onnxruntime / qgru median |\n"
                "|---|---:|---|---|---|---:|\n"
                "| python | 64 | 1 (qgru) | 2.00 [1.90–2.50] / 3.25 (3.5) | 9.00 [8.50–10.00] / 12.00 (3.8) | 4.5× |\n"
                "| c | 1024 | 2 (onnxruntime) | 2.00 [1.90–2.50] / 3.25 (1.0) | 9.00 [8.50–10.00] / 12.00 (12.0) | 4.5× |\n"
                "\n"
                "| H | round | qgru step median / p99 / max µs (load) | onnxruntime median / p99 / max µs (load) | "
                "median ratio | qgru p99 / median |\n"
                "|---:|---:|---|---|---:|---:|\n"
                "| 256 | 2 | 2.00 / 3.25 / 40 (0.5) | 9.00 / 12.00 / 90 (10.2) | 4.5× | 1.62 |\n")
    expect(written == expected, "table written:\n%s\nexpected:\n%s" % (written, expected))

    check_states({"qgru-c": [0.5, 0.5], "qgru-py": [0.5], "ort-c": [1.0], "ort-py": [1.0 + 1e-7]}, 64)  # agree
    for sums in ({"qgru-c": [0.5], "qgru-py": [0.5 + 1e-6]}, {"ort-c": [0.5, 0.25]}, {"ort-c": [1.0], "ort-py": [1.1]}):
        with contextlib.redirect_stderr(io.StringIO()):
            try:
                check_states(sums, 64)
                failures.append("check_states accepted %s" % sums)
            except SystemExit as e:
                expect("H = 64" in str(e.code), "check_states message: %s" % e.code)
    for f in failures:
        print("bench_stream self-test: FAIL: %s" % f, file=sys.stderr)
    print("bench_stream self-test: %s" % ("FAILED" if failures else "passed"))
    return 1 if failures else 0


def main():
    args = parse_args()
    if args.self_test:
        sys.exit(self_test())
    if args.ort_worker:
        return ort_worker(args.ort_worker, args.frames, args.warmup)
    if args.worker:
        return worker(args.worker, args.H, args.frames, args.warmup, args.work)
    bench_cpu.VENV = args.venv
    subprocess.run(["cmake", "--build", args.build, "--target", "bench_stream"], check=True, stdout=subprocess.DEVNULL)
    lines = []
    if args.pairs:
        run_pairs(args, lines)
        write_table(args.table, lines)
        return
    if not bench_cpu.ensure_venv(ORT_PACKAGES):
        sys.exit("could not install %s into %s" % (", ".join(ORT_PACKAGES), bench_cpu.VENV))
    py = os.path.join(bench_cpu.VENV, "bin", "python")
    binary = os.path.join(args.build, "test", "bench_stream")
    for line in LEGACY_HEADER:
        out(lines, line)
    for H in args.sizes:
        for r in range(args.rounds):
            l1 = load()
            q = json.loads(subprocess.run([binary, str(H), str(args.frames), str(args.warmup)], check=True,
                                          capture_output=True, text=True).stdout)
            l2 = load()
            o = json.loads(subprocess.run([py, __file__, "--ort-worker", str(H), "--frames", str(args.frames), "--warmup",
                                           str(args.warmup)], check=True, capture_output=True, text=True).stdout)
            out(lines, legacy_row(H, r + 1, q, o, l1, l2))
    out(lines, "")
    out(lines, "qgru: %s; %s" % (q["executor"], o["executor"]))
    write_table(args.table, lines)


if __name__ == "__main__":
    main()
