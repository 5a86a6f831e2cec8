#!/usr/bin/env bash
# Outputs never destroy anything (docs/HARDENING.md, "Outputs never destroy anything"): every subcommand names
# its inputs and outputs to one output policy, which refuses before anything is read or written (exit 2, one
# line naming the flag and the file) an output that is an input or another output under any name (./x, a hard
# link, a symbolic link, the artifact's tensor file, the quantize_config.json beside a checkpoint), an output
# that is a device node, a FIFO or a directory, and an input that is not a regular file (nothing blocks). Each
# refusal leaves every file as it was (checksums) and no output or temporary file. Then: the artifact naming
# rule, paths with a newline or bytes that are not UTF-8, and concurrent writers of one artifact (50 rounds,
# and an outside flock on the folder holding a writer back).
# Usage: outputs_never_destroy.sh <qgru-binary> <scratch-dir> <source-root>
set -u
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
# ---- inputs: a tiny GRU (C = 4, H = 5) and a linear layer [8, 32] from the corpus, and what qgru makes of them
make_hazard_inputs
ln x.npy x_hardlink.npy
ln -s x.npy x_symlink.npy
mkdir special && mkfifo special/fifo.npy special/fifo.json
mkdir outdir

# ---- 1. the float model replaced by the artifact's tensor file (gru.json beside gru.safetensors) ----------------
expect_refusal 2 "artifact gru.json: .*NAME.qgru.json.*use gru.qgru.json" \
  quantize --model gru.safetensors --stats stats.json -o gru.json
expect_refusal 2 "artifact out/.qgru.json: .*use out/model.qgru.json" \
  quantize --model gru.safetensors --stats stats.json -o out/.qgru.json
cp gru.safetensors named.qgru.safetensors
expect_refusal 2 "-o \(its tensor file\) named.qgru.safetensors is the same file as --model named.qgru.safetensors" \
  quantize --model named.qgru.safetensors --stats stats.json -o named.qgru.json
rm named.qgru.safetensors

# ---- 2. an output that is an input, under every name ------------------------------------------------------------
same_as_input="is the same file as .*an output must never replace an input"
expect_refusal 2 "--output x.npy is the same file as --input x.npy" \
  run --model gru.qgru.json --input x.npy --output x.npy
expect_refusal 2 "--output ./x.npy $same_as_input" run --model gru.qgru.json --input x.npy --output ./x.npy
expect_refusal 2 "--output $work/x.npy $same_as_input" run --model gru.qgru.json --input x.npy --output "$work/x.npy"
expect_refusal 2 "--output outdir/../x.npy $same_as_input" run --model gru.qgru.json --input x.npy --output outdir/../x.npy
expect_refusal 2 "--output x_hardlink.npy $same_as_input" run --model gru.qgru.json --input x.npy --output x_hardlink.npy
expect_refusal 2 "--output x_symlink.npy $same_as_input" run --model gru.qgru.json --input x.npy --output x_symlink.npy
expect_refusal 2 "--output x.npy is the same file as --h0 x.npy" run --model gru.qgru.json --input acts.npy --h0 x.npy --output x.npy
expect_refusal 2 "--output gru.qgru.safetensors is the same file as --model \(its tensor file\)" \
  run --model gru.qgru.json --input x.npy --output gru.qgru.safetensors
expect_refusal 2 "--output x.npy is the same file as --lengths x.npy" \
  run --model gru.qgru.json --input acts.npy --lengths x.npy --output x.npy
expect_refusal 2 "--hn gru.qgru.json is the same file as --model gru.qgru.json" \
  run --model gru.qgru.json --input x.npy --output outdir/y.npy --hn gru.qgru.json
expect_refusal 2 "--output gru.safetensors is the same file as --model" \
  run --model gru.safetensors --input x.npy --output gru.safetensors
