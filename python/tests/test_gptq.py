"""GPTQ from Python against `qgru gptq` and `qgru linear`, and against a float64 reference of the packed layout."""

import json
import os

import numpy as np
import pytest

import qgru
from conftest import read_bytes, run_cli


@pytest.fixture(scope="module")
def layer():
    rng = np.random.default_rng(42)
    weight = rng.standard_normal((64, 256)).astype(np.float32)
    # Correlated activations (a few strong directions), where GPTQ's error compensation matters.
    basis = rng.standard_normal((16, 256))
    activations = (rng.standard_normal((600, 16)) @ basis + 0.1 * rng.standard_normal((600, 256))).astype(np.float32)
    return weight, activations


def test_gptq_writes_the_cli_checkpoint(cli, layer, tmp_path):
    weight, activations = layer
    qgru.write_tensors(tmp_path / "w.safetensors", {"fc.weight": weight})
    np.save(tmp_path / "x.npy", activations)
    for who in ("cli", "py"):
        (tmp_path / who).mkdir()
    run_cli(cli, "gptq", "--weights", tmp_path / "w.safetensors", "--tensor", "fc.weight", "--activations",
            tmp_path / "x.npy", "--sym", "-o", tmp_path / "cli" / "q.safetensors")
    result = qgru.gptq(weight, activations, name="fc.weight", sym=True, checkpoint=tmp_path / "py" / "q.safetensors")
    for name in ("q.safetensors", "quantize_config.json"):
        assert read_bytes(tmp_path / "py" / name) == read_bytes(tmp_path / "cli" / name), name
    assert result.qweight.shape == (256 * 4 // 32, 64) and result.qweight.dtype == np.int32
    assert result.scales.dtype == np.float16 and result.scales.shape == (2, 64)
    assert result.g_idx.tolist() == [k // 128 for k in range(256)]
    assert 0 < result.gptq_error < result.rtn_error
    assert result.tokens == 600 and (result.N, result.K) == (64, 256)

    np.save(tmp_path / "x_test.npy", activations[:20])
    run_cli(cli, "linear", "--checkpoint", tmp_path / "cli" / "q.safetensors", "--layer", "fc", "--input",
            tmp_path / "x_test.npy", "--output", tmp_path / "y.npy")
    y = qgru.gptq_linear(tmp_path / "py" / "q.safetensors", activations[:20])
    np.testing.assert_array_equal(y, np.load(tmp_path / "y.npy"))
    np.testing.assert_array_equal(qgru.gptq_linear(result, activations[:20]), y)


def dequantized_v2(result, bits, N, K):
    """Ŵ [N, K] in float64 from the packed tensors of a gptq_v2 checkpoint (zero points stored as they are)."""
    per_word = 32 // bits
    mask = (1 << bits) - 1
    words = result.qweight.view(np.uint32)
    codes = np.array([[(int(words[k // per_word, n]) >> (bits * (k % per_word))) & mask for n in range(N)]
                      for k in range(K)])                                         # [K, N]
    zero_words = result.qzeros.view(np.uint32)
    zeros = np.array([[(int(zero_words[g, n // per_word]) >> (bits * (n % per_word))) & mask for n in range(N)]
                      for g in range(zero_words.shape[0])])                     # [G, N]
    scales = result.scales.astype(np.float64)
    g = result.g_idx
    return ((codes - zeros[g]) * scales[g]).T


def test_gptq_linear_is_x_times_the_dequantized_weight(layer, tmp_path):
    weight, activations = layer
    result = qgru.gptq(weight, [activations[:300], activations[300:]], bits=4, group_size=64, format="gptq_v2",
                       act_order=True, checkpoint=tmp_path / "q.safetensors")
    assert sorted(set(result.g_idx.tolist())) == [0, 1, 2, 3] and result.g_idx.tolist() != [k // 64 for k in range(256)]
    w_hat = dequantized_v2(result, 4, 64, 256)
    assert np.abs(w_hat - weight).max() < 0.5 * np.abs(weight).max()
    x = activations[:10].astype(np.float64)
    y = qgru.gptq_linear(tmp_path / "q.safetensors", activations[:10])
    reference = x @ w_hat.T
    assert np.abs(y - reference).max() <= 1e-4 * np.abs(reference).max()
    config = json.loads(read_bytes(tmp_path / "quantize_config.json"))
    assert config["group_size"] == 64 and config["desc_act"] is True


def test_gptq_options_follow_the_library(layer):
    weight, activations = layer
    defaults = qgru.gptq_defaults()
    assert (defaults["bits"], defaults["group_size"]) == (4, 128)  # the signature's defaults are the CLI's
    assert defaults["order"] == "group-aware"                      # --order's default
    assert {"damp", "sym", "static_groups", "block_size"} <= set(defaults)
    with pytest.raises(TypeError, match="unknown option 'desc_act'"):
        qgru.gptq(weight, activations, desc_act=True)
    with pytest.raises(TypeError, match="order= or act_order=True, not both"):
        qgru.gptq(weight, activations, order="natural", act_order=True)
    with pytest.raises(qgru.Error, match="^gptq: column order 'random' is not known, expected group-aware, "
                                         "act-order or natural$"):
        qgru.gptq(weight, activations, order="random")
    without_file = qgru.gptq(weight, activations, bits=8, group_size=-1)
    assert without_file.checkpoint is None and without_file.scales.shape == (1, 64)
    with pytest.raises(qgru.Error, match="was not written to a checkpoint"):
        qgru.gptq_linear(without_file, activations[:2])


def test_gptq_refusals_name_the_array(layer, tmp_path):
    weight, activations = layer
    with pytest.raises(qgru.Error, match=r"activations\[0\] \(activations of 'linear.weight'\)"):
        qgru.gptq(weight, activations[:, :200])
    with pytest.raises(qgru.Error, match=r"^weight \(in memory\): tensor 'linear.weight' is \[60, 256\]"):
        qgru.gptq(weight[:60], activations)
    result = qgru.gptq(weight, activations, checkpoint=tmp_path / "q.safetensors")
    with pytest.raises(qgru.Error, match=r"^x: input has shape \[3, 255\], expected \[M, 256\] for layer 'linear'$"):
        qgru.gptq_linear(result, activations[:3, :255])


def test_gptq_without_a_checkpoint_ignores_the_working_folder(layer, tmp_path, monkeypatch):
    weight, activations = layer
    # A quantize_config.json of 8-bit checkpoints where the interpreter runs: nothing is written there, so
    # nothing there can disagree.
    (tmp_path / "quantize_config.json").write_text(json.dumps({"bits": 8, "group_size": 128, "quant_method": "gptq"}))
    monkeypatch.chdir(tmp_path)
    result = qgru.gptq(weight, activations)
    assert result.checkpoint is None and result.qweight.shape == (256 * 4 // 32, 64)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["quantize_config.json"]


def test_each_column_order_writes_the_cli_checkpoint(cli, layer, tmp_path):
    weight, activations = layer
    qgru.write_tensors(tmp_path / "w.safetensors", {"fc.weight": weight})
    np.save(tmp_path / "x.npy", activations)
    g_idx = {}
    for order, python_args, cli_args in (("default", {}, []),
                                         ("group-aware", {"order": "group-aware"}, ["--order", "group-aware"]),
                                         ("act-order", {"order": "act-order"}, ["--order", "act-order"]),
                                         ("act-order-flag", {"act_order": True}, ["--act-order"]),
                                         ("natural", {"order": "natural"}, ["--order", "natural"])):
        for who in ("cli", "py"):
            (tmp_path / order / who).mkdir(parents=True)
        run_cli(cli, "gptq", "--weights", tmp_path / "w.safetensors", "--tensor", "fc.weight", "--activations",
                tmp_path / "x.npy", "--group-size", "64", *cli_args, "-o", tmp_path / order / "cli" / "q.safetensors")
        result = qgru.gptq(weight, activations, group_size=64, name="fc.weight", **python_args,
                           checkpoint=tmp_path / order / "py" / "q.safetensors")
        for name in ("q.safetensors", "quantize_config.json"):
            assert read_bytes(tmp_path / order / "py" / name) == read_bytes(tmp_path / order / "cli" / name), \
                (order, name)
        g_idx[order] = result.g_idx.tolist()
    in_groups = [k // 64 for k in range(256)]
    assert g_idx["default"] == g_idx["group-aware"] == g_idx["natural"] == in_groups
    assert g_idx["act-order"] == g_idx["act-order-flag"] != in_groups
    configs = {order: json.loads(read_bytes(tmp_path / order / "py" / "quantize_config.json"))
               for order in ("group-aware", "act-order", "natural")}
    assert [configs[o]["desc_act"] for o in ("group-aware", "act-order", "natural")] == [False, True, False]
    assert [configs[o]["meta"]["act_group_aware"] for o in ("group-aware", "act-order", "natural")] == \
        [True, False, False]


def test_gptq_linear_reads_the_checkpoint_as_qgru_linear(cli, tmp_path):
    """The bias added (left out with no_bias), v1 zero points of 0 by the clients' rule, and a v1 file of
    qgru's earlier writer (meta.quantizer "qgru") by its own per-field rule: y equal to `qgru linear`'s."""
    rng = np.random.default_rng(5)
    weight = rng.standard_normal((32, 96)).astype(np.float32)
    weight[::2] = np.abs(weight[::2])  # rows >= 0: asymmetric zero points of 0
    bias = rng.standard_normal(32).astype(np.float32)
    qgru.write_tensors(tmp_path / "w.safetensors", {"fc.weight": weight, "fc.bias": bias})
    np.save(tmp_path / "calib.npy", rng.standard_normal((256, 96)).astype(np.float32))
    x = rng.standard_normal((7, 96)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "v1").mkdir()
    run_cli(cli, "gptq", "--weights", tmp_path / "w.safetensors", "--tensor", "fc.weight", "--activations",
            tmp_path / "calib.npy", "--bits", "2", "--group-size", "32", "-o", tmp_path / "v1" / "q.safetensors")
    checkpoint = tmp_path / "v1" / "q.safetensors"

    def cli_linear(path, *flags):
        run_cli(cli, "linear", "--checkpoint", path, "--layer", "fc", "--input", tmp_path / "x.npy", "--output",
                tmp_path / "y.npy", *flags)
        return np.load(tmp_path / "y.npy")

    with_bias, without_bias = cli_linear(checkpoint), cli_linear(checkpoint, "--no-bias")
    np.testing.assert_array_equal(qgru.gptq_linear(checkpoint, x), with_bias)
    np.testing.assert_array_equal(qgru.gptq_linear(checkpoint, x, no_bias=True), without_bias)
    # The bias is what differs: stored in float16 (as AutoGPTQ keeps it), added in float32.
    assert np.abs(with_bias - without_bias - bias.astype(np.float16).astype(np.float32)).max() < 1e-5

    # The same layer as qgru's earlier writer stored it: (zero − 1) & maxq in each 2-bit field of qzeros.
    (tmp_path / "old").mkdir()
    tensors = qgru.read_tensors(checkpoint)
    words = tensors["fc.qzeros"].view(np.uint32).astype(np.uint64)
    zeros = np.stack([((words + 0x55555555) & 0xFFFFFFFF) >> np.uint64(2 * i) & np.uint64(3) for i in range(16)], -1)
    assert np.any(zeros == 0)
    fields = (zeros.astype(np.int64) - 1) & 3
    tensors["fc.qzeros"] = np.bitwise_or.reduce(fields.astype(np.uint64) << (2 * np.arange(16, dtype=np.uint64)),
                                                axis=-1).astype(np.uint32).view(np.int32)
    qgru.write_tensors(tmp_path / "old" / "q.safetensors", tensors)
    config = json.loads(read_bytes(tmp_path / "v1" / "quantize_config.json"))
    config["meta"] = {"quantizer": "qgru"}
    (tmp_path / "old" / "quantize_config.json").write_text(json.dumps(config))
    old = qgru.gptq_linear(tmp_path / "old" / "q.safetensors", x)
    np.testing.assert_array_equal(old, cli_linear(tmp_path / "old" / "q.safetensors"))
    np.testing.assert_array_equal(old, with_bias)


def test_a_hessian_fed_chunk_by_chunk_gives_the_rows_checkpoint(cli, layer, tmp_path):
    """qgru.Hessian: the same chunks in the same order give the same H as qgru.gptq's own accumulation, so the
    checkpoint equals the one from the rows (and `qgru gptq --hessian` of its matrix), for every column order."""
    weight, activations = layer
    chunks = [activations[:250], activations[250:257], activations[257:].reshape(7, 49, 256)]
    hessian = qgru.Hessian(256)
    for chunk in chunks:
        hessian.add(chunk)
    assert hessian.tokens == 600 and hessian.K == 256
    H = hessian.matrix()
    plain = 2.0 * activations.astype(np.float64).T @ activations.astype(np.float64)
    assert H.dtype == np.float64 and H.shape == (256, 256)
    assert np.max(np.abs(H - plain)) <= 1e-12 * np.max(np.abs(plain))
    np.testing.assert_array_equal(H, H.T)
    qgru.write_tensors(tmp_path / "w.safetensors", {"fc.weight": weight})
    np.save(tmp_path / "h.npy", H)
    for order in ("group-aware", "act-order", "natural"):
        (tmp_path / order).mkdir()
        rows = qgru.gptq(weight, chunks, name="fc.weight", order=order)
        shared = qgru.gptq(weight, hessian=hessian, name="fc.weight", order=order)
        given = qgru.gptq(weight, hessian=H, name="fc.weight", order=order, checkpoint=tmp_path / order / "q.safetensors")
        for name, tensor in rows.tensors.items():
            np.testing.assert_array_equal(shared.tensors[name], tensor, err_msg=f"{order}: {name}")
            np.testing.assert_array_equal(given.tensors[name], tensor, err_msg=f"{order}: {name}")
        assert (shared.gptq_error, shared.rtn_error, shared.tokens) == (rows.gptq_error, rows.rtn_error, 600)
        assert given.gptq_error == rows.gptq_error and given.tokens == 0
        run_cli(cli, "gptq", "--weights", tmp_path / "w.safetensors", "--tensor", "fc.weight", "--hessian",
                tmp_path / "h.npy", "--order", order, "-o", tmp_path / order / "cli.safetensors")
        cli_tensors = qgru.read_tensors(tmp_path / order / "cli.safetensors")
        for name, tensor in qgru.read_tensors(tmp_path / order / "q.safetensors").items():
            np.testing.assert_array_equal(cli_tensors[name], tensor, err_msg=f"{order}: {name}")
    assert hessian.tokens == 600  # quantizing from it used it as it was


def test_hessian_refusals(layer):
    weight, activations = layer
    with pytest.raises(TypeError, match="activations or hessian=, one of them"):
        qgru.gptq(weight, activations, hessian=qgru.Hessian(256).add(activations))
    with pytest.raises(TypeError, match="activations or hessian=, one of them"):
        qgru.gptq(weight)
    with pytest.raises(qgru.Error, match=r"^hessian rows: activations have shape \[600, 200\], expected \[M, K\] "
                                         r"\(or \[\.\.\., K\]\) with K = 256 \(the weight's input size\)$"):
        qgru.Hessian(256).add(activations[:, :200])
    with pytest.raises(qgru.Error, match=r"^hessian: Hessian has shape \[256, 255\], expected a square \[K, K\]$"):
        qgru.Hessian.from_matrix(np.zeros((256, 255)))
    given = qgru.Hessian.from_matrix(np.eye(256), tokens=3)
    assert given.tokens == 3
    with pytest.raises(qgru.Error, match="given as a matrix; it takes no more rows"):
        given.add(activations)
    with pytest.raises(qgru.Error, match=r"^hessian \(Hessian of 'linear.weight'\): Hessian holds 16384 values, "
                                         r"expected \[256, 256\] \(K from the weight\)$"):
        qgru.gptq(weight, hessian=np.eye(128))
    negative = np.eye(256)
    negative[3, 3] = -1.0
    with pytest.raises(qgru.Error, match=r"Hessian diagonal entry \[3, 3\] is -1"):
        qgru.gptq(weight, hessian=negative)


def test_gptq_devices_by_name(layer):
    """device= as `qgru gptq --device`: "cpu" is the default path; "cuda" either runs GPTQ on the GPU (then its
    error is within a hundredth of the CPU path's, the GPU path's contract) or is refused in one line saying why
    (no GPU here, or a build without CUDA); any other name is refused."""
    weight, activations = layer
    devices = qgru.gptq_devices()
    assert devices[0] == "cpu" and set(devices) <= {"cpu", "cuda"}
    cpu = qgru.gptq(weight, activations, device="cpu")
    np.testing.assert_array_equal(cpu.qweight, qgru.gptq(weight, activations).qweight)
    for make in (lambda: qgru.gptq(weight, activations, device="cuda"),
                 lambda: qgru.gptq(weight, hessian=qgru.Hessian(256, device="cuda").add(activations), device="cuda")):
        try:
            result = make()
        except qgru.Error as e:
            if "cuda" in devices:
                assert str(e).startswith("device cuda: no usable CUDA device: "), str(e)
            else:
                assert str(e) == "device cuda: this qgru was built without CUDA (nvcc was not found at configure time)"
        else:
            assert abs(result.gptq_error - cpu.gptq_error) <= 0.01 * cpu.gptq_error
            assert result.tokens == 600
    with pytest.raises(qgru.Error, match=r"^device 'tpu': expected cpu or cuda$"):
        qgru.gptq(weight, activations, device="tpu")
    with pytest.raises(qgru.Error, match=r"^device 'tpu': expected cpu or cuda$"):
        qgru.Hessian(256, device="tpu")


def test_gptq_cuda_without_cublas_is_one_line(cli, tmp_path):
    """A device that would be usable but for cuBLAS (loaded at first use; here a file that does not exist, with the
    probe's test seams standing in for a driver and a GPU): qgru.gptq(device="cuda") and qgru.Hessian(device=
    "cuda") raise the one line naming the library, as `qgru gptq --device cuda` does. A build without CUDA says so."""
    import re
    import subprocess
    import sys

    built = re.search(r"built with CUDA (\d+)\.(\d+)", subprocess.run([cli, "--version"], capture_output=True,
                                                                      text=True).stdout)
    env = dict(os.environ, QGRU_TEST_CUDA_DEVICE_COUNT="1", QGRU_CUBLAS_LIBRARY="libqgru_no_such_cublas.so")
    if built:
        env["QGRU_TEST_CUDA_DRIVER_VERSION"] = str(int(built[1]) * 1000 + int(built[2]) * 10)
    program = ("import numpy as np, qgru\n"
               "w = np.ones((8, 32), np.float32)\n"
               "for call in (lambda: qgru.gptq(w, np.ones((40, 32), np.float32), group_size=-1, device='cuda'),\n"
               "             lambda: qgru.Hessian(32, device='cuda')):\n"
               "    try:\n"
               "        call()\n"
               "    except qgru.Error as e:\n"
               "        print(e)\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2, result.stdout
    for line in lines:
        if built:
            assert line.startswith("device cuda: no usable CUDA device: cuBLAS (libqgru_no_such_cublas.so) could not "
                                   "be loaded: "), line
        else:
            assert line == "device cuda: this qgru was built without CUDA (nvcc was not found at configure time)"


class _CudaArray:
    """Stands in for a GPU array (CuPy, Numba): only its __cuda_array_interface__ is read."""

    def __init__(self, **interface):
        self.__cuda_array_interface__ = dict(dict(typestr="<f4", data=(0x7F0000001000, False), version=3), **interface)


def test_gpu_rows_follow_the_cuda_array_interface():
    """What qgru.Hessian(device="cuda").add hands the GPU accumulator for rows already on a GPU: the address, the
    rows (leading dimensions flattened), the row stride in elements and the producing stream in the interface's
    convention; what it cannot read in place is refused naming the rows; host arrays are not GPU rows."""
    from qgru._inputs import gpu_rows

    rows = gpu_rows(_CudaArray(shape=(2, 3, 8), strides=None, stream=2), 8, "x")
    assert (rows.pointer, rows.M, rows.ld, rows.stream) == (0x7F0000001000, 6, 8, 2)
    rows = gpu_rows(_CudaArray(shape=(5, 8), strides=(48, 4)), 8, "x")  # padded rows: 12 floats apart
    assert (rows.M, rows.ld, rows.stream) == (5, 12, 0)  # no stream: nothing to wait for
    rows = gpu_rows(_CudaArray(shape=(1, 4, 8), strides=(999, 32, 4)), 8, "x")  # a unit dimension's stride is free
    assert (rows.M, rows.ld) == (4, 8)
    assert gpu_rows(np.ones((4, 8), np.float32), 8, "x") is None
    with pytest.raises(qgru.Error, match=r"^x: rows in GPU memory have type <f2, expected float32 \(<f4\); "):
        gpu_rows(_CudaArray(shape=(4, 8), typestr="<f2"), 8, "x")
    with pytest.raises(qgru.Error, match=r"^x: rows have shape \[4, 7\], expected \[\.\.\., 8\]$"):
        gpu_rows(_CudaArray(shape=(4, 7)), 8, "x")
    with pytest.raises(qgru.Error, match=r"^x: rows in GPU memory are not row-contiguous \(strides \[4, 16\] bytes\)"):
        gpu_rows(_CudaArray(shape=(4, 8), strides=(4, 16)), 8, "x")  # a transposed [8, 4]
    with pytest.raises(qgru.Error, match=r"^x: rows in GPU memory are not row-contiguous"):
        gpu_rows(_CudaArray(shape=(2, 4, 8), strides=(256, 64, 4)), 8, "x")  # gaps between rows of a 3-D array
    with pytest.raises(qgru.Error, match=r"^x: rows in GPU memory need a Hessian accumulated on the GPU \(device cuda\)$"):
        qgru.Hessian(8)._impl.add_device(0x7F0000001000, 4, 8, 0, "x")
