#!/usr/bin/env bash
# The committed malformed-input corpus (test/corpus/) is what scripts/make_corpus.py makes with this qgru, byte
# for byte: the script runs with --check (a scratch folder, compared file by file). A failure names the files that
# differ; regenerate with `/usr/bin/python3 scripts/make_corpus.py --qgru build/apps/qgru/qgru` and commit when the
# change is meant (a format, a new case, the tool version).
# Usage: corpus_reproducible.sh <qgru> <scratch-dir> <source-root>
set -u
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
find_python
TMPDIR=$scratch "$python" "$root/scripts/make_corpus.py" --qgru "$qgru" --out "$root/test/corpus" --check ||
  fail "scripts/make_corpus.py does not reproduce test/corpus (the lines above name the files)"
