#!/usr/bin/env python3
"""CPU benchmark of qgru's executors beside PyTorch, onnxruntime and OpenVINO; writes docs/benchmarks/cpu.md.

  scripts/bench_cpu.py [--build build-fast] [--reps 5] [--threads 2] [--out docs/benchmarks/cpu.md] [--quick]
                       [--rounds 3] [--avx2-rounds 0] [--contended-rounds 0] [--baseline-build DIR]
                       [--no-int8-probe]

Runs, one process per (runner, shape) under /usr/bin/time -v (peak resident memory):
  qgru int8 reference, qgru fast int8 (1 and --threads threads; the best level the CPU has, and the avx2
  level for comparison), qgru fast int16-activations, qgru float reference: the bench_cpu binary
  (scripts/bench_cpu.cpp, Google Benchmark), median of --reps repetitions, each after 12 untimed runs (the
  thread team's start and the batch-1 schedule choice's warm-up);
  torch nn.GRU float32, torch quantize_dynamic int8: this script in --worker mode on Debian's python3-torch;
  onnxruntime and OpenVINO (CPU plugin, latency hint, fp32 and its bf16 hint, which runs bf16 where the CPU
  has AVX512-BF16 or AMX and fp32 elsewhere; the page says which precision the GRU ran in): the same ONNX file
  per shape (one GRU node, linear_before_reset = 1), --threads threads each; median of --reps timed runs
  after 2 warm-up runs.
Each run is the whole sequence of T steps (one layer, C = H, unidirectional, batch N). Times are the wall
time and the process CPU time (all threads) per run. Then --rounds alternating rounds per shape of a fast
int8 process, an onnxruntime process and an OpenVINO process (its bf16 hint): the ratio to the faster peer of
the same round (median over rounds) is what the targets are read from; --baseline-build adds a process of
another build's bench_cpu (e.g. main's) to each round, for a before/after in the same conditions; then
--avx2-rounds more with the fast path held to its avx2 level. --contended-rounds: the batch-1 shapes again
while os.cpu_count() - 1 spinning processes (started here, each ending itself after --spin-seconds) keep the
other CPUs busy: qgru with --threads threads and with one, and the peers, beside an idle round; each qgru
repetition there runs for --contended-min-time seconds on a new executor object (its schedule choice learns
anew: 0.05 s measures a fresh object, 0.5 s a long-lived one).
Whether OpenVINO's own int8 path applies to this GRU is probed once (NNCF post-training quantization, and
FakeQuantize on the GRUSequence's x, h, W and R): when the GRU then runs in an 8-bit precision it is timed as
a peer, else the page says what the probe found.
onnxruntime, onnx, openvino (and nncf for the probe) are installed from PyPI into a private venv
(/tmp/qgru-bench-venv), PyTorch from Debian's python3-torch when it is missing (apt-get, as root or with
sudo): none of them is a dependency of the build or the tests.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

SHAPES = [(64, 100, 1), (256, 100, 1), (256, 100, 64), (512, 50, 32), (1024, 50, 1)]
VENV = "/tmp/qgru-bench-venv"
VENV_PACKAGES = ["onnxruntime", "onnx", "openvino"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OV_HINTS = ("f32", "bf16")  # OpenVINO runners: the fp32 precision hint, and bf16 (fp32 where the CPU lacks it)


def onnx_gru_model(H, T, N, initial_h=False, seed=0):
    """One ONNX GRU node (opset 14, linear_before_reset = 1: the variant of PyTorch's GRU and of qgru), C = H,
    fp32 weights and biases uniform in ±1/sqrt(H) (PyTorch's initialization): X [T, N, H] -> Y [T, 1, N, H],
    Y_h [1, N, H]; with initial_h, an input initial_h [1, N, H] (else zeros). Needs onnx and numpy (the venv)."""
    import numpy as np
    from onnx import TensorProto, helper
    rng = np.random.default_rng(seed)
    bound = 1.0 / np.sqrt(H)
    W = rng.uniform(-bound, bound, (1, 3 * H, H)).astype(np.float32)
    R = rng.uniform(-bound, bound, (1, 3 * H, H)).astype(np.float32)
    B = rng.uniform(-bound, bound, (1, 6 * H)).astype(np.float32)
    inputs = ["X", "W", "R", "B"] + (["", "initial_h"] if initial_h else [])
    node = helper.make_node("GRU", inputs, ["Y", "Y_h"], hidden_size=H, linear_before_reset=1)
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, N, H])]
    if initial_h:
        graph_inputs.append(helper.make_tensor_value_info("initial_h", TensorProto.FLOAT, [1, N, H]))
    graph = helper.make_graph(
        [node], "gru", graph_inputs,
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [T, 1, N, H]),
         helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, N, H])],
        [helper.make_tensor("W", TensorProto.FLOAT, W.shape, W.flatten()),
         helper.make_tensor("R", TensorProto.FLOAT, R.shape, R.flatten()),
         helper.make_tensor("B", TensorProto.FLOAT, B.shape, B.flatten())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def peer_input(H, T, N):
    import numpy as np
    return np.random.default_rng(1).standard_normal((T, N, H), dtype=np.float32)


def time_runs(run, reps):
    """Median wall and process CPU ms of `reps` runs after 2 warm-up runs."""
    wall, cpu = [], []
    for _ in range(2):
        run()
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.process_time()
        run()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return {"wall_ms": 1e3 * statistics.median(wall), "cpu_ms": 1e3 * statistics.median(cpu)}


def ov_gru_precision(compiled):
    """The precision OpenVINO's CPU plugin runs the GRU node in (its runtime graph's RNNSeq node)."""
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if "layerType" in info and info["layerType"].astype(str) == "RNNSeq":
            return info["runtimePrecision"].astype(str)
    return "unknown (no RNNSeq node in the runtime graph)"


def ov_compile(core, model, threads, hint):
    return core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads,
                                             "INFERENCE_PRECISION_HINT": hint})


def ov_int8_models(core, onnx_path, x):
    """OpenVINO's two int8 routes for this GRU: NNCF post-training quantization (calibrated on x and two more
    inputs), and FakeQuantize (256 levels, min/max ranges; 255 symmetric levels for W and R) inserted on the
    GRUSequence's x, h, W and R inputs, which the CPU plugin's low-precision transformations read as an int8
    GRUSequence where they support one. Returns {route: (model or None, what happened)}."""
    import numpy as np
    out = {}
    model = core.read_model(onnx_path)
    try:
        import nncf
        data = [x] + [np.random.default_rng(s).standard_normal(x.shape, dtype=np.float32) for s in (2, 3)]
        q = nncf.quantize(model, nncf.Dataset(data), subset_size=len(data))
        fq = sum(1 for op in q.get_ordered_ops() if op.get_type_name() == "FakeQuantize")
        out["nncf"] = (q, "NNCF %s quantize: %d FakeQuantize nodes inserted" % (nncf.__version__, fq))
    except Exception as e:  # noqa: BLE001 - reported in the page
        out["nncf"] = (None, "NNCF failed: %s" % str(e)[:200])
    import openvino.opset13 as ops
    model = core.read_model(onnx_path)
    gru = [op for op in model.get_ordered_ops() if op.get_type_name() == "GRUSequence"]
    if not gru:
        out["fakequantize"] = (None, "no GRUSequence in the converted model")
        return out
    gru = gru[0]

    def fake_quantize(src, lo, hi, levels):
        c = [ops.constant(np.float32(v)) for v in (lo, hi, lo, hi)]
        return ops.fake_quantize(src, c[0], c[1], c[2], c[3], levels).output(0)
    gru.input(0).replace_source_output(fake_quantize(gru.input(0).get_source_output(), float(x.min()), float(x.max()), 256))
    gru.input(1).replace_source_output(fake_quantize(gru.input(1).get_source_output(), -1.0, 1.0, 256))
    for i in (3, 4):  # W, R
        src = gru.input(i).get_source_output()
        a = float(np.abs(src.get_node().get_data()).max())
        gru.input(i).replace_source_output(fake_quantize(src, -a, a, 255))
    model.validate_nodes_and_infer_types()
    out["fakequantize"] = (model, "FakeQuantize on the GRUSequence's x, h, W and R")
    return out


def worker(args):
    H, T, N = args.H, args.T, args.N
    if args.worker not in ("torch", "torch_qdyn"):
        sys.modules["torch"] = None  # the ONNX peers need no torch; nncf fails on Debian's older one if it sees it
    if args.worker == "export":  # the ONNX file every ONNX peer of this shape reads
        import onnx
        onnx.save(onnx_gru_model(H, T, N), args.onnx)
        return
    if args.worker in ("torch", "torch_qdyn"):
        import torch
        torch.set_num_threads(args.threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass
        torch.manual_seed(0)
        model = torch.nn.GRU(H, H).eval()
        x = torch.randn(T, N, H)
        if args.worker == "torch_qdyn":
            model = torch.quantization.quantize_dynamic(model, {torch.nn.GRU}, dtype=torch.qint8)
        with torch.no_grad():
            r = time_runs(lambda: model(x), args.reps)
    elif args.worker == "ort":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(args.onnx, so, providers=["CPUExecutionProvider"])
        x = peer_input(H, T, N)
        r = time_runs(lambda: sess.run(None, {"X": x}), args.reps)
        r["engine"] = "onnxruntime %s" % ort.__version__
    elif args.worker in ("ov", "ov_int8_probe"):
        import openvino as ov
        core = ov.Core()
        x = peer_input(H, T, N)
        if args.worker == "ov_int8_probe":
            found = {}
            for route, (model, what) in ov_int8_models(core, args.onnx, x).items():
                precision = ov_gru_precision(ov_compile(core, model, args.threads, "bf16")) if model is not None else None
                found[route] = {"what": what, "precision": precision}
            print(json.dumps(found))
            return
        model = core.read_model(args.onnx)
        if args.int8_route:
            model = ov_int8_models(core, args.onnx, x)[args.int8_route][0]
        compiled = ov_compile(core, model, args.threads, args.precision)
        request = compiled.create_infer_request()
        r = time_runs(lambda: request.infer({0: x}), args.reps)
        r["precision"] = ov_gru_precision(compiled)
        r["engine"] = "OpenVINO %s" % ov.get_version().split("-")[0]
    else:
        raise SystemExit("unknown worker " + args.worker)
    print(json.dumps(r))


def timed(cmd):
    """Run cmd under /usr/bin/time -v; return (stdout, peak RSS in MiB)."""
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("failed: %s\n%s" % (" ".join(cmd), p.stderr[-2000:]))
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    return p.stdout, (int(m.group(1)) / 1024.0 if m else float("nan"))


def qgru_run(binary, path, H, T, N, threads, reps, min_time=0.05):
    """Each repetition is a new executor object (its 12 untimed runs, then runs for at least min_time s)."""
    name = "BM_gru/path:%d/H:%d/T:%d/N:%d/threads:%d/" % (path, H, T, N, threads)
    out, rss = timed([binary, "--benchmark_filter=^" + name, "--benchmark_repetitions=%d" % reps,
                      "--benchmark_min_time=%g" % min_time, "--benchmark_format=json"])
    runs = [b for b in json.loads(out)["benchmarks"] if b.get("run_type") == "iteration"]
    if not runs or "error_message" in runs[0]:
        raise RuntimeError("no result for " + name + ": " + str(runs[:1]))
    scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[runs[0]["time_unit"]]
    return {"wall_ms": statistics.median(b["real_time"] * scale for b in runs),
            "cpu_ms": statistics.median(b["cpu_time"] * scale for b in runs), "rss_mib": rss}


_onnx_files = {}


def onnx_file(H, T, N):
    """The ONNX GRU of a shape, written once (by the venv's interpreter, which has onnx) and read by every
    ONNX peer: onnxruntime and OpenVINO run the same graph and weights."""
    if (H, T, N) not in _onnx_files:
        path = os.path.join(tempfile.mkdtemp(prefix="qgru-bench-onnx-"), "gru_%d_%d_%d.onnx" % (H, T, N))
        subprocess.run([os.path.join(VENV, "bin", "python"), os.path.abspath(__file__), "--worker", "export", "--H", str(H),
                        "--T", str(T), "--N", str(N), "--onnx", path], check=True)
        _onnx_files[(H, T, N)] = path
    return _onnx_files[(H, T, N)]


def peer_run(kind, H, T, N, threads, reps, precision=None, int8_route=None):
    # the torch peers run on the interpreter ensure_torch() checked (Debian's python3-torch lives there, not in
    # a pyenv or other python3 first on PATH); the ONNX peers on the venv's, from the shape's ONNX file
    onnx_peer = kind in ("ort", "ov", "ov_int8_probe")
    py = os.path.join(VENV, "bin", "python") if onnx_peer else "/usr/bin/python3"
    cmd = [py, os.path.abspath(__file__), "--worker", kind, "--H", str(H), "--T", str(T), "--N", str(N),
           "--threads", str(threads), "--reps", str(reps)]
    if onnx_peer:
        cmd += ["--onnx", onnx_file(H, T, N)]
    if precision:
        cmd += ["--precision", precision]
    if int8_route:
        cmd += ["--int8-route", int8_route]
    out, rss = timed(cmd)
    r = json.loads(out.strip().splitlines()[-1])
    r["rss_mib"] = rss
    return r


def madd_peak(binary, name="BM_madd_peak"):
    out, _ = timed([binary, "--benchmark_filter=" + name, "--benchmark_repetitions=5",
                    "--benchmark_format=json"])
    res = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") != "iteration" or "error_message" in b:
            continue
        th = int(re.search(r"threads:(\d+)", b["name"]).group(1))
        res.setdefault(th, []).append(b)
    peak = {}
    for th, runs in res.items():
        # items_per_second is per wall second; the CPU-time rate is what one unloaded core would do
        wall = statistics.median(b["items_per_second"] for b in runs)
        per_cpu = statistics.median(b["items_per_second"] * b["real_time"] / b["cpu_time"] for b in runs)
        peak[th] = (wall, per_cpu)
    return peak


def ensure_torch():
    """PyTorch for the torch peers: Debian's python3-torch, installed when missing."""
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0:
        return True
    cmd = ["apt-get", "install", "-y", "-q", "python3-torch"]
    if os.geteuid() != 0:
        cmd = ["sudo"] + cmd
    print("PyTorch missing: %s" % " ".join(cmd), flush=True)
    try:
        subprocess.run(cmd, check=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    except (OSError, subprocess.CalledProcessError) as e:
        print("could not install python3-torch (%s): the torch rows will say so" % e, flush=True)
        return False
    return True


def ensure_venv(packages=None):
    """The private venv with `packages` (default: the ONNX peers' engines) importable; True when they are."""
    packages = packages or VENV_PACKAGES
    py = os.path.join(VENV, "bin", "python")
    # as the venv's workers import them: without the interpreter's torch (nncf fails on Debian's older one)
    check = "import sys; sys.modules['torch'] = None; import " + ", ".join(p.replace("-", "_") for p in packages)
    if os.path.exists(py) and subprocess.run([py, "-c", check], capture_output=True).returncode == 0:
        return True
    if not os.path.exists(py):
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", VENV], check=True)
    p = subprocess.run([os.path.join(VENV, "bin", "pip"), "install", "-q"] + packages)
    return p.returncode == 0 and subprocess.run([py, "-c", check], capture_output=True).returncode == 0


def runnable_others(seconds=2.0):
    """Processes other than this one ready to run, averaged over `seconds` (the running count of /proc/loadavg,
    sampled every 50 ms): an instantaneous view of a shared machine, where the 1-minute load average lags by a
    minute and includes this script's own benchmark processes."""
    samples = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with open("/proc/loadavg") as f:
                samples.append(int(f.read().split()[3].split("/")[0]) - 1)  # minus the reader itself
        except (OSError, ValueError, IndexError):
            return float("nan")
        time.sleep(0.05)
    return sum(samples) / max(1, len(samples))


def wait_quiet(limit_s, threshold=0.3):
    """Wait (at most limit_s) until runnable_others() < threshold; returns what it was when the wait ended."""
    end = time.monotonic() + limit_s
    busy = runnable_others()
    while busy >= threshold and time.monotonic() < end:
        time.sleep(5.0)
        busy = runnable_others()
    return busy


SPIN = "import time\nend = time.monotonic() + %f\nwhile time.monotonic() < end:\n    pass\n"


class Spinners:
    """os.cpu_count() - 1 processes spinning on the CPU (at least one), each ending itself after `seconds`
    and stopped (by its own pid) when the block ends."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        count = max(1, (os.cpu_count() or 2) - 1)
        self.procs = [subprocess.Popen([sys.executable, "-c", SPIN % self.seconds]) for _ in range(count)]
        time.sleep(0.2)  # let the scheduler place them
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--H", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--T", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--N", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--onnx", help=argparse.SUPPRESS)
    ap.add_argument("--precision", default="f32", help=argparse.SUPPRESS)
    ap.add_argument("--int8-route", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build-fast"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks", "cpu.md"))
    ap.add_argument("--json", default="/tmp/qgru-bench-cpu.json")
    ap.add_argument("--quick", action="store_true", help="first two shapes only")
    ap.add_argument("--shapes", help="H,T,N[;H,T,N...] instead of the default five shapes")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating rounds of fast int8, onnxruntime and OpenVINO per shape for the side-by-side ratio (0: none)")
    ap.add_argument("--avx2-rounds", type=int, default=0,
                    help="as --rounds, with the fast path held to its avx2 level (bench_cpu path 5), after them (0: none)")
    ap.add_argument("--contended-rounds", type=int, default=0,
                    help="rounds of the batch-1 shapes idle and with the other CPUs kept busy by spinning processes (0: none)")
    ap.add_argument("--spin-seconds", type=float, default=120.0, help="the longest a spinning process lives")
    ap.add_argument("--contended-min-time", type=float, default=0.05,
                    help="seconds of runs per qgru repetition in the contended rounds: each repetition is a new "
                         "executor whose batch-1 schedule choice learns anew (0.05: a fresh object; 0.5 and more: "
                         "a long-lived one, as in a service)")
    ap.add_argument("--wait-quiet", type=float, default=0.0,
                    help="before each side-by-side round wait up to this many seconds until no other process is ready "
                         "to run (on a shared machine); the page records what was running")
    ap.add_argument("--baseline-build", help="another build folder whose bench_cpu joins every side-by-side round")
    ap.add_argument("--no-int8-probe", action="store_true", help="skip probing OpenVINO's int8 route (installs nncf)")
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    binary = os.path.join(args.build, "test", "bench_cpu")
    baseline = os.path.join(args.baseline_build, "test", "bench_cpu") if args.baseline_build else None
    ensure_torch()
    have_onnx_peers = ensure_venv()
    shapes = SHAPES[:2] if args.quick else SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes.split(";")]
    th = args.threads
    runners = [
        ("qgru int8 reference (1 thread)", lambda H, T, N: qgru_run(binary, 0, H, T, N, 1, max(3, args.reps // 2))),
        ("qgru fast int8 (1 thread)", lambda H, T, N: qgru_run(binary, 1, H, T, N, 1, args.reps)),
        ("qgru fast int8 avx2 level (1 thread)", lambda H, T, N: qgru_run(binary, 5, H, T, N, 1, args.reps)),
        ("qgru fast int8 (%d threads)" % th, lambda H, T, N: qgru_run(binary, 1, H, T, N, th, args.reps)),
        ("qgru fast int16-act (%d threads)" % th, lambda H, T, N: qgru_run(binary, 2, H, T, N, th, args.reps)),
        ("qgru float reference (1 thread)", lambda H, T, N: qgru_run(binary, 3, H, T, N, 1, max(3, args.reps // 2))),
        ("torch nn.GRU fp32 (%d threads)" % th, lambda H, T, N: peer_run("torch", H, T, N, th, args.reps)),
        ("torch quantize_dynamic int8 (%d threads)" % th, lambda H, T, N: peer_run("torch_qdyn", H, T, N, th, args.reps)),
    ]
    if baseline:
        runners.insert(2, ("qgru fast int8 baseline build (1 thread)", lambda H, T, N: qgru_run(baseline, 1, H, T, N, 1, args.reps)))
    ort_name = "onnxruntime GRU fp32 (%d threads)" % th
    ov_names = {hint: "OpenVINO GRU, %s hint (%d threads)" % (hint, th) for hint in OV_HINTS}
    probe = None
    if have_onnx_peers:
        runners.append((ort_name, lambda H, T, N: peer_run("ort", H, T, N, th, args.reps)))
        for hint in OV_HINTS:
            runners.append((ov_names[hint], lambda H, T, N, hint=hint: peer_run("ov", H, T, N, th, args.reps, precision=hint)))
        if not args.no_int8_probe:
            probe = int8_probe(shapes, th)
            for route, found in (probe or {}).items():
                if route != "shape" and is_int8(found.get("precision")):
                    runners.append(("OpenVINO GRU int8 via %s (%d threads)" % (route, th),
                                    lambda H, T, N, route=route: peer_run("ov", H, T, N, th, args.reps, precision="bf16", int8_route=route)))
    results = {}
    load_before = os.getloadavg()
    for (H, T, N) in shapes:
        for name, fn in runners:
            try:
                r = fn(H, T, N)
            except Exception as e:  # noqa: BLE001 - a runner that fails is reported, not fatal
                r = {"error": str(e)[:300]}
            results[(H, T, N, name)] = r
            print("%-48s H=%-5d T=%-4d N=%-3d %s" % (name, H, T, N, json.dumps(r)), flush=True)

    # Side by side: the fast int8 path, the baseline build's, onnxruntime and OpenVINO (its bf16 hint) in
    # alternating processes, so that a slow phase of the machine hits all of them; per round the ratio to the
    # faster peer, then the median over rounds.
    spinning = [False]  # inside a Spinners block: no waiting for a quiet machine

    def side_by_side(path, label, count, shape_list, threads_list=(th,), min_time=0.05):
        rounds = {}
        if not have_onnx_peers:
            return rounds
        for (H, T, N) in shape_list:
            for _ in range(count):
                busy = wait_quiet(args.wait_quiet) if args.wait_quiet > 0 and not spinning[0] else runnable_others(0.5)
                row = {"load": os.getloadavg()[0], "busy": busy}
                try:
                    for t in threads_list:
                        row["qgru%d" % t] = qgru_run(binary, path, H, T, N, t, args.reps, min_time)["wall_ms"]
                    if baseline:
                        row["baseline"] = qgru_run(baseline, path, H, T, N, th, args.reps)["wall_ms"]
                    row["ort"] = peer_run("ort", H, T, N, th, args.reps)["wall_ms"]
                    row["ov"] = peer_run("ov", H, T, N, th, args.reps, precision="bf16")["wall_ms"]
                except Exception as e:  # noqa: BLE001 - reported in the page, not fatal
                    print("side-by-side round failed: %s" % e, flush=True)
                    continue
                rounds.setdefault((H, T, N), []).append(row)
                q = row["qgru%d" % th]
                print("round%s H=%-5d T=%-4d N=%-3d %s: %.2fx the faster peer" % (
                    label, H, T, N, json.dumps({k: round(v, 4) for k, v in row.items()}), min(row["ort"], row["ov"]) / q), flush=True)
        return rounds
    rounds = side_by_side(1, "", args.rounds, shapes)
    rounds_avx2 = side_by_side(5, " (avx2 level)", args.avx2_rounds, shapes)
    contended = {}
    batch1 = [s for s in shapes if s[2] == 1]
    for _ in range(args.contended_rounds):
        for shape in batch1:
            idle = side_by_side(1, " (idle)", 1, [shape], (th, 1), args.contended_min_time)
            with Spinners(args.spin_seconds):
                spinning[0] = True
                busy = side_by_side(1, " (other CPUs busy)", 1, [shape], (th, 1), args.contended_min_time)
                spinning[0] = False
            if idle.get(shape) and busy.get(shape):
                contended.setdefault(shape, []).append((idle[shape][0], busy[shape][0]))
    peak = madd_peak(binary)
    try:  # the fp32 FMA rate an fp32 peer's GEMM is bound by, and whether FMAs issue beside vpmaddwd
        fma = (madd_peak(binary, "BM_fma_peak"), madd_peak(binary, "BM_madd_fma_mix"))
    except Exception:  # noqa: BLE001 - reported as missing in the page
        fma = ({}, {})
    try:
        vnni = madd_peak(binary, "BM_vnni_peak")
    except Exception:  # noqa: BLE001 - no AVX-512 VNNI: the madd peak is the limit
        vnni = {}
    load_after = os.getloadavg()
    with open(args.json, "w") as f:
        json.dump({"results": {"%d/%d/%d/%s" % k: v for k, v in results.items()},
                   "rounds": {"%d/%d/%d" % k: v for k, v in rounds.items()},
                   "contended": {"%d/%d/%d" % k: v for k, v in contended.items()}, "probe": probe}, f, indent=1)
    write_md(args, shapes, runners, results, peak, vnni, load_before, load_after, rounds, rounds_avx2, fma, contended,
             probe, ov_names, ort_name)


def is_int8(precision):
    return bool(precision) and precision.lower() in ("u8", "i8", "int8", "uint8")


def int8_probe(shapes, threads):
    """Whether OpenVINO runs this GRU in 8 bits by either int8 route, on the first batched shape (or the first)."""
    H, T, N = next((s for s in shapes if s[2] > 1), shapes[0])
    if not ensure_venv(VENV_PACKAGES + ["nncf"]):
        return {"shape": (H, T, N), "nncf": {"what": "could not install nncf into %s" % VENV, "precision": None}}
    try:
        found = peer_run("ov_int8_probe", H, T, N, threads, 1)
    except Exception as e:  # noqa: BLE001 - reported in the page
        return {"shape": (H, T, N), "probe": {"what": "failed: %s" % str(e)[:200], "precision": None}}
    found.pop("rss_mib", None)
    found["shape"] = (H, T, N)
    print("OpenVINO int8 probe:", json.dumps(found), flush=True)
    return found


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = re.search(r"Model name:\s*(.*)", out).group(1).strip()
        cpus = re.search(r"^CPU\(s\):\s*(\d+)", out, re.M).group(1)
        flags = re.search(r"Flags:\s*(.*)", out).group(1).split()
        isa = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "avx_vnni") if f in flags]
        return "%s, %s CPUs, %s" % (model, cpus, " ".join(isa))
    except Exception:  # noqa: BLE001
        return platform.processor()


def write_md(args, shapes, runners, results, peak, vnni, load_before, load_after, rounds, rounds_avx2, fma, contended,
             probe, ov_names, ort_name):
    fast_name = next(name for name, _ in runners if name.startswith("qgru fast int8 (%d threads" % args.threads))
    one_thread_name = "qgru fast int8 (1 thread)"
    lines = []
    command = shlex.join(["scripts/bench_cpu.py"] + sys.argv[1:])  # quoted as a shell needs it (--shapes "a;b")
    taken = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")
    lines.append("# CPU benchmarks\n")
    # The docs test's mark of a measurement (docs/README.md): closed at the end of the file, after the notes.
    lines.append("<!-- measured\ndate: %s UTC\nmachine: %s, Linux %s\ncommand: %s\n-->" % (
        taken, cpu_model(), platform.release(), command))
    lines.append("Generated by `%s` on %s UTC.\n" % (command, taken))
    lines.append("- Machine: %s (`lscpu`), Linux %s, %s." % (cpu_model(), platform.release(), "python " + platform.python_version()))
    if load_before[0] > 1.0:  # the load after includes the benchmark itself
        lines.append("- **The machine was shared and loaded while measuring** (load average %.1f before, %.1f after, "
                     "on %d CPUs): wall times include waiting for a CPU and are noisy; the CPU time per run (all threads "
                     "of the process, `getrusage`/`process_time`) is the steadier figure of the work done."
                     % (load_before[0], load_after[0], os.cpu_count()))
    else:
        lines.append("- The machine was otherwise idle (load average %.1f before, %.1f after, on %d CPUs)."
                     % (load_before[0], load_after[0], os.cpu_count()))
    lines.append("- Model: one GRU layer, C = H, unidirectional, batch N, T steps per run; qgru models are quantized "
                 "from ranges observed on the same input (int8 preset unless named). Peers use their own random "
                 "weights of the same shape; onnxruntime and OpenVINO read the same ONNX file (one GRU node, "
                 "linear_before_reset = 1). Median of %d runs (the reference paths: of max(3, reps/2)); "
                 "before its timed runs each qgru fast path makes 12 untimed ones (the thread team's start, the batch-1 schedule "
                 "choice's warm-up), each peer 2." % args.reps)
    lines.append("- OpenVINO: CPU plugin, `PERFORMANCE_HINT` LATENCY, `INFERENCE_NUM_THREADS` %d, "
                 "`INFERENCE_PRECISION_HINT` f32 or bf16; [ran ...] is the precision its runtime graph reports for the "
                 "GRU node (bf16 needs AVX512-BF16 or AMX, else it runs f32)." % args.threads)
    lines.append("- Peak memory is the process's maximum resident set (`/usr/bin/time -v`): the Python peers include "
                 "the interpreter (and libtorch for the torch rows), the qgru figures include building the float "
                 "model, calibrating and quantizing it in-process.\n")
    lines.append("| shape (H, T, N) | runner | wall ms/run | CPU ms/run | µs/step (wall) | steps/s (wall) | "
                 "GMAC/s (CPU time) | peak RSS MiB | %s speed-up (wall) |" % fast_name.replace("qgru ", ""))
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (H, T, N) in shapes:
        macs = 2.0 * 3 * H * H * T * N
        fast = results.get((H, T, N, fast_name), {})
        for name, _ in runners:
            r = results[(H, T, N, name)]
            if "error" in r:
                lines.append("| %d, %d, %d | %s | error: %s | | | | | | |" % (H, T, N, name, r["error"][:80].replace("|", "/").replace("\n", " ")))
                continue
            shown = name + (" [ran %s]" % r["precision"] if "precision" in r else "")
            ratio = (r["wall_ms"] / fast["wall_ms"]) if "wall_ms" in fast else float("nan")
            lines.append("| %d, %d, %d | %s | %.2f | %.2f | %.1f | %.0f | %.2f | %.0f | %.2fx |" % (
                H, T, N, shown, r["wall_ms"], r["cpu_ms"], 1e3 * r["wall_ms"] / T, T / (r["wall_ms"] / 1e3),
                macs / (r["cpu_ms"] / 1e3) / 1e9 if r["cpu_ms"] > 0 else float("nan"), r["rss_mib"], ratio))
    lines.append("")
    lines.append("The last column is each runner's wall time divided by the fast int8 path's with %d threads "
                 "(> 1: the fast path is that many times faster).\n" % args.threads)
    if probe:
        lines.append("OpenVINO's int8 route, probed on shape %s: %s.\n" % (
            ", ".join(str(v) for v in probe.get("shape", ())),
            "; ".join("%s: %s, the GRU then ran in %s%s" % (
                route, f.get("what"), f.get("precision"), "" if is_int8(f.get("precision")) else " (not int8: no int8 peer)")
                for route, f in probe.items() if route != "shape")))

    def fmt(v):
        return "%.3f" % v if v < 100 else "%.1f" % v

    def rounds_table(rs_by_shape, title, what, count):
        if not rs_by_shape:
            return
        th = args.threads
        lines.append("## Side by side: %s against the peers in alternating processes\n" % title)
        lines.append("%d rounds per shape, each a %s process (%d threads)%s, an onnxruntime process and an OpenVINO "
                     "process (bf16 hint; %d threads each), each the median of %d runs; a slow phase of the machine hits "
                     "all of a round. The ratio is the faster peer's time over qgru's, per round; load is the 1-minute "
                     "load average before the round (it lags and counts this script's own processes), busy the number "
                     "of other processes ready to run just before it (mean over 2 s of /proc/loadavg's running count%s).\n"
                     % (count, what, th, ", the baseline build's" if args.baseline_build else "", th, args.reps,
                        "; each round waited up to %.0f s for none" % args.wait_quiet if args.wait_quiet > 0 else ""))
        base = " baseline ms (rounds) |" if args.baseline_build else ""
        lines.append("| shape (H, T, N) | qgru %s ms (rounds) |%s onnxruntime ms (rounds) | OpenVINO ms (rounds) | load | busy | "
                     "vs faster peer per round | median vs faster peer | median vs onnxruntime | median vs OpenVINO |" % (what, base))
        lines.append("|---|---|%s---|---|---|---|---|---:|---:|---:|" % ("---|" if args.baseline_build else ""))
        for (H, T, N) in shapes:
            rs = rs_by_shape.get((H, T, N), [])
            if not rs:
                continue
            q = [r["qgru%d" % th] for r in rs]
            best = [min(r["ort"], r["ov"]) / r["qgru%d" % th] for r in rs]
            cells = [" ".join(fmt(v) for v in q)]
            if args.baseline_build:
                cells.append(" ".join(fmt(r["baseline"]) for r in rs))
            cells += [" ".join(fmt(r["ort"]) for r in rs), " ".join(fmt(r["ov"]) for r in rs),
                      " ".join("%.1f" % r["load"] for r in rs), " ".join("%.1f" % r.get("busy", float("nan")) for r in rs),
                      " ".join("%.2fx" % b for b in best)]
            lines.append("| %d, %d, %d | %s | **%.2fx** | %.2fx | %.2fx |" % (
                H, T, N, " | ".join(cells), statistics.median(best),
                statistics.median(r["ort"] / r["qgru%d" % th] for r in rs),
                statistics.median(r["ov"] / r["qgru%d" % th] for r in rs)))
        lines.append("")
    rounds_table(rounds, "fast int8", "fast int8", args.rounds)
    if rounds_avx2:
        rounds_table(rounds_avx2, "fast int8 held to its avx2 level", "fast int8 avx2 level", args.avx2_rounds)
        lines.append("The avx2 level is what a CPU without AVX-512 VNNI runs. On a CPU that has AVX-512, the peers "
                     "still use their AVX-512 kernels while qgru is held to AVX2 here: a harder comparison than the "
                     "same code on an AVX2-only CPU.\n")
    if contended:
        th = args.threads
        lines.append("## Batch 1 with the other CPUs busy\n")
        lines.append("Per round and shape: qgru fast int8 with %d threads and with 1, onnxruntime and OpenVINO (bf16 hint, "
                     "%d threads), first on the otherwise idle machine, then while %d spinning process(es) started by the "
                     "script keep the other CPUs busy. ms per run (median of %d); each qgru repetition a new executor "
                     "object that runs for %g s after its 12 untimed runs (its batch-1 schedule choice learns anew: %s); "
                     "load average and other runnable processes (busy, the spinners included) before each part.\n"
                     % (th, th, max(1, (os.cpu_count() or 2) - 1), args.reps, args.contended_min_time,
                        "a long-lived object" if args.contended_min_time >= 0.5 else "a fresh object"))
        lines.append("| shape (H, T, N) | round | idle: qgru %d thr / 1 thr / onnxruntime / OpenVINO (load, busy) | busy: qgru %d "
                     "thr / 1 thr / onnxruntime / OpenVINO (load, busy) | busy: qgru %d thr / qgru 1 thr | busy: faster peer / "
                     "qgru %d thr |" % (th, th, th, th))
        lines.append("|---|---:|---|---|---:|---:|")
        for shape in shapes:
            for i, (idle, busy) in enumerate(contended.get(shape, [])):
                def part(r):
                    return "%s / %s / %s / %s (%.1f, %.1f)" % (fmt(r["qgru%d" % th]), fmt(r["qgru1"]), fmt(r["ort"]), fmt(r["ov"]),
                                                              r["load"], r.get("busy", float("nan")))
                lines.append("| %d, %d, %d | %d | %s | %s | %.2f | %.2fx |" % (
                    shape[0], shape[1], shape[2], i + 1, part(idle), part(busy), busy["qgru%d" % th] / busy["qgru1"],
                    min(busy["ort"], busy["ov"]) / busy["qgru%d" % th]))
        lines.append("")
    lines.append("## The machine's int16 multiply-add rate (AVX2 `_mm256_madd_epi16`)\n")
    lines.append("`bench_cpu --benchmark_filter=BM_madd_peak`: 10 independent register-only chains of "
                 "`vpmaddwd` + `vpaddd` (written in assembly), 16 MACs per instruction, the multiply of the avx2 "
                 "level's GEMMs (int8 weights sign-extended to int16 for it; its 8-bit GEMV pairs `vpmaddubsw` "
                 "with `vpmaddwd` for 32 MACs per two multiplies, the same rate).\n")
    lines.append("| threads | MAC/s per wall second | MAC/s per CPU second |")
    lines.append("|---:|---:|---:|")
    for th in sorted(peak):
        lines.append("| %d | %.1f G | %.1f G |" % (th, peak[th][0] / 1e9, peak[th][1] / 1e9))
    one_core = peak.get(1, (float("nan"), float("nan")))[1]
    fma_peak, mix = fma
    if 1 in fma_peak and 1 in mix:
        madd_instr, fma_instr = one_core / 16, fma_peak[1][1] / 8
        lines.append("")
        lines.append("Beside it, one core's fp32 FMA rate (`BM_fma_peak`: 10 chains of `vfmadd231ps`, 8 MACs per "
                     "instruction), the bound of an fp32 peer's GEMM, and `BM_madd_fma_mix` (4 `vpmaddwd` + `vpaddd` "
                     "chains interleaved with 4 `vfmadd231ps` chains; multiply instructions per CPU second):\n")
        lines.append("| one core | instructions/s | MAC/s |")
        lines.append("|---|---:|---:|")
        lines.append("| `vpmaddwd` (BM_madd_peak) | %.2f G | %.1f G |" % (madd_instr / 1e9, one_core / 1e9))
        lines.append("| `vfmadd231ps` (BM_fma_peak) | %.2f G | %.1f G |" % (fma_instr / 1e9, fma_peak[1][1] / 1e9))
        lines.append("| both interleaved (BM_madd_fma_mix) | %.2f G | |" % (mix[1][1] / 1e9))
        lines.append("")
        lines.append("Exact int8 products on AVX2 reach %.2fx the fp32 FMA rate of the same core in MACs; the two kinds "
                     "%s." % (one_core / fma_peak[1][1],
                              "share their execution units (interleaved, they issue no faster than the faster kind alone)"
                              if mix[1][1] < 1.2 * max(madd_instr, fma_instr) else
                              "issue side by side (interleaved, faster than either kind alone)"))
    peak_name = "madd"
    if vnni:
        lines.append("")
        lines.append("## The machine's int8 multiply-add rate (AVX-512 VNNI `vpdpbusd`)\n")
        lines.append("`bench_cpu --benchmark_filter=BM_vnni_peak`: 12 independent register-only chains of `vpdpbusd` "
                     "(u8 x s8, 64 MACs per instruction), the instruction of the avx512-vnni level's GEMMs.\n")
        lines.append("| threads | MAC/s per wall second | MAC/s per CPU second |")
        lines.append("|---:|---:|---:|")
        for th in sorted(vnni):
            lines.append("| %d | %.1f G | %.1f G |" % (th, vnni[th][0] / 1e9, vnni[th][1] / 1e9))
        one_core = vnni.get(1, (float("nan"), float("nan")))[1]
        peak_name = "vpdpbusd"
    lines.append("")
    lines.append("How close each shape comes (fast int8, 1 thread, MACs per CPU second / one core's %s peak %.1f G):\n" % (peak_name, one_core / 1e9))
    base_name = "qgru fast int8 baseline build (1 thread)"
    has_base = any(name == base_name for name, _ in runners)
    lines.append("| shape (H, T, N) | fast int8 1 thread GMAC/s (CPU) | fraction of one core's %s peak |%s" % (
        peak_name, " baseline build GMAC/s | baseline fraction |" if has_base else ""))
    lines.append("|---|---:|---:|%s" % ("---:|---:|" if has_base else ""))
    for (H, T, N) in shapes:
        macs = 2.0 * 3 * H * H * T * N
        r = results.get((H, T, N, one_thread_name), {})
        if "cpu_ms" not in r:
            continue
        rate = macs / (r["cpu_ms"] / 1e3)
        row = "| %d, %d, %d | %.2f | %.0f%% |" % (H, T, N, rate / 1e9, 100 * rate / one_core)
        b = results.get((H, T, N, base_name), {})
        if has_base and "cpu_ms" in b:
            brate = macs / (b["cpu_ms"] / 1e3)
            row += " %.2f | %.0f%% |" % (brate / 1e9, 100 * brate / one_core)
        lines.append(row)
    lines.append("")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    extra = ""
    if os.path.exists(args.out):
        old = open(args.out).read()
        marker = "<!-- notes: kept across runs -->"
        if marker in old:
            extra = old[old.index(marker):]
    extra = extra or "<!-- notes: kept across runs -->\n"
    if "<!-- /measured -->" not in extra:
        extra = extra.rstrip("\n") + "\n<!-- /measured -->\n"
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n" + extra)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
