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
