#!/usr/bin/env bash
# Every --help screen (qgru's and each subcommand's) ends with one or two example command lines under
# "Example:" / "Examples:", each a qgru command (a line ending in '\' continues on the next), and exits 0.
# Usage: help_examples.sh <qgru-binary> <scratch-dir> <source-root>
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
cd "$scratch"

"$qgru" --help > top.txt || fail "qgru --help exited $?"
# The subcommands, as qgru --help lists them (CLI11: "Subcommands:" then "  name   description").
subcommands=$(sed -n '/^Subcommands:/,/^$/p' top.txt | awk 'NR > 1 && NF { print $1 }')
[ "$(echo "$subcommands" | wc -w)" -ge 8 ] || fail "qgru --help lists too few subcommands: $subcommands"

check_examples() {  # name help-file
  python3 - "$1" "$2" <<'PY' || fail "$1 --help does not end with one or two examples: $(tail -n 6 "$2")"
import sys
name, path = sys.argv[1], sys.argv[2]
lines = [line.rstrip() for line in open(path).read().splitlines()]
while lines and not lines[-1]:
    lines.pop()
heading = max(i for i, line in enumerate(lines) if line in ("Example:", "Examples:"))
examples, continued = 0, False
for line in lines[heading + 1:]:
    if continued:
        assert line.startswith("      "), f"{name}: continuation line not indented: {line!r}"
    else:
        assert line.startswith("  qgru "), f"{name}: after the examples' heading: {line!r}"
        examples += 1
    continued = line.endswith("\\")
assert not continued, f"{name}: the last example ends in a continuation"
assert 1 <= examples <= 2, f"{name}: {examples} examples"
assert (examples == 1) == (lines[heading] == "Example:"), f"{name}: heading {lines[heading]!r} for {examples}"
PY
}

check_examples qgru top.txt
for command in $subcommands; do
  "$qgru" "$command" --help > "$command.txt" || fail "qgru $command --help exited $?"
  check_examples "$command" "$command.txt"
done
echo "help_examples.sh: qgru and $(echo "$subcommands" | wc -w) subcommands end their --help with examples"
