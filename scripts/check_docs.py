#!/usr/bin/env python3
"""The docs test: every figure the documentation quotes is checked against the command that makes it, or is
marked as a measurement with its date, machine and command (docs/README.md, "Checked figures").

    check_docs.py --qgru BUILD/apps/qgru/qgru [--scratch DIR] [FILE.md ...]     check (default: every doc)
    check_docs.py --qgru ... --update FILE.md ...                                rewrite outputs and values
    check_docs.py --qgru ... --self-test [synthetic|real]                        show that the check can fail
    check_docs.py --qgru ... --with-self-test [FILE.md ...]                      check, then the real-document
                                                                                 self-test on the check's results

Markers (HTML comments are invisible on a rendered page; code fences keep their first word as the language):

    ```sh docs-check                 a shell block the test runs (bash -e -o pipefail), in a scratch folder
    qgru quantize ...                where examples/, scripts/, configs/ and test/ are the repository's and
    ```                              `qgru` is the build's; one folder per Markdown file, blocks in order.

    ```text docs-output              the exact stdout of the docs-check block before it (a line "..." stands
    ...                              for any number of lines); <!-- docs-output --> ... <!-- /docs-output -->
    ```                              is the same for Markdown the command prints (a table, a worked example).

    30.0 dB<!--=int8.sqnr_db-->      the number just before the marker equals the value a docs-check block of
                                     this file printed as the line "int8.sqnr_db = 29.9949", rounded (half
                                     away from zero) to the digits quoted.

    <!-- measured                    figures that are measurements: not rerun, not compared; the marker names
    date: 2026-11-25                 when, where and how (all three required) and the region ends at
    machine: 2-core AMD EPYC ...     <!-- /measured -->.
    command: bash scripts/bench...
    -->

Outside those, a number with a unit of measure (dB, %, ×, ms, µs, s, MiB, GB/s, ...) or a decimal number alone
in a table cell is an unmarked figure, and the test fails naming its line. Nothing is cached between runs. Within
one run, blocks see QGRU_DOCS_RUN_CACHE, a folder made empty when the run starts, where a script may keep results
that a later block of the same run asks for again (scripts/example_figures.py keeps each RUN's figures there); and
the self-test's copies of real documents (one quoted number changed, the same docs-check blocks) reuse
the stdout the main check got for those blocks (--with-self-test), since the same commands print the same.
"""
import argparse
import decimal
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What a docs-check block sees of the repository, relative to its scratch folder.
LINKED_FOLDERS = ("examples", "scripts", "configs", "test")
BLOCK_TIMEOUT_S = 300

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
VALUE_MARKER = re.compile(r"<!--=\s*([^\s>]+?)\s*-->")
VALUE_LINE = re.compile(r"^(\S+) = (\S+)\s*$")
NUMBER = re.compile(r"[-+−]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
MEASURED_OPEN = re.compile(r"^\s*<!--\s*measured\b(.*)$")
MEASURED_CLOSE = re.compile(r"^\s*<!--\s*/measured\s*-->\s*$")
OUTPUT_OPEN = re.compile(r"^\s*<!--\s*docs-output\s*-->\s*$")
OUTPUT_CLOSE = re.compile(r"^\s*<!--\s*/docs-output\s*-->\s*$")
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")

# A figure: a number with a unit that results are given in (any number), a decimal number with a unit of time or
# size (whole ones are mostly settings and limits: "8 s per target", "an 8 GiB limit"), or a decimal number alone
# in a table cell. A line that holds such a number which is not a figure says so: <!-- not-a-figure: why -->.
_RESULT_UNITS = r"(?:\s?(?:dB|%|ms|µs|us|ns|TB/s|GB/s|G ?MAC/s|TFLOP/s|nats(?:/char)?)|[×x])"
_SIZE_TIME_UNITS = r"\s?(?:s|min|GiB|MiB|KiB|GB|MB|KB|kB|GFLOP)"
FIGURE = re.compile(r"(?<![\w.^/\\-])(?:[-+−]?\d+(?:[.,]\d+)*" + _RESULT_UNITS + r"|[-+−]?\d+\.\d+" +
                    _SIZE_TIME_UNITS + r")(?![\w/])")
NOT_A_FIGURE = re.compile(r"<!--\s*not-a-figure:\s*\S.*?-->")
DECIMAL_CELL = re.compile(r"^[-+−]?\d+\.\d+(?:[eE][-+]?\d+)?$")


class Failure(Exception):
    pass


class Doc:
    """One Markdown file, parsed into what the test checks."""

    def __init__(self, path, text, display):
        self.path = path
        self.display = display
        self.lines = text.split("\n")
        self.checks = []        # {"line", "script", "output": None or {"start", "end", "kind"}}
        self.values = []        # (line index, column of the marker, key)
        self.measured = []      # (start line, end line, fields)
        self.figures = []       # (line index, text) of unmarked figures
        self.errors = []        # (line index, message) of malformed markers
        self._parse()

    def where(self, index):
        return f"{self.display}:{index + 1}"

    def _parse(self):
        lines = self.lines
        i = 0
        measured_start = None
        measured_fields = None
        in_comment = False
        while i < len(lines):
            line = lines[i]
            if in_comment:
                if "-->" in line:
                    in_comment = False
                i += 1
                continue
            fence = FENCE.match(line)
            if fence:
                i = self._fenced_block(i, fence)
                continue
            opened = MEASURED_OPEN.match(line)
            if opened:
                if measured_start is not None:
                    self.errors.append((i, "a measured region opens inside another (close it with <!-- /measured -->)"))
                comment, end = self._comment_text(i)
                measured_start, measured_fields = i, self._measured_fields(i, comment)
                i = end + 1
                continue
            if MEASURED_CLOSE.match(line):
                if measured_start is None:
                    self.errors.append((i, "<!-- /measured --> without an open measured region"))
                else:
                    self.measured.append((measured_start, i, measured_fields))
                measured_start = None
                i += 1
                continue
            if OUTPUT_OPEN.match(line):
                i = self._output_region(i)
                continue
            if OUTPUT_CLOSE.match(line):
                self.errors.append((i, "<!-- /docs-output --> without <!-- docs-output -->"))
                i += 1
                continue
            # Markers of values (not those shown in inline code), then the rest of the line for unmarked figures.
            outside_code = re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)
            for marker in VALUE_MARKER.finditer(outside_code):
                self.values.append((i, marker.start(), marker.group(1)))
            text, in_comment = self._visible_text(line)
            if measured_start is None and not NOT_A_FIGURE.search(outside_code):
                for figure in _figures(text):
                    self.figures.append((i, figure))
            i += 1
        if measured_start is not None:
            self.errors.append((measured_start, "measured region never closed (<!-- /measured -->)"))

    def _comment_text(self, start):
        """The text of the HTML comment opening on line `start` and the line index where it closes."""
        text = []
        for j in range(start, len(self.lines)):
            text.append(self.lines[j])
            if "-->" in self.lines[j]:
                return "\n".join(text), j
        self.errors.append((start, "HTML comment never closed"))
        return "\n".join(text), len(self.lines) - 1

    def _measured_fields(self, index, comment):
        body = comment.split("measured", 1)[1].rsplit("-->", 1)[0]
        fields = {}
        for part in re.split(r"\n|\s\|\s", body):
            if ":" in part:
                key, value = part.split(":", 1)
                fields[key.strip().lower()] = value.strip()
        missing = [key for key in ("date", "machine", "command") if not fields.get(key)]
        if missing:
            self.errors.append((index, "measured region lacks " + ", ".join(missing) +
                                " (each measurement names its date, machine and command)"))
        elif not DATE.search(fields["date"]):
            self.errors.append((index, f"measured region's date '{fields['date']}' is not YYYY-MM-DD"))
        return fields

    def _fenced_block(self, start, fence):
        marks, info = fence.group(1), fence.group(2).split()
        end = start + 1
        while end < len(self.lines):
            close = FENCE.match(self.lines[end])
            if close and close.group(1)[0] == marks[0] and len(close.group(1)) >= len(marks) and not close.group(2).strip():
                break
            end += 1
        if end >= len(self.lines):
            self.errors.append((start, "code block never closed"))
        body = self.lines[start + 1:end]
        if "docs-check" in info:
            self.checks.append({"line": start, "script": "\n".join(body) + "\n", "output": None})
        elif "docs-output" in info:
            self._attach_output(start, start + 1, end, "block")
        return end + 1

    def _output_region(self, start):
        end = start + 1
        while end < len(self.lines) and not OUTPUT_CLOSE.match(self.lines[end]):
            end += 1
        if end >= len(self.lines):
            self.errors.append((start, "<!-- docs-output --> never closed (<!-- /docs-output -->)"))
        self._attach_output(start, start + 1, end, "region")
        return end + 1

    def _attach_output(self, marker, first, end, kind):
        if not self.checks:
            self.errors.append((marker, "docs-output before any docs-check block"))
        elif self.checks[-1]["output"] is not None:
            self.errors.append((marker, "a second docs-output for the docs-check block of line "
                                f"{self.checks[-1]['line'] + 1}"))
        else:
            self.checks[-1]["output"] = {"start": first, "end": end, "kind": kind, "marker": marker}

    @staticmethod
    def _visible_text(line):
        """The line without inline code, HTML comments, link targets and value-marked numbers."""
        in_comment = False
        text = VALUE_MARKER.sub("\0", line)
        text = re.sub(r"(\d+(?:\.\d+)?)(\s?\S{0,6}?)\0", " ", text)  # a marked number (with its unit)
        text = re.sub(r"<!--.*?-->", " ", text)
        if "<!--" in text:
            text, in_comment = text.split("<!--", 1)[0], True
        text = re.sub(r"`[^`]*`", " ", text)
        text = re.sub(r"\]\([^)]*\)", "]", text)
        return text.replace("**", ""), in_comment


