#!/usr/bin/env bash
# `qgru verify --html report.html [--stats stats.json]` on the bundled digits model: one self-contained file
# (no script, no external resource) with the expected tables and one inline svg per plot, rendered by
# headless Chromium into a PNG that is checked to be non-blank and to show the plots' colours.
# Usage: html_report.sh <qgru> <scratch-dir> <source-root>. Needs chromium (scripts/setup.sh installs it)
# and python3 with numpy.
set -euo pipefail
qgru="$1"
scratch="$2"
root="$3"
example="$root/examples/digits"
rm -rf "$scratch"
mkdir -p "$scratch"
fail() { echo "FAIL: $*" >&2; exit 1; }

python=""
for candidate in "${PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$candidate" ] && "$candidate" -c "import numpy" 2>/dev/null; then
    python="$candidate"
    break
  fi
done
[ -n "$python" ] || fail "no python3 with numpy found (run scripts/setup.sh)"
browser=""
for candidate in chromium chromium-browser google-chrome; do
  if command -v "$candidate" >/dev/null 2>&1; then browser="$candidate"; break; fi
done
[ -n "$browser" ] || fail "no chromium found to render the HTML report (run scripts/setup.sh, which installs it)"

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
"$python" - "$scratch/report.html" "$scratch/report.json" <<'EOF' || fail "HTML structure"
import json, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
report = json.load(open(sys.argv[2]))
def need(cond, what):
    if not cond:
        sys.exit("html_report: " + what)
need(html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>"), "not a complete HTML document")
for banned in ("<script", "<link", " src=", "<iframe", "@import", "url(http"):
    need(banned not in html, f"not self-contained: contains {banned!r}")
need(html.count("http") == html.count('xmlns="http://www.w3.org/2000/svg"'), "a URL other than the SVG namespace")
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
export HOME="$scratch"  # chromium wants a writable profile folder
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
  --user-data-dir="$scratch/profile" --window-size=1100,1500 --screenshot="$scratch/report.png" \
  "file://$scratch/report.html" >"$scratch/chromium.log" 2>&1 || true
[ -s "$scratch/report.png" ] || fail "chromium wrote no screenshot: $(tail -3 "$scratch/chromium.log")"
"$python" - "$scratch/report.png" <<'EOF' || fail "the screenshot looks wrong"
# Decode the PNG (8-bit RGB/RGBA, non-interlaced) with zlib + numpy and look at its pixels.
import struct, sys, zlib
import numpy as np
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, width = 8, b"", None
while pos < len(data):
    (length,) = struct.unpack(">I", data[pos:pos + 4])
    kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
    if kind == b"IHDR":
        width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
        assert depth == 8 and color in (2, 6) and interlace == 0, f"unexpected PNG format {depth} {color} {interlace}"
        bpp = 3 if color == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + length
raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, 1 + width * bpp)
img = np.zeros((height, width * bpp), dtype=np.int32)
prev = np.zeros(width * bpp, dtype=np.int32)
for y in range(height):
    f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
    if f == 0:
        cur = line
    elif f == 1:   # Sub: a running sum per channel
        cur = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) % 256
    elif f == 2:   # Up
        cur = (line + prev) % 256
    else:          # Average / Paeth: sequential
        cur = np.zeros_like(line)
        for x in range(width * bpp):
            a = int(cur[x - bpp]) if x >= bpp else 0
            b, c = int(prev[x]), (int(prev[x - bpp]) if x >= bpp else 0)
            if f == 3:
                cur[x] = (line[x] + (a + b) // 2) % 256
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (line[x] + pred) % 256
    img[y] = cur
    prev = cur
rgb = img.reshape(height, width, bpp)[:, :, :3]
non_white = np.mean(np.any(rgb < 235, axis=2))
# The plots' blue (#1f77b4 = 31, 119, 180) and the tables' green SQNR cells (#e3f4e1) must be visible.
blue = np.sum(np.all(np.abs(rgb - np.array([31, 119, 180])) <= 40, axis=2))
green_cells = np.sum(np.all(np.abs(rgb - np.array([227, 244, 225])) <= 3, axis=2))
print(f"screenshot {width}x{height}: {non_white:.1%} non-white pixels, {blue} plot-blue pixels, "
      f"{green_cells} green-cell pixels")
assert non_white > 0.03, "the page is (almost) blank"
assert blue > 300, "no plot lines visible (the inline SVG did not render?)"
assert green_cells > 100, "the metrics table's coloured cells are not visible"
EOF
echo "html_report: OK"
