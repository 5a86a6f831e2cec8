"""The whole-model checkpoint folder's parts that need no PyTorch (qgru._gptq_checkpoint): the config, Ŵ decoded
from the packed tensors against `qgru linear`'s reader, the progress folder of a resumable run and the final
write. qgru.gptq_model itself is tested with PyTorch (python/tests_torch/test_gptq_model.py)."""

import json
import os
import re
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


def test_tensor_file_writer_writes_the_whole_file_writers_bytes_one_tensor_at_a_time(tmp_path):
    """TensorFileWriter (qgru's SafetensorsWriter): the bytes write_tensors writes for the same tensors, given in
    name order one at a time; a BF16 tensor from its int16 bits reads back as the float32 values of those bits;
    every misuse refused naming the file and the tensor, leaving no file."""
    rng = np.random.default_rng(9)
    tensors = {"b.qweight": rng.integers(-2**31, 2**31, (4, 8), dtype=np.int64).astype(np.int32),
               "a.scales": rng.standard_normal((2, 8)).astype(np.float16),
               "c.weight": rng.standard_normal((3, 5)).astype(np.float32), "d.empty": np.zeros((0, 4), np.float32)}
    metadata = {"format": "pt", "quantizer": "test"}
    qgru.write_tensors(tmp_path / "whole.safetensors", tensors, metadata)
    layout, tensor_of = ckpt.array_layout(tensors)
    assert layout["b.qweight"] == ("I32", [4, 8]) and layout["a.scales"] == ("F16", [2, 8])
    assert _layout(tmp_path / "whole.safetensors") == layout
    order = []
    ckpt.write_tensor_file(tmp_path / "streamed.safetensors", layout,
                           lambda name: order.append(name) or tensor_of(name), metadata)
    assert order == sorted(tensors)
    with open(tmp_path / "whole.safetensors", "rb") as a, open(tmp_path / "streamed.safetensors", "rb") as b:
        assert a.read() == b.read()

    bits = rng.integers(-2**15, 2**15, (6,), dtype=np.int64).astype(np.int16)
    bits[1] = 0x7f80  # +inf's bits
    writer = qgru._qgru.TensorFileWriter(os.fspath(tmp_path / "bf16.safetensors"), {"h": ("BF16", [6])}, {})
    writer.write("h", bits, True)
    writer.commit()
    expected = (bits.astype(np.int64) & 0xFFFF).astype(np.uint32) << 16
    np.testing.assert_array_equal(qgru.read_tensors(tmp_path / "bf16.safetensors")["h"], expected.view(np.float32))
    assert _layout(tmp_path / "bf16.safetensors") == {"h": ("BF16", [6])}

    path = os.fspath(tmp_path / "refused.safetensors")
    refusals = [
        (lambda w: w.write("b.qweight", tensors["b.qweight"]),
         "tensor 'b.qweight': written out of order; expected 'a.scales' next (tensors go in name order)"),
        (lambda w: w.write("z", tensors["c.weight"]), "tensor 'z': not in the layout the file was started with"),
        (lambda w: w.write("a.scales", tensors["a.scales"].astype(np.float32)),
         "tensor 'a.scales': expected F16 [2, 8] as laid out, got F32 [2, 8]"),
        (lambda w: w.commit(), "tensor 'a.scales': not written; every tensor of the layout must be written before commit"),
        (lambda w: w.write("a.scales", tensors["a.scales"], True), "tensor 'a.scales': BF16 bits must come as int16"),
    ]
    for misuse, message in refusals:
        writer = qgru._qgru.TensorFileWriter(path, layout, metadata)
        with pytest.raises(qgru.Error, match=re.escape(message)):
            misuse(writer)
        del writer
    assert sorted(os.listdir(tmp_path)) == ["bf16.safetensors", "streamed.safetensors", "whole.safetensors"]
    with pytest.raises(qgru.Error, match=r"tensor 'x': dtype 'F8' is not one qgru writes"):
        qgru._qgru.TensorFileWriter(path, {"x": ("F8", [1])}, {})
    with pytest.raises(qgru.Error, match=r"tensor 'x': an array of dtype bool"):
        ckpt.array_layout({"x": np.zeros(3, dtype=bool)})


def _layout(path):
    return {name: (dtype, list(shape)) for name, (dtype, shape) in qgru._qgru.read_tensor_layout(os.fspath(path)).items()}


def test_write_checkpoint_shards_past_max_shard_size(tmp_path):
    """Past max_shard_size the tensors go into model-0000i-of-0000n.safetensors in name order, each within the
    limit unless one tensor alone passes it, with model.safetensors.index.json naming every tensor's file and the
    total size; within it, one model.safetensors (the files of an interrupted write with another count removed)."""
    rng = np.random.default_rng(3)
    tensors = {f"t{i:02d}": rng.standard_normal(n).astype(np.float32) for i, n in enumerate([100, 300, 50, 700, 10, 90])}
    options = make_gptq_options(4, 128, None, False, {}, "test")
    quant = ckpt.quantization_config(options, "gptq", True)
    out = tmp_path / "out"
    ckpt.write_checkpoint(out, tensors, {"model_type": "llama"}, quant, max_shard_size=1600)  # bytes: 4 per value
    # name order t00..t05 (400, 1200, 200, 2800, 40, 360 bytes): [t00 t01] [t02] [t03] [t04 t05]
    shards = [f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)]
    assert sorted(os.listdir(out)) == sorted(shards + [ckpt.SHARD_INDEX, "quantize_config.json", "config.json"])
    with open(out / ckpt.SHARD_INDEX) as f:
        index = json.load(f)
    assert index["metadata"] == {"total_size": 4 * 1250}
    assert index["weight_map"] == {"t00": shards[0], "t01": shards[0], "t02": shards[1], "t03": shards[2],
                                   "t04": shards[3], "t05": shards[3]}
    for shard in shards:
        assert safetensors_metadata(out / shard) == {"format": "pt"}
        for name, value in qgru.read_tensors(out / shard).items():
            assert index["weight_map"][name] == shard
            np.testing.assert_array_equal(value, tensors[name])
    # Written again within the limit (a resumed run's final write, say): one file, the shards removed.
    ckpt.write_checkpoint(out, tensors, {"model_type": "llama"}, quant, max_shard_size="1MB")
    assert sorted(os.listdir(out)) == sorted(ckpt.CHECKPOINT_FILES)
    assert sorted(qgru.read_tensors(out / "model.safetensors")) == sorted(tensors)
    assert [ckpt.shard_bytes(s) for s in ("5GB", "5GiB", " 500 mb", 123, None)] == [5 * 10**9, 5 * 2**30, 500 * 10**6,
                                                                                      123, None]
    for bad in ("lots", 0, -5, "0GB"):
        with pytest.raises(qgru.Error, match="max_shard_size .*: expected a positive size"):
            ckpt.shard_bytes(bad)