expect_refusal 2 "-o gru.safetensors $same_as_input" calibrate --model gru.safetensors --data x.npy -o gru.safetensors
expect_refusal 2 "-o x.npy is the same file as --data x.npy" calibrate --model gru.safetensors --data x.npy -o x.npy
expect_refusal 2 "--html gru.safetensors $same_as_input" \
  calibrate --model gru.safetensors --data x.npy -o outdir/s.json --html gru.safetensors
expect_refusal 2 "-o ./stats.json is the same file as --merge stats.json" calibrate --merge stats.json -o ./stats.json
expect_refusal 2 "--html gru.safetensors $same_as_input" \
  quantize --model gru.safetensors --stats stats.json --html gru.safetensors -o outdir/a.qgru.json
expect_refusal 2 "--html x.npy is the same file as --stats \(a data file it records\) x.npy" \
  quantize --model gru.safetensors --stats stats.json --range-method search --html x.npy -o outdir/a.qgru.json
expect_refusal 2 "--report x.npy $same_as_input" \
  verify --model gru.safetensors --artifact gru.qgru.json --input x.npy --report x.npy
expect_refusal 2 "--html gru.qgru.safetensors is the same file as --artifact \(its tensor file\)" \
  verify --model gru.safetensors --artifact gru.qgru.json --input x.npy --html gru.qgru.safetensors
expect_refusal 2 "-o linear.safetensors is the same file as --weights" \
  gptq --weights linear.safetensors --tensor fc.weight --activations acts.npy -o linear.safetensors
expect_refusal 2 "--save-hessian acts.npy is the same file as --activations" \
  gptq --weights linear.safetensors --tensor fc.weight --activations acts.npy --save-hessian acts.npy -o outdir/q.safetensors
expect_refusal 2 "--output acts.npy $same_as_input" \
  linear --checkpoint ckpt/q.safetensors --layer fc --input acts.npy --output acts.npy
mkdir ext && cp "$root/test/data/onnx/pytorch_l2_bidir_external/model.onnx" "$root/test/data/onnx/pytorch_l2_bidir_external/weights.bin" ext/
expect_refusal 2 "-o ext/weights.bin is the same file as --model \(its external data\)" \
  calibrate --model ext/model.onnx --data x.npy -o ext/weights.bin
expect_refusal 2 "--output ext/weights.bin is the same file as --model \(its external data\)" \
  run --model ext/model.onnx --input x.npy --output ext/weights.bin
expect_refusal 2 "--report ext/weights.bin is the same file as --model \(its external data\)" \
  verify --model ext/model.onnx --artifact gru.qgru.json --input x.npy --report ext/weights.bin
expect_refusal 2 "-o gru.safetensors $same_as_input" export --onnx --model gru.safetensors -o gru.safetensors
expect_refusal 2 "-o gru.qgru.safetensors is the same file as --model \(its tensor file\)" \
  export --onnx --model gru.qgru.json -o gru.qgru.safetensors
expect_refusal 2 "--output ckpt/quantize_config.json is the same file as --checkpoint \(its quantize_config.json\)" \
  linear --checkpoint ckpt/q.safetensors --layer fc --input acts.npy --output ckpt/quantize_config.json

# ---- 3. two outputs of one command on one file ----------------------------------------------------------------
two_outputs="two outputs of one command need two files"
expect_refusal 2 "--hn outdir/y.npy is the same file as --output outdir/y.npy: $two_outputs" \
  run --model gru.qgru.json --input x.npy --output outdir/y.npy --hn outdir/y.npy
expect_refusal 2 "--codes ./outdir/y.npy is the same file as --output outdir/y.npy: $two_outputs" \
  run --model gru.qgru.json --input x.npy --output outdir/y.npy --codes ./outdir/y.npy
expect_refusal 2 "--dump-intermediates outdir/y.npy .*: $two_outputs" \
  run --model gru.qgru.json --input x.npy --output outdir/y.npy --dump-intermediates outdir/y.npy