def _figures(text):
    found = [m.group(0) for m in FIGURE.finditer(text)]
    if text.lstrip().startswith("|"):
        cells = [cell.strip() for cell in text.strip().strip("|").split("|")]
        if not all(re.fullmatch(r":?-+:?", cell) for cell in cells if cell):
            found += [cell for cell in cells if DECIMAL_CELL.match(cell)]
    return found


def quoted_number(line, column):
    """The number written just before a value marker on its line."""
    numbers = list(NUMBER.finditer(line[:column]))
    if not numbers:
        return None
    m = numbers[-1]
    if line[m.end():column].strip(" `%×x*dBmsµGiMKB/natchr") != "":  # a unit, emphasis or inline code's end
        return None  # something other than a unit between the number and the marker
    return m


def to_decimal(text):
    return decimal.Decimal(text.replace("−", "-").replace("+", ""))


def rounded_like(value_text, quoted_text):
    """value rounded (half away from zero) to the digits of the quoted number, as the quoted text would be."""
    quoted = to_decimal(quoted_text)
    value = to_decimal(value_text)
    exponent = quoted.as_tuple().exponent
    return value.quantize(decimal.Decimal(1).scaleb(exponent), rounding=decimal.ROUND_HALF_UP)


def same_output(expected_lines, actual):
    """expected (lines, "..." for any run of lines) against actual stdout, trailing spaces and blank lines
    at the end ignored."""
    actual_lines = [line.rstrip() for line in actual.rstrip("\n").split("\n")] if actual.strip() else []
    expected = [line.rstrip() for line in expected_lines]
    while expected and not expected[-1]:
        expected.pop()
    pattern = "".join(r"(?:[^\n]*\n)*?" if line == "..." else re.escape(line) + r"\n" for line in expected)
    return re.fullmatch(pattern, "".join(line + "\n" for line in actual_lines)) is not None


