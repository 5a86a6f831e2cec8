"""The quantized model and its runtime: whole runs and streams through qgru's runtime C API."""

import os

import numpy as np

from . import _qgru
from ._inputs import to_numpy

_INT32_MIN, _INT32_MAX = np.iinfo(np.int32).min, np.iinfo(np.int32).max


def runtime_array(value, what, batch_first=False):
    """(array, is_codes) for the C API: float32 values or int32 codes, C-contiguous, time-major.

    A float32 or int32 C-contiguous NumPy array (or CPU tensor) is passed on as it is, not copied. Other
    float dtypes are converted to float32 and other integer dtypes to int32 (a copy, and a refusal of codes
    that int32 cannot hold); a batch-first or otherwise non-contiguous array is made contiguous (a copy).
    """
    array = to_numpy(value)
    if array.dtype.kind == "f":
        is_codes, dtype = False, np.float32
    elif array.dtype.kind in "iu":
        is_codes, dtype = True, np.int32
        if array.size and array.dtype.itemsize >= 4 and array.dtype != np.int32:
            low, high = array.min(), array.max()
            if low < _INT32_MIN or high > _INT32_MAX:
                bad = low if low < _INT32_MIN else high
                raise _qgru.Error(f"{what}: code {bad} is outside int32; integer arrays are codes in the tensor's space")
    else:
        raise _qgru.Error(f"{what}: dtype {array.dtype}, expected float values or integer codes")
    if batch_first:
        if array.ndim != 3:
            raise _qgru.Error(f"{what}: shape {list(array.shape)}, expected [N, T, C] (batch_first)")
        array = array.swapaxes(0, 1)
    return np.ascontiguousarray(array, dtype=dtype), is_codes


def sequence_lengths(value, N):
    """Sequence lengths ``[N]`` as a C-contiguous int32 array (integers only; the C API checks ``[0, T]``)."""
    array = to_numpy(value)
    if array.dtype.kind not in "iu":
        raise _qgru.Error(f"lengths: dtype {array.dtype}, expected integer sequence lengths")
    if array.shape != (N,):
        raise _qgru.Error(f"lengths: shape {list(array.shape)}, expected [N] with N = {N}")
    if array.size and (array.min() < _INT32_MIN or array.max() > _INT32_MAX):
        n = int(np.argmax((array < _INT32_MIN) | (array > _INT32_MAX)))
        raise _qgru.Error(f"lengths: lengths[{n}] = {array[n]}, expected a length in [0, T]")
    return np.ascontiguousarray(array, dtype=np.int32)


class Stream:
    """A stream of frames through a unidirectional artifact, the state (every layer's h codes) kept here.

    ``step(frame)`` with ``frame`` ``[N, C]`` (one frame of N sequences) or ``[F, N, C]`` (F frames) gives
    the last layer's output ``[N, H]`` or ``[F, N, H]``: floats for float frames, codes for integer frames.
    Stepping through frames gives exactly the codes of one whole ``run`` over them. Steps run on the calling
    thread and allocate nothing in the C library; the GIL is released while they compute.
    """

    def __init__(self, impl, artifact):
        self._impl = impl
        self._artifact = artifact

    batch = property(lambda self: self._impl.batch, doc="N, the number of sequences streamed together.")

    def step(self, frame):
        array = to_numpy(frame)
        one_frame = array.ndim == 2
        x, is_codes = runtime_array(array[np.newaxis] if one_frame else array, "frame")
        if x.ndim != 3:
            raise _qgru.Error(f"frame: shape {list(array.shape)}, expected [N, C] or [F, N, C]")
        y = np.empty((x.shape[0], self.batch, self._artifact.hidden_size), np.int32 if is_codes else np.float32)
        self._impl.step(x, y, is_codes)
        return y[0] if one_frame else y

    def reset(self):
        """Every state code back to that of 0.0."""
        self._impl.reset()

    @property
    def state(self):
        """The state codes ``[L, N, H]`` int32 (layer l in cell (l, 0)'s h space): the h_n of the frames so far.
        Assign codes of that shape to set it (range-checked)."""
        return self._impl.get_codes()

    @state.setter
    def state(self, codes):
        self._impl.set_codes(np.ascontiguousarray(to_numpy(codes), dtype=np.int32))