expect_refusal 2 "--codes outdir/hn.npy is the same file as --hn outdir/hn.npy" \
  run --model gru.qgru.json --input x.npy --output outdir/y.npy --hn outdir/hn.npy --codes outdir/hn.npy
expect_refusal 2 "--suggest-config outdir/a.qgru.json is the same file as -o outdir/a.qgru.json" \
  quantize --model gru.safetensors --stats stats.json --range-method search --suggest-config outdir/a.qgru.json \
  -o outdir/a.qgru.json
expect_refusal 2 "--html outdir/s.json is the same file as -o outdir/s.json" \
  calibrate --model gru.safetensors --data x.npy -o outdir/s.json --html outdir/s.json
expect_refusal 2 "--html outdir/r.json is the same file as --report outdir/r.json" \
  verify --model gru.safetensors --artifact gru.qgru.json --input x.npy --report outdir/r.json --html outdir/r.json
expect_refusal 2 "-o \(its quantize_config.json\) outdir/quantize_config.json is the same file as -o" \
  gptq --weights linear.safetensors --tensor fc.weight --activations acts.npy -o outdir/quantize_config.json
expect_refusal 2 "--save-hessian outdir/q.safetensors is the same file as -o" \
  gptq --weights linear.safetensors --tensor fc.weight --activations acts.npy --save-hessian outdir/q.safetensors \
  -o outdir/q.safetensors

# ---- 4. outputs that are not regular files: device nodes, a FIFO, a directory, a missing folder ----------------
# As root (CI runs as root) a rename over /dev/null used to replace the device node with a regular file; the
# refusal comes before anything is written, whoever runs it, so this needs no root to be meaningful.
device_refused="is a character device; qgru writes an output beside its path"
expect_refusal 2 "--output /dev/null: $device_refused" run --model gru.qgru.json --input x.npy --output /dev/null
expect_refusal 2 "--hn /dev/full: $device_refused" run --model gru.qgru.json --input x.npy --output outdir/y.npy --hn /dev/full
expect_refusal 2 "-o /dev/null: $device_refused" export --onnx --model gru.qgru.json -o /dev/null
expect_refusal 2 "-o /dev/null: $device_refused" calibrate --model gru.safetensors --data x.npy -o /dev/null
expect_refusal 2 "--report /dev/full: $device_refused" \
  verify --model gru.safetensors --artifact gru.qgru.json --input x.npy --report /dev/full
expect_refusal 2 "-o /dev/null: $device_refused" gptq --weights linear.safetensors --tensor fc.weight --activations acts.npy -o /dev/null
expect_refusal 2 "--output /dev/full: $device_refused" linear --checkpoint ckpt/q.safetensors --layer fc --input acts.npy --output /dev/full
expect_refusal 2 "-o \(its tensor file\) /dev/null.qgru.safetensors|artifact /dev/null" \
  quantize --model gru.safetensors --stats stats.json -o /dev/null
for node in /dev/null /dev/full; do [ -c "$node" ] || fail "$node is no longer a character device"; done
[ -z "$(find /dev -maxdepth 1 -name '*.tmp.*')" ] || fail "temporary files left in /dev: $(find /dev -maxdepth 1 -name '*.tmp.*')"
expect_refusal 2 "--output special/fifo.npy: is a FIFO; qgru writes" run --model gru.qgru.json --input x.npy --output special/fifo.npy
expect_refusal 2 "-o outdir: is a directory" calibrate --model gru.safetensors --data x.npy -o outdir
expect_refusal 2 "--output outdir/: is a directory|names a folder" run --model gru.qgru.json --input x.npy --output outdir/
expect_refusal 2 "--output no_such_folder/y.npy: its folder no_such_folder does not exist" \
  run --model gru.qgru.json --input x.npy --output no_such_folder/y.npy