def python_with_numpy():
    for candidate in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if candidate and subprocess.run([candidate, "-c", "import numpy"], capture_output=True).returncode == 0:
            return candidate
    return None


def prepare_scratch(scratch, qgru):
    if os.path.exists(scratch):
        shutil.rmtree(scratch)
    os.makedirs(os.path.join(scratch, "bin"))
    for folder in LINKED_FOLDERS:
        os.symlink(os.path.join(ROOT, folder), os.path.join(scratch, folder))
    os.symlink(os.path.abspath(qgru), os.path.join(scratch, "bin", "qgru"))
    python = python_with_numpy()
    if python:
        os.symlink(python, os.path.join(scratch, "bin", "python3"))


def run_checks(doc, scratch, qgru, run_cache):
    """Run every docs-check block of `doc` in order; returns [(stdout, seconds)] and raises Failure on an error.
    run_cache: the folder the blocks see as QGRU_DOCS_RUN_CACHE (results kept for later blocks of this run)."""
    prepare_scratch(scratch, qgru)
    env = dict(os.environ, PATH=os.path.join(scratch, "bin") + os.pathsep + os.environ.get("PATH", ""),
               LC_ALL="C", QGRU_DOCS_CHECK="1", QGRU_DOCS_RUN_CACHE=run_cache)
    results = []
    for check in doc.checks:
        started = time.monotonic()
        try:
            done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", check["script"]], cwd=scratch, env=env,
                                  capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Failure(f"{doc.where(check['line'])}: the docs-check block ran past {BLOCK_TIMEOUT_S} s")
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().split("\n")[-8:])
            raise Failure(f"{doc.where(check['line'])}: the docs-check block exited {done.returncode}:\n{tail}")
        results.append((done.stdout, time.monotonic() - started))
    return results


