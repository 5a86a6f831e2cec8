"""qgru.QuantLinear: a GPTQ checkpoint layer read once and called many times, against qgru.gptq_linear (the same
library function, byte for byte) and against a float64 x·Ŵᵀ with Ŵ decoded here from the packed tensors."""

import copy
import os
import re
import shutil

import numpy as np
import pytest

import qgru

N, K, GROUP = 32, 128, 32


@pytest.fixture(scope="module")
def weights():
    rng = np.random.default_rng(11)
    weight = rng.standard_normal((N, K)).astype(np.float32)
    weight[::3] = np.abs(weight[::3])  # rows >= 0: asymmetric zero points of 0, which v1 stores by borrowing
    bias = rng.standard_normal(N).astype(np.float32)
    activations = rng.standard_normal((200, K)).astype(np.float32)
    x = rng.standard_normal((5, K)).astype(np.float32)
    return weight, bias, activations, x


CASES = [(bits, fmt, order) for bits in (2, 3, 4, 8) for fmt in ("gptq", "gptq_v2") for order in ("group-aware", "act-order")]


@pytest.fixture(scope="module")
def checkpoints(weights, tmp_path_factory):
    """One written checkpoint (with a bias) per case: {case: GptqResult}."""
    weight, bias, activations, _ = weights
    results = {}
    for bits, fmt, order in CASES:
        folder = tmp_path_factory.mktemp(f"q{bits}_{fmt}_{order}")
        results[(bits, fmt, order)] = qgru.gptq(weight, activations, bits=bits, group_size=GROUP, order=order,
                                                format=fmt, name="fc.weight", bias=bias,
                                                checkpoint=folder / "q.safetensors")
    return results


def stream_fields(rows, bits, count):
    """Fields of `bits` bits from little-endian bit streams: rows [R, W] int32 words -> [R, count] ints."""
    bit_stream = np.unpackbits(np.ascontiguousarray(rows).view(np.uint32).view(np.uint8), axis=1, bitorder="little")
    fields = bit_stream[:, : bits * count].reshape(rows.shape[0], count, bits).astype(np.int64)
    return fields @ (1 << np.arange(bits, dtype=np.int64))


