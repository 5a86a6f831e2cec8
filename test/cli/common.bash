# Sourced by the CLI tests (test/cli/*.sh, each run as `bash TEST <qgru> <scratch-dir> <source-root>`); not a
# test itself (the .bash name keeps it out of the tests' *.sh glob).
# start_cli_test QGRU SCRATCH ROOT: sets $qgru, $scratch and $root from the test's arguments and makes $scratch a
#   fresh, empty folder.
# fail MESSAGE...: "FAIL: MESSAGE" on stderr, exit 1.
# find_python: sets $python to a python3 that imports NumPy, or fails naming what is missing.

start_cli_test() {
  qgru="$1"
  scratch="$2"
  root="$3"
  rm -rf "$scratch"
  mkdir -p "$scratch"
}

fail() { echo "FAIL: $*" >&2; exit 1; }

find_python() {
  # $PYTHON first, then python3, then Debian's: scripts/setup.sh installs python3-numpy, and another python3
  # may come first in PATH.
  python=""
  for candidate in "${PYTHON:-}" python3 /usr/bin/python3; do
    if [ -n "$candidate" ] && "$candidate" -c "import numpy" 2>/dev/null; then
      python="$candidate"
      break
    fi
  done
  [ -n "$python" ] || fail "no python3 with numpy found (run scripts/setup.sh)"
}

# tree_state DIR: every entry under DIR, one per line, sorted: the type and path of each, and the sha256 of each
#   regular file (FIFOs and other special files by type only: reading them could block).
tree_state() {
  (cd "$1" && find . -mindepth 1 ! -type f -printf '%y %p\n' | LC_ALL=C sort &&
    find . -type f -exec sha256sum {} + | LC_ALL=C sort -k2)
}

# make_hazard_inputs: the inputs the hazard suites (outputs_never_destroy.sh, results_never_silently_wrong.sh)
#   start from, made in a new folder $work ($scratch/work) that becomes the current folder: a tiny GRU (C = 4,
#   H = 5) and a linear layer [8, 32] from the corpus (gru.safetensors, x.npy, linear.safetensors, acts.npy),
#   their statistics and int8 artifact (stats.json, gru.qgru.json) and a GPTQ checkpoint (ckpt/q.safetensors).
make_hazard_inputs() {
  local corpus=$root/test/corpus/base
  work=$scratch/work
  mkdir "$work"
  cd "$work" || exit 1
  cp "$corpus/model.safetensors" gru.safetensors
  cp "$corpus/x.npy" x.npy
  cp "$corpus/linear.safetensors" linear.safetensors
  cp "$corpus/acts.npy" acts.npy
  "$qgru" -q calibrate --model gru.safetensors --data x.npy -o stats.json >/dev/null || fail "calibrate"
  "$qgru" -q quantize --model gru.safetensors --stats stats.json -o gru.qgru.json || fail "quantize"
  mkdir ckpt
  "$qgru" -q gptq --weights linear.safetensors --tensor fc.weight --activations acts.npy --group-size 32 \
    -o ckpt/q.safetensors >/dev/null || fail "gptq"
}

# expect_refusal CODE PATTERN ARGS...: `qgru -q ARGS`, run in $work under a 20 s limit (a read that blocks on a
#   FIFO would hang), must exit CODE (1 bad input, 2 usage), print exactly one stderr line "qgru: error: ..."
#   matching the extended regex PATTERN and nothing on stdout, and leave $work as it was: no input changed,
#   no output and no temporary file added. Counts the cases in $refusals.
refusals=0
expect_refusal() {
  local code=$1 pattern=$2 rc before after
  shift 2
  before=$(tree_state "$work")
  (cd "$work" && timeout 20 "$qgru" -q "$@" >"$scratch/refusal.out" 2>"$scratch/refusal.err")
  rc=$?
  after=$(tree_state "$work")
  refusals=$((refusals + 1))
  local what="qgru $*"
  [ "$rc" -ne 124 ] || fail "$what: still running after 20 s (blocked on a FIFO?)"
  [ "$rc" -eq "$code" ] || fail "$what: exit $rc, expected $code: $(cat "$scratch/refusal.err")"
  [ "$(wc -l <"$scratch/refusal.err")" -eq 1 ] || fail "$what: stderr is not one line: $(cat "$scratch/refusal.err")"
  grep -Eq "^qgru: error: .*($pattern)" "$scratch/refusal.err" ||
    fail "$what: the message does not match '$pattern': $(cat "$scratch/refusal.err")"
  [ ! -s "$scratch/refusal.out" ] || fail "$what: printed on stdout: $(head -3 "$scratch/refusal.out")"
  [ "$before" = "$after" ] || fail "$what: changed the folder: $(diff <(echo "$before") <(echo "$after") | head -5)"
}

# expect_failure CODE OUTPUT-FILE PATTERN -- qgru args...: exit code, one stderr line matching PATTERN, no file.
expect_failure() {
  local code="$1" output="$2" pattern="$3"
  shift 4
  local rc=0
  "$qgru" "$@" >"$scratch/stdout" 2>"$scratch/stderr" || rc=$?
  [ "$rc" = "$code" ] || fail "expected exit $code, got $rc: qgru $* (stderr: $(cat "$scratch/stderr"))"
  if [ "$code" = 1 ]; then
    [ "$(wc -l <"$scratch/stderr")" = 1 ] || fail "expected one stderr line: qgru $*: $(cat "$scratch/stderr")"
    grep -q "^qgru: error: .*$pattern" "$scratch/stderr" || fail "stderr lacks '$pattern': $(cat "$scratch/stderr")"
  fi
  [ ! -e "$output" ] || fail "output $output exists after a failed run: qgru $*"
  local leftovers
  leftovers="$(find "$(dirname "$output")" -maxdepth 1 -name "$(basename "$output")*" | wc -l)"
  [ "$leftovers" = 0 ] || fail "temporary files left beside $output"
}
