"""calibrate, quantize, verify and their results: the CLI's subcommands as functions."""

import json
import os

from . import _qgru
from ._inputs import as_model, data_items, is_path, sequence_input, torch_gru_batch_first
from ._runtime import Artifact


class Statistics:
    """Calibration statistics of one model (what ``qgru calibrate -o stats.json`` writes).

    Mergeable: statistics of shards of the calibration data merge into those of all the data
    (``Statistics.merge(a, b)`` or ``a.merge(b)``); counts, min/max and histograms exactly, the EMA as one
    pass over the shards in the given order. Saved as the CLI's JSON (``save``), read back with
    ``Statistics.load`` or used by ``qgru quantize --stats``.
    """

    def __init__(self, impl):
        self._impl = impl

    @staticmethod
    def load(path):
        """Statistics from a file written by ``qgru calibrate`` or ``Statistics.save``."""
        return Statistics(_qgru.load_statistics(os.fspath(path)))

    def merge(self, *others):
        """The statistics of all the shards, in order: ``Statistics.merge(a, b, c)``, ``a.merge(b, c)`` or
        ``Statistics.merge([a, b, c])``. Shards must be of the same model (shape and weights)."""
        shards = list(self) if isinstance(self, (list, tuple)) else [self]
        for other in others:
            shards.extend(other if isinstance(other, (list, tuple)) else [other])
        for shard in shards:
            if not isinstance(shard, Statistics):
                raise _qgru.Error(f"merge: a {type(shard).__name__} among the shards, expected qgru.Statistics")
        return Statistics(_qgru.merge_statistics([shard._impl for shard in shards]))

    def save(self, path):
        """Write the statistics as JSON (atomically). The statistics are then known by this path: an artifact
        quantized from them records it, as ``qgru quantize --stats PATH`` does."""
        self._impl.save(os.fspath(path))

    def to_json(self):
        """The JSON text ``save`` writes."""
        return self._impl.to_json()

    def to_dict(self):
        return json.loads(self._impl.to_json())

    def to_html(self, path, config="int8"):
        """Write the calibration report (``qgru calibrate --merge STATS --html PATH --config CONFIG``): per
        tensor, its histogram and the range, grid and error of every range method."""
        self._impl.write_html(os.fspath(path), os.fspath(config))

    path = property(lambda self: self._impl.path or None, doc="The file the statistics were read from or saved to.")
    method = property(lambda self: self._impl.method, doc="The default range method recorded ('ema', 'kl', ...).")
    num_layers = property(lambda self: self._impl.num_layers)
    num_directions = property(lambda self: self._impl.num_directions)
    input_size = property(lambda self: self._impl.input_size)
    hidden_size = property(lambda self: self._impl.hidden_size)
    total_sequences = property(lambda self: self._impl.total_sequences, doc="Sequences observed in all.")

    def __repr__(self):
        return (f"qgru.Statistics(method={self.method!r}, layers={self.num_layers}, directions={self.num_directions}, "
                f"C={self.input_size}, H={self.hidden_size}, sequences={self.total_sequences}"
                + (f", path={self.path!r})" if self.path else ")"))


def calibrate(model, data, method=None, *, percentile=None, exclude_zeros=False, max_samples=0, batch_first=None,
              lengths=None, layout="auto", prefix=None, node=None):
    """Run the float GRU over calibration data and observe every tensor of the fixed-point data flow.

    ``qgru calibrate`` as a function: per layer and direction, min/max, the per-step EMA and a mergeable
    histogram of x, h, W·x+bw, R·h+br and every gate's input and output (docs/CALIBRATION.md).

    Args:
        model: a ``torch.nn.GRU`` or ``torch.nn.GRUCell``, a state dict (names as PyTorch's nn.GRU or
            haste's), or a path to a ``.safetensors`` or ``.onnx`` file (read as ``--model``).
        data: one array or tensor ``[T, N, C]`` (``[N, T, C]`` with ``batch_first``), a path to a ``.npy``
            (or ``file.npz:key``), or a list or any iterable of those (a generator, a DataLoader: an item
            that is an ``(inputs, targets)`` pair gives its inputs). Each is observed in order, as the CLI
            observes its ``--data`` files; a float dtype is required.
        method: the default range method the statistics record: ``minmax``, ``ema`` (the default),
            ``kl``, ``percentile[:P]``, ``mse`` or ``bounds``, each optionally ``+pow2``.
        percentile: P for ``method="percentile"`` without its own ``:P`` (default 99.99).
        exclude_zeros: histogram-based methods ignore exact zeros.
        max_samples: use at most this many sequences in all, the first ones (0: all).
        batch_first: arrays are ``[N, T, C]``; default: the module's own ``batch_first`` for a
            ``torch.nn.GRU``, else False.
        lengths: sequence lengths ``[N]`` (integers; steps ``t >= lengths[n]`` are padding and not observed):
            one array or path per data item, in a list, or one for a single array (``--lengths``).
        layout: weight layout of a path or state dict: ``auto``, ``pytorch`` or ``haste``.
        prefix: which GRU of a full state dict or ``.safetensors`` (``--prefix``, e.g. ``"encoder.rnn"``).
        node: which GRU stack of an ONNX graph (``--node``).

    Returns:
        Statistics (``save``, ``merge``, ``to_html``).

    Raises:
        qgru.Error: the CLI's one-line message (wrong rank or C, a non-float dtype, NaN with its (t, n, c),
            an unknown method, shape mismatches of the weights).

    Example:
        >>> stats = qgru.calibrate(gru, x_calib)            # x_calib [T, N, C] float32
        >>> stats.save("stats.json")
    """
    if batch_first is None:
        batch_first = torch_gru_batch_first(model)
    float_model = as_model(model, layout, prefix, node)
    defaults = _qgru.calibrate_defaults()
    session = _qgru.CalibrationSession(float_model, defaults["method"] if method is None else method,
                                       defaults["percentile"] if percentile is None else float(percentile),
                                       bool(exclude_zeros), int(max_samples), bool(batch_first))
    if lengths is not None and not isinstance(lengths, (list, tuple)):
        lengths = [lengths]
    count = 0
    for index, item in enumerate(data_items(data)):
        if not session.wants_more:
            break
        item_lengths = None
        if lengths is not None:
            if index >= len(lengths):
                raise _qgru.Error(f"lengths: {len(lengths)} lengths for more data items; give one per data item, "
                                  "in the same order")
            item_lengths = sequence_input(lengths[index])
        session.add(item, f"data[{index}]", item_lengths)
        count += 1
    if count == 0:
        raise _qgru.Error("no calibration data: data holds no array")
    if lengths is not None and len(lengths) != count and session.wants_more:
        raise _qgru.Error(f"lengths: {len(lengths)} lengths for {count} data items; give one per data item, "
                          "in the same order")
    return Statistics(session.finish())