class Artifact:
    """A quantized GRU: shifts, zero points, integer weights and activation tables, proven free of overflow.

    Made by ``qgru.quantize`` or read by ``qgru.load``. ``run`` and ``stream`` execute it through the runtime
    (the C API of ``<qgru/qgru_runtime.h>``): integer arithmetic only, the same codes as ``qgru run`` whichever
    executor runs it. ``save`` writes ``model.qgru.json`` and the tensor file beside it, both or neither.
    """

    def __init__(self, impl):
        self._impl = impl
        self._contexts = {}

    input_size = property(lambda self: self._impl.input_size, doc="C")
    hidden_size = property(lambda self: self._impl.hidden_size, doc="H")
    num_layers = property(lambda self: self._impl.num_layers, doc="L")
    num_directions = property(lambda self: self._impl.num_directions, doc="D (2: bidirectional)")
    config = property(lambda self: self._impl.config_name, doc="The bit-width config's name ('int8', ...).")
    path = property(lambda self: self._impl.path or None, doc="The file it was read from or saved to.")

    def save(self, path):
        """Write ``path`` (``name.qgru.json``) and its tensor file beside it (``name.qgru.safetensors``),
        atomically and together."""
        self._impl.save(os.fspath(path))

    def describe(self):
        """Every cell's tensors (bits, shift, zero point, range) and derived shifts, one line each."""
        return self._impl.describe()

    def quant(self, tensor="x", layer=0, direction=0):
        """The quantization of x or h of cell (layer, direction): bits, unsigned, shift, zero_point, code_min,
        code_max, scale (value = (code - zero_point) * scale)."""
        return _qgru.quant(self._impl, tensor, layer, direction)

    def quantize_input(self, x):
        """Float inputs as codes in layer 0's x space (round half away from zero, saturating): what ``run``
        does to float input. Any shape; returns int32."""
        return _qgru.quantize_input(self._impl, np.ascontiguousarray(to_numpy(x), dtype=np.float32))

    def dequantize_output(self, codes):
        """Output codes ``[..., D*H]`` as float32 values (direction d's columns in its last cell's h space)."""
        return _qgru.dequantize_output(self._impl, np.ascontiguousarray(to_numpy(codes), dtype=np.int32))

    def _context(self, device, device_id, threads, executor):
        key = (device, int(device_id), int(threads), executor)
        if key not in self._contexts:
            self._contexts[key] = _qgru.Context(self._impl, device, int(device_id), int(threads), executor)
        return self._contexts[key]

    def executor(self, *, device="cpu", device_id=0, threads=0, executor="fast"):
        """What runs for these options, e.g. "cpu fast (avx512-vnni)" (the C API's context description)."""
        return self._context(device, device_id, threads, executor).describe()

    def run(self, x, h0=None, *, lengths=None, batch_first=False, threads=0, executor="fast", device="cpu", device_id=0):
        """Run whole sequences: ``(y, h_n)`` as ``torch.nn.GRU`` returns them.

        Args:
            x: ``[T, N, C]`` (``[N, T, C]`` with ``batch_first``). Float values are quantized with layer 0's
                x parameters and y, h_n come back as float32 values; integer codes (in that x space) give
                int32 codes back. A float32 or int32 C-contiguous array (or CPU tensor) is read in place,
                never copied; other dtypes and batch-first input are converted first (a copy).
            h0: initial state ``[L*D, N, H]``, values or codes like x (default: the code of 0.0).
            lengths: sequence lengths ``[N]`` for a padded batch (integers in ``[0, T]``; default: every sequence
                has T frames). Steps ``t >= lengths[n]`` are padding: sequence n's state stays, its y rows are
                0.0 (the code of 0.0), its h_n is the state after its last frame and a reverse direction starts
                at that frame, so each sequence gets what it gets run alone over its own frames (as
                ``torch.nn.utils.rnn.pack_padded_sequence`` and ONNX's ``sequence_lens``).
            threads: CPU threads for the run (0: the hardware's count).
            executor: ``"fast"`` (AVX-512 VNNI / AVX2 where the CPU allows) or ``"reference"``: the same codes.
            device: ``"cpu"`` or ``"cuda"`` (when the package was built with CUDA), ``device_id`` the GPU.

        Returns:
            (y, h_n): y ``[T, N, D*H]`` (``[N, T, D*H]`` with ``batch_first``), h_n ``[L*D, N, H]``.

        The GIL is released while the integer model runs.
        """
        x_array, is_codes = runtime_array(x, "x", batch_first)
        h0_array = None
        if h0 is not None:
            h0_array, h0_codes = runtime_array(h0, "h0")
            if h0_codes != is_codes:
                raise _qgru.Error("h0: " + ("codes given with float x" if h0_codes else "values given with integer x")
                                  + "; give both as values or both as codes")
        if x_array.ndim != 3:
            raise _qgru.Error(f"x: shape {list(x_array.shape)}, expected [T, N, C] with C = {self.input_size}")
        T, N = x_array.shape[0], x_array.shape[1]
        lengths_array = None if lengths is None else sequence_lengths(lengths, N)
        dtype = np.int32 if is_codes else np.float32
        y = np.empty((T, N, self.num_directions * self.hidden_size), dtype)
        h_n = np.empty((self.num_layers * self.num_directions, N, self.hidden_size), dtype)
        self._context(device, device_id, threads, executor).run(x_array, h0_array, y, h_n, is_codes, lengths_array)
        return (y.swapaxes(0, 1) if batch_first else y), h_n

    def stream(self, batch=1, *, executor="fast", device="cpu", device_id=0):
        """A ``Stream`` of ``batch`` sequences (unidirectional models), every state code that of 0.0."""
        context = self._context(device, device_id, 0, executor)
        return Stream(_qgru.Stream(context, int(batch)), self)

    def __repr__(self):
        return (f"qgru.Artifact(config={self.config!r}, C={self.input_size}, H={self.hidden_size}, "
                f"layers={self.num_layers}, directions={self.num_directions}"
                + (f", path={self.path!r})" if self.path else ")"))
