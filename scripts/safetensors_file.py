"""Writing a safetensors file with NumPy alone (8-byte little-endian header length, JSON header padded to 8
bytes, raw little-endian bytes), for the scripts that make the repository's models and fixtures."""
import json
import struct

import numpy as np

DTYPE_NAMES = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("float16"): "F16",
               np.dtype("int64"): "I64"}


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: numpy array}. Names sorted, offsets contiguous, header padded to 8 bytes."""
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": DTYPE_NAMES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)
