#!/usr/bin/env bash
# `qgru verify --html report.html [--stats stats.json]` on the bundled digits model: one self-contained file
# (no script, no external resource) with the expected tables and one inline svg per plot, rendered by
# headless Chromium into a PNG that is checked to be non-blank and to show the plots' colours.
# Usage: html_report.sh <qgru> <scratch-dir> <source-root>. Needs chromium (scripts/setup.sh installs it)
# and python3 with numpy.
set -euo pipefail
source "$(dirname "$0")/html_tools.bash"
start_cli_test "$@"
example="$root/examples/digits"
find_report_tools

"$qgru" -q calibrate --model "$example/gru.safetensors" --data "$example/calib.npy" -o "$scratch/stats.json" >/dev/null
"$qgru" -q quantize --model "$example/gru.safetensors" --stats "$scratch/stats.json" --config int8 \
  -o "$scratch/model.qgru.json"
"$qgru" -q verify --model "$example/gru.safetensors" --artifact "$scratch/model.qgru.json" \
  --input "$example/test.npy" --report "$scratch/report.json" --html "$scratch/report.html" \
  --stats "$scratch/stats.json" >"$scratch/table.txt"
[ -s "$scratch/report.html" ] || fail "no HTML report written"
# Without --html, --stats is a usage mistake, said as such.
if "$qgru" -q verify --model "$example/gru.safetensors" --artifact "$scratch/model.qgru.json" \
  --input "$example/test.npy" --stats "$scratch/stats.json" >/dev/null 2>"$scratch/err.txt"; then
  fail "--stats without --html was accepted"
fi
grep -q -- "--html" "$scratch/err.txt" || fail "unhelpful message for --stats without --html: $(cat "$scratch/err.txt")"

# ---- the HTML's structure, and figures equal to the JSON report's -------------------------------------------
"$python" "$(dirname "$0")/report_checks.py" self-contained "$scratch/report.html" || fail "HTML not self-contained"
"$python" - "$scratch/report.html" "$scratch/report.json" <<'EOF' || fail "HTML structure"
import json, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
report = json.load(open(sys.argv[2]))
def need(cond, what):
    if not cond:
        sys.exit("html_report: " + what)
svgs = re.findall(r'<svg [^>]*id="([^"]+)"', html)
cells = 1
expected = ["plot-output-sqnr", "plot-sqnr-l0-d0"]
expected += [f"plot-{k}-l0-d0-{g}" for g in ("update_gate", "reset_gate", "new_gate") for k in ("act", "acterr")]
tensors = ["x", "h", "weight_ih_linear", "weight_hh_linear", "update_gate_input", "update_gate_output",
           "reset_gate_input", "reset_gate_output", "new_gate_input", "new_gate_output"]
expected += [f"plot-hist-l0-d0-{t}" for t in tensors]
need(sorted(svgs) == sorted(expected), f"svg plots {sorted(set(svgs) ^ set(expected))} differ from the expected set")
need(html.count("</svg>") == len(expected), "unbalanced svg elements")
rows = re.findall(r'<tr class="tensor-row" data-tensor="([^"]+)">(.*?)</tr>', html)
need([r[0] for r in rows] == tensors, f"tensor rows {[r[0] for r in rows]}")
need(len(re.findall(r'class="summary-row"', html)) == 2, "summary rows")
need(len(re.findall(r'class="activation-row"', html)) == 3, "activation rows")
# Each tensor row's max abs error is the JSON report's (3 significant digits).
for (name, row), entry in zip(rows, report["tensors"]):
    need(entry["tensor"] == name, f"row order {name} vs {entry['tensor']}")
    cells_ = re.findall(r'<td class="num[^"]*">([^<]*)</td>', row)
    value = entry["max_abs_error"]
    shown = float(cells_[0])
    need(abs(shown - value) <= 0.006 * abs(value) + 1e-12, f"{name}: max abs error {shown} vs report {value}")
# Histograms mark the chosen range and the grid.
need(html.count("range min ") == 10 and html.count("grid max ") == 10, "histogram markers")
# The SQNR series is drawn: one path per per-step curve, no NaN coordinates.
bad_coordinates = re.findall(r'(?:\sd|\sx\d?|\sy\d?|\scx|\scy)="[^"]*(?:nan|inf)[^"]*"', html, flags=re.I)
need(not bad_coordinates, f"non-finite coordinates in a plot: {bad_coordinates[:3]}")
need(html.count("<path d=") >= len(expected), "fewer drawn paths than plots")
print(f"html_report: {len(svgs)} svg plots, {len(rows)} tensor rows, {len(html)} bytes")
EOF

# ---- rendered by headless Chromium --------------------------------------------------------------------------
render_page "$scratch/report.html" "$scratch" --window-size=1100,1500 --screenshot="$scratch/report.png" >/dev/null
[ -s "$scratch/report.png" ] || fail "chromium wrote no screenshot: $(tail -3 "$scratch/chromium.log")"
# The plots' blue (#1f77b4) and the tables' green SQNR cells (#e3f4e1) must be visible.
"$python" "$(dirname "$0")/report_checks.py" screenshot "$scratch/report.png" --min-non-white 0.03 \
  --colour "plot-blue:31,119,180:40:300" --colour "green-cell:227,244,225:3:100" ||
  fail "the screenshot looks wrong (blank, or the inline SVG or the coloured cells did not render)"
echo "html_report: OK"
