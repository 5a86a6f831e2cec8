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