def compare(doc, results):
    """Every difference between what the doc quotes and what its commands printed, as messages."""
    problems = []
    values = {}
    for check, (stdout, _) in zip(doc.checks, results):
        for line in stdout.split("\n"):
            m = VALUE_LINE.match(line)
            if not m:
                continue
            if m.group(1) in values and values[m.group(1)][0] != m.group(2):
                problems.append(f"{doc.where(check['line'])}: value '{m.group(1)}' printed twice, differently "
                                f"({values[m.group(1)][0]} and {m.group(2)})")
            values[m.group(1)] = (m.group(2), check["line"])
        output = check["output"]
        if output and not same_output(doc.lines[output["start"]:output["end"]], stdout):
            problems.append(f"{doc.where(output['marker'])}: docs-output differs from what the docs-check block of "
                            f"line {check['line'] + 1} prints now:\n" + _diff(doc.lines[output["start"]:output["end"]], stdout))
    for index, column, key in doc.values:
        line = doc.lines[index]
        number = quoted_number(line, column)
        if number is None:
            problems.append(f"{doc.where(index)}: no number before the marker of '{key}'")
            continue
        if key not in values:
            problems.append(f"{doc.where(index)}: '{key}' is quoted as {number.group(0)}, but no docs-check block of "
                            f"{doc.display} prints a line '{key} = VALUE'")
            continue
        value, check_line = values[key]
        try:
            current = rounded_like(value, number.group(0))
            stale = current != to_decimal(number.group(0))
        except decimal.InvalidOperation:
            problems.append(f"{doc.where(index)}: '{key}': '{value}' (line {check_line + 1}'s block) is not a number")
            continue
        if stale:
            problems.append(f"{doc.where(index)}: '{key}' is quoted as {number.group(0)}, but the docs-check block of "
                            f"line {check_line + 1} prints {value} (rounded: {current})")
    return problems


def _diff(expected_lines, actual):
    import difflib
    return "\n".join(difflib.unified_diff([l.rstrip() for l in expected_lines], actual.rstrip("\n").split("\n"),
                                          "quoted", "printed now", lineterm="", n=1))


