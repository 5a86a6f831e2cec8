#!/usr/bin/env python3
"""CPU benchmark of qgru's executors beside PyTorch and onnxruntime; writes docs/benchmarks/cpu.md.

  scripts/bench_cpu.py [--build build-fast] [--reps 5] [--threads 2] [--out docs/benchmarks/cpu.md] [--quick]
                       [--rounds 3] [--avx2-rounds 0]

Runs, one process per (runner, shape) under /usr/bin/time -v (peak resident memory):
  qgru int8 reference, qgru fast int8 (1 and --threads threads; the best level the CPU has, and the avx2
  level for comparison), qgru fast int16-activations, qgru float reference: the bench_cpu binary (scripts/bench_cpu.cpp, Google Benchmark), median of --reps repetitions, each after 12 untimed runs
  (the thread team's start and the batch-1 schedule choice's warm-up);
  torch nn.GRU float32, torch quantize_dynamic int8, onnxruntime GRU (the torch model exported to ONNX):
  this script in --worker mode, median of --reps timed runs after 2 warm-up runs.
Each run is the whole sequence of T steps (one layer, C = H, unidirectional, batch N). Times are the wall
time and the process CPU time (all threads) per run. Then --rounds alternating pairs of processes, fast int8
and onnxruntime, per shape: the side-by-side ratio (median over rounds) that the targets are read from; then
--avx2-rounds more with the fast path held to its avx2 level (on an AVX2-only CPU the two are the same).
onnxruntime is installed into a private venv
(/tmp/qgru-bench-venv), PyTorch from Debian's python3-torch when it is missing (apt-get, as root or with
sudo): neither is a dependency of the build or the tests.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

SHAPES = [(64, 100, 1), (256, 100, 1), (256, 100, 64), (512, 50, 32), (1024, 50, 1)]
VENV = "/tmp/qgru-bench-venv"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(args):
    import torch
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    H, T, N = args.H, args.T, args.N
    torch.manual_seed(0)
    model = torch.nn.GRU(H, H).eval()
    x = torch.randn(T, N, H)
    if args.worker == "torch":
        run = lambda: model(x)  # noqa: E731
    elif args.worker == "torch_qdyn":
        q = torch.quantization.quantize_dynamic(model, {torch.nn.GRU}, dtype=torch.qint8)
        run = lambda: q(x)  # noqa: E731
    elif args.worker == "ort":
        import onnxruntime as ort
        path = os.path.join(tempfile.mkdtemp(prefix="qgru-ort-"), "gru.onnx")
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y", "h_n"], opset_version=14)
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        xn = x.numpy()
        run = lambda: sess.run(None, {"x": xn})  # noqa: E731
    else:
        raise SystemExit("unknown worker " + args.worker)
    wall, cpu = [], []
    with torch.no_grad():
        for _ in range(2):
            run()
        for _ in range(args.reps):
            w0, c0 = time.perf_counter(), time.process_time()
            run()
            wall.append(time.perf_counter() - w0)
            cpu.append(time.process_time() - c0)
    print(json.dumps({"wall_ms": 1e3 * statistics.median(wall), "cpu_ms": 1e3 * statistics.median(cpu)}))


def timed(cmd):
    """Run cmd under /usr/bin/time -v; return (stdout, peak RSS in MiB)."""
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("failed: %s\n%s" % (" ".join(cmd), p.stderr[-2000:]))
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    return p.stdout, (int(m.group(1)) / 1024.0 if m else float("nan"))


def qgru_run(binary, path, H, T, N, threads, reps):
    name = "BM_gru/path:%d/H:%d/T:%d/N:%d/threads:%d/" % (path, H, T, N, threads)
    out, rss = timed([binary, "--benchmark_filter=^" + name, "--benchmark_repetitions=%d" % reps,
                      "--benchmark_min_time=0.05", "--benchmark_format=json"])
    runs = [b for b in json.loads(out)["benchmarks"] if b.get("run_type") == "iteration"]
    if not runs or "error_message" in runs[0]:
        raise RuntimeError("no result for " + name + ": " + str(runs[:1]))
    scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[runs[0]["time_unit"]]
    return {"wall_ms": statistics.median(b["real_time"] * scale for b in runs),
            "cpu_ms": statistics.median(b["cpu_time"] * scale for b in runs), "rss_mib": rss}


def peer_run(kind, H, T, N, threads, reps):
    # the torch peers run on the interpreter ensure_torch() checked (Debian's python3-torch lives there, not in
    # a pyenv or other python3 first on PATH)
    py = os.path.join(VENV, "bin", "python") if kind == "ort" else "/usr/bin/python3"
    out, rss = timed([py, os.path.abspath(__file__), "--worker", kind, "--H", str(H), "--T", str(T), "--N", str(N),
                      "--threads", str(threads), "--reps", str(reps)])
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
    """PyTorch for the torch peers and the ONNX export: Debian's python3-torch, installed when missing."""
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0:
        return True
    cmd = ["apt-get", "install", "-y", "-q", "python3-torch"]
    if os.geteuid() != 0:
        cmd = ["sudo"] + cmd
    print("PyTorch missing: %s" % " ".join(cmd), flush=True)
    try:
        subprocess.run(cmd, check=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    except (OSError, subprocess.CalledProcessError) as e:
        print("could not install python3-torch (%s): the torch and onnxruntime rows will say so" % e, flush=True)
        return False
    return True


def ensure_venv():
    if os.path.exists(os.path.join(VENV, "bin", "python")):
        p = subprocess.run([os.path.join(VENV, "bin", "python"), "-c", "import onnxruntime"], capture_output=True)
        if p.returncode == 0:
            return True
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", VENV], check=True)
    p = subprocess.run([os.path.join(VENV, "bin", "pip"), "install", "-q", "onnxruntime"])
    return p.returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("--H", type=int)
    ap.add_argument("--T", type=int)
    ap.add_argument("--N", type=int)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build-fast"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks", "cpu.md"))
    ap.add_argument("--json", default="/tmp/qgru-bench-cpu.json")
    ap.add_argument("--quick", action="store_true", help="first two shapes only")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating rounds of fast int8 and onnxruntime per shape for the side-by-side ratio (0: none)")
    ap.add_argument("--avx2-rounds", type=int, default=0,
                    help="as --rounds, with the fast path held to its avx2 level (bench_cpu path 5), after them (0: none)")
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    binary = os.path.join(args.build, "test", "bench_cpu")
    ensure_torch()
    have_ort = ensure_venv()
    shapes = SHAPES[:2] if args.quick else SHAPES
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
    if have_ort:
        runners.append(("onnxruntime GRU fp32 (%d threads)" % th, lambda H, T, N: peer_run("ort", H, T, N, th, args.reps)))
    results = {}
    load_before = os.getloadavg()
    for (H, T, N) in shapes:
        for name, fn in runners:
            try:
                r = fn(H, T, N)
            except Exception as e:  # noqa: BLE001 - a runner that fails is reported, not fatal
                r = {"error": str(e)[:300]}
            results[(H, T, N, name)] = r
            print("%-45s H=%-5d T=%-4d N=%-3d %s" % (name, H, T, N, json.dumps(r)), flush=True)
    # Side by side: the fast int8 path and onnxruntime (the fastest peer in every shape measured) in alternating
    # processes, so that a slow phase of the machine hits both; the ratio of each round, then their median.
    def side_by_side(path, label, count):
        rounds = {}
        if not have_ort:
            return rounds
        for (H, T, N) in shapes:
            for _ in range(count):
                try:
                    q = qgru_run(binary, path, H, T, N, th, args.reps)["wall_ms"]
                    o = peer_run("ort", H, T, N, th, args.reps)["wall_ms"]
                except Exception as e:  # noqa: BLE001 - reported in the page, not fatal
                    print("side-by-side round failed: %s" % e, flush=True)
                    continue
                rounds.setdefault((H, T, N), []).append((q, o))
                print("round%s H=%-5d T=%-4d N=%-3d qgru %.3f ms, onnxruntime %.3f ms: %.2fx" % (label, H, T, N, q, o, o / q), flush=True)
        return rounds
    rounds = side_by_side(1, "", args.rounds)
    rounds_avx2 = side_by_side(5, " (avx2 level)", args.avx2_rounds)
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
        json.dump({"%d/%d/%d/%s" % k: v for k, v in results.items()}, f, indent=1)
    write_md(args, shapes, runners, results, peak, vnni, load_before, load_after, rounds, rounds_avx2, fma)


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = re.search(r"Model name:\s*(.*)", out).group(1).strip()
        cpus = re.search(r"^CPU\(s\):\s*(\d+)", out, re.M).group(1)
        flags = re.search(r"Flags:\s*(.*)", out).group(1).split()
        isa = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni") if f in flags]
        return "%s, %s CPUs, %s" % (model, cpus, " ".join(isa))
    except Exception:  # noqa: BLE001
        return platform.processor()


