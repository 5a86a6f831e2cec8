#!/usr/bin/env bash
# Fuzz the readers with libFuzzer (clang, ASan + UBSan), each target for SECONDS, seeded from test/corpus/.
# Usage: scripts/fuzz.sh [SECONDS per target, default 60] [TARGET...]   (targets: see test/fuzz/CMakeLists.txt)
# Builds into the sanitizer tree, $QGRU_FUZZ_BUILD_DIR (default: $QGRU_ASAN_BUILD_DIR, else build-asan/),
# configured by scripts/configure_sanitized.sh: the tree scripts/test_sanitizers.sh builds, so after it the
# targets are up to date. scripts/test_sanitizers.sh (so scripts/test.sh) runs every target for
# QGRU_FUZZ_SECONDS (8 s) this way, beside its tests. Per target, under that folder:
#   fuzz_work/<target>/      inputs libFuzzer found interesting (kept between runs: the runs add up)
#   fuzz_findings/<target>/  crash-*, leak-*, oom-*, timeout-* reproducers: turn each into a corpus case
#   fuzz_logs/<target>.log   the run's log; the summary line gives executions and the finding, if any
# Reproduce a finding: build-asan/test/fuzz/<target> FILE. Exit status 1 when any target found something.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-60}"
shift || true
build="${QGRU_FUZZ_BUILD_DIR:-${QGRU_ASAN_BUILD_DIR:-$root/build-asan}}"
jobs="${QGRU_JOBS:-$(nproc)}"
all_targets=(fuzz_safetensors fuzz_npy fuzz_npz fuzz_stats fuzz_bitwidth_config fuzz_artifact fuzz_gptq_checkpoint fuzz_onnx)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

# QGRU_FUZZ_BUILD=0 skips configuring and building (targets already built), so that several runs of this
# script on different targets can share the tree at once; each touches only its own targets' folders.
if [ "${QGRU_FUZZ_BUILD:-1}" != 0 ]; then
  bash "$root/scripts/configure_sanitized.sh" "$build"
  cmake --build "$build" -j "$jobs" --target "${targets[@]}" >&2
fi

# Seeds from the corpus (valid baselines and their mutations).
corpus="$root/test/corpus"
seeds="$build/fuzz_seeds"
for target in "${targets[@]}"; do rm -rf "${seeds:?}/$target"; done
wanted=" ${targets[*]} "
# Cases that show a known, unfixed bug (expect "known" in cases.tsv) are left out: each would stop its target
# at once. The fuzzers find their own way to such bugs; set QGRU_FUZZ_KNOWN_SEEDS=1 to seed them anyway.
known=" $(awk -F'\t' '$2 == "known" { printf "%s ", $3 }' "$corpus/cases.tsv") "
[ "${QGRU_FUZZ_KNOWN_SEEDS:-0}" != 1 ] || known=" "
is_known() { [[ $known == *" ${1#"$corpus"/} "* ]]; }
seed() {  # seed TARGET FILE...
  [[ $wanted == *" $1 "* ]] || return 0
  mkdir -p "$seeds/$1"
  local target=$1
  shift
  for file in "$@"; do
    if [ -f "$file" ] && ! is_known "$file"; then cp "$file" "$seeds/$target/$(echo "$file" | tr / _)"; fi
  done
  return 0
}
shopt -s nullglob
seed fuzz_safetensors "$corpus"/base/*.safetensors "$corpus"/safetensors/* "$corpus"/gptq/*.safetensors \
  "$corpus"/artifact/*.safetensors
seed fuzz_npy "$corpus"/base/*.npy "$corpus"/npy/*
seed fuzz_npz "$corpus"/base/*.npz "$corpus"/npz/*
seed fuzz_stats "$corpus"/base/stats.json "$corpus"/stats/*
seed fuzz_bitwidth_config "$root"/configs/*.json "$corpus"/config/*
seed fuzz_onnx "$corpus"/onnx/*.onnx "$root"/test/data/onnx/*/model.onnx
mkdir -p "$seeds/fuzz_gptq_checkpoint" "$seeds/fuzz_artifact"
for file in "$corpus"/gptq/*.safetensors; do  # first byte 0x02: 4 bits, gptq (v1) format
  [[ $wanted == *" fuzz_gptq_checkpoint "* ]] || break
  is_known "$file" && continue
  { printf '\002'; cat "$file"; } >"$seeds/fuzz_gptq_checkpoint/$(basename "$file")"
done
# Artifact seeds: JSON with its sha256 replaced by @SHA256@, the separator, the tensor file. The golden vectors'
# artifacts add valid ones of both GRU cells (version 1 and version 2).
for json in "$corpus"/base/art.qgru.json "$corpus"/artifact/*.qgru.json "$root"/test/data/golden_fixed/*/*.qgru.json; do
  [[ $wanted == *" fuzz_artifact "* ]] || break
  is_known "$json" && continue
  tensor_name=$(sed -n 's/.*"tensor_file": *"\([^"]*\)".*/\1/p' "$json" | head -1)
  tensor="$(dirname "$json")/$tensor_name"
  out="$seeds/fuzz_artifact/$(echo "$json" | tr / _)"
  sed 's/"tensor_file_sha256": *"[0-9a-f]*"/"tensor_file_sha256": "@SHA256@"/' "$json" >"$out"
  if [ -f "$tensor" ]; then printf '\n--qgru-fuzz-tensor-file--\n' >>"$out" && cat "$tensor" >>"$out"; fi
done

status=0
printf '%-22s %12s %8s %7s  %s\n' target executions seconds corpus finding
for target in "${targets[@]}"; do
  work="$build/fuzz_work/$target" findings="$build/fuzz_findings/$target" log="$build/fuzz_logs/$target.log"
  rm -rf "$findings"
  mkdir -p "$work" "$findings" "$(dirname "$log")"
  started=$(date +%s)
  rc=0
  "$build/test/fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$work" "$seeds/$target" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  finding=$(grep -m1 -oE '(ERROR|WARNING): [A-Za-z]+Sanitizer: [^ ]+( [^ ]+)?|ERROR: libFuzzer: [a-z-]+|runtime error: .*' "$log" || true)
  [ "$rc" -eq 0 ] || status=1
  corpus_size=$(find "$work" -type f | wc -l)  # fuzz_work/<target>/ after the run (seeds not counted)
  printf '%-22s %12s %8s %7s  %s\n' "$target" "${execs:-?}" "$(($(date +%s) - started))" "$corpus_size" "${finding:-none}"
  [ "$rc" -eq 0 ] || ls "$findings" | sed 's/^/    reproducer: /'
done
exit $status