def lint(doc):
    problems = [f"{doc.where(i)}: {message}" for i, message in doc.errors]
    problems += [f"{doc.where(i)}: unmarked figure '{figure}': check it (a docs-check block and <!--=key-->) or mark "
                 "it as a measurement (<!-- measured ... -->, docs/README.md)" for i, figure in doc.figures]
    for check in doc.checks:
        if not check["script"].strip():
            problems.append(f"{doc.where(check['line'])}: empty docs-check block")
    return problems


def update(doc, results):
    """Rewrite docs-output blocks and quoted values with what the commands print now; returns the new text."""
    lines = list(doc.lines)
    values = {}
    for stdout, _ in results:
        for line in stdout.split("\n"):
            m = VALUE_LINE.match(line)
            if m:
                values[m.group(1)] = m.group(2)
    for index, column, key in reversed(doc.values):
        number = quoted_number(lines[index], column)
        if number is None or key not in values:
            continue
        quoted = number.group(0)
        new = str(rounded_like(values[key], quoted)).replace("-", "−" if "−" in quoted else "-")
        if quoted.startswith("+") and not new.startswith("-"):
            new = "+" + new
        lines[index] = lines[index][:number.start()] + new + lines[index][number.end():]
    for check, (stdout, _) in reversed(list(zip(doc.checks, results))):
        output = check["output"]
        if output and not same_output(lines[output["start"]:output["end"]], stdout):
            lines[output["start"]:output["end"]] = stdout.rstrip("\n").split("\n") if stdout.strip() else []
    return "\n".join(lines)


def default_files():
    files = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "configs", "README.md")]
    for folder, _, names in sorted(os.walk(os.path.join(ROOT, "docs"))):
        files += [os.path.join(folder, name) for name in sorted(names) if name.endswith(".md")]
    return files


def check_files(files, qgru, scratch_root, do_update=False, quiet=False, results_by_script=None):
    """Check each file; returns (problems, summary counters). `results_by_script` (a dict, or None) maps a file's
    docs-check blocks (the tuple of their scripts) to what they printed: a file whose blocks are already there
    reuses those results instead of running them again, and the results of each file run are added to it."""
    problems = []
    run_cache = os.path.join(scratch_root, "run_cache")
    shutil.rmtree(run_cache, ignore_errors=True)  # nothing kept from an earlier run
    os.makedirs(run_cache)
    counts = {"files": 0, "blocks": 0, "values": 0, "outputs": 0, "measured": 0, "seconds": 0.0}
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        display = os.path.relpath(path, ROOT) if os.path.abspath(path).startswith(ROOT + os.sep) else path
        doc = Doc(path, text, display)
        counts["files"] += 1
        counts["measured"] += len(doc.measured)
        file_problems = lint(doc)
        if doc.checks or doc.values:
            scratch = os.path.join(scratch_root, re.sub(r"[^\w.-]", "_", display))
            scripts = tuple(check["script"] for check in doc.checks)
            reused = results_by_script is not None and scripts in results_by_script and not do_update
            try:
                results = results_by_script[scripts] if reused else run_checks(doc, scratch, qgru, run_cache)
            except Failure as failure:
                problems += file_problems + [str(failure)]
                continue
            if results_by_script is not None:
                results_by_script[scripts] = results
            if not quiet:
                slowest = max(range(len(results)), key=lambda k: results[k][1], default=None)
                print(f"check_docs: {display}: {len(results)} docs-check blocks " +
                      ("(results of the same blocks reused)" if reused else
                       f"in {sum(seconds for _, seconds in results):.1f} s" +
                       (f", slowest line {doc.checks[slowest]['line'] + 1} ({results[slowest][1]:.1f} s)"
                        if slowest is not None else "")))
            counts["blocks"] += len(results)
            counts["seconds"] += sum(seconds for _, seconds in results)
            counts["values"] += len(doc.values)
            counts["outputs"] += sum(1 for check in doc.checks if check["output"])
            if do_update:
                new_text = update(doc, results)
                if new_text != text:
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(new_text)
                    if not quiet:
                        print(f"check_docs: updated {display}")
                    doc = Doc(path, new_text, display)
            file_problems += compare(doc, results)
        problems += file_problems
    return problems, counts


