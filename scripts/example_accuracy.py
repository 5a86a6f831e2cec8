#!/usr/bin/env python3
"""Accuracy of the digits example from a qgru output (numpy only).

    example_accuracy.py OUTPUT.npy [--model examples/digits/gru.safetensors]
                                   [--labels examples/digits/test_labels.npy]

OUTPUT is what `qgru run` wrote: [T, N, H] float (a float model's output, or a quantized model's
dequantized output). The last step y[T-1] goes through the linear head stored beside the GRU in the
safetensors file (head.weight [10, H], head.bias [10]); the prediction is the arg-max logit. Prints one
line: "accuracy 0.9799 (585/597)".
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1"}


def read_safetensors(path, names):
    """The named tensors of a safetensors file, as numpy arrays."""
    with open(path, "rb") as f:
        raw = f.read()
    (header_length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + header_length])
    data = raw[8 + header_length:]
    out = {}
    for name in names:
        if name not in header:
            sys.exit(f"example_accuracy: {path}: tensor '{name}' missing")
        entry = header[name]
        if entry["dtype"] not in DTYPES:
            sys.exit(f"example_accuracy: {path}: tensor '{name}': dtype {entry['dtype']} not supported here")
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="qgru run output .npy, [T, N, H]")
    parser.add_argument("--model", default=os.path.join(ROOT, "examples", "digits", "gru.safetensors"))
    parser.add_argument("--labels", default=os.path.join(ROOT, "examples", "digits", "test_labels.npy"))
    args = parser.parse_args()

    y = np.load(args.output)
    labels = np.load(args.labels)
    head = read_safetensors(args.model, ["head.weight", "head.bias"])
    weight = head["head.weight"].astype(np.float64)
    bias = head["head.bias"].astype(np.float64)
    if y.ndim != 3 or y.shape[1] != labels.shape[0] or y.shape[2] != weight.shape[1]:
        sys.exit(f"example_accuracy: {args.output}: expected [T, {labels.shape[0]}, {weight.shape[1]}], "
                 f"got {list(y.shape)}")
    logits = y[-1].astype(np.float64) @ weight.T + bias
    correct = int((logits.argmax(axis=1) == labels).sum())
    print(f"accuracy {correct / len(labels):.4f} ({correct}/{len(labels)})")


if __name__ == "__main__":
    main()
