#!/usr/bin/env python3
"""Writes the small NumPy and safetensors files under test/data/io/ that the io unit tests read.

The arrays are written by NumPy itself (np.save, np.savez, np.lib.format.write_array), so the tests check
qgru's readers against files another implementation produced. expected.json records, for every fixture,
the dtype, shape and values the script wrote (floats as exact decimal reprs, fp16/bf16 as bit patterns),
so the tests compare against what was meant, not against qgru's own output.

Usage: /usr/bin/python3 scripts/make_io_fixtures.py   (needs numpy only; run by hand, outputs committed)
"""
import io
import json
import os
import struct

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "data", "io")


def describe(arr):
    """dtype (qgru name), shape and values of an array, exactly."""
    names = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64", "int32": "I32",
             "int16": "I16", "int8": "I8", "uint8": "U8"}
    entry = {"dtype": names[arr.dtype.name], "shape": list(arr.shape)}
    flat = np.ascontiguousarray(arr).reshape(-1)
    if arr.dtype == np.float16:
        entry["bits"] = [int(b) for b in flat.view(np.uint16)]
    elif arr.dtype.kind == "f":
        entry["values"] = [float(v) for v in flat]  # float64 repr: exact for f4 and f8
    else:
        entry["values"] = [int(v) for v in flat]
    return entry


def write_array_version(path, arr, version):
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version)


def safetensors_bytes(tensors, metadata):
    """A safetensors file built by hand from the format description: header padded to 8 bytes."""
    header, data, offset = {}, b"", 0
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    header["__metadata__"] = metadata
    text = json.dumps(header).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240601)
    expected = {}

    # .npy versions 1.0, 2.0, 3.0.
    v1 = (rng.standard_normal((2, 3)) * 10).astype(np.float32)
    np.save(os.path.join(OUT, "v1_f32.npy"), v1)
    expected["v1_f32.npy"] = describe(v1)
    v2 = rng.integers(-32768, 32767, size=(3, 2, 2), dtype=np.int16)
    write_array_version(os.path.join(OUT, "v2_i16.npy"), v2, (2, 0))
    expected["v2_i16.npy"] = describe(v2)
    v3 = np.array([np.iinfo(np.int64).min, -1, 0, 1, np.iinfo(np.int64).max], dtype=np.int64)
    write_array_version(os.path.join(OUT, "v3_i64.npy"), v3, (3, 0))
    expected["v3_i64.npy"] = describe(v3)

    # float16 with its edge values: signed zeros, smallest subnormal, largest finite, infinities, NaN.
    f16 = np.array([0.0, -0.0, 6e-8, 65504.0, -65504.0, np.inf, -np.inf, np.nan, 1.0 / 3.0, -2.5],
                   dtype=np.float16)
    np.save(os.path.join(OUT, "f16.npy"), f16)
    expected["f16.npy"] = describe(f16)

    # A 0-d array and an empty one.
    scalar = np.array(3.25, dtype=np.float64)
    np.save(os.path.join(OUT, "scalar_f64.npy"), scalar)
    expected["scalar_f64.npy"] = describe(scalar)

    # An .npz of several dtypes (np.savez: stored members, ZIP64 extra fields in the local headers).
    members = {
        "weights": (rng.standard_normal((4, 3))).astype(np.float32),
        "codes": rng.integers(-128, 127, size=(5,), dtype=np.int8),
        "bytes": np.arange(0, 256, 51, dtype=np.uint8),
        "counts": rng.integers(-2**31, 2**31 - 1, size=(2, 2), dtype=np.int32),
        "precise": rng.standard_normal((3,)).astype(np.float64),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    np.savez(os.path.join(OUT, "arrays.npz"), **members)
    for key, arr in members.items():
        expected["arrays.npz:" + key] = describe(arr)
    single = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.savez(os.path.join(OUT, "single.npz"), only=single)
    expected["single.npz"] = describe(single)

    # Files qgru must refuse.
    np.save(os.path.join(OUT, "fortran.npy"), np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    np.save(os.path.join(OUT, "bigendian.npy"), np.arange(4, dtype=">f4"))
    np.save(os.path.join(OUT, "bool.npy"), np.array([True, False]))
    np.save(os.path.join(OUT, "uint16.npy"), np.arange(3, dtype=np.uint16))
    np.savez_compressed(os.path.join(OUT, "compressed.npz"), x=np.arange(100, dtype=np.float32))

    # A safetensors file made by hand (no safetensors package): F32, I8 and BF16, with metadata.
    f32 = np.array([[1.5, -2.0, 3.25], [0.0, -0.0, 1e-30]], dtype=np.float32)
    i8 = np.array([-128, -1, 0, 127], dtype=np.int8)
    bf16_bits = np.array([0x3F80, 0xC000, 0x7F80, 0x0001], dtype=np.uint16)  # 1, -2, inf, smallest subnormal
    tensors = {
        "layer.weight": ("F32", [2, 3], f32.tobytes()),
        "layer.codes": ("I8", [4], i8.tobytes()),
        "layer.bf16": ("BF16", [2, 2], bf16_bits.tobytes()),
    }
    metadata = {"format": "pt", "note": "hand-made"}
    with open(os.path.join(OUT, "hand_made.safetensors"), "wb") as f:
        f.write(safetensors_bytes(tensors, metadata))
    expected["hand_made.safetensors:layer.weight"] = describe(f32)
    expected["hand_made.safetensors:layer.codes"] = describe(i8)
    expected["hand_made.safetensors:layer.bf16"] = {"dtype": "BF16", "shape": [2, 2],
                                                    "bits": [int(b) for b in bf16_bits]}
    expected["hand_made.safetensors:__metadata__"] = metadata

    with open(os.path.join(OUT, "expected.json"), "w") as f:
        lines = ["  %s: %s" % (json.dumps(key), json.dumps(expected[key])) for key in sorted(expected)]
        f.write("{\n" + ",\n".join(lines) + "\n}\n")


if __name__ == "__main__":
    main()
