#!/usr/bin/env bash
# The malformed-input corpus (test/corpus/, made by scripts/make_corpus.py) through the CLI. Every row of
# test/corpus/cases.tsv names a case, what it expects, the file the error must name, a keyword and the qgru
# arguments ({C}: the corpus folder, {OUT}: an empty folder of its own).
#   fail:  exit 1, exactly one stderr line "qgru: error: ..." naming the file (base name) and matching the
#          keyword (extended regex, case-insensitive), nothing on stdout, nothing left in {OUT} (no output, no
#          *.tmp.* file), within the time limit and a memory limit.
#   ok:    a valid baseline: exit 0 and an output in {OUT} (so the failures fail for the reason they name).
#   known: a known bug in a reader (docs/HARDENING.md); skipped unless QGRU_CORPUS_KNOWN=1.
# Usage: bash corpus.sh <qgru-binary> <scratch-dir> <source-root> [case-name-regex]
set -u
QGRU=$1
SCRATCH=$2
ROOT=$3
ONLY=${4:-}
CORPUS=$ROOT/test/corpus
MANIFEST=$CORPUS/cases.tsv
TIME_LIMIT=${QGRU_CORPUS_TIMEOUT:-60}
rm -rf "$SCRATCH" && mkdir -p "$SCRATCH"
[ -f "$MANIFEST" ] || { echo "FAIL: no manifest $MANIFEST" >&2; exit 1; }

# A memory limit catches unbounded allocations as a failure instead of a swapping machine. Sanitizer builds
# reserve terabytes of address space for their shadow memory, so they run without it.
memory_limit_kb=8388608
if [ -n "${QGRU_SANITIZED:-}" ] || grep -q -a -m1 __asan_init "$QGRU"; then memory_limit_kb=unlimited; fi

failures=0 passed=0 skipped=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

while IFS=$'\t' read -r name expect file keyword args; do
  case "$name" in '#'* | '') continue ;; esac
  if [ -n "$ONLY" ] && ! [[ $name =~ $ONLY ]]; then continue; fi
  if [ "$expect" = known ] && [ "${QGRU_CORPUS_KNOWN:-0}" != 1 ]; then
    echo "known bug, skipped: $name ($file)"
    skipped=$((skipped + 1))
    continue
  fi
  out=$SCRATCH/$name
  mkdir -p "$out"
  # Split the arguments on spaces first, then fill in the folders (which may hold spaces themselves).
  read -r -a words <<<"$args"
  argv=()
  for word in "${words[@]}"; do
    word=${word//\{C\}/$CORPUS}
    argv+=("${word//\{OUT\}/$out}")
  done
  (
    ulimit -v "$memory_limit_kb"
    exec timeout -k 5 "$TIME_LIMIT" "$QGRU" -q "${argv[@]}"
  ) >"$out.stdout" 2>"$out.stderr"
  rc=$?
  before=$failures
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    fail "$name: still running after ${TIME_LIMIT}s (hang?): qgru ${argv[*]}"
  elif [ "$expect" = ok ]; then
    [ "$rc" -eq 0 ] || fail "$name: baseline exit $rc, expected 0: $(head -c 400 "$out.stderr")"
    [ -n "$(ls -A "$out")" ] || fail "$name: baseline wrote nothing"
  else
    lines=$(wc -l <"$out.stderr")
    [ "$rc" -eq 1 ] || fail "$name: exit $rc, expected 1: $(head -c 400 "$out.stderr")"
    [ "$lines" -eq 1 ] || fail "$name: $lines stderr lines, expected 1: $(head -c 400 "$out.stderr")"
    grep -q '^qgru: error: ' "$out.stderr" || fail "$name: stderr does not start 'qgru: error: ': $(head -c 400 "$out.stderr")"
    grep -qF -- "$(basename "$file")" "$out.stderr" || fail "$name: error does not name $(basename "$file"): $(head -c 400 "$out.stderr")"
    [ -z "$keyword" ] || grep -qiE -- "$keyword" "$out.stderr" || fail "$name: error lacks /$keyword/: $(head -c 400 "$out.stderr")"
    [ ! -s "$out.stdout" ] || fail "$name: stdout not empty: $(head -c 200 "$out.stdout")"
    [ -z "$(ls -A "$out")" ] || fail "$name: left files behind: $(ls -A "$out")"
  fi
  [ "$failures" -eq "$before" ] && passed=$((passed + 1))
done <"$MANIFEST"

# No reader may leave anything beside its inputs either.
stray=$(find "$CORPUS" -name '*.tmp.*' | head -5)
[ -z "$stray" ] || fail "temporary files in the corpus folder: $stray"

echo "corpus: $passed passed, $failures failed, $skipped known bugs skipped"
[ "$failures" -eq 0 ]
