"""``qgru.gptq_model``: GPTQ of a whole PyTorch causal LM (Llama, Mistral, Qwen2 style), block by block, into a
checkpoint folder transformers and GPTQModel load (docs/GPTQ.md, "Whole models from Python").

The walk is GPTQModel's: the embeddings run once and the first decoder block's inputs are caught (hidden
states and the keyword arguments the model gives its blocks: attention mask, position embeddings, ...); then,
block after block, the block's linear layers are quantized by ``qgru.gptq`` from their inputs, each set of
layers that reads the same input (q/k/v, then o, then gate/up, then down) from the block as it stands with the
sets before it already replaced by their dequantized weights (``true_sequential``), and the block's outputs
with every layer quantized become the next block's inputs. PyTorch is imported only here, and only when a
model is given.
"""

import hashlib
import json
import os
import sys
import time
from collections.abc import Mapping

import numpy as np

from . import _qgru
from ._gptq import Hessian, gptq, gptq_devices, make_gptq_options
from ._gptq_checkpoint import (PROGRESS_DIR, Progress, check_output_dir, dequantize, packing_unit,
                               quantization_config, shard_bytes, write_checkpoint)
from ._inputs import host_array

# Where causal LMs of the Llama family keep their decoder blocks: LlamaForCausalLM (and Mistral, Qwen2, ...)
# as model.model.layers, the bare LlamaModel as model.layers.
BLOCK_PATHS = ("model.layers", "layers")


class _Stop(Exception):
    """Raised by a hook to end a forward pass once what it needed has been seen."""


class GptqModelResult:
    """What ``qgru.gptq_model`` did: ``output_dir``; ``layers``, one dict per quantized linear in order (``name``,
    ``N``, ``K``, ``tokens``, ``gptq_error``, ``rtn_error``, ``seconds``: ``qgru gptq``'s report on the inputs the
    layer saw); ``blocks`` and ``blocks_resumed`` (taken from the progress folder of an interrupted run);
    ``seconds`` (the whole call)."""

    def __init__(self, output_dir, layers, blocks, blocks_resumed, seconds):
        self.output_dir = output_dir
        self.layers = layers
        self.blocks = blocks
        self.blocks_resumed = blocks_resumed
        self.seconds = seconds

    def __repr__(self):
        return (f"qgru.GptqModelResult({self.output_dir!r}: {len(self.layers)} layers in {self.blocks} blocks, "
                f"{self.blocks_resumed} resumed, {self.seconds:.1f} s)")


def find_blocks(model):
    """(path, ModuleList) of the model's decoder blocks, or a one-line error naming what was looked for."""
    import torch

    for path in BLOCK_PATHS:
        found = model
        for part in path.split("."):
            found = getattr(found, part, None)
        if isinstance(found, torch.nn.ModuleList) and len(found) > 0:
            return path, found
    raise _qgru.Error(f"gptq_model: a {type(model).__name__} has no decoder blocks: looked for "
                      f"{' and '.join(BLOCK_PATHS)}, a non-empty torch.nn.ModuleList (as Llama, Mistral and Qwen2 "
                      "causal LMs have)")


def block_linears(block):
    import torch

    return {name: module for name, module in block.named_modules() if isinstance(module, torch.nn.Linear)}


def check_layers(blocks_path, blocks, bits, group_size):
    """Every linear of every block must pack into whole int32 words and, for the loaders, whole groups."""
    unit = packing_unit(bits)
    for index, block in enumerate(blocks):
        linears = block_linears(block)
        if not linears:
            raise _qgru.Error(f"gptq_model: {blocks_path}.{index} holds no torch.nn.Linear to quantize")
        for name, linear in linears.items():
            N, K = linear.weight.shape
            tensor = f"{blocks_path}.{index}.{name}.weight"
            if K % unit or N % unit:
                raise _qgru.Error(f"gptq_model: tensor '{tensor}' is [{N}, {K}]; {bits}-bit GPTQ checkpoints need N "
                                  f"and K multiples of {unit} (codes fill whole int32 words)")
            if group_size > 0 and K % group_size:
                raise _qgru.Error(f"gptq_model: tensor '{tensor}' is [{N}, {K}]; K must be a multiple of group_size "
                                  f"{group_size} (the loaders of GPTQ checkpoints take whole groups only)")


