"""``qgru.QuantLinear``: one layer of a GPTQ checkpoint read once and kept, called on many inputs."""

import os

from . import _qgru
from ._gptq import GptqResult
from ._inputs import host_array


class QuantLinear:
    """One linear layer of a GPTQ checkpoint, read once and kept resident: ``layer(x)`` is
    ``x · Ŵᵀ + bias``, ``x [..., K]`` float (a NumPy array or a PyTorch CPU tensor), ``y [..., N]`` float32.

    Made from a checkpoint file (read as ``qgru linear`` and ``qgru.gptq_linear`` read it: the bits, the format
    and the v1 zero-point rule from its ``quantize_config.json``), from a ``GptqResult`` that was written to one,
    or from a ``GptqResult``'s tensors in memory (``qgru.gptq(...)`` without ``checkpoint=``). The file is read
    when the object is made and never again: removing it afterwards changes nothing.

    Args:
        checkpoint: the ``.safetensors`` path (``quantize_config.json`` beside it), or a ``GptqResult``.
        layer: the layer's prefix (``PREFIX.qweight``, ...); may be left out when the checkpoint holds one
            layer, and for a ``GptqResult`` (its own prefix).
        no_bias: leave out the checkpoint's ``PREFIX.bias`` (``--no-bias``); it is added by default.
        device: ``"cpu"`` (the default): the layer decoded once; each call is exactly ``qgru.gptq_linear``'s
            float32 product, byte for byte. ``"cuda"`` (when the package was built with CUDA; ``device_id`` the
            GPU): the layer is repacked and uploaded once, as the C API's ``qgruSetQuantizeGPTQWeights`` does
            (4- and 8-bit layers; the W4A16/W8A16 kernels of docs/CUDA.md). The arrays are on the host, so each
            call copies ``x`` up (rounded to fp16) and ``y`` down (fp16 values, then the bias added in float32,
            as ``qgru linear --device cuda``) and waits for the GPU.
        device_id: the CUDA device ordinal.

    Attributes: ``N``, ``K``, ``bits``, ``group_size``, ``has_bias``, ``act_order`` (``g_idx`` permuted),
    ``layer``, ``device``, ``device_id``, ``source`` (the checkpoint's path, or ``"GptqResult (in memory)"``).
    """

    def __init__(self, checkpoint, layer=None, *, no_bias=False, device="cpu", device_id=0):
        with_bias = not no_bias
        if isinstance(checkpoint, GptqResult):
            layer = layer or checkpoint.prefix
            if checkpoint.checkpoint is not None:
                self._impl = _qgru.quant_linear_from_checkpoint(checkpoint.checkpoint, layer, with_bias, str(device),
                                                                int(device_id))
            else:
                config = getattr(checkpoint, "quantize_config", None)
                if config is None:
                    raise _qgru.Error("QuantLinear: this GptqResult carries no quantize_config (made by an older qgru)")
                tensors = {str(name): host_array(value) for name, value in checkpoint.tensors.items()}
                self._impl = _qgru.quant_linear_from_tensors(tensors, config, layer, with_bias, str(device),
                                                             int(device_id), "GptqResult (in memory)")
        else:
            self._impl = _qgru.quant_linear_from_checkpoint(os.fspath(checkpoint), layer or "", with_bias, str(device),
                                                            int(device_id))

    def __call__(self, x):
        """``y [..., N]`` float32 for ``x [..., K]``."""
        return self._impl.run(host_array(x))

    N = property(lambda self: self._impl.N, doc="Output features.")
    K = property(lambda self: self._impl.K, doc="Input features.")
    bits = property(lambda self: self._impl.bits, doc="Bits per weight code (2, 3, 4 or 8).")
    group_size = property(lambda self: self._impl.group_size, doc="Columns per group (K for one group per row).")
    has_bias = property(lambda self: self._impl.has_bias, doc="Whether a bias is added.")
    act_order = property(lambda self: self._impl.act_order, doc="Whether g_idx is permuted (desc_act).")
    layer = property(lambda self: self._impl.layer, doc="The layer's prefix in the checkpoint.")
    device = property(lambda self: self._impl.device, doc='"cpu" or "cuda".')
    device_id = property(lambda self: self._impl.device_id, doc="The CUDA device ordinal.")
    source = property(lambda self: self._impl.source, doc="The checkpoint's path, or GptqResult (in memory).")

    def __repr__(self):
        device = self.device if self.device == "cpu" else f"{self.device}:{self.device_id}"
        return (f"qgru.QuantLinear({self.source!r}, layer={self.layer!r}: N={self.N}, K={self.K}, bits={self.bits}, "
                f"group_size={self.group_size}, act_order={self.act_order}, bias={self.has_bias}, device={device!r})")
