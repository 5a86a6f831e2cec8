#!/usr/bin/env bash
# End-to-end test of `qgru quantize --range-method search` on the bundled example with a small budget: the
# search's record in the artifact's provenance (start methods, history, widenings) and in the calibration report,
# the held-in score never below the best start method, the suggested config quantizing, the data taken from the
# statistics when --data is left out, the log line when the config's methods override `calibrate --method`, and
# refusals (search options without search, recorded data that are gone) that exit 1 with one line and write
# nothing.
# Usage: bash range_search.sh <qgru-binary> <scratch-dir> <source-root>
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
find_python
MODEL=$root/examples/digits/gru.safetensors
CALIB=$root/examples/digits/calib.npy
cd "$scratch"

"$qgru" -q calibrate --model "$MODEL" --data "$CALIB" --method kl -o stats.json > /dev/null

# 1. The config's methods win over the statistics' kl, and quantize says so in one line.
"$qgru" quantize --model "$MODEL" --stats stats.json --config int8 -o ema.qgru.json 2> log.txt > /dev/null ||
  fail "quantize exited $?: $(cat log.txt)"
grep -q "range methods: ema for every observed tensor (config 'int8'), overriding the statistics' 'kl'" log.txt ||
  fail "no precedence line: $(head -3 log.txt)"

# 2. The search, its data from --data, a small budget.
SEARCH=(--range-method search --search-sequences 64 --search-evaluations 80)
"$qgru" quantize --model "$MODEL" --stats stats.json "${SEARCH[@]}" --data "$CALIB" --html report.html \
  --suggest-config wide.json -o search.qgru.json 2> search.log > /dev/null || fail "search exited $?: $(cat search.log)"
grep -q "range search: 64 held-in sequences; start methods: minmax" search.log || fail "no start line: $(cat search.log)"
grep -q "range search: output SQNR" search.log || fail "no summary line: $(cat search.log)"
"$python" - search.qgru.json wide.json <<'PY' || fail "search.qgru.json / wide.json content"
import json, sys
a = json.load(open(sys.argv[1]))
s = a["provenance"]["range_search"]
assert s["method"] == "search" and s["held_in_sequences"] == 64, s
assert s["evaluations"] <= 80 and s["options"]["max_evaluations"] == 80
starts = {m["method"]: m["sqnr_db"] for m in s["start_methods"]}
assert len(starts) == 14 and s["start_method"] in starts, starts
assert s["sqnr_db"] >= max(starts.values()), (s["sqnr_db"], starts)
assert s["history"][0]["candidate"] == s["start_method"]
assert len(s["searched_tensors"]) == 10
# Every cell's ranges are those the history ends with.
for step in s["history"][1:]:
    t = a["cells"][0]["tensors"][step["tensor"]]
    assert "shift" in t
w = json.load(open(sys.argv[2]))
assert w["schema"] == "qgru.bitwidth_config"
wide = [name for name, t in w["tensors"].items() if t["bits"] == 16]
assert len(wide) == 1 and wide[0] == s["suggestion"], (wide, s.get("suggestion"))
PY
grep -q '<section id="range-search">' report.html || fail "the report lacks the search section"
grep -q 'data-method="search"' report.html || fail "the report lacks the search column"
"$qgru" -q quantize --model "$MODEL" --stats stats.json --config wide.json --range-method ema -o wide.qgru.json ||
  fail "the suggested config does not quantize"

# 3. Without --data the statistics' own files (found as recorded) are used, with the same result.
"$qgru" quantize --model "$MODEL" --stats stats.json "${SEARCH[@]}" --no-widening -o a.qgru.json 2> a.log > /dev/null ||
  fail "search from the statistics' data exited $?: $(cat a.log)"
grep -q "range search data $CALIB (recorded in stats.json)" a.log || fail "data source not logged: $(cat a.log)"
"$qgru" -q quantize --model "$MODEL" --stats stats.json "${SEARCH[@]}" --no-widening --data "$CALIB" -o b.qgru.json
"$python" -c "
import json, sys
a, b = (json.load(open(f)) for f in ('a.qgru.json', 'b.qgru.json'))
sys.exit(0 if a['cells'] == b['cells'] and a['provenance']['range_search']['history'] == b['provenance']['range_search']['history'] else 1)" ||
  fail "the search is not deterministic"

# 4. Refusals: one line, exit 1, nothing written.
rc=0
"$qgru" quantize --model "$MODEL" --stats stats.json --data "$CALIB" -o none.qgru.json 2> err.txt || rc=$?
[ "$rc" = 1 ] || fail "--data without search: exit $rc"
grep -q "belong to the range method 'search'" err.txt || fail "message: $(cat err.txt)"
sed "s|$CALIB|$scratch/moved.npy|" stats.json > moved.json
rc=0
"$qgru" -q quantize --model "$MODEL" --stats moved.json --range-method search -o none.qgru.json 2> err.txt || rc=$?
[ "$rc" = 1 ] || fail "recorded data gone: exit $rc"
grep -q "moved.npy (recorded in moved.json) is not found; give --data" err.txt || fail "message: $(cat err.txt)"
[ "$(wc -l < err.txt)" = 1 ] || fail "more than one line: $(cat err.txt)"
[ -e none.qgru.json ] && fail "a refused quantize wrote its artifact"
echo "range_search: ok"
