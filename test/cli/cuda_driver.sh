#!/usr/bin/env bash
# qgru --version names the CUDA toolkit the binary was built with and the driver it needs; a driver too old for
# that toolkit is a one-line error saying so (not "no GPU"), and --device auto logs it as the reason it runs on
# the CPU. The driver's answer is stood in for by QGRU_TEST_CUDA_DRIVER_VERSION (cuda/include/qgru_cuda/device.h),
# so this runs on machines without a GPU or a driver. A build without CUDA says so in --version and nothing more.
# Usage: cuda_driver.sh <qgru-binary> <scratch-dir> <source-root>
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
cd "$scratch"

"$qgru" --version > version.out 2> version.err || fail "qgru --version failed: $(cat version.err)"
head -n 1 version.out | grep -Eq '^qgru [0-9]+\.[0-9]+\.[0-9]+$' || fail "first line of --version: $(cat version.out)"
cuda_line=$(grep '^CUDA: ' version.out) || fail "--version has no CUDA line: $(cat version.out)"
if [[ "$cuda_line" == "CUDA: none (CPU only: built without CUDA)" ]]; then
  echo "cuda_driver: CPU-only build: --version says so"
  echo "cuda_driver: ok"
  exit 0
fi
[[ "$cuda_line" =~ ^CUDA:\ built\ with\ CUDA\ ([0-9]+)\.([0-9]+)\ .*needs\ an\ NVIDIA\ driver\ for\ CUDA\ ([0-9]+)\.0\ or\ newer ]] ||
  fail "--version's CUDA line does not name the toolkit and the driver: $cuda_line"
major="${BASH_REMATCH[1]}"
[ "${BASH_REMATCH[3]}" = "$major" ] || fail "the driver requirement's major differs from the toolkit's: $cuda_line"
case "$major" in
  12) grep -q "Linux driver 525 or newer" <<<"$cuda_line" || fail "CUDA 12 build must name the 525 driver: $cuda_line" ;;
  13) grep -q "Linux driver 580 or newer" <<<"$cuda_line" || fail "CUDA 13 build must name the 580 driver: $cuda_line" ;;
esac
echo "cuda_driver: $cuda_line"

find_python
"$python" -c "import numpy as np; np.save('x.npy', np.zeros((3, 2, 5), np.float32))"
model="$root/test/data/golden_fixed/random_l2_bidir/model.safetensors"  # nn.GRU(5, 7, num_layers=2, bidirectional)
old=$(((major - 1) * 1000 + 20))  # e.g. 12020: what a 535-series driver reports, for a CUDA 13 build
old_text="$((major - 1)).2"

rc=0
QGRU_TEST_CUDA_DRIVER_VERSION=$old "$qgru" run --model "$model" --input x.npy --output y.npy --device cuda \
  > run.out 2> run.err || rc=$?
[ "$rc" = 1 ] || fail "--device cuda with an old driver: expected exit 1, got $rc ($(cat run.err))"
[ "$(wc -l < run.err)" = 1 ] || fail "--device cuda with an old driver: expected one stderr line: $(cat run.err)"
grep -q "^qgru: error: --device cuda: no usable CUDA device: the NVIDIA driver is too old: it supports CUDA $old_text, this qgru was built with CUDA $major\." run.err ||
  fail "old-driver message: $(cat run.err)"
! grep -qi "no GPU" run.err || fail "an old driver is reported as a missing GPU: $(cat run.err)"
[ ! -e y.npy ] || fail "y.npy written after a refused run"

QGRU_TEST_CUDA_DRIVER_VERSION=$old "$qgru" run --model "$model" --input x.npy --output auto.npy --device auto \
  > auto.out 2> auto.err || fail "--device auto with an old driver failed: $(cat auto.err)"
grep -q "device auto: using the CPU (the NVIDIA driver is too old: it supports CUDA $old_text" auto.err ||
  fail "--device auto did not log the old driver as its reason: $(cat auto.err)"
[ -s auto.npy ] || fail "--device auto wrote no output"

rc=0
QGRU_TEST_CUDA_DRIVER_VERSION=0 "$qgru" run --model "$model" --input x.npy --output y.npy --device cuda \
  > none.out 2> none.err || rc=$?
[ "$rc" = 1 ] || fail "--device cuda without a driver: expected exit 1, got $rc"
grep -q "no usable CUDA device: no NVIDIA driver is installed" none.err || fail "no-driver message: $(cat none.err)"
echo "cuda_driver: ok"
