#!/usr/bin/env bash
# cuBLAS is loaded when a CUDA executor first needs it (cuda/include/qgru_cuda/cublas_library.h), never at start:
# the qgru binary has no libcublas / libcublasLt among its needed libraries (directly or through another), and
# `qgru --version` and a CPU `qgru run` of a quantized artifact finish without the dynamic loader opening either
# (LD_DEBUG=files lists every file it opens, dlopen's included). A CPU-only build passes the same checks.
# Then, in a CUDA build, the device choice once a device is usable: with QGRU_CUBLAS_LIBRARY naming a file that does
# not exist, --device cuda is one line saying so (exit 1, no output written) for an integer artifact (the executor
# chooser) and a float model (the CLI's device option), and --device auto runs on the CPU with that reason. A GPU
# is stood in for by the probe's test seams (QGRU_TEST_CUDA_DRIVER_VERSION, QGRU_TEST_CUDA_DEVICE_COUNT:
# cuda/include/qgru_cuda/device.h): the cuBLAS check comes before anything runs on the device.
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
echo "cublas_at_first_use: $(wc -l < run.opened) libraries opened by a CPU run, none of them cuBLAS"

cuda_line=$(grep '^CUDA: ' version.out) || fail "--version has no CUDA line: $(cat version.out)"
if [[ "$cuda_line" == "CUDA: none (CPU only: built without CUDA)" ]]; then
  echo "cublas_at_first_use: ok (CPU-only build)"
  exit 0
fi
[[ "$cuda_line" =~ built\ with\ CUDA\ ([0-9]+)\.([0-9]+) ]] || fail "--version's CUDA line names no toolkit: $cuda_line"
export QGRU_TEST_CUDA_DRIVER_VERSION=$((BASH_REMATCH[1] * 1000 + BASH_REMATCH[2] * 10))  # a driver that serves it
export QGRU_TEST_CUDA_DEVICE_COUNT=1
missing=libqgru_no_such_cublas.so
expected="^qgru: error: --device cuda: no usable CUDA device: cuBLAS \($missing\) could not be loaded: $missing: .*LD_LIBRARY_PATH"
float_model="$root/test/data/golden_fixed/random_l2_bidir/model.safetensors"
for input_model in "$model" "$float_model"; do
  rc=0
  QGRU_CUBLAS_LIBRARY=$missing "$qgru" run --model "$input_model" --input x.npy --output refused.npy --device cuda \
    > refused.out 2> refused.err || rc=$?
  [ "$rc" = 1 ] || fail "--device cuda without cuBLAS ($input_model): expected exit 1, got $rc: $(cat refused.err)"
  [ "$(wc -l < refused.err)" = 1 ] || fail "--device cuda without cuBLAS: expected one stderr line: $(cat refused.err)"
  grep -Eq "$expected" refused.err || fail "--device cuda without cuBLAS ($input_model): $(cat refused.err)"
  [ ! -e refused.npy ] || fail "--device cuda without cuBLAS wrote refused.npy"
  QGRU_CUBLAS_LIBRARY=$missing "$qgru" run --model "$input_model" --input x.npy --output auto.npy --device auto \
    > auto.out 2> auto.err || fail "--device auto without cuBLAS ($input_model) failed: $(cat auto.err)"
  grep -q "device auto: using the CPU (cuBLAS ($missing) could not be loaded" auto.err ||
    fail "--device auto did not give the missing cuBLAS as its reason ($input_model): $(cat auto.err)"
  "$qgru" run --model "$input_model" --input x.npy --output cpu.npy --device cpu > cpu.out 2> cpu.err ||
    fail "qgru run --device cpu ($input_model) failed: $(cat cpu.err)"
  cmp -s auto.npy cpu.npy || fail "--device auto's CPU fallback differs from --device cpu ($input_model)"
  rm -f auto.npy cpu.npy
done
echo "cublas_at_first_use: $(head -n 1 refused.err)"
echo "cublas_at_first_use: ok"
