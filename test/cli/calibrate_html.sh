#!/usr/bin/env bash
# `qgru calibrate --html report.html` on the bundled digits model: one self-contained page with a section, a
# histogram svg and a table per observed tensor, one range marker and one table row per range method, rendered
# by headless Chromium (the DOM it parsed, and a PNG that shows the plots); every figure in the tables agrees
# with an independent NumPy computation from the statistics JSON; `--merge stats.json --html` makes the same
# page from existing statistics; bad statistics and unwritable paths exit 1 with one line and leave nothing.
# Usage: calibrate_html.sh <qgru> <scratch-dir> <source-root>. Needs chromium and python3 with numpy.
set -euo pipefail
source "$(dirname "$0")/html_tools.bash"
start_cli_test "$@"
example="$root/examples/digits"
find_report_tools

# ---- the report beside the statistics, and the same report from the statistics alone -----------------------
"$qgru" -q calibrate --model "$example/gru.safetensors" --data "$example/calib.npy" -o "$scratch/stats.json" \
  --html "$scratch/report.html" >"$scratch/table.txt" || fail "calibrate --html exited $?"
[ -s "$scratch/stats.json" ] || fail "no statistics written"
[ -s "$scratch/report.html" ] || fail "no HTML report written"
"$qgru" -q calibrate --merge "$scratch/stats.json" --html "$scratch/again.html" >/dev/null ||
  fail "calibrate --merge STATS --html (no -o) exited $?"
cmp -s "$scratch/report.html" "$scratch/again.html" || fail "the report from the statistics file differs from the run's"
"$qgru" -q calibrate --merge "$scratch/stats.json" --html "$scratch/int16.html" --config int16 >/dev/null ||
  fail "calibrate --merge --html --config int16 exited $?"
grep -q '<td>i16 asym</td>' "$scratch/int16.html" || fail "--config int16: no 16-bit tensor in the report"
grep -q '<td>i16 asym</td>' "$scratch/report.html" && fail "the default report is not the int8 preset's"

# ---- rendered by headless Chromium: the parsed DOM and a screenshot ----------------------------------------
render_page "$scratch/report.html" "$scratch" --dump-dom >"$scratch/dom.html"
[ -s "$scratch/dom.html" ] || fail "chromium dumped no DOM: $(tail -3 "$scratch/chromium.log")"
render_page "$scratch/report.html" "$scratch" --window-size=1100,1600 --screenshot="$scratch/report.png" >/dev/null
[ -s "$scratch/report.png" ] || fail "chromium wrote no screenshot: $(tail -3 "$scratch/chromium.log")"
# The top of the page: the summary's green best cells, the first histogram (grey) and the range bars of minmax
# (blue) and ema (orange), each drawn at 80% over the strip's #fbfbfb.
"$python" "$(dirname "$0")/report_checks.py" screenshot "$scratch/report.png" --min-non-white 0.05 \
  --colour "best-cell:227,244,225:3:200" --colour "histogram-grey:196,196,196:6:500" \
  --colour "minmax-bar:75,145,194:12:300" --colour "ema-bar:254,152,61:12:300" ||
  fail "the screenshot looks wrong (blank, or the inline SVG or the coloured cells did not render)"

# ---- structure (from the browser's DOM) and every figure against NumPy ---------------------------------------
"$python" "$(dirname "$0")/report_checks.py" self-contained "$scratch/report.html" || fail "HTML not self-contained"
"$python" - "$scratch/dom.html" "$scratch/report.html" "$scratch/stats.json" "$root/configs/int8.json" <<'EOF' ||
import json, math, sys
from html.parser import HTMLParser
import numpy as np

dom_path, html_path, stats_path, config_path = sys.argv[1:5]
def need(cond, what):
    if not cond:
        sys.exit("calibrate_html: " + what)

html = open(html_path, encoding="utf-8").read()

class Dom(HTMLParser):
    """Tensor sections with their svg ids, range markers and method rows; summary rows and cells."""
    def __init__(self):
        super().__init__()
        self.sections, self.summary, self.section, self.summary_row = [], [], None, None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "section" and "tensor" in classes:
            self.section = {"id": a["id"], "svgs": [], "markers": [], "rows": []}
            self.sections.append(self.section)
        elif tag == "svg" and self.section is not None:
            self.section["svgs"].append(a.get("id"))
        elif tag == "g" and "range-marker" in classes and self.section is not None:
            self.section["markers"].append(a["data-name"])
        elif tag == "tr" and "method-row" in classes and self.section is not None:
            self.section["rows"].append(dict(a, best="best" in classes, chosen="chosen" in classes))
        elif tag == "tr" and "summary-row" in classes:
            self.summary_row = {"tensor": a["data-tensor"], "cells": []}
            self.summary.append(self.summary_row)
        elif tag == "td" and self.summary_row is not None and "data-method" in a:
            self.summary_row["cells"].append([a["data-method"], set(classes), ""])
    def handle_data(self, data):
        if self.summary_row is not None and self.summary_row["cells"] and not self.summary_row["cells"][-1][2]:
            self.summary_row["cells"][-1][2] = data.strip()
    def handle_endtag(self, tag):
        if tag == "section":
            self.section = None
        if tag == "tr":
            self.summary_row = None

