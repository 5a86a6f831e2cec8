#!/usr/bin/env bash
# cuBLAS is loaded when a CUDA executor first needs it (cuda/include/qgru_cuda/cublas_library.h), never at start:
# the qgru binary has no libcublas / libcublasLt among its needed libraries (directly or through another), and
# `qgru --version` and a CPU `qgru run` of a quantized artifact finish without the dynamic loader opening either
# (LD_DEBUG=files lists every file it opens, dlopen's included). A CPU-only build passes the same checks.
# Usage: cublas_at_first_use.sh <qgru-binary> <scratch-dir> <source-root>
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
cd "$scratch"

readelf -d "$qgru" > needed.txt || fail "readelf -d $qgru failed"
grep -q '(NEEDED)' needed.txt || fail "readelf -d lists no needed library at all (its format changed?): $(head -n 5 needed.txt)"
if grep '(NEEDED)' needed.txt | grep -q 'libcublas'; then
  fail "qgru links cuBLAS at start: $(grep '(NEEDED)' needed.txt | grep libcublas | tr -s ' ' | tr '\n' ' ')"
fi
ldd "$qgru" > ldd.txt || fail "ldd $qgru failed"
! grep -q 'libcublas' ldd.txt || fail "qgru loads cuBLAS through another library: $(grep libcublas ldd.txt | tr '\n' ' ')"

# opened_libraries LOG: the shared objects the loader opened, one per line, from an LD_DEBUG=files log.
opened_libraries() { sed -nE 's/.*file=([^ ]+) \[0\];  (needed|dynamically loaded) by .*/\1/p' "$1" | sort -u; }

LD_DEBUG=files LD_DEBUG_OUTPUT="$scratch/version.debug" "$qgru" --version > version.out 2> version.err ||
  fail "qgru --version failed: $(cat version.err)"
grep -q '^qgru ' version.out || fail "qgru --version printed no version: $(cat version.out)"
opened_libraries version.debug.* > version.opened
grep -q 'libc\.so' version.opened || fail "LD_DEBUG=files recorded no library (its format changed?): $(head -n 3 version.debug.*)"
! grep -q libcublas version.opened || fail "qgru --version loaded cuBLAS: $(grep libcublas version.opened | tr '\n' ' ')"

model="$root/test/data/golden_fixed/random_l2_bidir/model_int8.qgru.json"  # nn.GRU(5, 7, 2 layers, bidirectional)
find_python
"$python" -c "import numpy as np; np.save('x.npy', np.linspace(-1, 1, 3 * 2 * 5, dtype=np.float32).reshape(3, 2, 5))"
LD_DEBUG=files LD_DEBUG_OUTPUT="$scratch/run.debug" "$qgru" run --model "$model" --input x.npy --output y.npy \
  --device cpu > run.out 2> run.err || fail "qgru run --device cpu failed: $(cat run.err)"
[ -s y.npy ] || fail "qgru run --device cpu wrote no output"
opened_libraries run.debug.* > run.opened
! grep -q libcublas run.opened || fail "a CPU run loaded cuBLAS: $(grep libcublas run.opened | tr '\n' ' ')"
echo "cublas_at_first_use: ok ($(wc -l < run.opened) libraries opened by a CPU run, none of them cuBLAS)"
