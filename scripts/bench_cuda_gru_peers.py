#!/usr/bin/env python3
"""Side-by-side timing of qgru's CUDA GRU executors and cuDNN's GRU (torch.nn.GRU) on one GPU.

One process, alternating rounds: every round visits every shape and, per shape, every engine (the order reversed on
odd rounds, so that neither side always runs first on a warm or a cold card); each visit times `--runs` calls after
`--warmup` and keeps the median; a row's figure is the median of its rounds' medians, in microseconds per time step.

Engines (one layer, one direction, C = H, batch-first no, every call end to end: input from host memory, output back
to host memory, as qgru's calls are):
  qgru       build/test/bench_cuda_gru (test/cuda/bench_gru.cpp) with --json-lines: presets int8, int16-activations,
             int16 and the float executor on the per-step recurrence, and int8 and int16-activations on the
             persistent kernel (--recurrence persistent; the row's "path" says whether the plan took it), and int8
             on the persistent kernel with the cluster barrier (QGRU_CUDA_GRU_SYNC=cluster; recurrence
             "persistent-cluster") and with it the exchange of h in shared memory (cluster-dsmem; recurrence
             "persistent-cluster-dsmem"); the path says which barrier the plan took, and why where not the cluster's.
  cudnn-fp32 torch.nn.GRU in float32 on CUDA (cuDNN), torch imported only when this engine runs.
  cudnn-fp16 the same in float16.
Shapes (H, T, N): (64,100,1), (256,100,1), (1024,50,1), (256,100,64), (512,50,32), (256,2000,1) unless --shape.

Output: a markdown table on stdout (median us per step, and the ratio to the fastest cuDNN row of the shape), and with
--json FILE the rows as a JSON array of {"H", "T", "N", "engine", "preset", "us_per_step", "card", "date", "commit"}
plus "recurrence", "path", "ratio_to_fastest_peer", "rounds_us_per_step". Both files are rewritten after every round
(the medians of the rounds done so far, which the table's first line counts), so a run cut short by a session's time
limit keeps its finished rounds.

On the GPU machine, from the repository root (builds bench_cuda_gru first if it is missing):
  python3 scripts/bench_cuda_gru_peers.py --build-if-missing --json /tmp/peers.json
or with the carried binaries of scripts/gpu_pack.sh (scripts/gpu_session.sh bench does this):
  python3 scripts/bench_cuda_gru_peers.py --bench .gpu/bin/bench_cuda_gru --json cuda-gru.json --markdown cuda-gru.md
QGRU_CUDA_GRU_UNITS and QGRU_CUDA_GRU_ROWS (docs/CUDA.md) set in the environment fix the persistent kernel's units
and batch rows per block for a sweep.
Without a GPU or torch: --dry-run runs fabricated engines (the table and JSON machinery only; every row says
"dry run" in its card); --self-test checks the argument parsing, the table and the JSON rows that way.
"""
import argparse
import contextlib
import datetime
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DEFAULT_SHAPES = [(64, 100, 1), (256, 100, 1), (1024, 50, 1), (256, 100, 64), (512, 50, 32), (256, 2000, 1)]
QGRU_STEP_PRESETS = ["int8", "int16-activations", "int16", "float"]
QGRU_PERSISTENT_PRESETS = ["int8", "int16-activations"]
QGRU_CLUSTER_PRESETS = ["int8"]
# recurrence label -> QGRU_CUDA_GRU_SYNC
QGRU_CLUSTER_SYNCS = [("persistent-cluster", "cluster"), ("persistent-cluster-dsmem", "cluster-dsmem")]
PEERS = ["cudnn-fp32", "cudnn-fp16"]
ROW_KEYS = ["H", "T", "N", "engine", "preset", "us_per_step", "card", "date", "commit"]
DRY_RUN_CARD = "dry run: fabricated timings, no GPU"