dom = Dom()
dom.feed(open(dom_path, encoding="utf-8").read())
stats = json.load(open(stats_path))
config = json.load(open(config_path))
tensors = ["x", "h", "weight_ih_linear", "weight_hh_linear", "update_gate_input", "update_gate_output",
           "reset_gate_input", "reset_gate_output", "new_gate_input", "new_gate_output"]
methods = ["minmax", "minmax+pow2", "ema", "ema+pow2", "kl", "kl+pow2", "percentile:99.99",
           "percentile:99.99+pow2", "mse", "mse+pow2"]
need([s["id"] for s in dom.sections] == [f"tensor-l0-d0-{t}" for t in tensors],
     f"tensor sections {[s['id'] for s in dom.sections]}")
need([r["tensor"] for r in dom.summary] == [f"l0-d0-{t}" for t in tensors], "summary rows")
include_zeros = stats["method"]["include_zeros"]

def round_half_away(v):
    return math.copysign(math.floor(abs(v) + 0.5), v)

def grid_for(lo, hi, bits, unsigned, symmetric):
    """quant_from_range's rule, restated: the largest shift whose grid holds [min(lo,0), max(hi,0)] unsaturated."""
    qmin, qmax = (0, 2**bits - 1) if unsigned else (-(2**(bits - 1)), 2**(bits - 1) - 1)
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    def place(s):
        zp = 0 if symmetric else int(qmin - round_half_away(math.ldexp(lo, s)))
        if not symmetric and not qmin <= zp <= qmax:
            return None
        codes = [round_half_away(math.ldexp(v, s)) + zp for v in (lo, hi)]
        return zp if all(qmin <= c <= qmax for c in codes) else None
    fitting = [s for s in range(-32, 41) if place(s) is not None]
    return max(fitting), place(max(fitting)), qmin, qmax

for section, row_summary, t in zip(dom.sections, dom.summary, stats["tensors"]):
    name = t["tensor"]
    spec = config["tensors"][name]
    bits, unsigned, symmetric = spec["bits"], not spec["signed"], spec["symmetric"]
    need(section["svgs"] == [f"plot-calib-l0-d0-{name}"], f"{name}: svgs {section['svgs']}")
    need(section["markers"] == methods, f"{name}: range markers {section['markers']}")
    need([r["data-method"] for r in section["rows"]] == methods, f"{name}: method rows")
    need([c[0] for c in row_summary["cells"]] == methods, f"{name}: summary cells")
    # The histogram from the JSON: fine-bin centres and counts, exact zeros apart.
    e = t["histogram"]["exponent"]
    width = math.ldexp(1.0, e - 16)
    index = np.concatenate([np.arange(run[0], run[0] + len(run) - 1) for run in t["histogram"]["runs"]])
    counts = np.concatenate([np.array(run[1:], dtype=np.float64) for run in t["histogram"]["runs"]])
    centres = (index - 65536 + 0.5) * width
    zeros = t["zero_count"] if include_zeros else 0
    total = counts.sum() + zeros
    mean_square = float(np.sum(counts * centres**2) / total)
    # percentile 99.99: asymmetric, each tail at 0.01% (zeros a point mass at 0, linear inside a fine bin);
    # symmetric, the 99.99th percentile of |x|.
    def quantile(idx, cnt, origin, rank, zero_before):
        idx, inverse = np.unique(idx, return_inverse=True)  # ascending; bins sharing an index add up
        cnt = np.bincount(inverse, weights=cnt)
        cumulative, zeros_left = 0.0, zeros
        for k, c in zip(idx, cnt):
            if zeros_left and k >= zero_before:  # the exact zeros come before the first bin at or above 0
                if cumulative + zeros_left >= rank:
                    return 0.0
                cumulative, zeros_left = cumulative + zeros_left, 0
            if cumulative + c >= rank:
                return origin + (k + (rank - cumulative) / c) * width
            cumulative += c
        return origin + (idx[-1] + 1) * width
    if symmetric:
        magnitude = np.where(index >= 65536, index - 65536, 65536 - index - 1)
        threshold = quantile(magnitude, counts, 0.0, 0.9999 * total, 0)
        p_lo, p_hi = max(t["min"], -threshold), min(t["max"], threshold)
    else:
        origin = -65536 * width
        p_lo = min(max(quantile(index, counts, origin, 0.0001 * total, 65536), t["min"]), t["max"])
        p_hi = min(max(quantile(index, counts, origin, 0.9999 * total, 65536), t["min"]), t["max"])
    expected_ranges = {"minmax": (t["min"], t["max"]), "ema": (t["ema"]["min"], t["ema"]["max"]),
                       "percentile:99.99": (p_lo, p_hi)}
    errors = []
    for row in section["rows"]:
        m = row["data-method"]
        lo, hi, shift, zp = float(row["data-min"]), float(row["data-max"]), int(row["data-shift"]), int(row["data-zp"])
        if m in expected_ranges:
            a, b = expected_ranges[m]
            tol = 1e-9 * max(1.0, abs(a), abs(b))
            need(abs(lo - a) <= tol and abs(hi - b) <= tol, f"{name} {m}: range [{lo}, {hi}] vs NumPy [{a}, {b}]")
        g_shift, g_zp, qmin, qmax = grid_for(lo, hi, bits, unsigned, symmetric)
        need((shift, zp) == (g_shift, g_zp), f"{name} {m}: grid shift {shift} zp {zp} vs rule {g_shift} {g_zp}")
        step = math.ldexp(1.0, -shift)
        low_edge, high_edge = (qmin - zp) * step, (qmax - zp) * step
        high = centres > high_edge + step / 2
        low = centres < low_edge - step / 2
        inside = ~(high | low)
        mse = float((np.sum(counts[high] * (centres[high] - high_edge) ** 2) +
                     np.sum(counts[low] * (low_edge - centres[low]) ** 2) +
                     np.sum(counts[inside]) * step * step / 12.0) / total)
        for key, value in (("data-clipped-low", counts[low].sum() / total), ("data-clipped-high", counts[high].sum() / total),
                           ("data-mse", mse)):
            shown = float(row[key])
            need(abs(shown - value) <= 1e-9 * abs(value) + 1e-15, f"{name} {m}: {key} {shown} vs NumPy {value}")
        errors.append(mse)
        # The summary cell: SQNR on the histogram, to 0.1 dB.
        cell = next(c for c in row_summary["cells"] if c[0] == m)
        db = 10 * math.log10(mean_square / mse)
        need(abs(float(cell[2]) - db) <= 0.051, f"{name} {m}: summary SQNR {cell[2]} vs NumPy {db:.3f}")
        need(("best" in cell[1]) == row["best"], f"{name} {m}: summary and table disagree on the best")
        need(row["chosen"] == (m == config["range_method"]), f"{name} {m}: quantize's method marked wrongly")
    smallest = min(errors)
    best = [m for m, err in zip(methods, errors) if err <= smallest * (1 + 1e-9)]
    need([r["data-method"] for r in section["rows"] if r["best"]] == best, f"{name}: best {best} not the one marked")
    need(any(r["data-clipped-high"] != "0" or r["data-clipped-low"] != "0" for r in section["rows"]) or name == "x",
         f"{name}: no method clips anything (the clipped column would not be tested)")
