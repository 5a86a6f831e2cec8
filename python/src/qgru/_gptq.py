"""GPTQ on arrays: ``qgru gptq`` and ``qgru linear --device cpu`` as functions."""

import os

import numpy as np

from . import _qgru
from ._inputs import gpu_rows, host_array, is_torch_module, is_torch_tensor, to_numpy


def gptq_option_names():
    """The names ``qgru.gptq`` takes as keyword options: the fields of the library's GptqOptions."""
    return sorted(name for name in dir(_qgru.GptqOptions) if not name.startswith("_"))


def gptq_defaults():
    """The options ``qgru gptq`` starts from, as a dict: ``order`` (``--order``) and the option fields."""
    defaults = _qgru.gptq_cli_defaults()
    values = {name: getattr(defaults, name) for name in gptq_option_names()}
    values["order"] = _qgru.column_order_name(defaults)
    return values


def make_gptq_options(bits, group_size, order, act_order, options, caller):
    """The library's GptqOptions: the CLI's defaults, then bits, group size, the column order (``order`` or
    ``act_order``, as --order and --act-order) and any other option field by name (TypeError for an unknown one)."""
    gptq_options = _qgru.gptq_cli_defaults()
    gptq_options.bits = int(bits)
    gptq_options.group_size = int(group_size)
    if act_order and order is not None:
        raise TypeError(f"{caller} takes order= or act_order=True, not both (as --order and --act-order)")
    if act_order or order is not None:
        _qgru.set_column_order(gptq_options, "act-order" if act_order else str(order))
    known = gptq_option_names()
    for key, value in options.items():
        if key not in known:
            raise TypeError(f"{caller} got an unknown option {key!r}; the options are {', '.join(known)}")
        setattr(gptq_options, key, value)
    return gptq_options


class GptqResult:
    """One layer quantized by GPTQ, in the checkpoint's layout (AutoGPTQ / GPTQModel):

    ``qweight`` int32 ``[K*bits/32, N]``, ``qzeros`` int32 ``[G, N*bits/32]``, ``scales`` float16 ``[G, N]``,
    ``g_idx`` int32 ``[K]`` (and ``bias`` float16 ``[N]`` when one was given); ``tensors`` holds them by their
    checkpoint names (``PREFIX.qweight``, ...). The reconstruction errors, ``‖(W − Ŵ)X‖² / ‖WX‖²`` for GPTQ
    (``gptq_error``) and for round-to-nearest on the same grid (``rtn_error``), are those ``qgru gptq`` prints.
    """

    def __init__(self, result, prefix, checkpoint):
        self.tensors = result["tensors"]
        self.prefix = prefix
        self.checkpoint = checkpoint
        for key, value in result["report"].items():
            setattr(self, key, value)
        for part in ("qweight", "qzeros", "scales", "g_idx", "bias"):
            setattr(self, part, self.tensors.get(f"{prefix}.{part}"))

    def __repr__(self):
        return (f"qgru.GptqResult({self.prefix!r}: N={self.N}, K={self.K}, gptq_error={self.gptq_error:.4g}, "
                f"rtn_error={self.rtn_error:.4g})")


