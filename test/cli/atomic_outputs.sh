#!/usr/bin/env bash
# Outputs are whole or absent (docs/HARDENING.md):
#  1. Two qgru processes writing the same output path at once: the file left is one of the two complete
#     outputs, byte for byte, and no temporary file remains.
#  2. SIGTERM and SIGINT while qgru computes and while it writes its output: the process dies of the signal,
#     and neither the output nor a temporary file (*.tmp.*) is left.
# Usage: bash atomic_outputs.sh <qgru-binary> <scratch-dir> <source-root>
set -u
QGRU=$1
SCRATCH=$2
ROOT=$3
MODEL=$ROOT/examples/digits/gru.safetensors
A=$ROOT/examples/digits/calib.npy
B=$ROOT/examples/digits/test.npy
rm -rf "$SCRATCH" && mkdir -p "$SCRATCH"
cd "$SCRATCH" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
no_temporaries() {  # no_temporaries DIR WHAT
  local stray
  stray=$(find "$1" -name '*.tmp.*')
  [ -z "$stray" ] || fail "$2: temporary files left: $stray"
}

# ---- 1. concurrent writers -------------------------------------------------------------------------------
"$QGRU" -q run --model "$MODEL" --input "$A" --output ref_a.npy >/dev/null || fail "reference run A"
"$QGRU" -q run --model "$MODEL" --input "$B" --output ref_b.npy >/dev/null || fail "reference run B"
cmp -s ref_a.npy ref_b.npy && fail "the two reference outputs are equal: the test could not tell them apart"
mkdir race
for round in 1 2 3 4; do
  "$QGRU" -q run --model "$MODEL" --input "$A" --output race/y.npy >/dev/null &
  first=$!
  "$QGRU" -q run --model "$MODEL" --input "$B" --output race/y.npy >/dev/null &
  second=$!
  wait $first || fail "round $round: writer A exited $?"
  wait $second || fail "round $round: writer B exited $?"
  if ! cmp -s race/y.npy ref_a.npy && ! cmp -s race/y.npy ref_b.npy; then
    fail "round $round: race/y.npy ($(stat -c %s race/y.npy) bytes) is neither complete output"
  fi
  no_temporaries race "round $round"
done
# Same for the statistics writer (a JSON file): calibrate twice into one path.
"$QGRU" -q calibrate --model "$MODEL" --data "$A" -o stats_a.json >/dev/null || fail "reference calibrate A"
"$QGRU" -q calibrate --model "$MODEL" --data "$B" -o stats_b.json >/dev/null || fail "reference calibrate B"
for round in 1 2; do
  "$QGRU" -q calibrate --model "$MODEL" --data "$A" -o race/stats.json >/dev/null &
  first=$!
  "$QGRU" -q calibrate --model "$MODEL" --data "$B" -o race/stats.json >/dev/null &
  second=$!
  wait $first || fail "calibrate round $round: writer A exited $?"
  wait $second || fail "calibrate round $round: writer B exited $?"
  if ! cmp -s race/stats.json stats_a.json && ! cmp -s race/stats.json stats_b.json; then
    fail "calibrate round $round: race/stats.json is neither complete output"
  fi
  no_temporaries race "calibrate round $round"
done

# ---- 2. signals --------------------------------------------------------------------------------------------
# A larger input (zeros: the values do not matter, only the work and the output size): x [8, 8000, 8] float32,
# whose output y [8, 8000, 64] is 16 MB, so both the computation and the write take a while.
T=8 N=8000 C=8
header="{'descr': '<f4', 'fortran_order': False, 'shape': ($T, $N, $C), }"
pad=$((64 - (10 + ${#header} + 1) % 64))
{
  printf '\x93NUMPY\x01\x00'
  len=$((${#header} + pad + 1))
  printf "\\x$(printf %02x $((len & 255)))\\x$(printf %02x $((len >> 8)))"
  printf '%s%*s\n' "$header" "$pad" ''
  head -c $((T * N * C * 4)) /dev/zero
} >big.npy
"$QGRU" -q run --model "$MODEL" --input big.npy --output big_ref.npy --hn big_ref_hn.npy >/dev/null 2>big_ref.err ||
  fail "run on the generated input failed: $(cat big_ref.err)"

# signal_test NAME SIGNAL WHEN: start a run, send SIGNAL when WHEN is "compute" (shortly after the start) or
# "write" (as soon as its temporary file appears), then check what is left.
signal_test() {
  local name=$1 signal=$2 when=$3 dir=sig_$1 pid rc caught=0 tries=0
  while [ $tries -lt 5 ]; do
    tries=$((tries + 1))
    rm -rf "$dir" && mkdir "$dir"
    "$QGRU" -q run --model "$MODEL" --input big.npy --output "$dir/y.npy" --hn "$dir/hn.npy" >/dev/null 2>"$dir.err" &
    pid=$!
    if [ "$when" = compute ]; then
      sleep 0.05
      caught=1
    else
      caught=0
      while kill -0 $pid 2>/dev/null; do
        if compgen -G "$dir/*.tmp.*" >/dev/null; then caught=1 && break; fi
      done
    fi
    kill -s "$signal" $pid 2>/dev/null
    wait $pid
    rc=$?
    [ $caught -eq 1 ] && [ $rc -ne 0 ] && break  # signalled at the intended moment; otherwise try again
  done
  if [ $caught -ne 1 ] || [ $rc -eq 0 ]; then
    echo "note: $name: could not signal qgru during the $when phase in $tries tries (machine too fast?)" >&2
    return
  fi
  local expected_rc=$((128 + $(kill -l "$signal")))
  [ $rc -eq $expected_rc ] || fail "$name: exit $rc, expected $expected_rc (death by $signal): $(cat "$dir.err")"
  no_temporaries "$dir" "$name"
  # The two outputs are renamed into place one after the other (AtomicFileGroup::commit_all): a signal between
  # the renames can leave y whole without h_n. A file present must be whole; a partial file is a failure.
  if [ -e "$dir/y.npy" ]; then
    cmp -s "$dir/y.npy" big_ref.npy || fail "$name: a partial y.npy is left after $signal during $when"
    [ -e "$dir/hn.npy" ] || echo "note: $name: y.npy committed, hn.npy not (signal between the two renames)" >&2
  fi
  if [ -e "$dir/hn.npy" ]; then
    cmp -s "$dir/hn.npy" big_ref_hn.npy || fail "$name: a partial hn.npy is left after $signal during $when"
  fi
}
signal_test term_compute TERM compute
signal_test int_compute INT compute
signal_test term_write TERM write
signal_test int_write INT write

[ "$failures" -eq 0 ] && echo "atomic_outputs: all checks passed"
[ "$failures" -eq 0 ]