def self_test(qgru, scratch_root, cases="all", results_by_script=None):
    """The checker on docs made to fail: each must fail with the expected message, the untouched ones pass.
    cases: "synthetic" (small made-up documents running their own tiny commands), "real" (copies of real
    documents with one number made stale) or "all". A real document's copy has the same docs-check blocks as the
    document, so it reuses their results from `results_by_script` when the main check of this run put them there
    (--with-self-test); otherwise it runs them."""
    failures = []

    def expect(name, text, wanted):
        path = os.path.join(scratch_root, "selftest", name + ".md")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        problems, _ = check_files([path], qgru, os.path.join(scratch_root, "selftest_runs"), quiet=True,
                                  results_by_script=results_by_script)
        if wanted is None and problems:
            failures.append(f"{name}: expected to pass, got: {problems}")
        elif wanted is not None and not any(re.search(wanted, p) for p in problems):
            failures.append(f"{name}: expected a failure matching '{wanted}', got: {problems or 'a pass'}")
        elif wanted is not None and len(problems) != 1:
            failures.append(f"{name}: expected exactly one failure, got: {problems}")
        elif wanted is None:
            print(f"check_docs self-test: {name}: passes")
        else:
            print(f"check_docs self-test: {name}: fails as it must: {problems[0].splitlines()[0]}")

    if cases in ("all", "synthetic"):
        failures += _self_test_synthetic(expect)
    if cases in ("all", "real"):
        failures += _self_test_real(expect)
    return failures


def _self_test_synthetic(expect):
    """Made-up documents: each kind of failure the check reports, and documents that must pass."""
    check = "```sh docs-check\nprintf 'a.sqnr_db = 29.94\\nb.ratio = 1.25\\n'\nprintf 'one\\ntwo 2.0\\nthree\\n'\n```\n"
    output = "```text docs-output\na.sqnr_db = 29.94\nb.ratio = 1.25\n...\nthree\n```\n"
    good = check + output + "\nSQNR 29.9 dB<!--=a.sqnr_db--> and **1.3×**<!--=b.ratio-->.\n"
    expect("synthetic_good", good, None)
    expect("synthetic_stale_value", good.replace("29.9 dB", "30.0 dB"),
           r"'a\.sqnr_db' is quoted as 30\.0, but .* prints 29\.94")
    expect("synthetic_stale_output", good.replace("three\n```", "four\n```"), r"docs-output differs")
    expect("synthetic_unknown_key", good + "and 7 dB<!--=c.gain-->\n", r"no docs-check block .* prints a line 'c\.gain")
    expect("synthetic_unmarked_figure", good + "\nIt took 12.5 ms here.\n", r"unmarked figure '12\.5 ms'")
    expect("synthetic_unmarked_table_cell", good + "\n| case | T |\n|---|---|\n| gaussian | 3.8124 |\n",
           r"unmarked figure '3\.8124'")
    measured = ("<!-- measured\ndate: 2026-11-25\nmachine: a 2-core VM\ncommand: bash scripts/bench.sh\n-->\n"
                "It took 12.5 ms here.\n<!-- /measured -->\n")
    expect("synthetic_measured", good + measured, None)
    expect("synthetic_measured_without_machine", good + measured.replace("machine: a 2-core VM\n", ""),
           r"measured region lacks machine")
    expect("synthetic_failing_command", "```sh docs-check\nexit 3\n```\n", r"exited 3")
    return []


