#!/usr/bin/env python3
"""How many piecewise-linear segments `qgru quantize` gives a gate by default, per activation width: for each
width, the int16-activations preset with every activation tensor at that width and every gate `pwl` without a
`segments` count, quantized on the bundled example (examples/digits); prints the count each artifact's gates use
(configs/README.md quotes them):

    pwl_segments.py [--bits 8 10 12 14 16] [--qgru qgru]      ->  "pwl.8.segments = 16" ...

Run from the repository root with `qgru` on PATH (or --qgru).
"""
import argparse
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "digits")
WEIGHTS = ("W", "R", "bw", "br")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bits", type=int, nargs="+", default=[8, 10, 12, 14, 16])
    parser.add_argument("--qgru", default="qgru")
    args = parser.parse_args()
    model = os.path.join(EXAMPLE, "gru.safetensors")
    with open(os.path.join(ROOT, "configs", "int16-activations.json")) as f:
        preset = json.load(f)
    with tempfile.TemporaryDirectory(prefix="qgru-pwl-") as work:
        stats = os.path.join(work, "stats.json")
        subprocess.run([args.qgru, "-q", "calibrate", "--model", model, "--data", os.path.join(EXAMPLE, "calib.npy"),
                        "-o", stats], check=True, stdout=subprocess.DEVNULL)
        for bits in args.bits:
            config = json.loads(json.dumps(preset))
            config["name"] = f"pwl{bits}"
            for name, tensor in config["tensors"].items():
                if name not in WEIGHTS:
                    tensor["bits"] = bits
            config["activations"] = {gate: {"impl": "pwl"} for gate in config["activations"]}
            path = os.path.join(work, f"pwl{bits}.json")
            with open(path, "w") as f:
                json.dump(config, f)
            done = subprocess.run([args.qgru, "-q", "quantize", "--model", model, "--stats", stats, "--config", path,
                                   "--json", "-o", os.path.join(work, f"pwl{bits}.qgru.json")],
                                  check=True, capture_output=True, text=True)
            counts = {a["segments"] for cell in json.loads(done.stdout)["cells"] for a in cell["activations"].values()}
            if len(counts) != 1:
                raise SystemExit(f"pwl_segments: {bits} bits: the gates use different counts {sorted(counts)}")
            print(f"pwl.{bits}.segments = {counts.pop()}")


if __name__ == "__main__":
    main()