print(f"calibrate_html: {len(dom.sections)} tensor sections x {len(methods)} methods agree with NumPy; "
      f"{len(html)} bytes")
EOF
  fail "report structure or figures"

# ---- refusals: one line, exit 1, nothing written ----------------------------------------------------------
head -c 4000 "$scratch/stats.json" >"$scratch/truncated.json"
mkdir "$scratch/refused"
set +e
"$qgru" -q calibrate --merge "$scratch/truncated.json" --html "$scratch/refused/r.html" >"$scratch/out.txt" 2>"$scratch/err.txt"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "truncated statistics: exit $rc, expected 1"
[ "$(wc -l <"$scratch/err.txt")" -eq 1 ] || fail "truncated statistics: not one line: $(cat "$scratch/err.txt")"
grep -q "^qgru: error: .*truncated.json" "$scratch/err.txt" || fail "the error does not name the file: $(cat "$scratch/err.txt")"
[ ! -s "$scratch/out.txt" ] || fail "truncated statistics: output on stdout"
# A report path whose folder does not exist: refused before any work by the output policy (exit 2, usage), and
# the statistics are not written either (the two appear together or not at all).
set +e
"$qgru" -q calibrate --model "$example/gru.safetensors" --data "$example/calib.npy" -o "$scratch/refused/stats.json" \
  --html "$scratch/no-such-folder/r.html" >/dev/null 2>"$scratch/err2.txt"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "unwritable --html: exit $rc, expected 2"
[ "$(wc -l <"$scratch/err2.txt")" -eq 1 ] || fail "unwritable --html: not one line: $(cat "$scratch/err2.txt")"
grep -q "^qgru: error: .*no-such-folder/r.html" "$scratch/err2.txt" || fail "the error does not name the report: $(cat "$scratch/err2.txt")"
[ -z "$(ls -A "$scratch/refused")" ] || fail "files left after refusals: $(ls -A "$scratch/refused")"
# Usage: --merge without -o needs --html (exit 2, the usage code); -o and --html naming one file is refused.
set +e
"$qgru" -q calibrate --merge "$scratch/stats.json" >/dev/null 2>"$scratch/err3.txt"
rc=$?
"$qgru" -q calibrate --merge "$scratch/stats.json" -o "$scratch/same.html" --html "$scratch/same.html" >/dev/null 2>&1
rc_same=$?
set -e
[ "$rc" -eq 2 ] || fail "--merge without -o or --html: exit $rc, expected 2"
grep -q -- "--output is required" "$scratch/err3.txt" || fail "unhelpful usage message: $(cat "$scratch/err3.txt")"
[ "$rc_same" -eq 2 ] && [ ! -e "$scratch/same.html" ] || fail "-o and --html naming one file: exit $rc_same"
echo "calibrate_html: OK"