# ---- 5. inputs that are not regular files are refused before anything opens them (no read blocks) -------------
not_regular="qgru reads only regular files"
expect_refusal 2 "--input special/fifo.npy: is a FIFO; $not_regular" run --model gru.qgru.json --input special/fifo.npy --output outdir/y.npy
expect_refusal 2 "--input /dev/zero: is a character device; $not_regular" run --model gru.qgru.json --input /dev/zero --output outdir/y.npy
expect_refusal 2 "--model special/fifo.json: is a FIFO" run --model special/fifo.json --input x.npy --output outdir/y.npy
expect_refusal 2 "MODEL special/fifo.json: is a FIFO" inspect special/fifo.json
expect_refusal 2 "--data special/fifo.npy: is a FIFO" calibrate --model gru.safetensors --data special/fifo.npy -o outdir/s.json
expect_refusal 2 "--stats special/fifo.json: is a FIFO" quantize --model gru.safetensors --stats special/fifo.json -o outdir/a.qgru.json
expect_refusal 2 "--config special/fifo.json: is a FIFO" quantize --model gru.safetensors --stats stats.json --config special/fifo.json -o outdir/a.qgru.json
expect_refusal 2 "--activations special/fifo.npy: is a FIFO" \
  gptq --weights linear.safetensors --tensor fc.weight --activations special/fifo.npy -o outdir/q.safetensors
echo '[{"tensor": "fc.weight", "activations": ["special/fifo.npy"]}]' >manifest_fifo.json
expect_refusal 2 "--activations \(in --manifest\) special/fifo.npy: is a FIFO" \
  gptq --weights linear.safetensors --manifest manifest_fifo.json -o outdir/q.safetensors
mkdir ckpt_fifo_config && cp ckpt/q.safetensors ckpt_fifo_config/ && mkfifo ckpt_fifo_config/quantize_config.json
expect_refusal 2 "--checkpoint \(its quantize_config.json\) ckpt_fifo_config/quantize_config.json: is a FIFO" \
  linear --checkpoint ckpt_fifo_config/q.safetensors --layer fc --input acts.npy --output outdir/y.npy
# An artifact whose JSON names a FIFO as its tensor file.
sed 's/"tensor_file": "gru.qgru.safetensors"/"tensor_file": "fifo.npy"/' gru.qgru.json >special/a.qgru.json
expect_refusal 2 "--model \(its tensor file\) special/fifo.npy: is a FIFO" \
  run --model special/a.qgru.json --input x.npy --output outdir/y.npy
rm special/a.qgru.json
# A FIFO inside --data-dir is not a *.npy file to read: the regular files are, and nothing blocks.
mkdir datadir && cp x.npy datadir/a.npy && mkfifo datadir/b.npy
timeout 20 "$qgru" -q calibrate --model gru.safetensors --data-dir datadir -o outdir/dd.json >/dev/null ||
  fail "calibrate --data-dir with a FIFO inside: exit $?"
grep -q '"path": "datadir/a.npy"' outdir/dd.json && ! grep -q 'b.npy' outdir/dd.json ||
  fail "calibrate --data-dir read other than the regular *.npy file"
rm -r datadir outdir/dd.json

# ---- 6. paths with a newline and bytes that are not UTF-8 are valid paths; messages about them stay one line --
odd_in=$'in\n\xff.npy'
odd_out=$'out\xfe\n.npy'
cp x.npy "$odd_in"
"$qgru" -q run --model gru.qgru.json --input x.npy --output outdir/plain.npy >/dev/null || fail "plain run: exit $?"
"$qgru" -q run --model gru.qgru.json --input "$odd_in" --output "outdir/$odd_out" >/dev/null ||
  fail "run with a newline and non-UTF-8 bytes in the paths: exit $?"
cmp -s "outdir/$odd_out" outdir/plain.npy || fail "the odd-named output differs from the plain one"
rm -f outdir/plain.npy "outdir/$odd_out"
expect_refusal 2 'in\\x0a\\xff.npy is the same file as --input in\\x0a\\xff.npy' \
  run --model gru.qgru.json --input "$odd_in" --output "./$odd_in"
