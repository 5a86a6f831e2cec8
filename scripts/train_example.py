#!/usr/bin/env python3
"""Train the bundled example: a GRU classifier of scikit-learn's digits (examples/digits/).

Data: sklearn.datasets.load_digits (1797 8x8 images of handwritten digits, shipped inside scikit-learn,
no download). Each image is read as a sequence of T = 8 rows of C = 8 pixels, scaled from 0..16 to [0, 1].
A fixed permutation (seed 0) splits it into 1200 training and 597 held-out test images.

Model: nn.GRU(8, 64, 1 layer) and a linear head (64 -> 10) on the last hidden state.

Writes examples/digits/:
  gru.safetensors   the GRU under the prefix "gru." (PyTorch names) plus head.weight [10, 64], head.bias [10]
  calib.npy         [8, 1000, 8] float32: the first 1000 training images (calibration data)
  test.npy          [8, 597, 8] float32: the held-out images
  test_labels.npy   [597] int64
and prints the float test accuracy. Needs torch; run by hand (a few seconds on a CPU):
    /usr/bin/python3 scripts/train_example.py
"""
import os
import sys

import numpy as np
import torch
from sklearn.datasets import load_digits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_file import write_safetensors  # noqa: E402  (the hand-written safetensors writer)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "examples", "digits")
HIDDEN = 64
EPOCHS = 40


class DigitGru(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(8, HIDDEN, num_layers=1)
        self.head = torch.nn.Linear(HIDDEN, 10)

    def forward(self, x):  # x [T, N, 8]
        y, _ = self.gru(x)
        return self.head(y[-1])


def sequences(images):
    """[N, 64] pixels 0..16 -> [T=8, N, C=8] float32 in [0, 1] (row t of the image is step t)."""
    return np.ascontiguousarray((images.reshape(-1, 8, 8) / 16.0).astype(np.float32).transpose(1, 0, 2))


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    digits = load_digits()
    order = np.random.RandomState(0).permutation(len(digits.target))
    train_idx, test_idx = order[:1200], order[1200:]
    x_train = sequences(digits.data[train_idx])
    y_train = digits.target[train_idx].astype(np.int64)
    x_test = sequences(digits.data[test_idx])
    y_test = digits.target[test_idx].astype(np.int64)

    model = DigitGru()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    generator = torch.Generator().manual_seed(0)
    for epoch in range(EPOCHS):
        batches = torch.randperm(len(y_train), generator=generator).split(64)
        for batch in batches:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt[:, batch]), yt[batch])
            loss.backward()
            optimizer.step()
        if epoch % 10 == 9:
            print(f"epoch {epoch + 1}: loss {loss.item():.4f}", file=sys.stderr)

    with torch.no_grad():
        train_accuracy = (model(xt).argmax(1) == yt).float().mean().item()
        test_accuracy = (model(torch.from_numpy(x_test)).argmax(1).numpy() == y_test).mean()

    os.makedirs(OUT, exist_ok=True)
    tensors = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    write_safetensors(os.path.join(OUT, "gru.safetensors"), tensors,
                      {"source": "scripts/train_example.py", "data": "sklearn.datasets.load_digits",
                       "float_test_accuracy": f"{test_accuracy:.4f}"})
    np.save(os.path.join(OUT, "calib.npy"), np.ascontiguousarray(x_train[:, :1000]))
    np.save(os.path.join(OUT, "test.npy"), x_test)
    np.save(os.path.join(OUT, "test_labels.npy"), y_test)
    print(f"train accuracy {train_accuracy:.4f}, float test accuracy {test_accuracy:.4f} "
          f"({int(round(test_accuracy * len(y_test)))}/{len(y_test)})")


if __name__ == "__main__":
    main()