def parse_shape(text):
    try:
        H, T, N = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shape {text}: expected H,T,N (three integers)")
    if min(H, T, N) < 1:
        raise argparse.ArgumentTypeError(f"--shape {text}: every size must be at least 1")
    return (H, T, N)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="the CMake build folder (default ./build)")
    p.add_argument("--bench", help="the bench_cuda_gru binary (default: BUILD/test/bench_cuda_gru; scripts/gpu_pack.sh's "
                                   "pack holds it in bin/)")
    p.add_argument("--build-if-missing", action="store_true",
                   help="configure and build bench_cuda_gru there when the binary is missing")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    p.add_argument("--runs", type=int, default=10, help="timed calls per visit (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls before each visit (default 3)")
    p.add_argument("--shape", type=parse_shape, action="append", help="H,T,N (repeatable; default: the six shapes)")
    p.add_argument("--engines", default="qgru,cudnn-fp32,cudnn-fp16",
                   help="comma-separated subset of qgru, cudnn-fp32, cudnn-fp16")
    p.add_argument("--torch-device-io", action="store_true",
                   help="time torch with input and output resident on the GPU (default: host in, host out, as qgru)")
    p.add_argument("--json", help="write the rows to this file (a JSON array)")
    p.add_argument("--markdown", help="also write the table to this file")
    p.add_argument("--dry-run", action="store_true", help="fabricated engines: no GPU, no torch, no binary")
    p.add_argument("--self-test", action="store_true", help="check this script with --dry-run, then exit")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.runs < 1 or args.warmup < 0:
        p.error("--rounds and --runs must be at least 1, --warmup at least 0")
    engines = [e for e in args.engines.split(",") if e]
    unknown = [e for e in engines if e not in ["qgru"] + PEERS]
    if unknown or not engines:
        p.error(f"--engines {args.engines}: expected a subset of qgru, cudnn-fp32, cudnn-fp16")
    args.engine_list = engines
    args.shapes = args.shape or DEFAULT_SHAPES
    return args


class QgruEngine:
    """bench_cuda_gru in a subprocess: one visit = the per-step presets, then the persistent kernel's."""

    def __init__(self, args):
        self.binary = args.bench or os.path.join(args.build, "test", "bench_cuda_gru")
        self.args = args
        if not os.path.exists(self.binary):
            if args.bench or not args.build_if_missing:
                sys.exit(f"bench_cuda_gru_peers: {self.binary} is missing (build the bench_cuda_gru target, or pass "
                         "--build-if-missing)")
            subprocess.run(["cmake", "-S", ROOT, "-B", args.build, "-DCMAKE_BUILD_TYPE=Release"], check=True)
            subprocess.run(["cmake", "--build", args.build, "-j", str(os.cpu_count() or 4), "--target", "bench_cuda_gru"],
                           check=True)

    def _run(self, shape, extra, env=None):
        H, T, N = shape
        cmd = [self.binary, "--shape", f"{H},{T},{N}", "--runs", str(self.args.runs), "--warmup", str(self.args.warmup),
               "--json-lines"] + extra
        done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
        if done.returncode != 0:
            sys.exit(f"bench_cuda_gru_peers: {' '.join(cmd)} exited {done.returncode}: "
                     f"{(done.stderr or done.stdout).strip()}")
        rows = [json.loads(line[5:]) for line in done.stdout.splitlines() if line.startswith("JSON ")]
        if not rows:
            sys.exit(f"bench_cuda_gru_peers: {' '.join(cmd)} printed no JSON row")
        return rows

    def visit(self, shape):
        """[(key, us_per_step, path)] for every qgru row of one shape."""
        out = []
        for row in self._run(shape, ["--recurrence", "step"]):
            out.append((("qgru", row["preset"], "step"), row["us_per_step"], row["path"]))
        for preset in QGRU_PERSISTENT_PRESETS:
            for row in self._run(shape, ["--recurrence", "persistent", "--preset", preset]):
                out.append((("qgru", preset, "persistent"), row["us_per_step"], row["path"]))
        for preset in QGRU_CLUSTER_PRESETS:
            for recurrence, sync in QGRU_CLUSTER_SYNCS:
                for row in self._run(shape, ["--recurrence", "persistent", "--preset", preset], {"QGRU_CUDA_GRU_SYNC": sync}):
                    out.append((("qgru", preset, recurrence), row["us_per_step"], row["path"]))
        return out

    def card(self):
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
        return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else "unknown GPU"


class TorchEngine:
    """torch.nn.GRU on CUDA (cuDNN) in one dtype; torch is imported here, not at the script's start."""

    def __init__(self, name, args):
        try:
            import torch  # lazily: the dry run and the self-test need no torch
        except ImportError as e:
            sys.exit(f"bench_cuda_gru_peers: {name} needs torch, which does not import here ({e}); run where PyTorch "
                     "is installed, or pass --engines qgru, or --dry-run")

        self.torch = torch
        self.name = name
        self.dtype = torch.float32 if name == "cudnn-fp32" else torch.float16
        self.args = args
        if not torch.cuda.is_available():
            sys.exit("bench_cuda_gru_peers: torch sees no CUDA device")
        torch.backends.cudnn.enabled = True

    def visit(self, shape):
        torch = self.torch
        H, T, N = shape
        gru = torch.nn.GRU(H, H, num_layers=1).to(device="cuda", dtype=self.dtype).eval()
        x_host = torch.randn(T, N, H, dtype=self.dtype).pin_memory()
        x_device = x_host.cuda()

        def call():
            if self.args.torch_device_io:
                return gru(x_device)[0]
            y, _ = gru(x_host.cuda(non_blocking=True))
            return y.cpu()

        times = []
        with torch.inference_mode():
            for _ in range(self.args.warmup):
                call()
            torch.cuda.synchronize()
            for _ in range(self.args.runs):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                call()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
        us = 1000.0 * statistics.median(times) / T
        return [((self.name, "fp32" if self.dtype == torch.float32 else "fp16", "cudnn"), us, f"torch {torch.__version__}")]

    def card(self):
        return self.torch.cuda.get_device_name(0)