def write_md(args, shapes, runners, results, peak, vnni, load_before, load_after, rounds, rounds_avx2, fma):
    fast_name = runners[3][0]
    lines = []
    command = " ".join(["scripts/bench_cpu.py"] + [a for a in sys.argv[1:]])
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
                 "weights of the same shape. Median of %d runs (the reference paths: of max(3, reps/2)); "
                 "before its timed runs each qgru fast path makes 12 untimed ones (the thread team's start, the batch-1 schedule "
                 "choice's warm-up), each peer 2." % args.reps)
    lines.append("- Peak memory is the process's maximum resident set (`/usr/bin/time -v`): the Python peers include "
                 "the interpreter and libtorch (~hundreds of MiB), the qgru figures include building the float model, "
                 "calibrating and quantizing it in-process.\n")
    lines.append("| shape (H, T, N) | runner | wall ms/run | CPU ms/run | µs/step (wall) | steps/s (wall) | "
                 "GMAC/s (CPU time) | peak RSS MiB | %s speed-up (wall) |" % fast_name.replace("qgru ", ""))
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (H, T, N) in shapes:
        macs = 2.0 * 3 * H * H * T * N
        fast = results.get((H, T, N, fast_name), {})
        for name, _ in runners:
            r = results[(H, T, N, name)]
            if "error" in r:
                lines.append("| %d, %d, %d | %s | error: %s | | | | | | |" % (H, T, N, name, r["error"][:80].replace("|", "/")))
                continue
            ratio = (r["wall_ms"] / fast["wall_ms"]) if "wall_ms" in fast else float("nan")
            lines.append("| %d, %d, %d | %s | %.2f | %.2f | %.1f | %.0f | %.2f | %.0f | %.2fx |" % (
                H, T, N, name, r["wall_ms"], r["cpu_ms"], 1e3 * r["wall_ms"] / T, T / (r["wall_ms"] / 1e3),
                macs / (r["cpu_ms"] / 1e3) / 1e9 if r["cpu_ms"] > 0 else float("nan"), r["rss_mib"], ratio))
    lines.append("")
    lines.append("The last column is each runner's wall time divided by the fast int8 path's with %d threads "
                 "(> 1: the fast path is that many times faster).\n" % args.threads)
    def rounds_table(rs_by_shape, title, what, count):
        if not rs_by_shape:
            return
        lines.append("## Side by side: %s against onnxruntime in alternating processes\n" % title)
        lines.append("%d rounds per shape, each a %s process (%d threads) then an onnxruntime process (%d threads), "
                     "each the median of %d runs; a slow phase of the machine hits both sides of a round.\n"
                     % (count, what, args.threads, args.threads, args.reps))
        lines.append("| shape (H, T, N) | qgru %s ms (rounds) | onnxruntime ms (rounds) | ratio per round | median ratio |" % what)
        lines.append("|---|---|---|---|---:|")
        for (H, T, N) in shapes:
            rs = rs_by_shape.get((H, T, N), [])
            if not rs:
                continue
            ratios = [o / q for q, o in rs]
            lines.append("| %d, %d, %d | %s | %s | %s | %.2fx |" % (
                H, T, N, " ".join("%.3f" % q for q, _ in rs), " ".join("%.3f" % o for _, o in rs),
                " ".join("%.2fx" % r for r in ratios), statistics.median(ratios)))
        lines.append("")
    rounds_table(rounds, "fast int8", "fast int8", args.rounds)
    if rounds_avx2:
        rounds_table(rounds_avx2, "fast int8 held to its avx2 level", "fast int8 avx2 level", args.avx2_rounds)
        lines.append("The avx2 level is what a CPU without AVX-512 VNNI runs. On a CPU that has AVX-512, onnxruntime "
                     "still uses its AVX-512 kernels while qgru is held to AVX2 here: a harder comparison than the "
                     "same code on an AVX2-only CPU.\n")
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
    lines.append("| shape (H, T, N) | fast int8 1 thread GMAC/s (CPU) | fraction of one core's %s peak |" % peak_name)
    lines.append("|---|---:|---:|")
    for (H, T, N) in shapes:
        r = results.get((H, T, N, runners[1][0]), {})
        if "cpu_ms" in r:
            rate = 2.0 * 3 * H * H * T * N / (r["cpu_ms"] / 1e3)
            lines.append("| %d, %d, %d | %.2f | %.0f%% |" % (H, T, N, rate / 1e9, 100 * rate / one_core))
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
