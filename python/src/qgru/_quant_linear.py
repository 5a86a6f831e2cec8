"""``qgru.QuantLinear``: one layer of a GPTQ checkpoint read once and kept, called on many inputs."""

import os
import sys

from . import _qgru
from ._gptq import GptqResult
from ._inputs import host_array, is_torch_tensor


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
            (4- and 8-bit layers; the W4A16/W8A16 kernels of docs/CUDA.md). For an array on the host, each
            call copies ``x`` up (rounded to fp16) and ``y`` down (fp16 values, then the bias added in float32,
            as ``qgru linear --device cuda``) and waits for the GPU. A PyTorch CUDA tensor on that GPU stays there:
            the call is queued on PyTorch's current stream (no host copy, no wait) and returns a float32 CUDA
            tensor holding the same values as the host path's array.
        device_id: the CUDA device ordinal.

    Attributes: ``N``, ``K``, ``bits``, ``group_size``, ``has_bias``, ``act_order`` (``g_idx`` permuted),
    ``layer``, ``device``, ``device_id``, ``source`` (the checkpoint's path, or ``"GptqResult (in memory)"``).
    """

    def __init__(self, checkpoint, layer=None, *, no_bias=False, device="cpu", device_id=0):
        with_bias = not no_bias
        # CUDA-tensor calls: the bias on the GPU, made at the first; the workspace size of the last M.
        self._gpu_bias, self._workspace_for, self._workspace_bytes = None, None, 0
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
        """``y [..., N]`` float32 for ``x [..., K]``: a NumPy array, or for a PyTorch CUDA tensor on a ``"cuda"``
        layer's GPU a CUDA tensor (the same values)."""
        if self._impl.device == "cuda" and is_torch_tensor(x) and x.device.type == "cuda":
            return self._call_on_gpu(x)
        return self._impl.run(host_array(x))

    def _call_on_gpu(self, x):
        """``x`` stays on the GPU: rounded to fp16 there, the kernel queued on PyTorch's current stream with
        workspace and output from PyTorch's allocator (no host copy, no wait), then the bias added in float32 to
        the fp16 values: what the host path returns, bit for bit, as a float32 CUDA tensor."""
        torch = sys.modules["torch"]
        K, N = self._impl.K, self._impl.N
        if x.device.index != self._impl.device_id:
            raise _qgru.Error(f"x: on {x.device}, but layer '{self.layer}' of {self.source} is on "
                              f"cuda:{self._impl.device_id}")
        x = x.detach()
        if x.dim() == 0 or x.shape[-1] != K:
            raise _qgru.Error(f"x: input has shape {list(x.shape)}, expected [..., {K}] for layer '{self.layer}' "
                              f"of {self.source}")
        leading = tuple(x.shape[:-1])
        # Through float32, as the host path reads x (float64 straight to fp16 could round differently, twice vs once).
        a = x.reshape(-1, K).to(torch.float32).to(torch.float16).contiguous()
        if a.data_ptr() % 16:  # the kernels read x 16 bytes at a time
            a = a.clone()
        M = a.shape[0]
        y = torch.empty((M, N), dtype=torch.float16, device=x.device)
        if M:
            if self._workspace_for != M:  # a decode loop calls with one M: ask the library once
                self._workspace_for, self._workspace_bytes = M, self._impl.workspace_bytes(M)
            size = self._workspace_bytes
            workspace = torch.empty(size, dtype=torch.uint8, device=x.device) if size else None
            self._impl.run_device(a.data_ptr(), M, y.data_ptr(), workspace.data_ptr() if size else 0,
                                  torch.cuda.current_stream(x.device).cuda_stream)
        out = y.float()
        if self._impl.has_bias:
            if self._gpu_bias is None:
                self._gpu_bias = torch.from_numpy(self._impl.bias()).to(x.device)
            out += self._gpu_bias
        return out.reshape(*leading, N)

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