class Hessian:
    """``H = 2·X·Xᵀ`` of one layer input, accumulated in float64 as the rows arrive, for ``qgru.gptq(...,
    hessian=)``: what ``qgru gptq`` accumulates from activation files, without keeping the rows (K × K × 8
    bytes, whatever the number of tokens). Layers that read the same input (q, k and v) share one.

    ``Hessian(K)`` then ``add(rows)`` for each chunk (``[..., K]`` float: an array or a tensor, on any device;
    rows are tokens, leading dimensions flattened); or ``Hessian.from_matrix(H)`` for a matrix made elsewhere
    (``[K, K]``, e.g. ``numpy.load`` of ``qgru gptq --save-hessian``'s file). The same chunks added in the same
    order give the same H, bit for bit, as ``qgru.gptq(weight, [chunks...])``.

    ``device="cuda"`` accumulates on the GPU (``qgru gptq --device cuda``'s accumulator): rows already on that
    GPU (CUDA tensors) are read where they are, others pass through the host as float32;
    ``qgru.gptq_devices()`` lists the devices this qgru was built with.
    """

    def __init__(self, K, device="cpu"):
        self._impl = _qgru.Hessian(int(K), str(device))
        self._device = str(device)

    @classmethod
    def from_matrix(cls, matrix, tokens=0):
        hessian = cls.__new__(cls)
        hessian._impl = _qgru.Hessian.from_matrix(host_array(matrix), int(tokens), "hessian")
        hessian._device = None
        return hessian

    def add(self, rows):
        """Adds ``rows`` (``[..., K]``). On ``device="cuda"``, rows already in GPU memory (a CUDA tensor on the
        same GPU, or another ``__cuda_array_interface__`` array) are read where they are, after the work that
        wrote them (PyTorch's current stream), and may be freed when ``add`` returns; rows anywhere else go
        through the host as float32."""
        return self._add(rows, "hessian rows")

    def _add(self, rows, name, view=None):
        """``add`` naming the rows ``name`` in errors; ``view``: ``gpu_rows`` of them when already taken."""
        if view is None and self._device == "cuda":
            view = gpu_rows(rows, self.K, name)
        if view is not None:
            self._impl.add_device(view.pointer, view.M, view.ld, view.stream, name)
        else:
            self._impl.add(host_array(rows), name)
        return self

    @property
    def K(self):
        return self._impl.K

    @property
    def tokens(self):
        """Rows added so far (for a matrix given whole: the ``tokens`` it was given)."""
        return self._impl.tokens

    def matrix(self):
        """H as a NumPy float64 ``[K, K]`` (a copy; ``numpy.save`` it for ``qgru gptq --manifest``'s
        ``"hessian"``)."""
        return self._impl.matrix()

    def __repr__(self):
        return f"qgru.Hessian(K={self.K}, tokens={self.tokens})"


def gptq_devices():
    """Where ``qgru.gptq`` and ``qgru.Hessian`` can compute in this build: ``["cpu"]``, or ``["cpu", "cuda"]``
    when qgru was built with CUDA (a GPU must also be present to use it)."""
    return list(_qgru.gptq_devices())


