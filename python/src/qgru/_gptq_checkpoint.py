"""The whole-model GPTQ checkpoint folder, without PyTorch: the config transformers and GPTQModel read, Ŵ decoded
from the packed tensors, the progress folder of a run that may be resumed, and the final write.

A finished folder (what ``qgru.gptq_model`` leaves) holds ``model.safetensors`` (every quantized linear as
``PREFIX.qweight/qzeros/scales/g_idx`` [+ ``PREFIX.bias`` fp16], every other tensor unchanged),
``quantize_config.json`` and ``config.json`` with ``quantization_config`` (written last: a folder without it is
not a checkpoint). While a run is under way the folder holds only ``PROGRESS_DIR`` (one ``.safetensors`` per
finished decoder block and ``manifest.json``), which no loader mistakes for a model.
"""

import json
import os

import numpy as np

from . import _qgru

PROGRESS_DIR = "qgru-gptq-in-progress"
MANIFEST = "manifest.json"
MANIFEST_KIND = "qgru gptq_model progress"
CHECKPOINT_FILES = ("model.safetensors", "quantize_config.json", "config.json")


def packing_unit(bits):
    """N and K of a layer must be multiples of this so the codes fill whole int32 words (qgru gptq's rule)."""
    return 32 if bits == 3 else 32 // bits


def quantization_config(options, format, true_sequential):
    """The ``quantization_config`` object: qgru gptq's ``quantize_config.json`` for these options (the
    library's one writer of its keys), with ``true_sequential`` (and ``meta.true_sequential``) as run."""
    config = json.loads(_qgru.quantize_config_text(options, format))
    config["true_sequential"] = bool(true_sequential)
    config["meta"]["true_sequential"] = bool(true_sequential)
    return config


def _unpack_fields(words, bits, axis, count):
    """The ``count`` codes of the little-endian bit streams of int32 ``words`` running along ``axis`` (code i at
    bits [bits·i, bits·i + bits) of the stream; docs/GPTQ.md "Packing"), as int64."""
    moved = np.ascontiguousarray(np.moveaxis(words, axis, -1)).astype("<u4")
    stream = np.unpackbits(moved.view(np.uint8), axis=-1, bitorder="little")  # [..., words·32] bits, lowest first
    fields = stream[..., : count * bits].reshape(*stream.shape[:-1], count, bits).astype(np.int64)
    codes = (fields << np.arange(bits, dtype=np.int64)).sum(axis=-1)
    return np.moveaxis(codes, -1, axis)


def _v1_zero_words_to_v2(qzeros, bits):
    """GPTQModel's v1 -> v2 rule for 2, 4 and 8 bits: ``word + ONES`` on the whole int32 word (wrapping)."""
    ones = {2: 0x55555555, 4: 0x11111111, 8: 0x01010101}[bits]
    return ((qzeros.astype(np.int64) & 0xFFFFFFFF) + ones) & 0xFFFFFFFF


def dequantize(tensors, prefix, bits, format, N, K):
    """Ŵ ``[N, K]`` float32 of the layer ``prefix`` in ``tensors`` (qweight, qzeros, scales, g_idx), read as the
    clients read it: ``scales[g_idx[k], n] · (code[k, n] − zero[g_idx[k], n])`` with the v1 zero points by
    GPTQModel's rule (whole-word ``+ ONES`` at 2, 4, 8 bits, ``(field + 1) mod 8`` at 3). The product of an
    fp16 scale and an integer below 2^9 is exact in float32 (11 + 9 bits of mantissa)."""
    qweight = tensors[f"{prefix}.qweight"]
    qzeros = tensors[f"{prefix}.qzeros"]
    scales = np.asarray(tensors[f"{prefix}.scales"]).astype(np.float32)
    g_idx = np.asarray(tensors[f"{prefix}.g_idx"]).astype(np.int64)
    codes = _unpack_fields(qweight, bits, 0, K)  # [K, N]
    if format == "gptq" and bits != 3:
        zeros = _unpack_fields(_v1_zero_words_to_v2(qzeros, bits).astype(np.uint32).view(np.int32), bits, 1, N)
    else:
        zeros = _unpack_fields(qzeros, bits, 1, N)  # [G, N]
        if format == "gptq":
            zeros = (zeros + 1) % 8
    return (scales[g_idx] * (codes - zeros[g_idx]).astype(np.float32)).T.copy()


def _write_json_atomically(path, value):
    _qgru.write_text(path, json.dumps(value, indent=2) + "\n")


