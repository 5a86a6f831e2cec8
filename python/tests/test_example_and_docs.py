"""examples/python runs and prints the CLI's figures; the public API documents itself."""

import json
import os
import pydoc
import subprocess
import sys

import qgru
from conftest import ROOT, run_cli


def test_digits_example_prints_the_cli_sqnr_and_its_artifact_runs_in_the_cli(cli, digits, tmp_path):
    example = os.path.join(ROOT, "examples", "python", "digits.py")
    result = subprocess.run([sys.executable, example, "--out", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines() if len(line.split()) == 3}
    assert rows["float"][0] == "0.9799" and rows["int8"][0] == "0.9799"

    run_cli(cli, "calibrate", "--model", digits["model"], "--data", digits["calib"], "-o", tmp_path / "stats.json")
    for config in ("int8", "int16"):
        run_cli(cli, "quantize", "--model", digits["model"], "--stats", tmp_path / "stats.json", "--config", config,
                "-o", tmp_path / f"{config}.qgru.json")
        run_cli(cli, "verify", "--model", digits["model"], "--artifact", tmp_path / f"{config}.qgru.json",
                "--input", digits["test"], "--report", tmp_path / f"{config}.json")
        sqnr = json.loads((tmp_path / f"{config}.json").read_text())["output"]["sqnr_db"]
        assert rows[config][1] == f"{sqnr:.1f}", config
    assert "the same 8 x 64 codes as the whole run" in result.stdout
    run_cli(cli, "run", "--model", tmp_path / "digits.qgru.json", "--input", digits["test"], "--output", tmp_path / "y.npy")


def test_help_shows_the_docstrings():
    for name in ("calibrate", "quantize", "verify", "load", "gptq", "gptq_linear", "read_tensors", "write_tensors"):
        text = pydoc.render_doc(getattr(qgru, name), renderer=pydoc.plaintext)
        assert len(getattr(qgru, name).__doc__) > 100, name
        assert getattr(qgru, name).__doc__.split("\n")[0] in text
    for cls in (qgru.Artifact, qgru.Statistics, qgru.Report, qgru.Stream, qgru.GptqResult):
        assert cls.__doc__ and len(cls.__doc__) > 100, cls.__name__
    quantize_help = pydoc.render_doc(qgru.quantize, renderer=pydoc.plaintext)
    for words in ("config", "int16-activations", "range_method", "Returns", "qgru.Error"):
        assert words in quantize_help
    assert qgru.Error.__module__ == "qgru"
    assert qgru.__version__ == run_version()


def run_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        for line in f:
            if line.startswith("project(qgru VERSION "):
                return line.split()[2]
    raise AssertionError("no project(qgru VERSION ...) line")