def _self_test_real(expect):
    """Real documents, each with one number made stale: the check must name it."""
    failures = []
    # Real documents, each with one number made stale: a quoted value of configs/README.md, and a number of
    # docs/FIXED_POINT.md's worked example (a docs-output region).
    for relative, kind in (("configs/README.md", "value"), ("docs/FIXED_POINT.md", "output")):
        with open(os.path.join(ROOT, relative), encoding="utf-8") as f:
            real = Doc(relative, f.read(), relative)
        if kind == "value":
            if not real.values:
                failures.append(f"{relative} quotes no checked value; the self-test needs one")
                continue
            index, column, key = real.values[0]
            number = quoted_number(real.lines[index], column)
            wanted = rf"'{re.escape(key)}' is quoted as {{stale}}, but"
        else:
            outputs = [check["output"] for check in real.checks if check["output"]]
            found = [(i, m) for o in outputs for i in range(o["start"], o["end"])
                     for m in [re.search(r"-?\d{3,}", real.lines[i])] if m]
            if not found:
                failures.append(f"{relative} has no docs-output with a number; the self-test needs one")
                continue
            index, number = found[len(found) // 2]
            wanted = "docs-output differs"
        digits = number.group(0)
        stale = digits[:-1] + str((int(digits[-1]) + 1) % 10)
        line = real.lines[index]
        real.lines[index] = line[:number.start()] + stale + line[number.end():]
        expect(relative.replace("/", "_") + "_one_number_stale", "\n".join(real.lines),
               wanted.replace("{stale}", re.escape(stale)))
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("files", nargs="*", help="Markdown files (default: README.md, configs/README.md, docs/**.md)")
    parser.add_argument("--qgru", default=os.path.join(ROOT, "build", "apps", "qgru", "qgru"), help="the qgru binary")
    parser.add_argument("--scratch", help="folder for the commands' files (default: a temporary folder, removed)")
    parser.add_argument("--update", action="store_true",
                        help="rewrite docs-output blocks and quoted values with what the commands print now")
    parser.add_argument("--self-test", nargs="?", const="all", choices=("all", "synthetic", "real"),
                        help="run the checker on documents made to fail: 'synthetic' ones (stale values and outputs, "
                        "unmarked figures, a failing command), 'real' ones (copies of configs/README.md and "
                        "docs/FIXED_POINT.md with one number changed), or 'all' (the default)")
    parser.add_argument("--with-self-test", action="store_true",
                        help="after the check, the real-document self-test, its copies reusing the results the "
                        "check got for the same docs-check blocks (one run of each document's commands)")
    args = parser.parse_args()
    if not os.access(args.qgru, os.X_OK):
        sys.exit(f"check_docs: {args.qgru}: not an executable qgru binary (--qgru)")
    scratch_root = args.scratch or tempfile.mkdtemp(prefix="qgru-docs-")
    try:
        if args.self_test:
            failures = self_test(args.qgru, scratch_root, args.self_test)
            for failure in failures:
                print(f"check_docs self-test: FAIL: {failure}", file=sys.stderr)
            return 1 if failures else 0
        started = time.monotonic()
        files = [os.path.abspath(f) for f in args.files] or default_files()
        results_by_script = {} if args.with_self_test else None
        problems, counts = check_files(files, args.qgru, scratch_root, do_update=args.update,
                                       results_by_script=results_by_script)
        for problem in problems:
            print(f"check_docs: {problem}", file=sys.stderr)
        print(f"check_docs: {counts['files']} files, {counts['blocks']} docs-check blocks run "
              f"({counts['seconds']:.1f} s), {counts['values']} quoted values and {counts['outputs']} outputs "
              f"compared, {counts['measured']} measured regions; {len(problems)} problem(s) "
              f"in {time.monotonic() - started:.1f} s")
        failures = []
        if args.with_self_test:
            failures = self_test(args.qgru, scratch_root, "real", results_by_script)
            for failure in failures:
                print(f"check_docs self-test: FAIL: {failure}", file=sys.stderr)
        return 1 if problems or failures else 0
    finally:
        if not args.scratch:
            shutil.rmtree(scratch_root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
