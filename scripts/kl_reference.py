#!/usr/bin/python3
"""Independent NumPy reference for `qgru calibrate --method kl` (docs/CALIBRATION.md, "kl").

Writes test/data/calib/kl_cases.json and, per case, the float32 samples as raw little-endian
test/data/calib/kl_<name>.f32 (fixed seeds). For each case: the |x| histogram (B = 2048 bins over
[0, A], A = max|x|, as np.histogram computes it), the levels L, the expected best clip bin i*, its KL and the
threshold T = (i* + 0.5) * A / B.

Algorithm (TensorRT's, made precise): candidates i = L .. B; P = hist[:i] with sum(hist[i:]) added to P[i-1];
bin k < i belongs to level floor(k * L / i); each level's sum of hist[:i] is spread evenly over the level's
bins where P != 0; KL(P||Q) on normalised P, Q summing where p > 0 (q == 0 < p gives +inf); smallest KL
wins, ties to the larger i.

Run by hand from the repository root:  /usr/bin/python3 scripts/kl_reference.py (needs NumPy)
`--print` computes the same and writes nothing: one line "CASE.KEY = VALUE" per figure (levels, absmax, clip_bins,
threshold), which docs/CALIBRATION.md quotes.
"""
import json
import os
import sys

import numpy as np

BINS = 2048
SAMPLES = 20000


def kl_for_clip(hist, i, levels):
    hist = np.asarray(hist, dtype=np.float64)
    p = hist[:i].copy()
    p[i - 1] += hist[i:].sum()
    level = (np.arange(i, dtype=np.int64) * levels) // i
    level_sum = np.bincount(level, weights=hist[:i], minlength=levels)
    level_nonzero = np.bincount(level, weights=(p != 0).astype(np.float64), minlength=levels)
    q = np.zeros(i)
    nz = p != 0
    q[nz] = level_sum[level[nz]] / level_nonzero[level[nz]]
    pn = p / p.sum()
    qn = q / q.sum() if q.sum() > 0 else q
    mask = pn > 0
    if np.any(qn[mask] == 0):
        return float("inf")
    return float(np.sum(pn[mask] * np.log(pn[mask] / qn[mask])))


def kl_search(hist, levels):
    best_i, best_kl = len(hist), float("inf")
    if levels >= len(hist):
        return len(hist), kl_for_clip(hist, len(hist), levels)
    for i in range(levels, len(hist) + 1):
        kl = kl_for_clip(hist, i, levels)
        if kl <= best_kl:
            best_i, best_kl = i, kl
    return best_i, best_kl


def make_cases():
    cases = {}
    rng = np.random.default_rng(20240601)
    cases["gaussian"] = (rng.normal(0.0, 1.0, SAMPLES), 8)
    rng = np.random.default_rng(20240602)
    cases["laplacian"] = (rng.laplace(0.0, 0.5, SAMPLES), 8)
    rng = np.random.default_rng(20240603)
    cases["uniform"] = (rng.uniform(-2.0, 2.0, SAMPLES), 8)
    rng = np.random.default_rng(20240604)
    cases["one_sided"] = (1.0 / (1.0 + np.exp(-rng.normal(0.0, 2.0, SAMPLES))), 8)  # sigmoid outputs
    rng = np.random.default_rng(20240605)
    body = rng.normal(0.0, 1.0, SAMPLES)
    outliers = rng.choice(SAMPLES, 40, replace=False)
    body[outliers] = rng.normal(0.0, 1.0, 40) * 25.0
    cases["outlier_heavy"] = (body, 8)
    return cases


def main():
    print_only = sys.argv[1:] == ["--print"]
    if sys.argv[1:] and not print_only:
        sys.exit("usage: kl_reference.py [--print]")
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "data", "calib")
    if not print_only:
        os.makedirs(root, exist_ok=True)
    out = []
    for name, (values, bits) in make_cases().items():
        x = values.astype(np.float32)
        if not print_only:
            x.astype("<f4").tofile(os.path.join(root, "kl_" + name + ".f32"))
        xd = x.astype(np.float64)
        levels = 2 ** bits if xd.min() >= 0 else 2 ** (bits - 1)
        absmax = float(np.abs(xd).max())
        hist, _ = np.histogram(np.abs(xd), bins=BINS, range=(0.0, absmax))
        best_i, best_kl = kl_search(hist, levels)
        threshold = (best_i + 0.5) * absmax / BINS
        out.append({
            "name": name,
            "samples_file": "kl_" + name + ".f32",
            "samples": int(x.size),
            "bits": bits,
            "levels": levels,
            "min": float(xd.min()),
            "max": float(xd.max()),
            "absmax": absmax,
            "abs_histogram": [int(c) for c in hist],
            "expected_clip_bins": best_i,
            "expected_kl": best_kl,
            "expected_threshold": threshold,
        })
        if print_only:
            for key, value in (("levels", levels), ("absmax", absmax), ("clip_bins", best_i), ("threshold", threshold)):
                print(f"{name}.{key} = {value!r}")
            continue
        print(f"{name:14s} L={levels:4d} A={absmax:.6f} i*={best_i:5d} KL={best_kl:.6g} T={threshold:.6f}")
    if print_only:
        return
    with open(os.path.join(root, "kl_cases.json"), "w") as f:
        json.dump({"generator": "scripts/kl_reference.py", "bins": BINS, "cases": out}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