def calibration_items(calibration):
    """The model's keyword arguments per calibration item (``input_ids`` [B, T] int64, plus an item's own keys
    when it is a mapping such as a tokenizer's output), and the number of tokens in all."""
    import torch

    items = list(calibration) if isinstance(calibration, (list, tuple)) else [calibration]
    if not items:
        raise _qgru.Error("gptq_model: calibration is empty; expected token-id tensors")
    result, tokens = [], 0
    for index, item in enumerate(items):
        kwargs = dict(item) if isinstance(item, Mapping) else {"input_ids": item}
        if "input_ids" not in kwargs:
            raise _qgru.Error(f"gptq_model: calibration[{index}] has no input_ids")
        ids = torch.as_tensor(kwargs["input_ids"])
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise _qgru.Error(f"gptq_model: calibration[{index}] is {ids.dtype}; expected token ids (integers)")
        if ids.dim() == 1:
            ids = ids.unsqueeze(0)
        if ids.dim() != 2 or ids.numel() == 0:
            raise _qgru.Error(f"gptq_model: calibration[{index}] has shape {list(ids.shape)}; expected [T] or [B, T] "
                              "token ids, T > 0")
        kwargs["input_ids"] = ids.long()
        mask = kwargs.get("attention_mask")
        tokens += int(torch.as_tensor(mask).sum()) if mask is not None else ids.numel()
        result.append(kwargs)
    return result, tokens


def calibration_sha256(items):
    digest = hashlib.sha256()
    for kwargs in items:
        for key in sorted(kwargs):
            value = kwargs[key]
            digest.update(key.encode())
            if hasattr(value, "shape"):
                digest.update(str(list(value.shape)).encode())
                digest.update(host_array(value).tobytes())
            else:
                digest.update(repr(value).encode())
    return digest.hexdigest()


def block_sha256(block):
    """sha256 of a block's tensors as they are now (names sorted, raw bytes): the float weights a finished
    block of an interrupted run must have been quantized from."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(block.state_dict().items()):
        digest.update(name.encode())
        digest.update(str(tensor.dtype).encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def gptq_device(model_device, device):
    """Where qgru's Hessians and GPTQ compute: ``device`` when given, else the model's: ``"cuda"`` for a model
    on a GPU when this qgru was built with CUDA, the CPU otherwise. A device this qgru lacks is refused before
    any work, in one line."""
    if device is None:
        return "cuda" if model_device.type == "cuda" and "cuda" in gptq_devices() else "cpu"
    device = str(device)
    if device not in gptq_devices():
        raise _qgru.Error(f"gptq_model: device '{device}': this qgru's GPTQ computes on {' or '.join(gptq_devices())}")
    return device


def block_kinds(model, blocks):
    """Per block, the kind of keyword arguments the model's forward gives it: ``config.layer_types[i]`` where
    the (text) config lists one per block (transformers' models with mixed attention, a sliding window on some
    layers and full attention on others, give each kind its own mask and position embeddings), else one kind
    for all."""
    config = getattr(model, "config", None)
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    layer_types = getattr(text_config, "layer_types", None)
    if isinstance(layer_types, (list, tuple)) and len(layer_types) == len(blocks):
        return [str(kind) for kind in layer_types]
    return [None] * len(blocks)


def catch_block_inputs(model, blocks, kinds, items):
    """Runs the model on each calibration item until the first block of the last kind to appear is called
    (the first block for a model of one kind), and keeps, per item, what the first block was called with,
    (positional args, keyword args), and per kind the keyword arguments of its first block: what the model
    gives every block of that kind."""
    first_of_kind = {}
    for index, kind in enumerate(kinds):
        first_of_kind.setdefault(kind, index)
    last = max(first_of_kind.values())
    caught, kwargs_of_kind = [], {kind: [] for kind in first_of_kind}

    def hook(index):
        def record(module, args, kwargs):
            if index == 0:
                caught.append((tuple(args), dict(kwargs)))
            kwargs_of_kind[kinds[index]].append(dict(kwargs))
            if index == last:
                raise _Stop
        return record

    device = model.get_input_embeddings().weight.device
    handles = [blocks[index].register_forward_pre_hook(hook(index), with_kwargs=True)
               for index in sorted(set(first_of_kind.values()))]
    try:
        for kwargs in items:
            moved = {key: value.to(device) if hasattr(value, "to") else value for key, value in kwargs.items()}
            try:
                model(**moved, use_cache=False)
            except _Stop:
                pass
            else:
                raise _qgru.Error("gptq_model: the model's forward never called its decoder blocks in order "
                                  f"(block {last} was not reached)")
    finally:
        for handle in handles:
            handle.remove()
    return caught, kwargs_of_kind


def with_kwargs_of(call, kwargs):
    """The call with another keyword arguments' set (another kind of block), its hidden states kept."""
    return with_hidden(((call[0][:1] if call[0] else ()), dict(kwargs)), hidden_of(call))


