"""The whole-model checkpoint folder's parts that need no PyTorch (qgru._gptq_checkpoint): the config, Ŵ decoded
from the packed tensors against `qgru linear`'s reader, the progress folder of a resumable run and the final
write. qgru.gptq_model itself is tested with PyTorch (python/tests_torch/test_gptq_model.py)."""

import json
import os
import struct

import numpy as np
import pytest

import qgru
from qgru import _gptq_checkpoint as ckpt
from qgru._gptq import make_gptq_options


def safetensors_metadata(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(length)).get("__metadata__")


def layer(seed, N=64, K=256):
    rng = np.random.default_rng(seed)
    weight = rng.standard_normal((N, K)).astype(np.float32)
    weight[:8] = np.abs(weight[:8])  # rows >= 0: asymmetric groups with zero points of 0 (the v1 borrow case)
    basis = rng.standard_normal((16, K))
    x = (rng.standard_normal((400, 16)) @ basis + 0.1 * rng.standard_normal((400, K))).astype(np.float32)
    return weight, x


def test_quantization_config_is_the_cli_config_with_true_sequential(tmp_path):
    weight, x = layer(1)
    qgru.gptq(weight, x, bits=3, group_size=64, sym=True, damp=0.02, name="fc.weight",
              checkpoint=tmp_path / "q.safetensors")
    with open(tmp_path / "quantize_config.json") as f:
        written = json.load(f)
    options = make_gptq_options(3, 64, None, False, {"sym": True, "damp": 0.02}, "test")
    for true_sequential in (False, True):
        config = ckpt.quantization_config(options, "gptq", true_sequential)
        assert config["true_sequential"] is true_sequential and config["meta"]["true_sequential"] is true_sequential
        expected = json.loads(json.dumps(written))
        expected["true_sequential"] = expected["meta"]["true_sequential"] = true_sequential
        assert config == expected
    # What transformers' GPTQConfig reads.
    assert (config["quant_method"], config["bits"], config["group_size"], config["sym"], config["desc_act"],
            config["checkpoint_format"]) == ("gptq", 3, 64, True, False, "gptq")
    act = ckpt.quantization_config(make_gptq_options(4, 128, None, True, {}, "test"), "gptq_v2", True)
    assert act["desc_act"] is True and act["meta"]["act_group_aware"] is False and act["format"] == "gptq_v2"
    with pytest.raises(qgru.Error, match="gptq_v3"):
        ckpt.quantization_config(options, "gptq_v3", True)


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
@pytest.mark.parametrize("format", ["gptq", "gptq_v2"])
@pytest.mark.parametrize("order", ["group-aware", "act-order"])
def test_dequantize_equals_qgru_linear(tmp_path, bits, format, order):
    weight, x = layer(bits, N=64 if bits != 3 else 96)
    N, K = weight.shape
    result = qgru.gptq(weight, x, bits=bits, group_size=128, order=order, format=format, name="fc.weight",
                       checkpoint=tmp_path / "q.safetensors")
    W_hat = ckpt.dequantize(result.tensors, "fc", bits, format, N, K)
    assert W_hat.dtype == np.float32 and W_hat.shape == (N, K)
    decoded = qgru.gptq_linear(tmp_path / "q.safetensors", np.eye(K, dtype=np.float32)).T  # qgru linear's reader
    np.testing.assert_array_equal(W_hat, decoded)
    if format == "gptq" and bits != 3:
        # The rows >= 0 have zero points of 0 somewhere, so the whole-word v1 rule was exercised.
        assert np.any(ckpt._unpack_fields(ckpt._v1_zero_words_to_v2(result.qzeros, bits).astype(np.uint32)
                                          .view(np.int32), bits, 1, N) == 0)


def test_progress_round_trip_and_refusals(tmp_path):
    identity = {"model": "M", "calibration_sha256": "abc", "quantization_config": {"bits": 4}}
    progress = ckpt.Progress(tmp_path / "out", identity)
    assert not progress.finished(0) and not os.path.exists(tmp_path / "out")  # nothing made before a block is done
    tensors = {"b.qweight": np.arange(8, dtype=np.int32).reshape(2, 4)}
    progress.write_block(0, tensors, "f" * 64, [{"name": "b", "gptq_error": 0.5}])
    assert sorted(os.listdir(tmp_path / "out")) == [ckpt.PROGRESS_DIR]
    again = ckpt.Progress(tmp_path / "out", identity)
    assert again.finished(0) and not again.finished(1)
    assert again.blocks[0]["layers"] == [{"name": "b", "gptq_error": 0.5}]
    np.testing.assert_array_equal(again.read_block(0, "f" * 64)["b.qweight"], tensors["b.qweight"])
    with pytest.raises(qgru.Error, match="block 0 was quantized from other float weights"):
        again.read_block(0, "0" * 64)
    with pytest.raises(qgru.Error, match=r"started differently \(calibration_sha256 'abc' there, 'xyz' now\)"):
        ckpt.Progress(tmp_path / "out", dict(identity, calibration_sha256="xyz"))
    with open(os.path.join(progress.path, ckpt.MANIFEST), "w") as f:
        f.write("{}")
    with pytest.raises(qgru.Error, match="not a qgru gptq_model progress manifest"):
        ckpt.Progress(tmp_path / "out", identity)
    progress.remove()
    assert os.listdir(tmp_path / "out") == []


def test_output_dir_must_be_new_or_empty_or_an_interrupted_run(tmp_path):
    ckpt.check_output_dir(tmp_path / "new")
    (tmp_path / "empty").mkdir()
    ckpt.check_output_dir(tmp_path / "empty")
    (tmp_path / "run" / ckpt.PROGRESS_DIR).mkdir(parents=True)
    ckpt.check_output_dir(tmp_path / "run")
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "config.json").write_text("{}")
    with pytest.raises(qgru.Error, match=r"done: not empty \(config.json\)"):
        ckpt.check_output_dir(tmp_path / "done")
    (tmp_path / "file").write_text("")
    with pytest.raises(qgru.Error, match="not a folder"):
        ckpt.check_output_dir(tmp_path / "file")


def test_write_checkpoint(tmp_path):
    weight, x = layer(5)
    result = qgru.gptq(weight, x, name="model.layers.0.fc.weight")
    options = make_gptq_options(4, 128, None, False, {}, "test")
    quant = ckpt.quantization_config(options, "gptq", True)
    tensors = dict(result.tensors, **{"model.norm.weight": np.ones(64, dtype=np.float32)})
    ckpt.write_checkpoint(tmp_path / "out", tensors, {"model_type": "llama", "hidden_size": 64}, quant,
                          {"quantizer": "test"})
    assert sorted(os.listdir(tmp_path / "out")) == sorted(ckpt.CHECKPOINT_FILES)
    with open(tmp_path / "out" / "config.json") as f:
        config = json.load(f)
    assert config["model_type"] == "llama" and config["quantization_config"] == quant
    with open(tmp_path / "out" / "quantize_config.json") as f:
        assert json.load(f) == quant
    assert safetensors_metadata(tmp_path / "out" / "model.safetensors") == {"format": "pt", "quantizer": "test"}
    back = qgru.read_tensors(tmp_path / "out" / "model.safetensors")
    assert sorted(back) == sorted(tensors)
    for name, value in tensors.items():
        np.testing.assert_array_equal(back[name], value)