class Progress:
    """The resumable state of a run in ``output_dir/PROGRESS_DIR``: ``manifest.json`` (what the run was started
    with, and one entry per finished block) and ``block-NNNN.safetensors`` (that block's packed tensors). The
    folder is made when the first block finishes, so a run refused before that leaves nothing behind."""

    def __init__(self, output_dir, identity):
        self.output_dir = os.fspath(output_dir)
        self.path = os.path.join(self.output_dir, PROGRESS_DIR)
        self.identity = identity  # options, block count, calibration sha256: must agree to resume
        self.blocks = {}  # index -> manifest entry
        manifest_path = os.path.join(self.path, MANIFEST)
        if os.path.exists(manifest_path):
            self._load(manifest_path)

    def _load(self, manifest_path):
        try:
            with open(manifest_path) as f:
                manifest = json.load(f)
        except (OSError, ValueError) as e:
            raise _qgru.Error(f"{manifest_path}: not a readable progress manifest ({e}); remove {self.path} to start over")
        if not isinstance(manifest, dict) or manifest.get("kind") != MANIFEST_KIND:
            raise _qgru.Error(f"{manifest_path}: not a qgru gptq_model progress manifest; remove {self.path} to start over")
        started = manifest.get("identity", {})
        differ = [f"{key} {started.get(key)!r} there, {value!r} now" for key, value in self.identity.items()
                  if started.get(key) != value]
        if differ:
            raise _qgru.Error(f"{manifest_path}: the run there was started differently ({'; '.join(differ)}); "
                              f"call with the same model, calibration and options, or remove {self.path}")
        for entry in manifest.get("blocks", []):
            self.blocks[int(entry["index"])] = entry

    def finished(self, index):
        return index in self.blocks

    def block_path(self, index):
        return os.path.join(self.path, f"block-{index:04d}.safetensors")

    def read_block(self, index, float_sha256):
        """The packed tensors of a finished block, after checking that the model's float weights of that block
        are the ones it was quantized from."""
        entry = self.blocks[index]
        if entry["float_sha256"] != float_sha256:
            raise _qgru.Error(f"{self.block_path(index)}: block {index} was quantized from other float weights "
                              f"(sha256 {entry['float_sha256'][:16]}..., the model's now {float_sha256[:16]}...); "
                              f"remove {self.path} to start over")
        return _qgru.read_tensors(self.block_path(index))

    def write_block(self, index, tensors, float_sha256, layers):
        """Block ``index`` done: its tensors (atomically, qgru's writer), then the manifest naming it (atomically):
        a run killed between the two redoes the block."""
        os.makedirs(self.path, exist_ok=True)
        _qgru.write_tensors(self.block_path(index), tensors)
        self.blocks[index] = {"index": index, "float_sha256": float_sha256, "layers": layers}
        _write_json_atomically(os.path.join(self.path, MANIFEST),
                               {"kind": MANIFEST_KIND, "identity": self.identity,
                                "blocks": [self.blocks[i] for i in sorted(self.blocks)]})

    def remove(self):
        for name in os.listdir(self.path):
            os.remove(os.path.join(self.path, name))
        os.rmdir(self.path)


def check_output_dir(output_dir):
    """Refuses an output folder that holds anything but a run's progress folder (a finished checkpoint
    included): one line naming the folder and what is in it."""
    path = os.fspath(output_dir)
    if os.path.exists(path) and not os.path.isdir(path):
        raise _qgru.Error(f"{path}: exists and is not a folder; expected a new or empty output folder")
    if not os.path.isdir(path):
        return
    others = sorted(name for name in os.listdir(path) if name != PROGRESS_DIR)
    if others:
        shown = ", ".join(others[:4]) + (", ..." if len(others) > 4 else "")
        raise _qgru.Error(f"{path}: not empty ({shown}); expected a new or empty folder, or one holding only "
                          f"{PROGRESS_DIR} of an interrupted run")


def write_tensor_file(path, layout, tensor_of, metadata):
    """A ``.safetensors`` written tensor by tensor (qgru's SafetensorsWriter, atomically): ``layout`` maps each
    name to ``(dtype name, shape)``; ``tensor_of(name)`` gives ``(array, bf16_bits)`` and is called once per
    tensor in name order, so the caller need hold only one tensor (or one source file) at a time."""
    writer = _qgru.TensorFileWriter(os.fspath(path), layout, metadata)
    for name in sorted(layout):
        array, bf16_bits = tensor_of(name)
        writer.write(name, array, bf16_bits)
        del array
    writer.commit()


