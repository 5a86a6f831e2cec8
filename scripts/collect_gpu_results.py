#!/usr/bin/env python3
"""Folds what a GPU session measured into the project's benchmark records, and says what it shows.

    collect_gpu_results.py OUT_DIR [--docs DIR]     OUT_DIR: the folder a gpu_session.sh call wrote (the device
                                                    tool's files_at); DIR: default docs/benchmarks of this checkout
    collect_gpu_results.py --self-test              shows the checks refuse what they must (no GPU needed)

OUT_DIR may hold any of cuda-gru.json (scripts/bench_cuda_gru_peers.py), cuda-linear.json (scripts/bench_cuda_linear.sh),
cuda-linear-wgmma.json (the wgmma step) and gptq-cuda.json (bench_cuda_gptq), session.log, whose "JSON {...}"
lines of bench_cuda_barrier (bench "persistent-meeting") are the meetings' rows, and cuda-stream.md, whose "JSON {...}"
lines of bench_cuda_gru --streaming (kind "stream") are the streaming rows. Their rows go into DIR/cuda-gru.json,
DIR/cuda-linear.json (the wgmma rows too), DIR/gptq-cuda.json, the lists the issues define, DIR/cuda-meetings.json and
DIR/cuda-stream.json:
  cuda-gru      {"H", "T", "N", "engine", "preset", "us_per_step", "card", "date", "commit"}
  cuda-linear   {"bits", "K", "N", "M", "engine", "us", "weight_gb_per_s", "hbm_fraction", "card", "date", "commit"}
  gptq-cuda     {"K", "N", "rows", "device", "seconds", "rel_err", "cpu_rel_err", "card", "date", "commit"}
  cuda-meetings {"mode", "blocks", "units", "H", "ns_per_phase", "card", "date", "commit"}
  cuda-stream   {"H", "N", "layers", "preset", "recurrence", "gpu_us_per_frame", "gpu_launches_us_per_frame",
                 "cpu_us_per_frame", "card", "date", "commit"} (a frame on the GPU replayed from its graph, and issued
                 as launches, beside the CPU's one-thread stepper)
(other keys a benchmark writes, such as "detail", are kept). Every row of every input is checked first: a missing
key, a value of the wrong type, a time that is not positive, a row of the peers script's dry run (fabricated
timings) or a card that does not name a GPU is one line naming the file, the row and the key, exit 1, and nothing
is written. A row replaces the recorded one with the same card, commit and identity (shape, engine, preset or
device); the others stay, so runs on several cards and commits accumulate. Each record is written whole through a
temporary file and a rename.

Then it prints, per card and commit, what the rows show against the issues' targets: the linear engines' speed-up
over cuBLAS fp16 and their fraction of HBM, the GRU executors' µs per step and ratio to the fastest cuDNN run, and
GPTQ's seconds and error against the CPU path. Only rows measured, nothing estimated. Last (also when there was
nothing to record), the call's steps from session.log: each step's seconds against its limit, the steps the device
tool cut off and those the session's budget left out, so the next loan's call can be planned to fit.
"""
import json
import math
import os
import re
import sys
import tempfile

DRY_RUN_CARD = "dry run: fabricated timings, no GPU"  # scripts/bench_cuda_gru_peers.py's

NUMBER = (int, float)
# record name -> (input files, required keys and their types, the identity keys of a row besides card and commit)
RECORDS = {
    "cuda-gru.json": (["cuda-gru.json"],
                      {"H": int, "T": int, "N": int, "engine": str, "preset": str, "us_per_step": NUMBER,
                       "card": str, "date": str, "commit": str},
                      ["H", "T", "N", "engine", "preset", "recurrence"]),
    "cuda-linear.json": (["cuda-linear.json", "cuda-linear-wgmma.json"],
                         {"bits": int, "K": int, "N": int, "M": int, "engine": str, "us": NUMBER,
                          "weight_gb_per_s": NUMBER, "hbm_fraction": (int, float, type(None)), "card": str,
                          "date": str, "commit": str},
                         ["bits", "K", "N", "M", "engine", "detail"]),
    "gptq-cuda.json": (["gptq-cuda.json"],
                       {"K": int, "N": int, "rows": int, "device": str, "seconds": NUMBER, "rel_err": NUMBER,
                        "cpu_rel_err": (int, float, type(None)), "card": str, "date": str, "commit": str},
                       ["K", "N", "rows", "device", "hessian_product"]),
    "cuda-meetings.json": (["session.log"],
                           {"mode": str, "blocks": int, "units": int, "H": int, "ns_per_phase": NUMBER, "card": str,
                            "date": str, "commit": str},
                           ["mode", "blocks", "units"]),
    "cuda-stream.json": (["cuda-stream.md"],
                         {"H": int, "N": int, "layers": int, "preset": str, "recurrence": str,
                          "gpu_us_per_frame": NUMBER, "gpu_launches_us_per_frame": NUMBER, "cpu_us_per_frame": NUMBER,
                          "card": str, "date": str, "commit": str},
                         ["H", "N", "layers", "preset", "recurrence"]),
}
POSITIVE = {"us_per_step", "us", "seconds", "ns_per_phase", "gpu_us_per_frame", "gpu_launches_us_per_frame",
            "cpu_us_per_frame"}
