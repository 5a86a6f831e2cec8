"""Shared fixtures of the Python package's tests (run by scripts/test_python.sh, in CI through ctest).

QGRU_CLI names the qgru binary of the same build (the round trips compare with it) and QGRU_SOURCE_DIR the
checkout (the bundled example, examples/python). Both are required: a test that needs them fails without them,
it never skips.
"""

import os
import subprocess

import numpy as np
import pytest

import qgru

ROOT = os.environ.get("QGRU_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS = os.path.join(ROOT, "examples", "digits")


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("QGRU_CLI")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("QGRU_CLI must name the qgru binary of this build (scripts/test_python.sh sets it)")
    return path


def run_cli(cli, *args, expect_failure=False, exit_code=1):
    """Run `qgru -q ARGS`; returns stdout, or with expect_failure the error line without "qgru: error: " (the
    exit code 1 for bad input, 2 for a usage error such as a refused output path)."""
    result = subprocess.run([cli, "-q", *map(str, args)], capture_output=True, text=True)
    if expect_failure:
        assert result.returncode == exit_code, f"qgru {' '.join(map(str, args))} exited {result.returncode}: {result.stderr}"
        lines = [line for line in result.stderr.splitlines() if line.startswith("qgru: error: ")]
        assert len(lines) == 1, result.stderr
        return lines[0][len("qgru: error: "):]
    assert result.returncode == 0, f"qgru {' '.join(map(str, args))} failed: {result.stderr}"
    return result.stdout


@pytest.fixture(scope="session")
def digits():
    """Absolute paths of the bundled example (the CLI and the package are given the same strings)."""
    return {
        "model": os.path.join(DIGITS, "gru.safetensors"),
        "calib": os.path.join(DIGITS, "calib.npy"),
        "test": os.path.join(DIGITS, "test.npy"),
        "labels": os.path.join(DIGITS, "test_labels.npy"),
    }


@pytest.fixture(scope="session")
def digits_state_dict(digits):
    """The GRU's tensors of the example as a state dict of NumPy arrays (the head left out, prefix kept)."""
    tensors = qgru.read_tensors(digits["model"])
    return {name: value for name, value in tensors.items() if name.startswith("gru.")}


@pytest.fixture(scope="session")
def digits_artifact(digits):
    """int8 artifact of the example, calibrated on its calibration file."""
    return qgru.quantize(digits["model"], qgru.calibrate(digits["model"], digits["calib"]), config="int8")


def random_gru_state_dict(seed, input_size, hidden_size, num_layers=1, bidirectional=False, scale=0.4):
    """An nn.GRU-shaped state dict of random float32 weights."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for layer in range(num_layers):
        for suffix in ["", "_reverse"] if bidirectional else [""]:
            c = input_size if layer == 0 else hidden_size * (2 if bidirectional else 1)
            tensors[f"weight_ih_l{layer}{suffix}"] = (rng.standard_normal((3 * hidden_size, c)) * scale).astype(np.float32)
            tensors[f"weight_hh_l{layer}{suffix}"] = (rng.standard_normal((3 * hidden_size, hidden_size)) * scale).astype(np.float32)
            tensors[f"bias_ih_l{layer}{suffix}"] = (rng.standard_normal(3 * hidden_size) * 0.1).astype(np.float32)
            tensors[f"bias_hh_l{layer}{suffix}"] = (rng.standard_normal(3 * hidden_size) * 0.1).astype(np.float32)
    return tensors


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()
