# Sourced by the HTML report tests (html_report.sh, calibrate_html.sh); not a test itself. It sources
# common.bash (start_cli_test, fail, find_python) too.
# find_report_tools: sets $python (a python3 with NumPy) and $browser (Chromium), or fails naming what is missing.
# render_page PAGE SCRATCH ARGS...: headless Chromium on PAGE with ARGS (--screenshot=..., --dump-dom), a
#   profile under SCRATCH, its log appended to SCRATCH/chromium.log; stdout is Chromium's (the DOM for --dump-dom).
# The checks on the results live in report_checks.py.

source "$(dirname "${BASH_SOURCE[0]}")/common.bash"

find_report_tools() {
  find_python
  browser=""
  for candidate in chromium chromium-browser google-chrome; do
    if command -v "$candidate" >/dev/null 2>&1; then browser="$candidate"; break; fi
  done
  [ -n "$browser" ] || fail "no chromium found to render the HTML report (run scripts/setup.sh, which installs it)"
}

render_page() {
  local page="$1" scratch="$2"
  shift 2
  # Chromium wants a writable home and profile folder.
  HOME="$scratch" timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$scratch/profile" "$@" "file://$page" 2>>"$scratch/chromium.log" || true
}
