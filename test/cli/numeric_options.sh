#!/usr/bin/env bash
# Every numeric option of every subcommand at huge, negative and zero values (and an integer past int64, a
# double past the largest finite one), on small inputs (the bundled examples/digits model and data; the GPTQ
# test layer fc2 [32, 64]): each run exits 0, 1 or 2 as its table row says, a refusal with exactly one stderr
# line "qgru: error: ..." naming the option, never a crash (exit >= 128), never "out of memory" (these inputs
# need a few MiB: an option that makes qgru allocate more than its inputs justify is a bug), within a few
# seconds and under a memory limit of 3 GiB of address space, so that an allocation blow-up fails loudly.
# Usage: numeric_options.sh <qgru> <scratch-dir> <source-root>
set -u
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
digits=$root/examples/digits
gptq_data=$root/test/data/gptq
time_limit=${QGRU_NUMERIC_TIMEOUT:-30}
# Sanitizer builds reserve terabytes of address space for their shadow memory: no limit there (as corpus.sh).
memory_limit_kb=3145728
if [ -n "${QGRU_SANITIZED:-}" ] || grep -q -a -m1 __asan_init "$qgru"; then memory_limit_kb=unlimited; fi

cd "$scratch" || exit 1
mkdir ckpt
"$qgru" -q calibrate --model "$digits/gru.safetensors" --data "$digits/calib.npy" -o stats.json >/dev/null ||
  fail "calibrate for the inputs"
"$qgru" -q quantize --model "$digits/gru.safetensors" --stats stats.json -o model.qgru.json >/dev/null ||
  fail "quantize for the inputs"
"$qgru" -q gptq --weights "$gptq_data/model.safetensors" --tensor fc2.weight --activations "$gptq_data/x_fc2.npy" \
  -o ckpt/q.safetensors >/dev/null || fail "gptq for the inputs"

# The base command of each subcommand; the option and value of a row are appended, with -o into a fresh folder.
declare -A base
base[calibrate]="calibrate --model $digits/gru.safetensors --data $digits/calib.npy -o OUT/stats.json"
base[quantize]="quantize --model $digits/gru.safetensors --stats stats.json -o OUT/m.qgru.json"
base[verify]="verify --model $digits/gru.safetensors --artifact model.qgru.json --input $digits/test.npy"
base[export]="export --onnx --model model.qgru.json -o OUT/m.onnx"
base[gptq]="gptq --weights $gptq_data/model.safetensors --tensor fc2.weight --activations $gptq_data/x_fc2.npy -o OUT/q.safetensors"

big_int=9223372036854775807   # INT64_MAX
past_int=99999999999999999999 # past int64
# subcommand  option  value  expected exit (0 runs, 1 refused as bad input, 2 refused as usage). Numbers inside
# a value count too (percentile:P).
cases="
calibrate --percentile 1e300 2
calibrate --percentile 1e309 2
calibrate --percentile -1 2
calibrate --percentile 0 2
calibrate --percentile 100 0
calibrate --percentile 10 2
calibrate --method percentile:1e-300 1
quantize --range-method percentile:1e300 1
quantize --range-method percentile:10 1
calibrate --max-samples $big_int 0
calibrate --max-samples $past_int 2
calibrate --max-samples -1 2
calibrate --max-samples 0 0
quantize --search-sequences 100000000 0
quantize --search-sequences $big_int 2
quantize --search-sequences $past_int 2
quantize --search-sequences -5 2
quantize --search-sequences 0 2
quantize --search-evaluations 100000000 0
quantize --search-evaluations $big_int 2
quantize --search-evaluations -1 2
quantize --search-evaluations 0 2
quantize --search-seconds 1e300 0
quantize --search-seconds 1e309 2
quantize --search-seconds -1 2
quantize --search-seconds 0 0
verify --fail-below-sqnr 1e300 1
verify --fail-below-sqnr -1e300 0
verify --fail-below-sqnr 1e309 2
verify --fail-below-sqnr 0 0
export --opset $big_int 2
export --opset -1 2
export --opset 0 2
gptq --block-size 100000000 0
gptq --block-size $big_int 0
gptq --block-size $past_int 2
gptq --block-size -1 2
gptq --block-size 0 2
gptq --group-size 100000000 0
gptq --group-size $big_int 0
gptq --group-size -1 0
gptq --group-size -2 2
gptq --group-size 0 2
gptq --bits $big_int 2
gptq --bits -1 2
gptq --bits 0 2
gptq --damp 1e300 1
gptq --damp -1 1
gptq --damp 0 1
"

count=0
while read -r command option value expected; do
  [ -n "$command" ] || continue
  count=$((count + 1))
  out=$scratch/case$count
  mkdir -p "$out"
  read -r -a argv <<<"${base[$command]//OUT/$out} $option $value"
  # calibrate's --percentile is the percentile method's; quantize's --search-* options are the range search's,
  # whose budget stays small but for the option under test.
  [ "$command/$option" = calibrate/--percentile ] && argv+=(--method percentile)
  if [ "$command" = quantize ] && [ "$option" != --range-method ]; then
    argv+=(--range-method search --data "$digits/calib.npy" --no-widening)
    [ "$option" = --search-sequences ] || argv+=(--search-sequences 64)
    [ "$option" = --search-evaluations ] || argv+=(--search-evaluations 40)
  fi
  what="qgru $command $option $value"
  started=$SECONDS
  (
    ulimit -v "$memory_limit_kb"
    exec timeout -k 5 "$time_limit" "$qgru" -q "${argv[@]}"
  ) >"$out.stdout" 2>"$out.stderr"
  rc=$?
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "$what: still running after ${time_limit} s (or killed)"
  [ "$rc" -lt 128 ] || fail "$what: crashed (exit $rc): $(head -c 400 "$out.stderr")"
  ! grep -qi "out of memory" "$out.stderr" || fail "$what: ran out of memory on tiny inputs: $(cat "$out.stderr")"
  [ "$rc" -eq "$expected" ] || fail "$what: exit $rc, expected $expected: $(head -c 400 "$out.stderr")"
  if [ "$rc" -ne 0 ]; then
    [ "$(wc -l <"$out.stderr")" -eq 1 ] || fail "$what: stderr is not one line: $(head -c 600 "$out.stderr")"
    grep -q "^qgru: error: " "$out.stderr" || fail "$what: stderr does not start 'qgru: error: ': $(cat "$out.stderr")"
    # The message names the option (CLI11 names it with its dashes; damp's own check says "--damp"), or the value
    # for a number inside one ('percentile:10').
    grep -qF -- "$option" "$out.stderr" || grep -qF -- "'$value'" "$out.stderr" ||
      fail "$what: the message names neither $option nor '$value': $(cat "$out.stderr")"
    [ -z "$(ls -A "$out")" ] || fail "$what: refused, but wrote $(ls -A "$out")"
  fi
  echo "$what: exit $rc in $((SECONDS - started)) s"
done <<<"$cases"
[ "$count" -ge 40 ] || fail "only $count cases ran"
echo "numeric_options: $count cases pass"