# An .npy given as the model: refused by its reader, naming the odd path in one line.
expect_refusal 1 'in\\x0a\\xff.npy' quantize --model "$odd_in" --stats stats.json -o outdir/odd.qgru.json
odd_model=$'gru\xff.safetensors'
cp gru.safetensors "$odd_model"
"$qgru" -q quantize --model "$odd_model" --stats stats.json --allow-model-mismatch -o outdir/odd.qgru.json 2>/dev/null ||
  fail "quantize with a non-UTF-8 model path: exit $?"
grep -q $'"path": "gru\xef\xbf\xbd.safetensors"' outdir/odd.qgru.json ||
  fail "the artifact does not record the non-UTF-8 path as UTF-8 (U+FFFD)"
"$qgru" -q run --model outdir/odd.qgru.json --input x.npy --output outdir/odd_y.npy >/dev/null ||
  fail "the artifact with a non-UTF-8 provenance path does not read back"
rm -f "$odd_in" "$odd_model" outdir/odd*

# ---- 7. concurrent writers of one artifact (JSON + tensor file): always one writer's complete pair ----------
# One set of statistics, two range methods (minmax, ema): two different artifacts A and B.
# The race runs in a tmpfs folder where there is one (/dev/shm): fsync costs nothing there, so the 50 rounds
# measure the lock and the renames, not the disk; the rename and flock semantics are the same.
race=$(mktemp -d /dev/shm/qgru_race.XXXXXX 2>/dev/null || mktemp -d "$scratch/race.XXXXXX")
trap 'rm -rf "$race"' EXIT
mkdir ref_a ref_b
"$qgru" -q quantize --model gru.safetensors --stats stats.json --range-method minmax -o ref_a/m.qgru.json || fail "reference A"
"$qgru" -q quantize --model gru.safetensors --stats stats.json --range-method ema -o ref_b/m.qgru.json || fail "reference B"
cmp -s ref_a/m.qgru.safetensors ref_b/m.qgru.safetensors && fail "A and B are equal: the race could not tell them apart"
pair_is() { cmp -s "$race"/m.qgru.json "$1/m.qgru.json" && cmp -s "$race"/m.qgru.safetensors "$1/m.qgru.safetensors"; }
# 50 rounds in the Release stage; the sanitizer stage (10x slower processes) runs 5, enough for memory errors.
rounds=50
if [ -n "${QGRU_SANITIZED:-}" ] || grep -q -a -m1 __asan_init "$qgru"; then rounds=5; fi
for round in $(seq "$rounds"); do
  "$qgru" -q quantize --model gru.safetensors --stats stats.json --range-method minmax -o "$race"/m.qgru.json &
  first=$!
  "$qgru" -q quantize --model gru.safetensors --stats stats.json --range-method ema -o "$race"/m.qgru.json &
  second=$!
  wait $first || fail "round $round: writer A exited $?"
  wait $second || fail "round $round: writer B exited $?"
  pair_is ref_a || pair_is ref_b || fail "round $round: the JSON and the tensor file come from different writers"
  [ "$(ls "$race")" = $'m.qgru.json\nm.qgru.safetensors' ] || fail "round $round: left in the folder: $(ls "$race")"
done
# The writers take an flock on the folder around their renames: one held from outside holds them back.
rm "$race"/*
flock "$race" sleep 1 &
holder=$!
sleep 0.2
"$qgru" -q quantize --model gru.safetensors --stats stats.json --range-method minmax -o "$race"/m.qgru.json &
writer=$!
sleep 0.6
[ ! -e "$race"/m.qgru.json ] || fail "a writer published its artifact while the folder's lock was held"
wait $holder
wait $writer || fail "the writer held back by the lock failed: exit $?"
pair_is ref_a || fail "the writer held back by the lock did not write its artifact"
[ "$(ls "$race")" = $'m.qgru.json\nm.qgru.safetensors' ] || fail "left in the folder: $(ls "$race")"

echo "outputs_never_destroy: $refusals refusals checked, $rounds concurrent rounds: all passed"