def hidden_of(call):
    args, kwargs = call
    return args[0] if args else kwargs["hidden_states"]


def with_hidden(call, hidden):
    args, kwargs = call
    if args:
        return (hidden,) + tuple(args[1:]), kwargs
    return args, dict(kwargs, hidden_states=hidden)


def run_block(block, calls):
    """The block's outputs on each call, as the next block's calls."""
    outputs = []
    for call in calls:
        args, kwargs = call
        out = block(*args, **kwargs)
        outputs.append(with_hidden(call, out[0] if isinstance(out, (tuple, list)) else out))
    return outputs


def call_groups(block, linears, call):
    """The block's linears in the order its forward calls them, grouped by input: consecutive calls on the same
    input tensor (q, k, v; gate, up) form one group. Every linear must be called."""
    seen = []  # (name, input tensor), first call of each linear

    def hook(name):
        def record(module, inputs):
            if all(name != done for done, _ in seen):
                seen.append((name, inputs[0]))
        return record

    handles = [linear.register_forward_pre_hook(hook(name)) for name, linear in linears.items()]
    try:
        args, kwargs = call
        block(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    missing = [name for name in linears if all(name != done for done, _ in seen)]
    if missing:
        raise _qgru.Error(f"gptq_model: the block's forward never called {', '.join(missing)}; every linear of a "
                          "decoder block is quantized from its inputs")
    groups = []
    for position, (name, tensor) in enumerate(seen):
        if position and tensor is seen[position - 1][1]:
            groups[-1].append(name)
        else:
            groups.append([name])
    return groups


def capture_hessians(block, linears, groups, calls, device):
    """Each group's Hessian H = 2·X·Xᵀ of its input rows over all calls (a qgru.Hessian, fed one call's
    float32 rows at a time, so no more than one call's rows are held); the forward stops after the last layer
    of the last group was called."""
    hessians = {group[0]: Hessian(linears[group[0]].in_features, device) for group in groups}
    last = groups[-1][-1]

    def hook(name):
        def record(module, inputs):
            if name in hessians:
                x = inputs[0].detach()
                hessians[name].add(x.reshape(-1, x.shape[-1]).float())
            if name == last:
                raise _Stop
        return record

    names = {group[0] for group in groups} | {last}
    handles = [linears[name].register_forward_pre_hook(hook(name)) for name in names]
    try:
        for args, kwargs in calls:
            try:
                block(*args, **kwargs)
            except _Stop:
                pass
    finally:
        for handle in handles:
            handle.remove()
    return hessians


def set_dequantized(linear, tensors, prefix, bits, format):
    """The linear's weight := Ŵ as decoded from its packed tensors, its bias := the fp16 bias the checkpoint
    holds, so the model computes what a loader of the checkpoint computes (up to its arithmetic)."""
    import torch

    N, K = linear.weight.shape
    W_hat = dequantize(tensors, prefix, bits, format, N, K)
    linear.weight.copy_(torch.from_numpy(W_hat).to(linear.weight.dtype))
    if linear.bias is not None:
        linear.bias.copy_(torch.from_numpy(np.asarray(tensors[f"{prefix}.bias"]).astype(np.float32)))


def untouched_tensors(model, quantized_prefixes):
    """Every tensor of the model's state dict but the quantized layers' weights and biases (references, not
    copies); a tensor that shares its storage with one taken already (tied embeddings) is left out, as
    transformers does."""
    taken, seen = {}, set()
    replaced = {f"{prefix}.{part}" for prefix in quantized_prefixes for part in ("weight", "bias")}
    for name, tensor in model.state_dict().items():
        if name in replaced:
            continue
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if key in seen:
            continue
        seen.add(key)
        taken[name] = tensor
    return taken


def folder_tensors(model, quantized_prefixes, block_paths):
    """``(layout, tensor_of)`` of the folder's ``model.safetensors`` for write_checkpoint, which writes it one
    tensor at a time: the packed tensors read from the progress folder's block files (one file held at a
    time: the names of a block are consecutive in name order), every other tensor copied from the model as
    it is written, in its own dtype (bfloat16 as bfloat16)."""
    import torch

    names = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8"}
    untouched = untouched_tensors(model, quantized_prefixes)
    layout, block_of = {}, {}
    for name, tensor in untouched.items():
        if tensor.dtype not in names:
            raise _qgru.Error(f"gptq_model: tensor '{name}' is {tensor.dtype}, which a .safetensors checkpoint of "
                              "qgru's cannot hold")
        layout[name] = (names[tensor.dtype], list(tensor.shape))
    for path in block_paths:
        for name, entry in _qgru.read_tensor_layout(path).items():
            layout[name] = entry
            block_of[name] = path
    held = {}  # the block file being written: {path: its tensors}

    def tensor_of(name):
        if name in block_of:
            path = block_of[name]
            if path not in held:
                held.clear()
                held[path] = _qgru.read_tensors(path)
            return held[path][name], False
        tensor = untouched[name].detach().cpu().contiguous()
        if tensor.dtype == torch.bfloat16:
            return tensor.view(torch.int16).numpy(), True
        return tensor.numpy(), False

    return layout, tensor_of


def log(verbose, text):
    if verbose:
        print(f"qgru gptq_model: {text}", file=sys.stderr, flush=True)


def gptq_model(model, calibration, output_dir, bits=4, group_size=128, *, order=None, act_order=False,
               format="gptq", true_sequential=True, tokenizer=None, device=None, max_shard_size="50GB", verbose=True,
               **options):
    """GPTQ of every linear layer of a causal LM's decoder blocks, written as a checkpoint folder.

    Args:
        model: a transformers causal LM of the Llama family (decoder blocks in ``model.model.layers``, or
            ``model.layers`` for a bare decoder), in eval mode or not (it runs under ``torch.no_grad``).
            Every ``torch.nn.Linear`` inside a block is quantized; embeddings, norms and ``lm_head`` are not.
            On return its layers hold their dequantized weights Ŵ (the float weights are not kept).
        calibration: token ids, ``[T]`` or ``[B, T]`` (a tensor, or anything ``torch.as_tensor`` takes), or a list
            of them, or of mappings with ``input_ids`` (and ``attention_mask``), as a tokenizer returns them.
        output_dir: the checkpoint folder to write (new, empty, or holding the progress of an interrupted run
            with the same model, calibration and options, which is resumed).
        bits, group_size, order, act_order, format, **options: as ``qgru.gptq`` (``sym``, ``damp``,
            ``static_groups``, ...).
        true_sequential: each set of layers reading the same input is quantized from the block with the sets
            before it already quantized (GPTQModel's default); False: all layers of a block from the float
            block's inputs.
        tokenizer: saved into the folder (``save_pretrained``) when given.
        device: where the Hessians accumulate and GPTQ runs, ``"cpu"`` or ``"cuda"`` (default: the model's
            device, when this qgru was built with CUDA; ``qgru.gptq_devices()``).
        max_shard_size: the largest ``.safetensors`` file of the folder (an int in bytes, or "5GB", "500MiB", ...;
            transformers' default, "50GB", unless given): a checkpoint past it is split into
            ``model-0000i-of-0000n.safetensors`` with ``model.safetensors.index.json``. None: one file.
        verbose: progress per block on stderr.

    Returns:
        GptqModelResult.
    """
    import torch

    started = time.time()
    output_dir = os.fspath(output_dir)
    blocks_path, blocks = find_blocks(model)
    gptq_options = make_gptq_options(bits, group_size, order, act_order, options, "gptq_model()")
    shard_bytes(max_shard_size)  # a bad size is refused before any work
    quant_config = quantization_config(gptq_options, format, true_sequential)
    check_layers(blocks_path, blocks, gptq_options.bits, gptq_options.group_size)
    items, tokens = calibration_items(calibration)
    if gptq_options.group_size > 0 and tokens < gptq_options.group_size:
        raise _qgru.Error(f"gptq_model: calibration has {tokens} tokens, fewer than one group ({gptq_options.group_size}); "
                          "GPTQ needs at least a group's worth of tokens per layer")
    config_dict = json.loads(model.config.to_json_string(use_diff=False))
    if config_dict.get("quantization_config"):
        raise _qgru.Error("gptq_model: the model's config has a quantization_config already; expected a float model")
    if not os.path.isdir(os.path.join(output_dir, PROGRESS_DIR)):
        check_output_dir(output_dir)
    device = gptq_device(model.get_input_embeddings().weight.device, device)
    identity = {"qgru": _qgru.version, "model": type(model).__name__, "blocks": f"{blocks_path} x {len(blocks)}",
                "quantization_config": quant_config, "calibration_sha256": calibration_sha256(items),
                "calibration_tokens": tokens}
    progress = Progress(output_dir, identity)
    call_options = dict(bits=bits, group_size=group_size, order=order, act_order=act_order, format=format,
                        device=device, **options)
    layers, resumed = [], 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            kinds = block_kinds(model, blocks)
            calls, kwargs_of_kind = catch_block_inputs(model, blocks, kinds, items)
            for index, block in enumerate(blocks):
                if index and kinds[index] != kinds[index - 1]:
                    calls = [with_kwargs_of(call, kwargs) for call, kwargs in zip(calls, kwargs_of_kind[kinds[index]])]
                block_started = time.time()
                prefix = f"{blocks_path}.{index}"
                linears = block_linears(block)
                float_sha256 = block_sha256(block)
                if progress.finished(index):
                    tensors = progress.read_block(index, float_sha256)
                    for name, linear in linears.items():
                        set_dequantized(linear, tensors, f"{prefix}.{name}", gptq_options.bits, format)
                    block_layers = progress.blocks[index]["layers"]
                    resumed += 1
                    what = "resumed from " + PROGRESS_DIR
                else:
                    tensors, block_layers = {}, []
                    groups = call_groups(block, linears, calls[0])
                    phases = [[group] for group in groups] if true_sequential else [groups]
                    for phase in phases:
                        hessians = capture_hessians(block, linears, phase, calls, device)
                        for group in phase:
                            for name in group:
                                layer_prefix = f"{prefix}.{name}"
                                result = gptq(linears[name], hessian=hessians[group[0]],
                                              name=f"{layer_prefix}.weight", **call_options)
                                set_dequantized(linears[name], result.tensors, layer_prefix, gptq_options.bits, format)
                                tensors.update(result.tensors)
                                block_layers.append({"name": layer_prefix, "N": result.N, "K": result.K,
                                                     "tokens": result.tokens, "gptq_error": result.gptq_error,
                                                     "rtn_error": result.rtn_error, "seconds": result.seconds})
                        del hessians
                    progress.write_block(index, tensors, float_sha256, block_layers)
                    ratio = np.exp(np.mean([np.log(max(layer["gptq_error"], 1e-300) / max(layer["rtn_error"], 1e-300))
                                            for layer in block_layers]))
                    what = (f"{len(block_layers)} layers in {len(groups)} input groups, GPTQ/RTN error {ratio:.3f} "
                            "(geo-mean)")
                layers += block_layers
                if index + 1 < len(blocks):
                    calls = run_block(block, calls)
                log(verbose, f"block {index + 1}/{len(blocks)} ({prefix}): {what}, {time.time() - block_started:.1f} s")
    finally:
        model.train(was_training)

    tensors = folder_tensors(model, [layer["name"] for layer in layers],
                             [progress.block_path(index) for index in range(len(blocks))])
    if tokenizer is not None:
        tokenizer.save_pretrained(output_dir)
    generation_config = getattr(model, "generation_config", None)
    if generation_config is not None:
        generation_config.save_pretrained(output_dir)
    write_checkpoint(output_dir, tensors, config_dict, quant_config,
                     {"quantizer": f"qgru {_qgru.version}", "calibration_sha256": identity["calibration_sha256"]},
                     max_shard_size=max_shard_size)
    progress.remove()
    seconds = time.time() - started
    log(verbose, f"wrote {output_dir} ({len(layers)} layers, {len(blocks)} blocks, {resumed} resumed) in {seconds:.1f} s")
    return GptqModelResult(output_dir, layers, len(blocks), resumed, seconds)