class FakeEngine:
    """--dry-run: fabricated, deterministic figures (1000 plus small offsets: plainly no measurement, no ranking of
    the engines), marked as such in every row."""

    def __init__(self, name):
        self.name = name
        self.calls = 0

    def visit(self, shape):
        self.calls += 1
        base = 1000.0 + 0.5 * (self.calls % 3)
        if self.name == "qgru":
            return [(("qgru", p, "step"), base + i, "dry run") for i, p in enumerate(QGRU_STEP_PRESETS)] + [
                (("qgru", p, "persistent"), base + 10 + i, "dry run") for i, p in enumerate(QGRU_PERSISTENT_PRESETS)] + [
                (("qgru", p, r), base + 15 + i + 2 * j, "dry run") for i, p in enumerate(QGRU_CLUSTER_PRESETS)
                for j, (r, _) in enumerate(QGRU_CLUSTER_SYNCS)]
        return [((self.name, "fp32" if self.name == "cudnn-fp32" else "fp16", "cudnn"),
                 base + (20 if self.name == "cudnn-fp32" else 21), "dry run")]

    def card(self):
        return DRY_RUN_CARD


def commit_id():
    done = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if done.returncode != 0:
        return "unknown"
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    return done.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def measure(args, engines, after_round=None):
    """{(shape, key): [us per round]}, {(shape, key): path}: every round visits every shape and engine; after_round(
    samples, paths, rounds_done) is called after each round."""
    samples, paths = {}, {}
    for r in range(args.rounds):
        order = engines if r % 2 == 0 else list(reversed(engines))
        for shape in args.shapes:
            for engine in order:
                for key, us, path in engine.visit(shape):
                    samples.setdefault((shape, key), []).append(us)
                    paths[(shape, key)] = path
        if after_round is not None:
            after_round(samples, paths, r + 1)
    return samples, paths


def build_rows(args, samples, paths, card, date, commit):
    rows = []
    for shape in args.shapes:
        keys = [k for (s, k) in samples if s == shape]
        peer_us = [statistics.median(samples[(shape, k)]) for k in keys if k[0] in PEERS]
        fastest_peer = min(peer_us) if peer_us else None
        for key in keys:
            engine, preset, recurrence = key
            us = statistics.median(samples[(shape, key)])
            rows.append({"H": shape[0], "T": shape[1], "N": shape[2], "engine": engine, "preset": preset,
                         "us_per_step": round(us, 4), "card": card, "date": date, "commit": commit,
                         "recurrence": recurrence, "path": paths[(shape, key)],
                         "ratio_to_fastest_peer": round(us / fastest_peer, 4) if fastest_peer else None,
                         "rounds_us_per_step": [round(v, 4) for v in samples[(shape, key)]]})
    return rows


