"""What the public functions accept, turned into what the extension takes.

Models: a path (read by the library, as the CLI reads ``--model``: ``.safetensors`` or ``.onnx``), a
``torch.nn.GRU`` / ``nn.GRUCell``, or a state dict (a mapping of names to arrays or tensors). Arrays: NumPy arrays, PyTorch tensors (detached, moved to
the CPU) or anything ``numpy.asarray`` takes. PyTorch is never imported here: a tensor or module is recognised
only when the caller's program has imported torch already.
"""

import os
import sys
from collections.abc import Mapping

import numpy as np

from . import _qgru


def is_path(value):
    return isinstance(value, (str, os.PathLike))


def _torch():
    return sys.modules.get("torch")


def is_torch_tensor(value):
    torch = _torch()
    return torch is not None and isinstance(value, torch.Tensor)


def is_torch_module(value):
    torch = _torch()
    return torch is not None and isinstance(value, torch.nn.Module)


def to_numpy(value):
    """A NumPy view of ``value`` where one exists (NumPy arrays as they are, CPU tensors without a copy)."""
    if is_torch_tensor(value):
        tensor = value.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        if tensor.dtype == _torch().bfloat16:  # NumPy has no bfloat16; float32 holds every value exactly
            tensor = tensor.float()
        return tensor.numpy()
    return np.asarray(value)


def host_array(value):
    """C-contiguous NumPy array of ``value`` (a copy only when it is not contiguous already)."""
    return np.ascontiguousarray(to_numpy(value))


class GpuRows:
    """Rows ``[M, K]`` float32 that stay in GPU memory: ``pointer`` (a device address), ``M``, ``ld`` (the row
    stride, in elements), ``stream`` (the stream that wrote them, as ``__cuda_array_interface__`` names one: 0
    nothing to wait for, 1 the legacy default stream, 2 the per-thread one, else a ``cudaStream_t``) and
    ``owner``, the object holding the memory (kept alive while the rows are read)."""

    __slots__ = ("pointer", "M", "ld", "stream", "owner")

    def __init__(self, pointer, M, ld, stream, owner):
        self.pointer, self.M, self.ld, self.stream, self.owner = pointer, M, ld, stream, owner


def gpu_rows(value, K, name):
    """``GpuRows`` of ``value`` when it lives in GPU memory (a PyTorch CUDA tensor, or any object with
    ``__cuda_array_interface__``: CuPy, Numba), ``[..., K]`` with the leading dimensions flattened into rows;
    ``None`` for anything on the host (then ``host_array`` applies), and for a PyTorch tensor on another GPU than
    the current one. A PyTorch tensor is detached and, where
    needed, made float32 (as the host path reads every dtype) and row-contiguous on its own device, and its
    rows were written on PyTorch's current stream of that device; other objects must be float32 already and
    say their stream themselves (the interface's version 3). Raises ``qgru.Error`` naming ``name`` for a
    shape or dtype it cannot read."""
    torch = _torch()
    stream = None
    if torch is not None and isinstance(value, torch.Tensor):
        if value.device.type != "cuda" or value.device.index != torch.cuda.current_device():
            return None  # host rows, or another GPU than the current one (where a GPU Hessian is made): the host path
        value = value.detach()
        if value.dim() == 0 or value.shape[-1] != K:
            raise _qgru.Error(f"{name}: rows have shape {list(value.shape)}, expected [..., {K}]")
        value = value.reshape(-1, K)
        if value.dtype != torch.float32:
            value = value.float()
        if value.stride(1) != 1 or value.stride(0) < K:
            value = value.contiguous()
        # PyTorch's interface is version 2 (no stream): its work is queued on its current stream.
        current = torch.cuda.current_stream(value.device).cuda_stream
        stream = current if current != 0 else 1
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is None:
        return None
    shape = tuple(int(d) for d in interface["shape"])
    if interface["typestr"] != "<f4":
        raise _qgru.Error(f"{name}: rows in GPU memory have type {interface['typestr']}, expected float32 (<f4); "
                          "convert them on the GPU first")
    if not shape or shape[-1] != K:
        raise _qgru.Error(f"{name}: rows have shape {list(shape)}, expected [..., {K}]")
    M = 1
    for d in shape[:-1]:
        M *= d
    strides = interface.get("strides")
    ld = K
    if strides is not None and M > 0:
        strides = tuple(int(s) for s in strides)
        contiguous = [4]
        for d in reversed(shape[1:]):
            contiguous.insert(0, contiguous[0] * d)
        if len(shape) == 2 and strides[1] == 4 and strides[0] % 4 == 0 and strides[0] >= 4 * K:
            ld = strides[0] // 4
        elif any(s != c for s, c, d in zip(strides, contiguous, shape) if d > 1):
            raise _qgru.Error(f"{name}: rows in GPU memory are not row-contiguous (strides {list(strides)} bytes); "
                              "make them contiguous first")
    if stream is None:
        stream = interface.get("stream") or 0
    return GpuRows(int(interface["data"][0]), M, ld, int(stream), value)


def torch_gru_batch_first(model):
    """``batch_first`` of a ``torch.nn.GRU`` (False for anything else)."""
    return bool(getattr(model, "batch_first", False)) if is_torch_module(model) else False


def as_model(model, layout="auto", prefix=None, node=None):
    """The float model (``_qgru.FloatModel``) of a path, a PyTorch GRU module or a state dict; ``prefix`` picks
    one GRU of a full state dict, ``node`` one GRU stack of an ONNX graph (the CLI's --prefix, --node)."""
    if isinstance(model, _qgru.FloatModel):
        return model
    if is_path(model):
        return _qgru.load_model(os.fspath(model), layout, prefix or "", node or "")
    if is_torch_module(model):
        torch = _torch()
        if not isinstance(model, (torch.nn.GRU, torch.nn.GRUCell)):
            raise _qgru.Error(f"model: a {type(model).__module__}.{type(model).__name__}, expected torch.nn.GRU or "
                              "torch.nn.GRUCell (or a state dict, or a path)")
        tensors = {name: host_array(value) for name, value in model.state_dict().items()}
        return _qgru.model_from_tensors(tensors, "pytorch", f"torch.nn.{type(model).__name__}", "")
    if isinstance(model, Mapping):
        tensors = {str(name): host_array(value) for name, value in model.items()}
        return _qgru.model_from_tensors(tensors, layout, "state dict", prefix or "")
    raise _qgru.Error(f"model: a {type(model).__name__}, expected a path (.safetensors), torch.nn.GRU, "
                      "torch.nn.GRUCell or a state dict")


def data_items(data):
    """The calibration inputs of ``data`` in order: paths as they are, everything else as arrays.

    ``data`` is a path, an array or tensor, a list or tuple of those, or any iterable of them (a generator,
    a DataLoader); an item that is itself a tuple or list (a DataLoader's ``(inputs, targets)``) gives its
    first element.
    """
    if is_path(data) or isinstance(data, np.ndarray) or is_torch_tensor(data):
        yield data if is_path(data) else host_array(data)
        return
    for item in data:
        if isinstance(item, (tuple, list)):
            if not item:
                raise _qgru.Error("data: an empty tuple among the calibration inputs")
            item = item[0]
        yield item if is_path(item) else host_array(item)


def sequence_input(value):
    """A path as it is, anything else as a C-contiguous array."""
    return os.fspath(value) if is_path(value) else host_array(value)
