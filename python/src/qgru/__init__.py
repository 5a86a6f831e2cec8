"""qgru: trained float GRUs to pure fixed-point integer inference, from Python.

The command-line toolchain's steps as functions on NumPy arrays and PyTorch modules (PyTorch is optional and
never imported by qgru):

    stats = qgru.calibrate(gru, x_calib)          # torch.nn.GRU / nn.GRUCell, a state dict, or a path
    artifact = qgru.quantize(gru, stats, config="int8")
    y_codes, h_codes = artifact.run(artifact.quantize_input(x))   # integer in, integer out
    report = qgru.verify(gru, artifact, x_test)   # report.sqnr_db, report.to_html("verify.html")
    artifact.save("model.qgru.json")              # what `qgru run` and the runtime C API read

and GPTQ: ``qgru.gptq(weight, activations, bits=4, group_size=128)`` (or ``hessian=qgru.Hessian(K)`` fed chunk
by chunk), ``qgru.gptq_linear(checkpoint, x)``,
``qgru.QuantLinear(checkpoint, layer)`` (read once, then ``layer(x)``; ``device="cuda"`` keeps it on a GPU), and
for a whole transformers causal LM ``qgru.gptq_model(model, calibration, output_dir)`` (a folder transformers loads).
Arrays are in PyTorch's layout, ``[T, N, C]`` (or ``batch_first=True``). Errors raise ``qgru.Error`` with the
CLI's one-line message. Logs go to stderr; ``qgru.set_log_level("info")`` shows the CLI's progress lines.
"""

from . import _qgru
from ._gptq import GptqResult, Hessian, gptq, gptq_defaults, gptq_devices, gptq_linear
from ._gptq_model import GptqModelResult, gptq_model
from ._quant_linear import QuantLinear
from ._runtime import Artifact, Stream
from ._toolchain import Metrics, Report, Statistics, calibrate, load, quantize, verify

Error = _qgru.Error
Error.__module__ = __name__
Error.__doc__ = ("A failure of qgru: bad input (the message names the file or array, the tensor and what was "
                 "expected, as the CLI's 'qgru: error:' line does) or a failed computation.")

__version__ = _qgru.version
presets = tuple(_qgru.preset_names())



def read_tensors(path):
    """Every tensor of a ``.safetensors`` file as NumPy arrays (read by qgru's own checked reader; BF16 is
    returned as float32). ``torch.nn.GRU.load_state_dict`` takes them through ``torch.from_numpy``."""
    import os

    return _qgru.read_tensors(os.fspath(path))


def write_tensors(path, tensors, metadata=None):
    """Write a mapping of names to arrays or tensors as ``.safetensors`` (atomically; qgru's own writer), e.g. a
    ``torch.nn.GRU``'s ``state_dict()`` for ``qgru calibrate --model``; ``metadata`` (str -> str) becomes the
    file's ``__metadata__``."""
    import os

    from ._inputs import host_array

    _qgru.write_tensors(os.fspath(path), {str(name): host_array(value) for name, value in tensors.items()},
                        {str(key): str(value) for key, value in (metadata or {}).items()})


_LEVELS = {"warning": 0, "info": 1, "debug": 2}


def set_log_level(level):
    """Log verbosity on stderr: "warning" (the package's default), "info" (the CLI's default) or "debug"."""
    if level not in _LEVELS:
        raise ValueError(f"level {level!r}: expected one of {', '.join(_LEVELS)}")
    _qgru.set_log_verbosity(_LEVELS[level])


_qgru.set_log_verbosity(0)

__all__ = ["Artifact", "Error", "GptqModelResult", "GptqResult", "Metrics", "QuantLinear", "Report", "Statistics",
           "Stream", "calibrate", "gptq", "gptq_defaults", "gptq_linear", "gptq_model", "load", "presets", "quantize",
           "read_tensors", "set_log_level", "verify", "write_tensors"]
