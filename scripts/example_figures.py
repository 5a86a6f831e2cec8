#!/usr/bin/env python3
"""The bundled example's figures (examples/digits), as the docs quote them: accuracy and output SQNR of the
integer model under each bit-width config and range method, on the 597 held-out sequences.

    example_figures.py RUN [RUN ...] [--diff A,B ...] [--qgru qgru]

RUN is CONFIG (a preset or config file, with its own range methods: int8, int16-activations, int16) or
CONFIG/METHOD (`quantize --range-method METHOD` with CONFIG's widths: int8/minmax, int8/ema+pow2, int8/search);
CONFIG@SCALES adds `quantize --scales SCALES` (int8@multiplier, int8@multiplier/ema).
Statistics come from `qgru calibrate` on examples/digits/calib.npy (default method); `search` scores on the same
file (`--data`). Prints one line per figure, the form docs-check blocks print (docs/README.md):

    float.accuracy = 97.98994974874372          accuracy (%) of the float model (`qgru run`, the linear head)
    RUN.sqnr_db = 29.994902314727344            output SQNR of `qgru verify` (dB)
    RUN.accuracy = 97.98994974874372            accuracy (%) of the integer model's `qgru run` output
    A-B.sqnr_db = 6.52...                       --diff A,B: the SQNR of A minus that of B (dB)

Run from the repository root with `qgru` on PATH (or --qgru); needs NumPy.

Under the docs test, QGRU_DOCS_RUN_CACHE names a folder that lives for one run of scripts/check_docs.py: a RUN
(and the float model's accuracy) that an earlier docs-check block of the same run computed with the same qgru
binary is read back from there instead of being quantized, verified and run again; the lines printed are the
same (the commands are deterministic and their inputs do not change within a run).
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from example_accuracy import read_safetensors  # noqa: E402  (the example's own head reader)

EXAMPLE = os.path.join(ROOT, "examples", "digits")
MODEL = os.path.join(EXAMPLE, "gru.safetensors")


def qgru(binary, *args):
    subprocess.run([binary, "-q", *args], check=True, stdout=subprocess.DEVNULL)


def accuracy_percent(output_path):
    """Accuracy of the last step's output through the model's linear head, in percent (example_accuracy.py)."""
    y = np.load(output_path)
    labels = np.load(os.path.join(EXAMPLE, "test_labels.npy"))
    head = read_safetensors(MODEL, ["head.weight", "head.bias"])
    logits = y[-1].astype(np.float64) @ head["head.weight"].astype(np.float64).T + head["head.bias"]
    return 100.0 * float((logits.argmax(axis=1) == labels).sum()) / len(labels)


class RunCache:
    """The figures of each RUN within one docs-test run (QGRU_DOCS_RUN_CACHE), keyed by the RUN, the qgru binary
    (its path, size and modification time) and the contents of a config file the RUN names; off when unset."""

    def __init__(self, binary):
        self.folder = os.environ.get("QGRU_DOCS_RUN_CACHE") or None
        path = binary if os.sep in binary else shutil.which(binary)
        stat = os.stat(path) if path and os.path.exists(path) else None
        self.binary = [os.path.realpath(path), stat.st_size, stat.st_mtime_ns] if stat else [binary]

    def _file(self, run):
        config = run.partition("/")[0].partition("@")[0]
        contents = open(config, "rb").read().hex() if os.path.isfile(config) else None
        key = json.dumps([run, self.binary, contents]).encode()
        return os.path.join(self.folder, "example_figures." + hashlib.sha256(key).hexdigest() + ".json")

    def get(self, run):
        if not self.folder or not os.path.exists(self._file(run)):
            return None
        with open(self._file(run)) as f:
            return json.load(f)

    def put(self, run, figures):
        if self.folder:
            os.makedirs(self.folder, exist_ok=True)
            with open(self._file(run) + ".tmp", "w") as f:
                json.dump(figures, f)
            os.replace(self._file(run) + ".tmp", self._file(run))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("runs", nargs="+", metavar="RUN", help="CONFIG or CONFIG/METHOD")
    parser.add_argument("--diff", action="append", default=[], metavar="A,B", help="also print A's SQNR minus B's")
    parser.add_argument("--qgru", default="qgru", help="the qgru binary (default: qgru on PATH)")
    args = parser.parse_args()
    test = os.path.join(EXAMPLE, "test.npy")
    calib = os.path.join(EXAMPLE, "calib.npy")
    sqnr = {}
    cache = RunCache(args.qgru)
    with tempfile.TemporaryDirectory(prefix="qgru-example-") as work:
        stats = os.path.join(work, "stats.json")
        if not all(cache.get(run) for run in args.runs):
            qgru(args.qgru, "calibrate", "--model", MODEL, "--data", calib, "-o", stats)
        float_figures = cache.get("float")
        if float_figures is None:
            float_output = os.path.join(work, "float.npy")
            qgru(args.qgru, "run", "--model", MODEL, "--input", test, "--output", float_output)
            float_figures = {"accuracy": accuracy_percent(float_output)}
            cache.put("float", float_figures)
        print(f"float.accuracy = {float_figures['accuracy']!r}")
        for index, run in enumerate(args.runs):
            figures = cache.get(run)
            if figures is not None:
                sqnr[run] = figures["sqnr_db"]
                print(f"{run}.sqnr_db = {sqnr[run]!r}")
                print(f"{run}.accuracy = {figures['accuracy']!r}")
                continue
            config, _, method = run.partition("/")
            config, _, scales = config.partition("@")
            artifact = os.path.join(work, f"run{index}.qgru.json")
            command = ["quantize", "--model", MODEL, "--stats", stats, "--config", config, "-o", artifact]
            if scales:
                command += ["--scales", scales]
            if method:
                command += ["--range-method", method]
            if method == "search":
                command += ["--data", calib]
            qgru(args.qgru, *command)
            report = os.path.join(work, f"run{index}.report.json")
            qgru(args.qgru, "verify", "--model", MODEL, "--artifact", artifact, "--input", test, "--report", report)
            with open(report) as f:
                sqnr[run] = json.load(f)["output"]["sqnr_db"]
            output = os.path.join(work, f"run{index}.npy")
            qgru(args.qgru, "run", "--model", artifact, "--input", test, "--output", output)
            figures = {"sqnr_db": sqnr[run], "accuracy": accuracy_percent(output)}
            cache.put(run, figures)
            print(f"{run}.sqnr_db = {sqnr[run]!r}")
            print(f"{run}.accuracy = {figures['accuracy']!r}")
    for pair in args.diff:
        a, b = pair.split(",")
        print(f"{a}-{b}.sqnr_db = {sqnr[a] - sqnr[b]!r}")


if __name__ == "__main__":
    main()