def quantize(model, stats, config="int8", *, range_method=None, data=None, batch_first=None, search_sequences=None,
             search_evaluations=None, search_seconds=None, widening=True, layout="auto", prefix=None, node=None,
             scales=None):
    """Quantize a float GRU with its calibration statistics and a bit-width config.

    ``qgru quantize`` as a function: power-of-two shifts and zero points from the statistics' ranges, the
    derived rescale shifts, the sigmoid/tanh tables, and the proof that no intermediate can overflow its
    integer type (a config that could overflow is refused, naming the tensor).

    Args:
        model: as for ``calibrate`` (a ``torch.nn.GRU``/``GRUCell``, a state dict or a path).
        stats: ``qgru.Statistics`` or a path to a statistics JSON file.
        config: ``"int8"`` (the default), ``"int16-activations"``, ``"int16"``, or a path to a config JSON
            file (configs/README.md).
        range_method: one range method for every observed tensor, overriding the config's (``minmax``,
            ``ema``, ``kl``, ``percentile[:P]``, ``mse``, ``bounds``, each optionally ``+pow2``, or
            ``search``); default: the config's method per tensor, else the statistics'.
        data: for the range method ``search`` (docs/CALIBRATION.md, "The range search"): the calibration data
            to score candidate ranges on, as ``calibrate`` takes it (``batch_first`` likewise). The search's
            budget: ``search_sequences`` (held-in sequences, default 256), ``search_evaluations`` (default
            2000), ``search_seconds`` (default none), ``widening`` (also score each activation tensor at 16
            bits; the result is in the artifact's provenance).
        layout, prefix, node: as for ``calibrate``.
        scales: ``"pow2"`` or ``"multiplier"``, as ``qgru quantize --scales``: every tensor's scale kind; with
            ``"multiplier"`` (exact scales, every rescale a 32-bit multiplier: for CPUs and GPUs), tensors whose
            range method nobody named get ranges that fit exact scales (the int8 preset's EMA ranges clip, which
            powers of two hide; README "qgru quantize"). Default: the config's (the presets: powers of two).

    Returns:
        Artifact: run it (``run``, ``stream``), check it (``qgru.verify``), ``save`` it. Given the same
        inputs as files, its saved bytes are those of ``qgru quantize``.

    Raises:
        qgru.Error: the CLI's one-line message.

    Example:
        >>> artifact = qgru.quantize(gru, stats, config="int8")
        >>> y, h_n = artifact.run(x)
    """
    float_model = as_model(model, layout, prefix, node)
    if is_path(stats):
        stats = Statistics.load(stats)
    if not isinstance(stats, Statistics):
        raise _qgru.Error(f"stats: a {type(stats).__name__}, expected qgru.Statistics or a path")
    if batch_first is None:
        batch_first = torch_gru_batch_first(model)
    items = [] if data is None else list(data_items(data))
    options = _qgru.RangeSearchOptions()
    for name, value in (("max_sequences", search_sequences), ("max_evaluations", search_evaluations),
                        ("max_seconds", search_seconds)):
        if value is not None:
            setattr(options, name, value)
    options.suggest_widening = bool(widening)
    return Artifact(_qgru.quantize(float_model, stats._impl, os.fspath(config), range_method or "", items,
                                   bool(batch_first), options, scales or ""))