def markdown(rows, args, card, date, commit, rounds=None):
    lines = [f"GPU: {card}; {date}; commit {commit}; median of {args.rounds if rounds is None else rounds} alternating "
             f"rounds{'' if rounds in (None, args.rounds) else f' (of {args.rounds} asked)'}, each the median of "
             f"{args.runs} calls after {args.warmup} warm-up; 1 layer, 1 direction, C = H; end to end "
             f"({'torch on device-resident tensors' if args.torch_device_io else 'host in, host out for every engine'})",
             "", "| H | T | N | engine | preset | recurrence / path | µs per step | x fastest cuDNN |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['ratio_to_fastest_peer']:.2f}" if r["ratio_to_fastest_peer"] is not None else "n/a"
        lines.append(f"| {r['H']} | {r['T']} | {r['N']} | {r['engine']} | {r['preset']} | {r['recurrence']}: {r['path']} | "
                     f"{r['us_per_step']:.2f} | {ratio} |")
    return "\n".join(lines)


def write_text(path, text):
    """The whole file or nothing: a temporary file beside it, renamed over it (the files are rewritten every round,
    and a run cut short while writing must leave the previous round's file whole)."""
    folder = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp") as f:
        f.write(text)
    os.replace(f.name, path)


def write_json(path, rows):
    write_text(path, json.dumps(rows, indent=1) + "\n")


def run(args, after_round_hook=None):
    if args.dry_run:
        engines = [FakeEngine(e) for e in args.engine_list]
    else:
        engines = [QgruEngine(args) if e == "qgru" else TorchEngine(e, args) for e in args.engine_list]
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    commit = commit_id()

    def write_files(samples, paths, rounds_done):
        card = engines[-1].card() if not args.dry_run else DRY_RUN_CARD
        rows = build_rows(args, samples, paths, card, date, commit)
        table = markdown(rows, args, card, date, commit, rounds_done)
        if args.json:
            write_json(args.json, rows)
        if args.markdown:
            write_text(args.markdown, table + "\n")
        return rows, table

    def after_round(samples, paths, rounds_done):
        write_files(samples, paths, rounds_done)
        print(f"bench_cuda_gru_peers: round {rounds_done} of {args.rounds} done", file=sys.stderr, flush=True)
        if after_round_hook is not None:
            after_round_hook(rounds_done)

    samples, paths = measure(args, engines, after_round)
    rows, table = write_files(samples, paths, args.rounds)
    print(table)
    return rows


def self_test():
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "rows.json")
        table = os.path.join(scratch, "rows.md")
        args = parse_args(["--dry-run", "--rounds", "2", "--json", out, "--markdown", table, "--shape", "64,100,1",
                           "--shape", "256,2000,1"])
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            rows = run(args)
        written = json.load(open(out))
        with open(table) as f:
            expect(f.read() == printed.getvalue(), "the markdown file holds the printed table")
        expect(printed.getvalue().count("\n| ") == len(rows) + 1, "one table line per row, and the header")
        expect(written == rows, "the JSON file holds the rows")
        expect(len(rows) == 2 * (len(QGRU_STEP_PRESETS) + len(QGRU_PERSISTENT_PRESETS) + len(QGRU_CLUSTER_PRESETS) * len(QGRU_CLUSTER_SYNCS) + len(PEERS)), f"{len(rows)} rows")
        for r in written:
            expect(all(k in r for k in ROW_KEYS), f"row keys {sorted(r)}")
            expect(r["card"] == DRY_RUN_CARD, "a dry-run row says so")
            expect(len(r["rounds_us_per_step"]) == 2, "one figure per round")
            expect(r["us_per_step"] == round(statistics.median(r["rounds_us_per_step"]), 4), "the median of the rounds")
        fastest = {(r["H"], r["T"], r["N"]): min(x["us_per_step"] for x in written
                                                 if x["engine"] in PEERS and (x["H"], x["T"], x["N"]) == (r["H"], r["T"], r["N"]))
                   for r in written}
        expect(all(abs(r["ratio_to_fastest_peer"] - r["us_per_step"] / fastest[(r["H"], r["T"], r["N"])]) < 1e-3
                   for r in written), "ratio to the fastest cuDNN row")
        expect(any(r["recurrence"] == "persistent" for r in written), "a persistent qgru row")
        expect(any(r["recurrence"] == "persistent-cluster" for r in written), "a persistent qgru row with the cluster barrier")
        expect(any(r["recurrence"] == "persistent-cluster-dsmem" for r in written),
               "a persistent qgru row with the exchange in shared memory")
        expect({r["engine"] for r in written} == {"qgru", "cudnn-fp32", "cudnn-fp16"}, "every engine")
        only = parse_args(["--dry-run", "--engines", "qgru"])
        expect(only.engine_list == ["qgru"] and only.shapes == DEFAULT_SHAPES, "--engines and the default shapes")
        for bad in (["--engines", "cudnn-fp64"], ["--shape", "1,2"], ["--shape", "0,5,1"], ["--rounds", "0"]):
            try:
                with contextlib.redirect_stderr(io.StringIO()):
                    parse_args(bad)
                failures.append(f"{bad} accepted")
            except SystemExit as e:
                expect(e.code == 2, f"{bad}: exit 2")
        # A run cut short after its first round (as by a session's time limit) leaves that round's rows behind.
        cut = parse_args(["--dry-run", "--rounds", "3", "--json", out, "--markdown", table, "--shape", "64,100,1"])

        class Cut(Exception):
            pass

        def cut_after_first(rounds_done):
            raise Cut()

        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                run(cut, cut_after_first)
            failures.append("the cut run was not cut")
        except Cut:
            partial = json.load(open(out))
            expect(len(partial) == len(QGRU_STEP_PRESETS) + len(QGRU_PERSISTENT_PRESETS) + len(QGRU_CLUSTER_PRESETS) * len(QGRU_CLUSTER_SYNCS) + len(PEERS), "the cut run's rows")
            expect(all(len(r["rounds_us_per_step"]) == 1 for r in partial), "one round in the cut run's rows")
            with open(table) as f:
                expect("median of 1 alternating rounds (of 3 asked)" in f.read(), "the cut table says how many rounds")
        expect("torch" not in sys.modules, "torch stays unimported in a dry run")
    if failures:
        print("bench_cuda_gru_peers self-test FAILED: " + "; ".join(failures), file=sys.stderr)
        return 1
    print("bench_cuda_gru_peers self-test passed")
    return 0


def main(argv):
    if "--self-test" in argv:
        return self_test()
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