MEETING_BENCH = "persistent-meeting"  # test/cuda/bench_barrier.cu's rows
# Text files whose "JSON {...}" lines hold rows among other output, and which of those lines are this file's rows.
LINE_FILES = {
    "session.log": lambda row: row.get("bench") == MEETING_BENCH,  # bench_cuda_barrier's, among every step's output
    "cuda-stream.md": lambda row: row.get("kind") == "stream",     # bench_cuda_gru --streaming's, beside its tables
}


class Refused(Exception):
    pass


def check_rows(path, rows, keys):
    if not isinstance(rows, list):
        raise Refused(f"{path}: expected a JSON list of rows, got {type(rows).__name__}")
    for i, row in enumerate(rows):
        where = f"{path}: row {i}"
        if not isinstance(row, dict):
            raise Refused(f"{where}: expected an object, got {type(row).__name__}")
        for key, kind in keys.items():
            if key not in row:
                raise Refused(f"{where}: no \"{key}\"")
            value = row[key]
            if isinstance(value, bool) or not isinstance(value, kind):
                raise Refused(f"{where}: \"{key}\" is {json.dumps(value)}, expected {describe(kind)}")
            if key in POSITIVE and not (math.isfinite(value) and value > 0):
                raise Refused(f"{where}: \"{key}\" is {value}, expected a positive time")
        card = row["card"]
        if card == DRY_RUN_CARD:
            raise Refused(f"{where}: a dry run's row (card \"{card}\"): fabricated timings are not records")
        if not card.strip() or card.strip().lower() in ("unknown", "none", "n/a", "cpu"):
            raise Refused(f"{where}: \"card\" is \"{card}\", expected the GPU's name")


def describe(kind):
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "an integer", float: "a number", str: "a string", type(None): "null"}
    return " or ".join(dict.fromkeys(names[k] for k in kinds))


def identity(row, keys):
    return (row["card"], row["commit"]) + tuple(json.dumps(row.get(k), sort_keys=True) for k in keys)