def decoded(result, bits, fmt):
    """Ŵ [N, K] in float64 by the documented formula Ŵ[n, k] = scales[g, n]·(code[n, k] − zero[g, n]), g = g_idx[k]
    (docs/GPTQ.md, "Packing"): qweight streams run along K per output n, qzeros streams along N per group; v1
    zero points are read as the clients read them (2, 4, 8 bits: word + 0x55.., 0x11.., 0x01.. on the whole
    int32 word; 3 bits: each field + 1 mod 8)."""
    codes = stream_fields(result.qweight.T, bits, K)                          # [N, K]
    qzeros = result.qzeros
    if fmt == "gptq" and bits != 3:
        ones = sum(1 << (bits * i) for i in range(32 // bits))
        qzeros = ((qzeros.view(np.uint32).astype(np.uint64) + ones) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    zeros = stream_fields(qzeros, bits, N)                                    # [G, N]
    if fmt == "gptq" and bits == 3:
        zeros = (zeros + 1) % 8
    g = result.g_idx
    return (result.scales.astype(np.float64)[g] * (codes.T - zeros[g])).T     # [N, K]


def same_bytes(a, b):
    assert a.dtype == b.dtype == np.float32 and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case[0]}bit-{case[1]}-{case[2]}")
def test_quant_linear_is_gptq_linear_byte_for_byte(checkpoints, weights, case):
    result = checkpoints[case]
    path = result.checkpoint
    _, _, _, x = weights
    x3 = np.concatenate([x, x[::-1] * 0.5])[:6].reshape(2, 3, K)
    with_bias, without_bias = qgru.QuantLinear(path, "fc"), qgru.QuantLinear(path, no_bias=True)
    in_memory = copy.copy(result)
    in_memory.checkpoint = None  # the same tensors, decoded from memory by the quantize_config they came with
    for layer, no_bias in ((with_bias, False), (without_bias, True), (qgru.QuantLinear(result), False),
                           (qgru.QuantLinear(in_memory), False), (qgru.QuantLinear(in_memory, no_bias=True), True)):
        for rows in (x[:1], x):
            same_bytes(layer(rows), qgru.gptq_linear(path, rows, "fc", no_bias=no_bias))
        y3 = layer(x3)
        assert y3.shape == (2, 3, N)
        same_bytes(y3.reshape(6, N), qgru.gptq_linear(path, x3.reshape(6, K), no_bias=no_bias))
        same_bytes(layer(x[0]), qgru.gptq_linear(path, x[:1], no_bias=no_bias).reshape(N))  # x [K] -> y [N]
    assert (with_bias.N, with_bias.K, with_bias.bits, with_bias.group_size) == (N, K, case[0], GROUP)
    assert with_bias.has_bias and not without_bias.has_bias
    assert with_bias.act_order == (case[2] == "act-order")
    assert repr(with_bias) == (f"qgru.QuantLinear({path!r}, layer='fc': N={N}, K={K}, bits={case[0]}, group_size={GROUP}, "
                               f"act_order={case[2] == 'act-order'}, bias=True, device='cpu')")


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case[0]}bit-{case[1]}-{case[2]}")
def test_quant_linear_is_x_times_the_decoded_weight(checkpoints, weights, case):
    bits, fmt, order = case
    weight, bias, _, x = weights
    result = checkpoints[case]
    w_hat = decoded(result, bits, fmt)
    # The decoder is right where the quantization is fine, and Ŵ is near W at every width.
    relative = np.linalg.norm(w_hat - weight) / np.linalg.norm(weight)
    assert relative < {2: 0.8, 3: 0.4, 4: 0.2, 8: 0.02}[bits], relative
    if order == "act-order":
        assert result.g_idx.tolist() != [k // GROUP for k in range(K)]
    bias16 = bias.astype(np.float16).astype(np.float64)
    x64 = x.astype(np.float64)
    reference = x64 @ w_hat.T + bias16
    y = qgru.QuantLinear(result.checkpoint)(x)
    # Ŵ is exact in float32 (an fp16 scale times an integer below 2^8); K products and sums, then the bias, each
    # rounded to float32: |y − ref| <= (K + 2)·2^-24·(|x|·|Ŵ|ᵀ + |bias|).
    bound = (K + 2) * 2.0**-24 * (np.abs(x64) @ np.abs(w_hat).T + np.abs(bias16))
    assert np.all(np.abs(y - reference) <= bound), np.max(np.abs(y - reference) / bound)


def test_quant_linear_reads_the_checkpoint_once(weights, tmp_path):
    weight, bias, activations, x = weights
    path = tmp_path / "kept" / "q.safetensors"
    path.parent.mkdir()
    qgru.gptq(weight, activations, bits=4, group_size=GROUP, name="fc.weight", bias=bias, checkpoint=path)
    before = qgru.gptq_linear(path, x)
    layer = qgru.QuantLinear(path)
    shutil.rmtree(path.parent)
    with pytest.raises(qgru.Error):
        qgru.gptq_linear(path, x)  # the file is gone
    for _ in range(2):
        same_bytes(layer(x), before)


def test_quant_linear_refusals_name_the_checkpoint_layer_and_shape(checkpoints, weights, tmp_path):
    _, _, _, x = weights
    path = checkpoints[(4, "gptq", "group-aware")].checkpoint
    layer = qgru.QuantLinear(path)
    with pytest.raises(qgru.Error, match=re.escape(f"x: input has shape [5, 127], expected [..., {K}] for layer 'fc' of "
                                                   f"{path}") + "$"):
        layer(x[:, :127])
    with pytest.raises(qgru.Error, match=re.escape(f"x: input has shape [2, 1, {K + 1}], expected [..., {K}] for layer "
                                                   f"'fc' of {path}") + "$"):
        layer(np.zeros((2, 1, K + 1), np.float32))
    with pytest.raises(qgru.Error, match=re.escape(f"{path}: no layer 'fc2' (no tensor 'fc2.qweight'; the layers: fc)") + "$"):
        qgru.QuantLinear(path, "fc2")
    with pytest.raises(qgru.Error, match=re.escape("device 'tpu': expected cpu or cuda") + "$"):
        qgru.QuantLinear(path, device="tpu")
    two = tmp_path / "two.safetensors"
    shutil.copy(os.path.join(os.path.dirname(path), "quantize_config.json"), tmp_path / "quantize_config.json")
    tensors = qgru.read_tensors(path)
    tensors.update({name.replace("fc.", "fc2.", 1): value for name, value in tensors.items()})
    qgru.write_tensors(two, tensors)
    with pytest.raises(qgru.Error, match=re.escape(f"{two}: holds 2 layers (fc, fc2); give layer=") + "$"):
        qgru.QuantLinear(two)
    same_bytes(qgru.QuantLinear(two, "fc2")(x), layer(x))


def test_quant_linear_on_cuda_is_refused_or_runs(checkpoints, weights):
    """Without CUDA in the build: the runtime's 'built without CUDA' refusal. With it and no GPU (CI): no CUDA
    device, with the runtime's reason. With a GPU: the fp16 kernel within fp16 rounding of the CPU's y."""
    _, _, _, x = weights
    path = checkpoints[(4, "gptq_v2", "act-order")].checkpoint
    prefix = f"{path}: layer 'fc': device cuda: "
    try:
        layer = qgru.QuantLinear(path, device="cuda")
    except qgru.Error as error:
        message = str(error)
        if "cuda" in qgru.gptq_devices():
            assert message.startswith(prefix + "no CUDA device"), message
        else:
            assert message == prefix + "this qgru was built without CUDA (nvcc was not found at configure time)"
        return
    assert "cuda" in qgru.gptq_devices()
    assert layer.device == "cuda" and repr(layer).endswith("device='cuda:0')")
    cpu = qgru.QuantLinear(path)(x)
    y = layer(x)
    # x rounded to fp16, fp32 accumulation, y rounded to fp16, then the bias: a few fp16 ulps of the largest |y|.
    assert y.shape == cpu.shape and np.abs(y - cpu).max() <= 2.0**-8 * np.abs(cpu).max()


def test_quant_linear_device_operands_need_a_cuda_layer(checkpoints, weights):
    """The entry point a CUDA tensor goes through (device addresses, PyTorch's stream) refuses a CPU layer, as the
    library does, naming it; the bias it hands the GPU path is the one the CPU path adds (the checkpoint's fp16
    values, exactly)."""
    _, bias, _, _ = weights
    path = checkpoints[(4, "gptq", "group-aware")].checkpoint
    layer = qgru.QuantLinear(path)
    for call in (lambda: layer._impl.run_device(0x7F0000001000, 2, 0x7F0000002000, 0, 0),
                 lambda: layer._impl.workspace_bytes(2)):
        with pytest.raises(qgru.Error, match=f"^{re.escape(str(path))}: layer 'fc': device rows need a layer on "
                                             r"device cuda$"):
            call()
    np.testing.assert_array_equal(layer._impl.bias(), bias.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(layer(np.zeros((1, K), np.float32))[0], layer._impl.bias())
    assert qgru.QuantLinear(path, no_bias=True)._impl.bias().shape == (0,)
