#!/usr/bin/env bash
# Usage errors that name what was wrong: a word that is no subcommand (listed, with the nearest name when it
# is a typo), and `qgru gptq` given both --activations and --hessian (or neither). Each: exit 2, one line.
# Usage: usage_words.sh <qgru> <scratch-dir> <source-root>
set -u
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
data=$root/test/data/gptq

# expect_usage PATTERN ARGS...: `qgru ARGS` exits 2 with exactly one stderr line matching PATTERN (extended
# regex) and nothing on stdout.
expect_usage() {
  local pattern=$1 rc
  shift
  "$qgru" "$@" >"$scratch/out" 2>"$scratch/err"
  rc=$?
  [ "$rc" -eq 2 ] || fail "qgru $*: exit $rc, expected 2: $(cat "$scratch/err")"
  [ "$(wc -l <"$scratch/err")" -eq 1 ] || fail "qgru $*: stderr is not one line: $(cat "$scratch/err")"
  grep -Eq "^qgru: error: $pattern" "$scratch/err" || fail "qgru $*: message does not match '$pattern': $(cat "$scratch/err")"
  [ ! -s "$scratch/out" ] || fail "qgru $*: printed on stdout"
}

expect_usage "'frobnicate' is not a qgru subcommand; the subcommands are [a-z]+(, [a-z]+)+ \(see --help\)$" \
  frobnicate --model x
for name in calibrate quantize run verify inspect export gptq linear; do
  grep -Eq "subcommands are (.*, )?$name(,| )" "$scratch/err" || fail "the list lacks $name: $(cat "$scratch/err")"
done
expect_usage "'quantise' is not a qgru subcommand \(did you mean 'quantize'\?\); " quantise --model x
expect_usage "'calbrate' is not a qgru subcommand \(did you mean 'calibrate'\?\); " -q calbrate
expect_usage "'gtpq' is not a qgru subcommand \(did you mean 'gptq'\?\); " -v gtpq
expect_usage "'Run' is not a qgru subcommand \(did you mean 'run'\?\); " Run
# A subcommand's own options are not taken for the subcommand.
expect_usage "A subcommand is required" -q

w=(gptq --weights "$data/model.safetensors" --tensor fc1.weight -o "$scratch/q/out.safetensors")
mkdir "$scratch/a"
"$qgru" -q gptq --weights "$data/model.safetensors" --tensor fc1.weight --activations "$data/x1.npy" \
  --save-hessian "$scratch/h.npy" -o "$scratch/a/out.safetensors" >/dev/null || fail "gptq run for the Hessian"
expect_usage "gptq: give --activations \(one or more\) or --hessian for 'fc1.weight', not both" "${w[@]}" \
  --activations "$data/x1.npy" --hessian "$scratch/h.npy"
expect_usage "gptq: give --activations \(one or more\) or --hessian for 'fc1.weight'( \(see|$)" "${w[@]}"
[ ! -e "$scratch/q" ] || fail "a refused gptq run made its output folder"
echo "usage_words: all cases pass"