def load(path):
    wanted = LINE_FILES.get(os.path.basename(path))
    if wanted is not None:  # the "JSON {...}" lines among the file's text
        rows = []
        with open(path, errors="replace") as f:
            for number, line in enumerate(f, 1):
                if not line.startswith("JSON {"):
                    continue
                try:
                    row = json.loads(line[5:])
                except json.JSONDecodeError as e:
                    raise Refused(f"{path}: line {number}: not JSON ({e})")
                if isinstance(row, dict) and wanted(row):
                    rows.append(row)
        return rows
    try:
        with open(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise Refused(f"{path}: not JSON ({e})")


def write_whole(path, rows):
    folder = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".collect-", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(rows, f, indent=1)
            f.write("\n")
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def collect(out_dir, docs_dir, report=print):
    """Checks every input, then merges; returns {record: (added, replaced, total)}."""
    plans = []
    for record, (inputs, keys, id_keys) in RECORDS.items():
        new_rows = []
        for name in inputs:
            path = os.path.join(out_dir, name)
            if os.path.exists(path):
                rows = load(path)
                check_rows(path, rows, keys)
                new_rows += rows
        if not new_rows:
            continue
        target = os.path.join(docs_dir, record)
        old_rows = load(target) if os.path.exists(target) else []
        check_rows(target, old_rows, keys)
        plans.append((record, target, old_rows, new_rows, id_keys))
    if not plans:
        files = [n for r in RECORDS.values() for n in r[0] if n != "session.log"]  # the log is always there
        log_note = (", and its session.log holds no bench_cuda_barrier rows"
                    if os.path.exists(os.path.join(out_dir, "session.log")) else ", nor a session.log")
        raise Refused(f"{out_dir}: no rows to record: none of {', '.join(files)} is there{log_note}")
    summary = {}
    for record, target, old_rows, new_rows, id_keys in plans:
        merged = {identity(r, id_keys): r for r in old_rows}
        replaced = sum(1 for r in new_rows if identity(r, id_keys) in merged)
        for r in new_rows:
            merged[identity(r, id_keys)] = r
        rows = [merged[k] for k in sorted(merged)]
        write_whole(target, rows)
        summary[record] = (len(new_rows) - replaced, replaced, len(rows))
        report(f"{target}: {len(new_rows) - replaced} rows added, {replaced} replaced, {len(rows)} in all")
    return summary


def rows_in(out_dir, *names):
    """The rows of those of the files that are in out_dir (already checked by collect)."""
    rows = []
    for name in names:
        path = os.path.join(out_dir, name)
        if os.path.exists(path):
            rows += load(path)
    return rows


def table_head(report, title, columns):
    report(f"\n{title}")
    report("| " + " | ".join(name for name, _ in columns) + " |")
    report("|" + "|".join("---:" if right else "---" for _, right in columns) + "|")


def show(out_dir, report=print):
    """What the session's rows show against the issues' targets (measured rows only)."""
    linear = rows_in(out_dir, "cuda-linear.json", "cuda-linear-wgmma.json")
    if linear:
        table_head(report, "quantized linear: speed-up over cuBLAS fp16 (its time / the engine's), fraction of HBM",
                   [("card", 0), ("bits", 1), ("K x N", 0), ("M", 1), ("engine", 0), ("µs", 1), ("x cuBLAS fp16", 1), ("HBM", 1)])
        cublas = {(r["card"], r["bits"], r["K"], r["N"], r["M"]): r["us"] for r in linear if r["engine"] == "cublas-fp16"}
        for r in sorted(linear, key=lambda r: (r["card"], r["bits"], r["K"], r["N"], r["M"], r["engine"])):
            if r["engine"] in ("cublas-fp16", "d2d-copy"):
                continue
            base = cublas.get((r["card"], r["bits"], r["K"], r["N"], r["M"]))
            ratio = f"{base / r['us']:.2f}" if base else "n/a"
            hbm = f"{100 * r['hbm_fraction']:.0f}%" if r.get("hbm_fraction") is not None else "n/a"
            report(f"| {r['card']} | {r['bits']} | {r['K']}x{r['N']} | {r['M']} | {r['engine']} | {r['us']:.1f} | {ratio} | {hbm} |")
    gru = rows_in(out_dir, "cuda-gru.json")
    if gru:
        table_head(report, "GRU: µs per step, ratio to the fastest cuDNN run of the shape (its time / this one's)",
                   [("card", 0), ("H, T, N", 0), ("engine", 0), ("preset", 0), ("recurrence", 0), ("µs per step", 1),
                    ("x fastest cuDNN", 1)])
        fastest = {}
        for r in gru:
            if r["engine"].startswith("cudnn"):
                key = (r["card"], r["H"], r["T"], r["N"])
                fastest[key] = min(fastest.get(key, math.inf), r["us_per_step"])
        for r in sorted(gru, key=lambda r: (r["card"], r["H"], r["T"], r["N"], r["engine"], r["preset"],
                                            str(r.get("recurrence", "")))):
            best = fastest.get((r["card"], r["H"], r["T"], r["N"]))
            ratio = f"{best / r['us_per_step']:.2f}" if best else "n/a"
            report(f"| {r['card']} | {r['H']}, {r['T']}, {r['N']} | {r['engine']} | {r['preset']} | "
                   f"{r.get('recurrence', '')} | {r['us_per_step']:.2f} | {ratio} |")
    meetings = rows_in(out_dir, "session.log")
    if meetings:
        table_head(report, "The persistent kernel's meetings: ns per phase (bench_cuda_barrier)",
                   [("card", 0), ("mode", 0), ("blocks", 1), ("units", 1), ("H", 1), ("ns per phase", 1)])
        for r in sorted(meetings, key=lambda r: (r["card"], r["blocks"], r["units"], r["mode"])):
            report(f"| {r['card']} | {r['mode']} | {r['blocks']} | {r['units']} | {r['H']} | {r['ns_per_phase']:.0f} |")
    stream = rows_in(out_dir, "cuda-stream.md")
    if stream:
        table_head(report, "Streaming: µs per frame on the GPU (replayed graph, launches) and on the CPU (one thread)",
                   [("card", 0), ("H", 1), ("N", 1), ("layers", 1), ("preset", 0), ("recurrence", 0), ("GPU graph", 1),
                    ("GPU launches", 1), ("CPU", 1), ("CPU / GPU graph", 1)])
        for r in sorted(stream, key=lambda r: (r["card"], r["H"], r["N"], r["layers"], r["preset"], r["recurrence"])):
            report(f"| {r['card']} | {r['H']} | {r['N']} | {r['layers']} | {r['preset']} | {r['recurrence']} | "
                   f"{r['gpu_us_per_frame']:.1f} | {r['gpu_launches_us_per_frame']:.1f} | {r['cpu_us_per_frame']:.1f} | "
                   f"{r['cpu_us_per_frame'] / r['gpu_us_per_frame']:.2f} |")
    gptq = rows_in(out_dir, "gptq-cuda.json")
    if gptq:
        table_head(report, "GPTQ on the GPU: seconds, relative error against the CPU path's",
                   [("card", 0), ("K x N", 0), ("rows", 1), ("device", 0), ("s", 1), ("rel_err", 1), ("cpu_rel_err", 1)])
        for r in gptq:
            cpu = "n/a" if r.get("cpu_rel_err") is None else f"{r['cpu_rel_err']:.5g}"
            report(f"| {r['card']} | {r['K']}x{r['N']} | {r['rows']} | {r['device']} | {r['seconds']:.3f} | "
                   f"{r['rel_err']:.5g} | {cpu} |")


STEP_START = re.compile(r"^=== (.+) \(limit (\d+) s\) \d\d:\d\d:\d\d$")
STEP_SKIPPED = re.compile(r"^=== (.+): NOT RUN \((.+)\)$")


def step_end(line, open_steps):
    """The end of an open step in `line`: (name, exit status, seconds), or None. Its closing line, or (logs of before
    step() ended a cut-off line first) that line glued after the step's last output."""
    for name in open_steps:
        end = re.search(r"=== " + re.escape(name) + r": exit (\d+) after (\d+) s$", line)
        if end:
            return name, int(end.group(1)), int(end.group(2))
    return None


def session_steps(out_dir):
    """gpu_session.sh's steps in session.log, in order: (name, limit or None, exit status or None, seconds or None,
    note). A step that started and never ended (the device tool cut the call) has no status; one the budget left
    out is NOT RUN."""
    path = os.path.join(out_dir, "session.log")
    if not os.path.exists(path):
        return []
    steps, open_steps = [], {}
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            start, skipped = STEP_START.match(line), STEP_SKIPPED.match(line)
            end = step_end(line, open_steps)
            if start:
                open_steps[start.group(1)] = len(steps)
                steps.append([start.group(1), int(start.group(2)), None, None, "no end: cut off"])
            elif end:
                name, step_status, seconds = end
                step = steps[open_steps.pop(name)]
                step[2], step[3] = step_status, seconds
                step[4] = "at its limit" if seconds >= step[1] else ""
            elif skipped:
                steps.append([skipped.group(1), None, None, None, "NOT RUN: " + skipped.group(2)])
    return [tuple(step) for step in steps]


def show_steps(out_dir, report=print):
    """How long each step of the call took against its limit: what the next loan's call can fit."""
    steps = session_steps(out_dir)
    if not steps:
        return
    table_head(report, "The call's steps (session.log): seconds against each step's limit",
               [("step", 0), ("limit s", 1), ("exit", 1), ("s", 1), ("", 0)])
    for name, limit, status, seconds, note in steps:
        name = name.replace("|", "\\|")  # a markdown cell
        report(f"| {name} | {'' if limit is None else limit} | {'' if status is None else status} | "
               f"{'' if seconds is None else seconds} | {note} |")
    report(f"steps ended: {sum(1 for s in steps if s[3] is not None)} of {len(steps)}, "
           f"{sum(s[3] for s in steps if s[3] is not None)} s in all")


def self_test():
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    card, date = "NVIDIA H200", "2026-11-29"
    linear_row = {"bits": 4, "K": 4096, "N": 4096, "M": 1, "engine": "qgru", "detail": "stripes", "us": 10.0,
                  "weight_gb_per_s": 800.0, "hbm_fraction": 0.17, "card": card, "date": date, "commit": "abc"}
    cublas_row = dict(linear_row, engine="cublas-fp16", detail="cublasGemmEx", us=20.0, hbm_fraction=None)
    wgmma_row = dict(linear_row, M=256, engine="qgru-wgmma", detail="wgmma", us=30.0)
    gru_row = {"H": 256, "T": 100, "N": 1, "engine": "qgru", "preset": "int8", "us_per_step": 2.5, "card": card,
               "date": date, "commit": "abc", "recurrence": "step"}
    # The same preset on another recurrence is another row, not a replacement.
    persistent_row = dict(gru_row, recurrence="persistent", us_per_step=1.5)
    cudnn_row = dict(gru_row, engine="cudnn-fp16", preset="fp16", us_per_step=5.0, recurrence="cudnn")
    gptq_row = {"K": 4096, "N": 4096, "rows": 262144, "device": "cuda", "hessian_product": "fp32", "seconds": 0.8,
                "rel_err": 0.011, "cpu_rel_err": 0.0111, "card": card, "date": date, "commit": "abc"}
    with tempfile.TemporaryDirectory() as root:
        out, docs = os.path.join(root, "out"), os.path.join(root, "docs")
        os.makedirs(out)
        os.makedirs(docs)

        def put(name, rows):
            with open(os.path.join(out, name), "w") as f:
                json.dump(rows, f)

        put("cuda-linear.json", [linear_row, cublas_row])
        put("cuda-linear-wgmma.json", [wgmma_row])
        put("cuda-gru.json", [gru_row, persistent_row, cudnn_row])
        put("gptq-cuda.json", [gptq_row])
        meeting_row = {"bench": MEETING_BENCH, "mode": "cluster", "blocks": 16, "units": 16, "H": 256,
                       "ns_per_phase": 400.0, "min_ns_per_phase": 390.0, "mismatches": 0, "card": card, "date": date,
                       "commit": "abc"}
        with open(os.path.join(out, "session.log"), "w") as f:
            f.write("=== persistent kernel's meetings (limit 30 s)\n| mode | ...\n")
            f.write("JSON " + json.dumps(meeting_row) + "\n")
            f.write("JSON " + json.dumps(dict(meeting_row, mode="grid", ns_per_phase=900.0)) + "\n")
            f.write("JSON " + json.dumps({"H": 256, "kind": "stream"}) + "\n")  # another bench's line: not a meeting
        stream_row = {"kind": "stream", "H": 256, "N": 1, "layers": 1, "preset": "int8", "recurrence": "step",
                      "gpu_us_per_frame": 12.0, "gpu_min_us": 11.0, "gpu_launches_us_per_frame": 30.0,
                      "cpu_us_per_frame": 6.0, "cpu_min_us": 5.5, "cpu": "fast", "path": "l0.d0 int8 cuBLAS",
                      "card": card, "date": date, "commit": "abc"}
        with open(os.path.join(out, "cuda-stream.md"), "w") as f:
            f.write("| C = H | N | layers | preset | ...\n|---|\n")
            f.write("JSON " + json.dumps(stream_row) + "\n")
            f.write("JSON " + json.dumps(dict(stream_row, preset="int16")) + "\n")
            f.write("JSON " + json.dumps(meeting_row) + "\n")  # not a streaming row
        lines = []
        summary = collect(out, docs, lines.append)
        expect(summary.get("cuda-meetings.json") == (2, 0, 2), f"the meetings' rows from the log: {summary}")
        expect(summary.get("cuda-stream.json") == (2, 0, 2), f"the streaming rows from cuda-stream.md: {summary}")
        expect(summary.get("cuda-linear.json") == (3, 0, 3), f"linear rows merged with the wgmma ones: {summary}")
        expect(summary.get("cuda-gru.json") == (3, 0, 3) and summary.get("gptq-cuda.json") == (1, 0, 1),
               f"every record written, the step and persistent rows of one preset both: {summary}")
        # A second run of another commit adds; the same commit replaces.
        put("cuda-linear.json", [dict(linear_row, us=9.0), dict(linear_row, commit="def")])
        os.unlink(os.path.join(out, "cuda-linear-wgmma.json"))
        summary = collect(out, docs, lines.append)
        with open(os.path.join(docs, "cuda-linear.json")) as f:
            recorded = json.load(f)
        expect(summary.get("cuda-linear.json") == (1, 1, 4), f"one replaced, one added: {summary}")
        expect(any(r["us"] == 9.0 and r["commit"] == "abc" for r in recorded) and
               not any(r["us"] == 10.0 and r["commit"] == "abc" and r["engine"] == "qgru" for r in recorded),
               "the same card, commit and identity: the new row replaces the old")
        # Refusals: one line naming the file, the row and the key; nothing written, not even the good records.
        before = {n: open(os.path.join(docs, n)).read() for n in os.listdir(docs)}
        bad_cases = [
            ("cuda-gru.json", [gru_row, {k: v for k, v in gru_row.items() if k != "us_per_step"}], "row 1: no \"us_per_step\""),
            ("cuda-gru.json", [dict(gru_row, card=DRY_RUN_CARD)], "a dry run"),
            ("cuda-linear.json", [dict(linear_row, us=0.0)], "expected a positive time"),
            ("cuda-linear.json", [dict(linear_row, M="1")], "\"M\" is \"1\", expected an integer"),
            ("gptq-cuda.json", [dict(gptq_row, card="unknown")], "expected the GPU's name"),
            ("cuda-linear.json", {"rows": []}, "expected a JSON list"),
        ]
        for name, rows, message in bad_cases:
            put("cuda-gru.json", [gru_row])
            put("cuda-linear.json", [linear_row])
            put("gptq-cuda.json", [gptq_row])
            put(name, rows)
            try:
                collect(out, docs, lambda _: None)
                expect(False, f"{name} {message}: accepted")
            except Refused as e:
                text = str(e)
                expect(message in text and name in text and "\n" not in text, f"{name}: the refusal says {text!r}")
            after = {n: open(os.path.join(docs, n)).read() for n in os.listdir(docs)}
            expect(after == before, f"{name} {message}: a record was written although an input was refused")
        with open(os.path.join(out, "cuda-gru.json"), "w") as f:
            f.write("[{")
        try:
            collect(out, docs, lambda _: None)
            expect(False, "a truncated file accepted")
        except Refused as e:
            expect("not JSON" in str(e), f"a truncated file: {e}")
        empty = os.path.join(root, "empty")
        os.makedirs(empty)
        try:
            collect(empty, docs, lambda _: None)
            expect(False, "an empty folder accepted")
        except Refused as e:
            expect("none of" in str(e), f"an empty folder: {e}")
        # The summary tables: the ratio to cuBLAS fp16 and to the fastest cuDNN run, from the rows alone.
        put("cuda-linear.json", [linear_row, cublas_row])
        put("cuda-gru.json", [gru_row, cudnn_row])
        put("gptq-cuda.json", [gptq_row])
        shown = []
        show(out, shown.append)
        text = "\n".join(shown)
        expect("| NVIDIA H200 | 4 | 4096x4096 | 1 | qgru | 10.0 | 2.00 | 17% |" in text, f"linear summary:\n{text}")
        expect("| NVIDIA H200 | 256, 100, 1 | qgru | int8 | step | 2.50 | 2.00 |" in text, f"GRU summary:\n{text}")
        expect("| NVIDIA H200 | 4096x4096 | 262144 | cuda | 0.800 | 0.011 | 0.0111 |" in text, f"GPTQ summary:\n{text}")
        expect("| NVIDIA H200 | cluster | 16 | 16 | 256 | 400 |" in text, f"meetings summary:\n{text}")
        expect("| NVIDIA H200 | 256 | 1 | 1 | int8 | step | 12.0 | 30.0 | 6.0 | 0.50 |" in text,
               f"streaming summary:\n{text}")
        # A streaming row without its launches figure is refused, naming the file and the key.
        with open(os.path.join(out, "cuda-stream.md"), "a") as f:
            f.write("JSON " + json.dumps({k: v for k, v in stream_row.items() if k != "gpu_launches_us_per_frame"}) + "\n")
        try:
            collect(out, docs, lambda _: None)
            expect(False, "a streaming row without its launches figure accepted")
        except Refused as e:
            expect("cuda-stream.md: row 2: no \"gpu_launches_us_per_frame\"" in str(e), f"a streaming row: {e}")
        with open(os.path.join(out, "cuda-stream.md"), "w") as f:
            f.write("JSON " + json.dumps(stream_row) + "\n")
        # A meeting row that is not a positive time is refused like any other.
        with open(os.path.join(out, "session.log"), "a") as f:
            f.write("JSON " + json.dumps(dict(meeting_row, ns_per_phase=0.0)) + "\n")
        try:
            collect(out, docs, lambda _: None)
            expect(False, "a meeting row of 0 ns accepted")
        except Refused as e:
            expect("session.log: row 2: \"ns_per_phase\" is 0.0, expected a positive time" in str(e), f"a 0 ns row: {e}")
        leftovers = [n for n in os.listdir(docs) if n.startswith(".collect-")]
        expect(not leftovers, f"temporary files left: {leftovers}")
    # The call's steps from session.log as gpu_session.sh writes them: names with parentheses and colons, a step
    # that ended, one at its limit, one the device tool cut off (no end line), one the budget left out.
    with tempfile.TemporaryDirectory() as out:
        with open(os.path.join(out, "session.log"), "w") as f:
            f.write("=== self-test (limit 120 s) 13:27:00\nok   something: 3 codes\n=== self-test: exit 0 after 41 s\n"
                    "=== cuBLAS at first use: one line without it (limit 30 s) 13:27:41\n"
                    "=== cuBLAS at first use: one line without it: exit 1 after 30 s\n"
                    "=== racecheck (linear kernels) (limit 75 s) 13:28:11\npartial output=== racecheck (linear kernels): "
                    "exit 124 after 75 s\n"
                    "=== GRU side by side (qgru, cuDNN fp32 / fp16) (limit 240 s) 13:29:26\n| H | ...\n"
                    "=== memcheck and racecheck (persistent-small): NOT RUN (compute-sanitizer not found)\n"
                    "=== GPTQ on the GPU, Hessian to packed words (bench_cuda_gptq): NOT RUN (9 s of the session's 575 s left)\n")
        steps = session_steps(out)
        expect(steps == [("self-test", 120, 0, 41, ""),
                         ("cuBLAS at first use: one line without it", 30, 1, 30, "at its limit"),
                         ("racecheck (linear kernels)", 75, 124, 75, "at its limit"),
                         ("GRU side by side (qgru, cuDNN fp32 / fp16)", 240, None, None, "no end: cut off"),
                         ("memcheck and racecheck (persistent-small)", None, None, None,
                          "NOT RUN: compute-sanitizer not found"),
                         ("GPTQ on the GPU, Hessian to packed words (bench_cuda_gptq)", None, None, None,
                          "NOT RUN: 9 s of the session's 575 s left")], f"session steps: {steps}")
        shown = []
        show_steps(out, shown.append)
        expect("steps ended: 3 of 6, 146 s in all" in shown, f"steps summary: {shown}")
    for f in failures:
        print(f"collect_gpu_results self-test: FAIL: {f}")
    print(f"collect_gpu_results self-test: {'FAILED' if failures else 'OK'}")
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    args = argv[1:]
    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "benchmarks")
    if len(args) == 3 and args[1] == "--docs":
        docs = args[2]
        args = args[:1]
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: collect_gpu_results.py OUT_DIR [--docs DIR] | --self-test", file=sys.stderr)
        return 2
    if not os.path.isdir(args[0]):
        print(f"collect_gpu_results: {args[0]}: not a folder", file=sys.stderr)
        return 1
    try:
        collect(args[0], docs)
    except Refused as e:
        print(f"collect_gpu_results: {e}; nothing written", file=sys.stderr)
        show_steps(args[0])  # what ran, and for how long, even when there is nothing to record
        return 1
    show(args[0])
    show_steps(args[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