def gptq(weight, activations=None, bits=4, group_size=128, *, hessian=None, order=None, act_order=False,
         checkpoint=None, name="linear.weight", bias=None, format="gptq", activations_feature_major=False,
         device="cpu", **options):
    """GPTQ-quantize one linear layer: ``qgru gptq`` on arrays.

    Args:
        weight: ``[N, K]`` float (an array, a tensor, or a ``torch.nn.Linear``, whose bias comes along).
        activations: the layer's inputs ``[M, K]`` (rows are tokens; any leading dimensions are flattened),
            or a list of such chunks; ``[K, M]`` with ``activations_feature_major``. The Hessian
            ``H = 2·X·Xᵀ`` is accumulated in float64 chunk by chunk.
        hessian: instead of ``activations``, a ``qgru.Hessian`` already accumulated from them (or a ``[K, K]``
            matrix); the result is the same as from the rows it was accumulated from.
        device: ``"cpu"`` or ``"cuda"``, as ``qgru gptq --device``: where the Hessian is accumulated from
            ``activations`` and GPTQ runs (docs/GPTQ.md, "On the GPU"); the errors and packing stay on the CPU.
            On ``"cuda"``, activations that are CUDA tensors are read where they are (``qgru.Hessian.add``).
        bits: 2, 3, 4 or 8.
        group_size: columns per group (-1: one group per row).
        order: the column order, as ``qgru gptq --order``: ``"group-aware"`` (the default: act-order inside
            each group, groups by their largest diag(H); ``g_idx`` stays ``k // group_size``),
            ``"act-order"`` (descending diag(H) over all columns; ``desc_act``, ``g_idx`` permuted) or
            ``"natural"``.
        act_order: ``True`` is ``order="act-order"`` (``--act-order``); not together with ``order``.
        checkpoint: when given, the ``.safetensors`` to write, with ``quantize_config.json`` beside it
            (atomically, together), exactly as ``qgru gptq -o`` writes them.
        name: the weight's name in the checkpoint; its prefix (``linear`` for ``linear.weight``) names the
            packed tensors.
        bias: ``[N]``, stored as float16 as AutoGPTQ does.
        format: ``"gptq"`` (v1) or ``"gptq_v2"``.
        **options: any other field of the library's GPTQ options, by name (``static_groups``, ``sym``,
            ``damp``, ``block_size``, ...; ``qgru.gptq_defaults()`` lists them with the CLI's defaults, which
            apply to those not given).

    Returns:
        GptqResult: ``qweight``, ``qzeros``, ``scales``, ``g_idx``, ``gptq_error``, ``rtn_error``...
    """
    if is_torch_module(weight):
        module = weight
        if not hasattr(module, "weight"):
            raise _qgru.Error(f"weight: a {type(module).__name__} without a weight, expected torch.nn.Linear or an array")
        weight = module.weight
        if bias is None and getattr(module, "bias", None) is not None:
            bias = module.bias
    gptq_options = make_gptq_options(bits, group_size, order, act_order, options, "gptq()")
    if (activations is None) == (hessian is None):
        raise TypeError("gptq() takes activations or hessian=, one of them")
    if hessian is not None:
        chunks = []
        if not isinstance(hessian, Hessian):
            hessian = Hessian.from_matrix(hessian)
        hessian = hessian._impl
    else:
        chunks = list(activations) if isinstance(activations, (list, tuple)) else [activations]
    weights = {name: host_array(weight)}
    if activations is not None and str(device) == "cuda" and not activations_feature_major and chunks:
        # CUDA tensors among the rows: the GPU Hessian reads them where they are (the job would copy every chunk
        # to the host and back); the same chunks in the same order give the same H as the job's accumulator.
        K = weights[name].shape[-1] if weights[name].ndim == 2 else None
        views = [gpu_rows(chunk, K, f"activations[{i}]") if K else None for i, chunk in enumerate(chunks)]
        if any(view is not None for view in views):
            accumulated = Hessian(K, "cuda")
            for i, (chunk, view) in enumerate(zip(chunks, views)):
                accumulated._add(chunk, f"activations[{i}]", view)
            hessian, chunks = accumulated._impl, []
    chunks = [host_array(chunk) for chunk in chunks]
    prefix = name[: -len(".weight")] if name.endswith(".weight") else name
    if bias is not None:
        weights[f"{prefix}.bias"] = host_array(bias)
    result = _qgru.gptq_layer(weights, name, chunks, bool(activations_feature_major), gptq_options, format,
                              "" if checkpoint is None else os.fspath(checkpoint), hessian, str(device))
    gptq_result = GptqResult(result, prefix, None if checkpoint is None else os.fspath(checkpoint))
    gptq_result.quantize_config = _qgru.quantize_config_text(gptq_options, format)  # what QuantLinear decodes it by
    return gptq_result


def gptq_linear(checkpoint, x, layer=None, *, no_bias=False):
    """``y = x · Ŵᵀ + bias`` for one layer of a GPTQ checkpoint, on the CPU from the packed codes, read exactly
    as ``qgru linear`` reads it (bits, format and the v1 zero-point rule from its ``quantize_config.json``).

    Args:
        checkpoint: the ``.safetensors`` (``quantize_config.json`` beside it), or a ``GptqResult`` that was
            written to one.
        x: ``[M, K]`` float.
        layer: the layer's prefix; may be left out when the checkpoint holds one layer.
        no_bias: leave out the checkpoint's ``PREFIX.bias`` (``--no-bias``); it is added by default, as every
            client adds it.

    Returns:
        y ``[M, N]`` float32.
    """
    if isinstance(checkpoint, GptqResult):
        if checkpoint.checkpoint is None:
            raise _qgru.Error("gptq_linear: this GptqResult was not written to a checkpoint (give checkpoint= to gptq)")
        layer = layer or checkpoint.prefix
        checkpoint = checkpoint.checkpoint
    path = os.fspath(checkpoint)
    if layer is None:
        layers = _qgru.checkpoint_layers(path)
        if len(layers) != 1:
            raise _qgru.Error(f"{path}: holds {len(layers)} layers ({', '.join(layers)}); give layer=")
        layer = layers[0]
    return _qgru.gptq_linear(path, layer, host_array(x), "x", not no_bias)
