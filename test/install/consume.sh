#!/usr/bin/env bash
# Install and consume: `cmake --install` into a temporary prefix, then, against the installed package only,
# a C program (plain cc + pkg-config --static: the archive) and a C++ program (find_package(qgru CONFIG),
# qgru::runtime: the shared library) stream the digits test set through an artifact made by the installed
# CLI and compare every output with `qgru run --codes`; then the streaming example (examples/streaming) runs
# from the same prefix and its accuracy must equal that of `qgru run`'s output.
# Usage: consume.sh <build-dir> <scratch-dir> <source-root>
set -euo pipefail
build="$1"
scratch="$2"
root="$3"
source "$root/test/cli/common.bash"
rm -rf "$scratch"
mkdir -p "$scratch"
prefix="$scratch/prefix"
cmake --install "$build" --prefix "$prefix" > "$scratch/install.log"
for f in bin/qgru include/qgru/qgru_runtime.h include/qgru/qgru_runtime.hpp lib/cmake/qgru/qgruConfig.cmake; do
  [ -e "$prefix/$f" ] || fail "cmake --install did not install $f"
done
pc="$(find "$prefix" -name qgru-runtime.pc | head -n 1)"
[ -n "$pc" ] || fail "cmake --install did not install qgru-runtime.pc"
libdir="$(dirname "$(dirname "$pc")")"
[ -e "$libdir/libqgru_runtime.a" ] && [ -e "$libdir/libqgru_runtime.so" ] || fail "the runtime library is not installed shared and static"

digits="$root/examples/digits"
qgru="$prefix/bin/qgru"
"$qgru" -q calibrate --model "$digits/gru.safetensors" --data "$digits/calib.npy" -o "$scratch/stats.json" > /dev/null
"$qgru" -q quantize --model "$digits/gru.safetensors" --stats "$scratch/stats.json" --config int8 -o "$scratch/digits.qgru.json" > /dev/null
"$qgru" -q run --model "$scratch/digits.qgru.json" --input "$digits/test.npy" --output "$scratch/y.npy" \
  --codes "$scratch/codes.npy" > /dev/null

# The C program: cc + pkg-config, linked with the archive (pkg-config --static gives what the archive needs
# beside it; nothing of the build tree on its command line).
export PKG_CONFIG_PATH="$(dirname "$pc")"
archive="$(pkg-config --variable=libdir qgru-runtime)/libqgru_runtime.a"
# shellcheck disable=SC2046
cc -std=c99 -O1 -Wall -Wextra -Werror -I"$root/examples/streaming" $(pkg-config --cflags qgru-runtime) -o "$scratch/consume_c" \
  "$root/test/install/consume.c" "$archive" $(pkg-config --static --libs qgru-runtime | sed 's/-lqgru_runtime//') -lm
! ldd "$scratch/consume_c" | grep -q libqgru_runtime || fail "consume_c links the shared runtime, expected the archive"
"$scratch/consume_c" "$scratch/digits.qgru.json" "$digits/test.npy" "$scratch/codes.npy"

# The C++ program: CMake's find_package against the prefix.
cmake -S "$root/test/install" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DQGRU_EXAMPLE_DIR="$root/examples/streaming" > "$scratch/consumer.log" || { cat "$scratch/consumer.log"; fail "consumer configure"; }
cmake --build "$scratch/consumer" >> "$scratch/consumer.log" 2>&1 || { cat "$scratch/consumer.log"; fail "consumer build"; }
"$scratch/consumer/consume_cpp" "$scratch/digits.qgru.json" "$digits/test.npy" "$scratch/codes.npy"

# The example, as its README runs it, against the same prefix; its accuracy is that of `qgru run`.
find_python
streamed=$(bash "$root/examples/streaming/run.sh" "$prefix" "$scratch/example")
echo "$streamed"
whole=$("$python" "$root/scripts/example_accuracy.py" --model "$digits/gru.safetensors" --labels "$digits/test_labels.npy" \
  "$scratch/y.npy")
echo "qgru run: $whole"
[ "$(echo "$streamed" | sed -E 's/.*accuracy ([0-9.]+).*/\1/')" = "$(echo "$whole" | sed -E 's/^accuracy ([0-9.]+).*/\1/')" ] ||
  fail "the streamed accuracy differs from qgru run's"
echo "install and consume: OK"
