#!/usr/bin/env python3
"""The fidelity table of docs/CALIBRATION.md: for every model of test/data/models/ and the bundled example,
every range method and the range search under a bit-width config, the output SQNR on held-out data
(`qgru verify` on the model's test inputs) and the task metric (scripts/task_metric.py on `qgru run`'s output).

    fidelity_table.py [--qgru build/apps/qgru/qgru] [--config int8] [--search-evaluations 2000] [--only NAME]
                      [--no-search]

Every row is measured twice: with the config as given (power-of-two scales, unless it says otherwise) and with
its multiplier-scale form ("scales": "multiplier", docs/FIXED_POINT.md §1a), same statistics, same range method
(the search too: on real grids for the multiplier form).

Each model is calibrated on its calibration file (statistics' method: ema); the search scores its candidates
on the first 256 of those sequences, never on the test inputs. Prints a Markdown table per model on stdout
(progress on stderr). Takes a few minutes (the searches dominate).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS_DIR = os.path.join(ROOT, "test", "data", "models")
METHODS = ["minmax", "minmax+pow2", "ema", "ema+pow2", "kl", "kl+pow2", "percentile:99.99", "percentile:99.99+pow2",
           "percentile:99.9", "percentile:99.9+pow2", "mse", "mse+pow2", "bounds", "bounds+pow2"]


def models(only):
    found = [("digits", os.path.join(ROOT, "examples", "digits"),
              {"calib": "calib.npy", "test": "test.npy", "metric": "accuracy"})]
    for name in sorted(os.listdir(MODELS_DIR)):
        if not os.path.isdir(os.path.join(MODELS_DIR, name)):
            continue  # README.md
        with open(os.path.join(MODELS_DIR, name, "model.json")) as f:
            found.append((name, os.path.join(MODELS_DIR, name), json.load(f)))
    return [m for m in found if only in (None, m[0])]


def run(command):
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"fidelity_table: {' '.join(command)} failed:\n{done.stderr}")
    return done.stdout, done.stderr


def metric(name, folder, output):
    if name == "digits":
        text, _ = run([sys.executable, os.path.join(ROOT, "scripts", "example_accuracy.py"), output])
    else:
        text, _ = run([sys.executable, os.path.join(ROOT, "scripts", "task_metric.py"), folder, output])
    return float(text.split()[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--qgru", default=os.path.join(ROOT, "build", "apps", "qgru", "qgru"))
    parser.add_argument("--config", default="int8")
    parser.add_argument("--search-evaluations", type=int, default=2000)
    parser.add_argument("--only")
    parser.add_argument("--no-search", action="store_true", help="leave out the range search rows (minutes)")
    args = parser.parse_args()
    qgru = args.qgru
    scratch = tempfile.mkdtemp(prefix="qgru_fidelity_")
    # The multiplier-scale form of the config: a preset's file (configs/NAME.json) or the given file, with "scales".
    preset_file = os.path.join(ROOT, "configs", args.config + ".json")
    with open(preset_file if os.path.exists(preset_file) else args.config) as f:
        multiplier_config = json.load(f)
    multiplier_config["scales"] = "multiplier"
    multiplier_config_path = os.path.join(scratch, "multiplier.json")
    with open(multiplier_config_path, "w") as f:
        json.dump(multiplier_config, f)

    def measure(model, stats, config, method, artifact, test, out, name, folder, extra=()):
        command = [qgru, "quantize", "--model", model, "--stats", stats, "--config", config, "-o", artifact] + list(extra)
        if method != "(config)":
            command += ["--range-method", method]
        _, log = run(command)
        table, _ = run([qgru, "-q", "verify", "--model", model, "--artifact", artifact, "--input", test])
        sqnr = float(next(line.split()[4] for line in table.splitlines() if line.startswith("output ")))
        run([qgru, "-q", "run", "--model", artifact, "--input", test, "--output", out])
        return sqnr, metric(name, folder, out), log

    for name, folder, manifest in models(args.only):
        model = os.path.join(folder, manifest.get("model", "gru.safetensors"))  # model.onnx for a Keras-style cell
        calib = os.path.join(folder, manifest["calib"])
        test = os.path.join(folder, manifest["test"])
        stats = os.path.join(scratch, name + ".stats.json")
        run([qgru, "-q", "calibrate", "--model", model, "--data", calib, "-o", stats])
        out = os.path.join(scratch, name + ".float.npy")
        run([qgru, "-q", "run", "--model", model, "--input", test, "--output", out])
        float_metric = metric(name, folder, out)
        rows = []
        for method in ["(config)"] + METHODS + ([] if args.no_search else ["search"]):
            artifact = os.path.join(scratch, f"{name}.qgru.json")
            extra = ["--search-evaluations", str(args.search_evaluations), "--no-widening"] if method == "search" else []
            sqnr, value, log = measure(model, stats, args.config, method, artifact, test, out, name, folder, extra)
            m_sqnr, m_value, _ = measure(model, stats, multiplier_config_path, method, artifact, test, out, name, folder, extra)
            held_in = ""
            if method == "search":
                found = re.search(r"range search: output SQNR ([-0-9.]+) dB on \d+ held-in sequences \(start: ([^,]+), ([-0-9.]+) dB\); "
                                  r"(\d+) evaluations", log)
                held_in = f"held-in {found.group(3)} → {found.group(1)} dB from {found.group(2)}, {found.group(4)} evaluations"
            rows.append((method, sqnr, value, held_in, m_sqnr, m_value))
            print(f"{name}: {method}: {sqnr:.2f} dB, multiplier {m_sqnr} dB {held_in}", file=sys.stderr)
        best_single = max(r[1] for r in rows if r[0] in METHODS)
        print(f"\n#### {name} (float {manifest['metric']} {float_metric:.4f}; config {args.config})\n")
        print(f"| range method | output SQNR held-out (dB) | {manifest['metric']} | multiplier scales: SQNR (dB) | "
              f"multiplier: {manifest['metric']} |")
        print("|---|---|---|---|---|")
        for method, sqnr, value, held_in, m_sqnr, m_value in rows:
            label = f"config's own ({args.config})" if method == "(config)" else method
            mark = "**" if sqnr == best_single and method in METHODS else ""
            note = f" ({held_in})" if held_in else ""
            print(f"| {mark}{label}{mark}{note} | {sqnr:.2f} | {value:.4f} | {m_sqnr:.2f} | {m_value:.4f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
