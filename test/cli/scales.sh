#!/usr/bin/env bash
# `qgru quantize --scales pow2|multiplier` on the bundled example, whose int8 preset names per-step EMA ranges
# that clip: with exact (multiplier) scales and those EMA ranges the output SQNR drops several dB below the
# power-of-two preset (the trap), and --scales multiplier's own ranges (those that fit exact scales) do not
# lose; a method the user names (--range-method, a config file's range_method) wins over them; --scales pow2 is
# the preset as it was; anything else is a usage error.
# Usage: scales.sh <qgru> <scratch-dir> <source-root>
set -u
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
find_python
digits=$root/examples/digits
cd "$scratch" || exit 1
"$qgru" -q calibrate --model "$digits/gru.safetensors" --data "$digits/calib.npy" -o stats.json >/dev/null ||
  fail "calibrate"

# sqnr NAME QUANTIZE-ARGS...: quantizes into NAME.qgru.json and prints the output SQNR `qgru verify` measures on
# the held-out data.
sqnr() {
  local name=$1
  shift
  "$qgru" quantize --model "$digits/gru.safetensors" --stats stats.json "$@" -o "$name.qgru.json" \
    >"$name.out" 2>"$name.err" || fail "quantize $*: $(cat "$name.err")"
  "$qgru" -q verify --model "$digits/gru.safetensors" --artifact "$name.qgru.json" --input "$digits/test.npy" \
    --report "$name.report.json" >/dev/null || fail "verify $name"
  "$python" -c "import json, sys; print(json.load(open(sys.argv[1]))['output']['sqnr_db'])" "$name.report.json"
}
# below A B MARGIN: A + MARGIN < B
below() { "$python" -c "import sys; a, b, m = map(float, sys.argv[1:]); sys.exit(0 if a + m < b else 1)" "$@"; }

pow2=$(sqnr pow2 --config int8)
trap_sqnr=$(sqnr trap --config int8 --scales multiplier --range-method ema)
exact=$(sqnr exact --config int8 --scales multiplier)
echo "int8: powers of two $pow2 dB; exact scales with EMA ranges $trap_sqnr dB; --scales multiplier $exact dB"
below "$trap_sqnr" "$pow2" 3 || fail "the example no longer shows the trap: EMA with exact scales $trap_sqnr dB, pow2 $pow2 dB"
below "$exact" "$pow2" 0 && fail "--scales multiplier ($exact dB) loses to powers of two ($pow2 dB)"
below "$trap_sqnr" "$exact" 3 || fail "--scales multiplier ($exact dB) is not clear of the trap ($trap_sqnr dB)"
grep -q '"scales": "multiplier"' exact.qgru.json || fail "the artifact's config does not say multiplier scales"
grep -q 'range methods that fit exact scales where none was named: percentile:99.9 for' exact.err ||
  fail "the log does not say which ranges --scales multiplier chose: $(cat exact.err)"

# A config file that names its method keeps it: the trap again, by the user's choice.
cp "$root/configs/int8.json" int8_ema.json  # names "range_method": "ema"
named=$(sqnr named --config int8_ema.json --scales multiplier)
[ "$named" = "$trap_sqnr" ] || fail "a config file's range_method ema with --scales multiplier gave $named dB, not $trap_sqnr"
# --scales pow2 is the preset as it is: the same tensor file, byte for byte.
sqnr same --config int8 --scales pow2 >/dev/null
cmp -s pow2.qgru.safetensors same.qgru.safetensors || fail "--scales pow2 changed the int8 artifact"
# 16-bit activations: exact scales with minmax ranges gain there too.
wide_pow2=$(sqnr wide_pow2 --config int16-activations)
wide_exact=$(sqnr wide_exact --config int16-activations --scales multiplier)
below "$wide_exact" "$wide_pow2" 0 && fail "int16-activations: --scales multiplier ($wide_exact dB) loses to pow2 ($wide_pow2 dB)"

"$qgru" -q quantize --model "$digits/gru.safetensors" --stats stats.json --scales exact -o bad.qgru.json 2>bad.err
[ $? -eq 2 ] || fail "--scales exact: expected exit 2"
grep -q "^qgru: error: --scales" bad.err || fail "--scales exact: $(cat bad.err)"
echo "scales: all cases pass"
