"""Writing ONNX models with NumPy alone: the few protobuf fields a GRU graph uses (ModelProto, GraphProto,
NodeProto, AttributeProto, TensorProto), for the scripts that make the repository's models and corpus cases.
Readers check these files with libonnx-dev's protobuf classes (qgru) or onnxruntime (scripts/make_onnx_fixtures.py)."""
import struct

import numpy as np


def pb_varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def pb_field(number, value):
    """value: int (varint), float (fixed32), bytes/str (length-delimited)."""
    if isinstance(value, bool) or isinstance(value, int):
        return pb_varint(number << 3) + pb_varint(value)
    if isinstance(value, float):
        return pb_varint(number << 3 | 5) + struct.pack("<f", value)
    if isinstance(value, str):
        value = value.encode()
    return pb_varint(number << 3 | 2) + pb_varint(len(value)) + value


def onnx_tensor(name, array=None, dims=None, raw=None, external=None):
    """TensorProto: FLOAT from `array` (raw_data; INT64 when the array is int64), or `raw` bytes with `dims`, or
    external data entries."""
    dims = list(array.shape) if dims is None else dims
    int64 = array is not None and array.dtype == np.int64
    out = b"".join(pb_field(1, d) for d in dims) + pb_field(2, 7 if int64 else 1) + pb_field(8, name)
    if external is not None:
        out += b"".join(pb_field(13, pb_field(1, k) + pb_field(2, v)) for k, v in external) + pb_field(14, 1)
    elif raw is not None:
        out += pb_field(9, raw)
    else:
        out += pb_field(9, array.astype("<i8" if int64 else "<f4").tobytes())
    return out


def onnx_attr(name, value):
    if isinstance(value, int):
        return pb_field(1, name) + pb_field(3, value) + pb_field(20, 2)
    if isinstance(value, float):
        return pb_field(1, name) + pb_field(2, value) + pb_field(20, 1)
    if isinstance(value, str):
        return pb_field(1, name) + pb_field(4, value) + pb_field(20, 3)
    # lists (AttributeProto: floats = 7, ints = 8, strings = 9; type FLOATS = 6, INTS = 7, STRINGS = 8)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value) and value:
        return pb_field(1, name) + b"".join(pb_field(8, v & ((1 << 64) - 1)) for v in value) + pb_field(20, 7)
    if all(isinstance(v, float) for v in value) and value:
        return pb_field(1, name) + b"".join(pb_field(7, v) for v in value) + pb_field(20, 6)
    return pb_field(1, name) + b"".join(pb_field(9, v) for v in value) + pb_field(20, 8)


def onnx_node(op, inputs, outputs, name, attrs=()):
    return (b"".join(pb_field(1, i) for i in inputs) + b"".join(pb_field(2, o) for o in outputs) + pb_field(3, name) +
            pb_field(4, op) + b"".join(pb_field(5, onnx_attr(k, v)) for k, v in attrs))


def float_tensor_type(dims):
    """TypeProto of a FLOAT tensor; dims: ints (dim_value) or strings (dim_param)."""
    dim = lambda d: pb_field(2 if isinstance(d, str) else 1, d)  # noqa: E731
    shape = b"".join(pb_field(1, dim(d)) for d in dims)
    return pb_field(1, pb_field(1, 1) + pb_field(2, shape))


def onnx_model(nodes, initializers, inputs=("x",), outputs=("Y",), producer="scripts/make_corpus.py", opset=14,
               shapes=None):
    """shapes: {input or output name: dims} declares those as FLOAT tensors of that shape (what onnx.checker and
    onnxruntime ask for; the corpus leaves the types out, which qgru does not read)."""
    typed = lambda name: pb_field(2, float_tensor_type(shapes[name])) if shapes and name in shapes else b""  # noqa: E731
    graph = (b"".join(pb_field(1, n) for n in nodes) + pb_field(2, "g") + b"".join(pb_field(5, t) for t in initializers) +
             b"".join(pb_field(11, pb_field(1, i) + typed(i)) for i in inputs) +
             b"".join(pb_field(12, pb_field(1, o) + typed(o)) for o in outputs))
    return pb_field(1, 7) + pb_field(2, producer) + pb_field(7, graph) + pb_field(8, pb_field(2, opset))


def _pb_fields(data):
    """(field number, wire type, value) of one protobuf message: ints for varints, bytes for the rest."""
    at = 0
    while at < len(data):
        key, at = _pb_read_varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _pb_read_varint(data, at)
        elif wire == 2:
            length, at = _pb_read_varint(data, at)
            value, at = data[at:at + length], at + length
        elif wire == 5:
            value, at = data[at:at + 4], at + 4
        elif wire == 1:
            value, at = data[at:at + 8], at + 8
        else:
            raise ValueError(f"protobuf wire type {wire} not expected here")
        yield number, wire, value


def _pb_read_varint(data, at):
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def read_onnx_initializers(path):
    """{name: numpy array} of a model's FLOAT / INT64 initializers stored as raw_data (what onnx_model writes)."""
    with open(path, "rb") as f:
        model = f.read()
    graph = next(v for n, w, v in _pb_fields(model) if n == 7)
    arrays = {}
    for number, _, tensor in _pb_fields(graph):
        if number != 5:
            continue
        dims, dtype, name, raw = [], None, None, None
        for n, _, v in _pb_fields(tensor):
            if n == 1:
                dims.append(v)
            elif n == 2:
                dtype = {1: "<f4", 7: "<i8"}.get(v)
            elif n == 8:
                name = v.decode()
            elif n == 9:
                raw = v
        if dtype is None or raw is None:
            raise ValueError(f"{path}: initializer {name} is not FLOAT or INT64 raw_data")
        arrays[name] = np.frombuffer(raw, dtype=dtype).reshape(dims)
    return arrays