def load(path):
    """An artifact written by ``qgru quantize`` or ``Artifact.save`` (model.qgru.json, its tensor file beside
    it), read with every check the runtime makes (sha256, shapes, code ranges, the overflow proof)."""
    return Artifact(_qgru.load_artifact(os.fspath(path)))


def _figure(value):
    return float(value) if value in ("inf", "-inf", "nan") else value  # the JSON writes these as text


class Metrics:
    """Error figures of the integer model against the float one for one tensor: ``max_abs_error``,
    ``mean_abs_error``, ``nmse``, ``sqnr_db`` (dB), ``cosine`` and ``count``; ``per_step_sqnr_db`` by time step."""

    def __init__(self, figures):
        for key, value in figures.items():
            setattr(self, key, [_figure(v) for v in value] if isinstance(value, list) else _figure(value))

    def __repr__(self):
        return f"Metrics(sqnr_db={self.sqnr_db:.2f}, max_abs_error={self.max_abs_error:.6g}, cosine={self.cosine:.6f})"


class Report:
    """``qgru verify``'s comparison: the output, h_n and every intermediate tensor of every layer and
    direction, overall and per time step. ``report.output.sqnr_db`` (also ``report.sqnr_db``),
    ``report.h_n``, ``report.tensors`` (each with ``layer``, ``direction``, ``tensor``); ``str(report)`` is
    the CLI's table, ``to_dict()`` its ``--report`` JSON, ``to_html(path)`` its ``--html`` page."""

    def __init__(self, impl):
        self._impl = impl
        self._dict = json.loads(impl.to_json())
        self.T = self._dict["T"]
        self.N = self._dict["N"]
        self.output = Metrics(self._dict["output"])
        self.h_n = Metrics(self._dict["h_n"])
        self.tensors = [Metrics(entry) for entry in self._dict["tensors"]]

    sqnr_db = property(lambda self: self.output.sqnr_db, doc="SQNR of the output, dB.")
    max_abs_error = property(lambda self: self.output.max_abs_error)
    mean_abs_error = property(lambda self: self.output.mean_abs_error)
    nmse = property(lambda self: self.output.nmse)
    cosine = property(lambda self: self.output.cosine)

    def tensor(self, name, layer=0, direction=0):
        """The figures of one intermediate tensor, e.g. ``report.tensor("update_gate_output")``."""
        for entry in self.tensors:
            if entry.tensor == name and entry.layer == layer and entry.direction == direction:
                return entry
        raise KeyError(f"no tensor {name!r} at layer {layer}, direction {direction}")

    def to_dict(self):
        """The JSON ``qgru verify --report`` writes, as a dict (non-finite figures as the strings "inf", "-inf")."""
        return json.loads(self._impl.to_json())

    def to_json(self, path=None):
        """The JSON text; written (atomically) to ``path`` when given."""
        if path is not None:
            self._impl.write_json(os.fspath(path))
        return self._impl.to_json()

    def to_html(self, path, stats=None):
        """Write the self-contained HTML report (``qgru verify --html``); with ``stats`` (qgru.Statistics or a
        path) it also plots the calibrated histograms."""
        if is_path(stats):
            stats = Statistics.load(stats)
        self._impl.write_html(os.fspath(path), stats._impl if stats is not None else None)

    def table(self):
        return self._impl.table()

    __str__ = table

    def __repr__(self):
        return f"qgru.Report(T={self.T}, N={self.N}, output SQNR {self.sqnr_db:.2f} dB)"


def verify(model, artifact, data, *, h0=None, batch_first=None, lengths=None, layout="auto", prefix=None, node=None):
    """Run the float model and the integer artifact side by side and compare them tensor by tensor.

    ``qgru verify`` as a function. The integer run follows its own state (no teacher forcing), so the
    figures include the drift over time, as a deployment sees it.

    Args:
        model: the float model, as for ``calibrate``.
        artifact: a ``qgru.Artifact`` or a path to ``model.qgru.json``.
        data: inputs ``[T, N, C]`` float (``[N, T, C]`` with ``batch_first``): an array, a tensor or a path.
        h0: initial state ``[L*D, N, H]`` floats (default zeros).
        batch_first: as for ``calibrate``.
        lengths: sequence lengths ``[N]`` (an integer array or a path): padded steps are left out of every
            figure (``--lengths``).
        layout, prefix, node: as for ``calibrate``.

    Returns:
        Report: ``report.sqnr_db``, ``report.output.max_abs_error``, ``report.tensor("h")``..., ``to_html``.
    """
    if batch_first is None:
        batch_first = torch_gru_batch_first(model)
    float_model = as_model(model, layout, prefix, node)
    if is_path(artifact):
        artifact = load(artifact)
    if not isinstance(artifact, Artifact):
        raise _qgru.Error(f"artifact: a {type(artifact).__name__}, expected qgru.Artifact or a path")
    h0_input = None if h0 is None else sequence_input(h0)
    lengths_input = None if lengths is None else sequence_input(lengths)
    return Report(_qgru.verify(float_model, artifact._impl, sequence_input(data), "data", h0_input, "h0",
                               lengths_input, bool(batch_first)))