def array_layout(tensors):
    """``(layout, tensor_of)`` of tensors held in memory (name -> array), for write_tensor_file."""
    arrays = {name: np.ascontiguousarray(value) for name, value in tensors.items()}
    layout = {}
    for name, array in arrays.items():
        dtype = _qgru.dtype_of(array)
        if not dtype:
            raise _qgru.Error(f"tensor '{name}': an array of dtype {array.dtype}, which a .safetensors of qgru's cannot hold")
        layout[name] = (dtype, list(array.shape))
    return layout, lambda name: (arrays[name], False)


DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1}
SHARD_INDEX = "model.safetensors.index.json"
_SIZE_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
               "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def shard_bytes(max_shard_size):
    """``max_shard_size`` in bytes: an int, or a string as transformers' ``save_pretrained`` takes it ("5GB" is
    5·10⁹ bytes, "5GiB" 5·2³⁰); None: no limit."""
    if max_shard_size is None:
        return None
    if isinstance(max_shard_size, int) and not isinstance(max_shard_size, bool):
        size = max_shard_size
    else:
        text = str(max_shard_size).strip().upper().replace(" ", "")
        unit = next((u for u in sorted(_SIZE_UNITS, key=len, reverse=True) if text.endswith(u)), None)
        try:
            size = int(float(text[: -len(unit)]) * _SIZE_UNITS[unit]) if unit else int(text)
        except ValueError:
            size = 0
    if size <= 0:
        raise _qgru.Error(f"max_shard_size {max_shard_size!r}: expected a positive size in bytes or a text such as "
                          "'5GB' or '500MiB'")
    return size


def layout_bytes(entry):
    """Bytes of a tensor of layout ``(dtype name, shape)``."""
    dtype, shape = entry
    return DTYPE_BYTES[dtype] * int(np.prod(shape, dtype=np.int64))


def shard_plan(layout, limit):
    """The shards' tensor names, in name order: a shard takes tensors until the next would pass ``limit``
    bytes (a tensor larger than the limit is a shard of its own, as transformers does)."""
    shards, size = [[]], 0
    for name in sorted(layout):
        nbytes = layout_bytes(layout[name])
        if limit is not None and shards[-1] and size + nbytes > limit:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += nbytes
    return shards


def write_checkpoint(output_dir, tensors, model_config, quant_config, metadata=None, max_shard_size=None):
    """The finished folder: the model's tensors, ``quantize_config.json`` and ``config.json`` (``model_config``
    with ``quantization_config`` = ``quant_config``), each atomically, the config last. ``tensors``: name ->
    array, or ``(layout, tensor_of)`` as write_tensor_file takes them (the model's tensors written one at a
    time). Within ``max_shard_size`` (shard_bytes) the tensors go into ``model.safetensors``; past it into
    ``model-0000i-of-0000n.safetensors`` in name order with ``model.safetensors.index.json`` (``total_size``,
    ``weight_map``), the layout transformers writes and loads. Files of those names left by an interrupted
    write with another shard count are removed."""
    path = os.fspath(output_dir)
    os.makedirs(path, exist_ok=True)
    layout, tensor_of = array_layout(tensors) if isinstance(tensors, dict) else tensors
    shards = shard_plan(layout, shard_bytes(max_shard_size))
    file_metadata = dict(metadata or {}, format="pt")
    if len(shards) == 1:
        written = ["model.safetensors"]
    else:
        written = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    for file_name, names in zip(written, shards):
        write_tensor_file(os.path.join(path, file_name), {name: layout[name] for name in names}, tensor_of,
                          file_metadata)
    if len(shards) > 1:
        total = sum(layout_bytes(entry) for entry in layout.values())
        weight_map = {name: file_name for file_name, names in zip(written, shards) for name in names}
        _write_json_atomically(os.path.join(path, SHARD_INDEX), {"metadata": {"total_size": total},
                                                                  "weight_map": weight_map})
        written.append(SHARD_INDEX)
    for name in os.listdir(path):
        stale = name in ("model.safetensors", SHARD_INDEX) or (name.startswith("model-") and ".safetensors" in name)
        if stale and name not in written:
            os.remove(os.path.join(path, name))
    _write_json_atomically(os.path.join(path, "quantize_config.json"), quant_config)
    config = dict(model_config)
    config["quantization_config"] = quant_config
    _write_json_atomically(os.path.join(path, "config.json"), config)
