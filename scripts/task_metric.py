#!/usr/bin/env python3
"""Task metric of a model of test/data/models/ from a qgru output (numpy only).

    task_metric.py MODEL_DIR OUTPUT.npy

MODEL_DIR holds gru.safetensors (the GRU and its linear head: head.weight, head.bias; a model whose GRU is ONNX
names its head file in model.json's "head") and model.json (scripts/train_models.py): "task" classify or regress, "pool" how the head reads the output [T, N, D*H]
(last: y[T-1]; mean: the mean over time; each: every step), the label or target file. OUTPUT is what
`qgru run` wrote on the model's test inputs (float or dequantized integer). Prints one line:
"accuracy 0.9648 (576/597)" or "r2 0.9797" (R² = 1 - Σ(pred - target)² / Σ(target - mean)², mean per output).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from example_accuracy import read_safetensors  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("output", help="qgru run output .npy, [T, N, D*H]")
    args = parser.parse_args()
    with open(os.path.join(args.model_dir, "model.json")) as f:
        manifest = json.load(f)
    head = read_safetensors(os.path.join(args.model_dir, manifest.get("head", "gru.safetensors")), ["head.weight", "head.bias"])
    weight, bias = head["head.weight"].astype(np.float64), head["head.bias"].astype(np.float64)
    y = np.load(args.output).astype(np.float64)
    if y.ndim != 3 or y.shape[2] != weight.shape[1]:
        sys.exit(f"task_metric: {args.output}: expected [T, N, {weight.shape[1]}], got {list(y.shape)}")
    feature = {"last": lambda: y[-1], "mean": lambda: y.mean(0), "each": lambda: y}[manifest["pool"]]()
    prediction = feature @ weight.T + bias
    if manifest["task"] == "classify":
        labels = np.load(os.path.join(args.model_dir, manifest["labels"]))
        correct = int((prediction.argmax(-1) == labels).sum())
        print(f"accuracy {correct / len(labels):.4f} ({correct}/{len(labels)})")
    else:
        target = np.load(os.path.join(args.model_dir, manifest["targets"])).astype(np.float64)
        residual = ((prediction - target) ** 2).sum()
        total = ((target - target.mean((0, 1))) ** 2).sum()
        print(f"r2 {1 - residual / total:.4f}")


if __name__ == "__main__":
    main()
