"""torch.nn.GRU / nn.GRUCell / nn.Linear and torch tensors given to the package: the same results as their state
dicts and NumPy arrays, and the README's example prints the CLI's SQNR."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import torch

import qgru
from conftest import ROOT, run_cli


def artifact_files(artifact, folder):
    folder.mkdir()
    artifact.save(folder / "m.qgru.json")
    return (folder / "m.qgru.json").read_bytes(), (folder / "m.qgru.safetensors").read_bytes()


def test_module_and_its_state_dict_give_the_same_artifact(tmp_path):
    torch.manual_seed(0)
    gru = torch.nn.GRU(5, 33, num_layers=2, bidirectional=True)
    x = torch.randn(7, 4, 5)
    from_module = qgru.quantize(gru, qgru.calibrate(gru, x), config="int16-activations")
    state = {name: value.numpy() for name, value in gru.state_dict().items()}
    from_dict = qgru.quantize(state, qgru.calibrate(state, x.numpy()), config="int16-activations")
    assert artifact_files(from_module, tmp_path / "a") == artifact_files(from_dict, tmp_path / "b")
    # And the float model is PyTorch's: the integer run follows torch's output within the int16 grid.
    y_torch, _ = gru(x)
    y, _ = from_module.run(x)
    assert np.abs(y - y_torch.detach().numpy()).max() < 0.01


def test_batch_first_modules_and_gru_cells(tmp_path):
    torch.manual_seed(1)
    gru = torch.nn.GRU(6, 16, batch_first=True)
    x = torch.randn(3, 9, 6)  # [N, T, C], as the module takes it
    stats = qgru.calibrate(gru, x)  # batch_first from the module
    same = qgru.calibrate({k: v.numpy() for k, v in gru.state_dict().items()}, x.transpose(0, 1).contiguous().numpy())
    assert stats.to_dict()["tensors"] == same.to_dict()["tensors"]
    artifact = qgru.quantize(gru, stats)
    y, h_n = artifact.run(x, batch_first=True)
    y_torch, h_torch = gru(x)
    assert y.shape == tuple(y_torch.shape) and h_n.shape == tuple(h_torch.shape)

    # A GRUCell is the one-layer GRU of its weights: stepped over a sequence, as torch steps it.
    cell = torch.nn.GRUCell(6, 16)
    sequence = torch.randn(5, 2, 6)
    artifact = qgru.quantize(cell, qgru.calibrate(cell, sequence), config="int16")
    h = torch.zeros(2, 16)
    for t in range(5):
        h = cell(sequence[t], h)
    y, _ = artifact.run(sequence)
    assert np.abs(y[-1] - h.detach().numpy()).max() < 0.01
    as_gru = {f"{name}_l0": value.numpy() for name, value in cell.state_dict().items()}
    same = qgru.quantize(as_gru, qgru.calibrate(as_gru, sequence.numpy()), config="int16")
    assert artifact_files(artifact, tmp_path / "cell")[1] == artifact_files(same, tmp_path / "gru")[1]


def test_cpu_tensors_are_read_in_place(tmp_path):
    torch.manual_seed(2)
    gru = torch.nn.GRU(4, 8)
    x = torch.randn(6, 3, 4)
    artifact = qgru.quantize(gru, qgru.calibrate(gru, x))
    from qgru import _qgru
    from qgru._runtime import runtime_array
    array, _ = runtime_array(x, "x")
    assert _qgru._data_address(array) == x.data_ptr()
    np.testing.assert_array_equal(artifact.run(x)[0], artifact.run(x.numpy())[0])
    with torch.no_grad():
        assert not qgru.calibrate(gru, x.requires_grad_()).to_json() == ""


def test_gptq_takes_a_linear_module_with_its_bias(tmp_path):
    torch.manual_seed(3)
    linear = torch.nn.Linear(128, 32)
    x = torch.randn(256, 128)
    result = qgru.gptq(linear, x, group_size=64, checkpoint=tmp_path / "q.safetensors")
    assert result.bias.dtype == np.float16 and result.bias.shape == (32,)
    y = qgru.gptq_linear(result, x[:8])
    with torch.no_grad():
        expected = (x[:8] @ linear.weight.T).numpy()
    assert np.abs(y - expected).max() < 0.2 * np.abs(expected).max()


def readme_python_example():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text[text.index("## Python"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_example_prints_the_cli_sqnr(cli, digits, tmp_path):
    result = subprocess.run([sys.executable, "-c", readme_python_example()], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "int32 (8, 597, 64)" in result.stdout
    printed = re.search(r"output SQNR ([0-9.]+) dB", result.stdout).group(1)
    run_cli(cli, "calibrate", "--model", digits["model"], "--data", digits["calib"], "-o", tmp_path / "stats.json")
    run_cli(cli, "quantize", "--model", digits["model"], "--stats", tmp_path / "stats.json", "-o", tmp_path / "m.qgru.json")
    run_cli(cli, "verify", "--model", digits["model"], "--artifact", tmp_path / "m.qgru.json", "--input", digits["test"],
            "--report", tmp_path / "r.json")
    assert printed == f"{json.loads((tmp_path / 'r.json').read_text())['output']['sqnr_db']:.1f}"
