#!/usr/bin/env python3
"""Which grid for r ⊙ h in the linear_before_reset = 0 cell (docs/FIXED_POINT.md §3a)? A fake-quantized simulation.

qgru quantizes r ⊙ h, the operand of that cell's second GEMM R_n (r ⊙ h), into h's own space. The alternative is
a tensor of its own, calibrated like the others. This script runs a trained model of test/data/models/ with
model.onnx (GRU nodes, linear_before_reset = 0) through the cell's data flow in float64 with every tensor rounded
to its grid where the integer cell rounds it (weights per row; activations with power-of-two scales from the
calibration file's ranges, found as quant_from_range does), and r ⊙ h either
  exact       not rounded (what any grid loses against),
  h's grid    qgru's choice,
  own grid    its own range from the calibration data (min/max or EMA like the other tensors).
It prints, per layer, the shift each grid gets, and the output SQNR and task accuracy of each on held-out data.
A model of the float cell, not the integer cell code for code (the integer cell rounds a few sums in two
terms), so compare the rows with each other, not with `qgru verify`.

    reset_hidden_grid.py [MODEL_DIR] [--bits 8] [--method minmax|ema]

Needs numpy only (the ONNX initializers are read by scripts/onnx_file.py).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from example_accuracy import read_safetensors  # noqa: E402
from onnx_file import read_onnx_initializers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENSORS = ["x", "h", "ih", "hh", "ugi", "ugo", "rgi", "rgo", "ngi", "ngo", "rh"]


def round_away(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


class Grid:
    """Power-of-two scale and zero point covering [lo, hi] with `bits` codes (quant_from_range's search)."""

    def __init__(self, lo, hi, bits, unsigned=False, symmetric=False):
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        self.q_min, self.q_max = (0, 2 ** bits - 1) if unsigned else (-2 ** (bits - 1), 2 ** (bits - 1) - 1)
        width = max(-lo, hi) if symmetric else hi - lo
        levels = self.q_max if symmetric else self.q_max - self.q_min

        def zp_if_fits(s):
            zp = 0 if symmetric else self.q_min - round_away(lo * 2.0 ** s)
            if zp < self.q_min or zp > self.q_max:
                return None
            if round_away(lo * 2.0 ** s) + zp < self.q_min or round_away(hi * 2.0 ** s) + zp > self.q_max:
                return None
            return zp

        s = int(np.floor(np.log2(levels / width))) if width > 0 else bits
        while zp_if_fits(s) is None:
            s -= 1
        while zp_if_fits(s + 1) is not None:
            s += 1
        self.shift, self.zp = s, zp_if_fits(s)

    def __call__(self, v):
        q = np.clip(round_away(v * 2.0 ** self.shift) + self.zp, self.q_min, self.q_max)
        return (q - self.zp) / 2.0 ** self.shift


def per_row(weights, bits):
    return np.stack([Grid(-np.abs(row).max(), np.abs(row).max(), bits, symmetric=True)(row) for row in weights])


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def run(x, layers, grids=None, mode=None, ranges=None):
    """The stack on x [T, N, C]; grids[l][tensor] rounds (None: float); mode: "exact", "h" or "own" for r ⊙ h.
    ranges: {(l, tensor): [(min, max) per step]} filled when given."""
    for l, (W, R, bw, br, H) in enumerate(layers):
        g = grids[l] if grids else None

        def q(name, v):
            if ranges is not None:
                ranges.setdefault((l, name), []).append((v.min(), v.max()))
            return g[name](v) if g else v

        if g:
            W, R, bw, br = g["W"], g["R"], g["bw"], g["br"]
        x = q("x", x)
        h = np.zeros((x.shape[1], H))
        out = []
        for t in range(x.shape[0]):
            ih = q("ih", x[t] @ W.T + bw)
            hh = h @ R[:2 * H].T + br[:2 * H]                     # z, r (ONNX order z, r, h)
            z = q("ugo", sigmoid(q("ugi", ih[:, :H] + hh[:, :H])))
            r = q("rgo", sigmoid(q("rgi", ih[:, H:2 * H] + hh[:, H:])))
            rh = r * h
            if ranges is not None:
                ranges.setdefault((l, "rh"), []).append((rh.min(), rh.max()))
            if g and mode == "h":
                rh = g["h"](rh)
            elif g and mode == "own":
                rh = g["rh"](rh)
            hn = rh @ R[2 * H:].T + br[2 * H:]
            both = np.concatenate([hh, hn], 1)
            both = q("hh", both)
            n = q("ngo", np.tanh(q("ngi", ih[:, 2 * H:] + both[:, 2 * H:])))
            h = q("h", z * h + (1 - z) * n)
            out.append(h)
        x = np.stack(out)
    return x


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", default=os.path.join(ROOT, "test", "data", "models", "waves_lbr0_l2"))
    parser.add_argument("--bits", type=int, default=8, help="activation bits (weights 8, biases 8 or 16 as the presets)")
    parser.add_argument("--method", choices=["minmax", "ema"], default="minmax")
    args = parser.parse_args()
    with open(os.path.join(args.model_dir, "model.json")) as f:
        manifest = json.load(f)
    init = {k: v.astype(np.float64) for k, v in read_onnx_initializers(os.path.join(args.model_dir, manifest["model"])).items()}
    layers = []
    while f"W{len(layers)}" in init:
        l = len(layers)
        W, R, B = init[f"W{l}"][0], init[f"R{l}"][0], init[f"B{l}"][0]
        H = R.shape[1]
        layers.append((W, R, B[:3 * H], B[3 * H:], H))
    head = read_safetensors(os.path.join(args.model_dir, manifest["head"]), ["head.weight", "head.bias"])
    calib = np.load(os.path.join(args.model_dir, manifest["calib"])).astype(np.float64)
    test = np.load(os.path.join(args.model_dir, manifest["test"])).astype(np.float64)
    labels = np.load(os.path.join(args.model_dir, manifest["labels"]))

    ranges = {}
    run(calib, layers, ranges=ranges)
    grids = []
    for l, (W, R, bw, br, H) in enumerate(layers):
        g = {}
        for name in TENSORS:
            steps = ranges[(l, name)]
            if args.method == "minmax":
                lo, hi = min(s[0] for s in steps), max(s[1] for s in steps)
            else:  # calibrate's per-step EMA: first step, then 0.9 old + 0.1 step
                lo, hi = steps[0]
                for s in steps[1:]:
                    lo, hi = 0.9 * lo + 0.1 * s[0], 0.9 * hi + 0.1 * s[1]
            g[name] = Grid(lo, hi, args.bits, unsigned=name in ("ugo", "rgo"), symmetric=name == "ngo")
        bias_bits = 8 if args.bits == 8 else 16
        g.update(W=per_row(W, 8), R=per_row(R, 8), bw=per_row(bw[:, None], bias_bits)[:, 0],
                 br=per_row(br[:, None], bias_bits)[:, 0])
        grids.append(g)
        print(f"layer {l}: h shift {g['h'].shift} zp {int(g['h'].zp)}; r ⊙ h's own grid shift {g['rh'].shift} "
              f"zp {int(g['rh'].zp)}")
    reference = run(test, layers)

    def accuracy(y):
        return ((y[-1] @ head["head.weight"].T + head["head.bias"]).argmax(1) == labels).mean()

    print(f"{args.bits}-bit activations, {args.method} ranges; float accuracy {accuracy(reference):.4f}")
    for mode, label in (("exact", "r ⊙ h exact"), ("h", "r ⊙ h on h's grid (qgru)"), ("own", "r ⊙ h on its own grid")):
        y = run(test, layers, grids, mode)
        sqnr = 10 * np.log10((reference ** 2).sum() / ((reference - y) ** 2).sum())
        print(f"  {label:28s} output SQNR {sqnr:6.2f} dB, accuracy {accuracy(y):.4f}")


if __name__ == "__main__":
    main()
