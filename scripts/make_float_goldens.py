#!/usr/bin/env python3
"""Write the float GRU goldens under test/data/golden/<case>/ from torch.nn.GRU (fixed seeds).

Each case folder holds:
  model.safetensors  the weights (PyTorch nn.GRU / nn.GRUCell state_dict names, haste's W, R, bx, br, or
                     haste_pytorch.GRU's kernel, recurrent_kernel, bias, recurrent_bias)
  x.npy              input, [T, N, C] ([N, T, C] when case.json says batch_first)
  h0.npy             initial state [L*D, N, H] (only when the case uses one)
  y.npy              torch's output ([T, N, D*H], or [N, T, D*H] when batch_first)
  hn.npy             torch's final state [L*D, N, H]
  case.json          {"batch_first": bool, "layout": "auto" | "pytorch" | "haste", "description": str}

The safetensors files are written by hand (8-byte little-endian header length, JSON header, raw
little-endian bytes), so the script needs torch and numpy only. Run it by hand; its outputs are committed:
    /usr/bin/python3 scripts/make_float_goldens.py
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_file import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "test", "data", "golden")

HASTE_MODULE_NAMES = {"W": "kernel", "R": "recurrent_kernel", "bx": "bias", "br": "recurrent_bias"}


def to_haste(state, num_layers, bidirectional, module_names=False):
    """PyTorch weight_ih [3H, C] (gates r, z, n) -> haste W [C, 3H] (gates z, r, n); same for R and biases."""
    def reorder(t):  # along the 3H axis (axis 0): r, z, n -> z, r, n
        r, z, n = np.split(t, 3, axis=0)
        return np.concatenate([z, r, n], axis=0)

    # haste's C++ names (W, R, bx, br) or haste_pytorch.GRU's parameter names for the same tensors.
    names = HASTE_MODULE_NAMES if module_names else {k: k for k in HASTE_MODULE_NAMES}
    out = {}
    for layer in range(num_layers):
        for direction in range(2 if bidirectional else 1):
            pt = f"_l{layer}" + ("_reverse" if direction else "")
            hs = "" if (num_layers == 1 and not bidirectional) else f"_l{layer}"
            hs += "_reverse" if direction else ""
            out[names["W"] + hs] = reorder(state["weight_ih" + pt]).T.copy()
            out[names["R"] + hs] = reorder(state["weight_hh" + pt]).T.copy()
            out[names["bx"] + hs] = reorder(state["bias_ih" + pt])
            out[names["br"] + hs] = reorder(state["bias_hh" + pt])
    return out


def make_case(name, description, C, H, T, N, num_layers=1, bidirectional=False, batch_first=False,
              use_h0=False, bias=True, layout="pytorch", prefix="", extra=None, weight_dtype=np.float32, seed=0):
    torch.manual_seed(seed)
    gru = torch.nn.GRU(C, H, num_layers=num_layers, bias=bias, batch_first=batch_first,
                       bidirectional=bidirectional)
    state = {k: v.detach().numpy().astype(np.float32) for k, v in gru.state_dict().items()}
    if weight_dtype != np.float32:
        # Store in the narrower dtype and run torch on exactly the stored values.
        state = {k: v.astype(weight_dtype) for k, v in state.items()}
        with torch.no_grad():
            for k, v in gru.named_parameters():
                v.copy_(torch.from_numpy(state[k].astype(np.float32)))
    D = 2 if bidirectional else 1
    x = torch.randn((N, T, C) if batch_first else (T, N, C), dtype=torch.float32)
    h0 = torch.randn(num_layers * D, N, H, dtype=torch.float32) * 0.5 if use_h0 else None
    with torch.no_grad():
        y, hn = gru(x, h0) if use_h0 else gru(x)

    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    if layout == "pytorch":
        tensors = state
    else:
        tensors = to_haste(state, num_layers, bidirectional, module_names=layout == "haste_module")
    tensors = {prefix + k: v for k, v in tensors.items()}
    tensors.update(extra or {})
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors, {"case": name})
    np.save(os.path.join(folder, "x.npy"), x.numpy())
    if use_h0:
        np.save(os.path.join(folder, "h0.npy"), h0.numpy())
    elif os.path.exists(os.path.join(folder, "h0.npy")):
        os.remove(os.path.join(folder, "h0.npy"))
    np.save(os.path.join(folder, "y.npy"), y.numpy())
    np.save(os.path.join(folder, "hn.npy"), hn.numpy())
    with open(os.path.join(folder, "case.json"), "w") as f:
        json.dump({"batch_first": batch_first, "layout": "auto", "description": description}, f, indent=2)
        f.write("\n")
    print(f"{name}: C={C} H={H} T={T} N={N} L={num_layers} D={D} -> {folder}", file=sys.stderr)


def make_cell_case(name, description, C, H, T, N, seed):
    """nn.GRUCell stepped over time by hand: names weight_ih, weight_hh, bias_ih, bias_hh (no _l0)."""
    torch.manual_seed(seed)
    cell = torch.nn.GRUCell(C, H)
    x = torch.randn(T, N, C, dtype=torch.float32)
    h = torch.zeros(N, H)
    steps = []
    with torch.no_grad():
        for t in range(T):
            h = cell(x[t], h)
            steps.append(h)
    y = torch.stack(steps)
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    tensors = {"cell." + k: v.detach().numpy() for k, v in cell.state_dict().items()}
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors, {"case": name})
    np.save(os.path.join(folder, "x.npy"), x.numpy())
    np.save(os.path.join(folder, "y.npy"), y.numpy())
    np.save(os.path.join(folder, "hn.npy"), h.unsqueeze(0).numpy())
    with open(os.path.join(folder, "case.json"), "w") as f:
        json.dump({"batch_first": False, "layout": "auto", "description": description}, f, indent=2)
        f.write("\n")
    print(f"{name}: GRUCell C={C} H={H} T={T} N={N} -> {folder}", file=sys.stderr)


def main():
    torch.set_num_threads(1)
    make_case("one_layer", "nn.GRU(5, 8), one layer", C=5, H=8, T=6, N=3, seed=1)
    make_case("two_layers", "nn.GRU(5, 8, num_layers=2)", C=5, H=8, T=5, N=2, num_layers=2, seed=2)
    make_case("bidirectional", "nn.GRU(4, 6, bidirectional=True)", C=4, H=6, T=5, N=3, bidirectional=True, seed=3)
    make_case("two_layers_bidirectional", "nn.GRU(4, 7, num_layers=2, bidirectional=True)", C=4, H=7, T=4, N=2,
              num_layers=2, bidirectional=True, seed=4)
    make_case("batch_first", "nn.GRU(3, 5, batch_first=True): x and y are [N, T, .]", C=3, H=5, T=4, N=3,
              batch_first=True, seed=5)
    make_case("h0", "nn.GRU(4, 6, num_layers=2) with a non-zero h0", C=4, H=6, T=5, N=2, num_layers=2,
              use_h0=True, seed=6)
    make_case("hidden_1", "nn.GRU(3, 1): H = 1", C=3, H=1, T=7, N=2, seed=7)
    make_case("hidden_31", "nn.GRU(6, 31): H = 31", C=6, H=31, T=4, N=2, seed=8)
    make_case("hidden_33", "nn.GRU(6, 33, bidirectional=True, with h0): H = 33", C=6, H=33, T=3, N=2,
              bidirectional=True, use_h0=True, seed=9)
    make_case("single_step", "nn.GRU(5, 8, num_layers=2): T = 1", C=5, H=8, T=1, N=4, num_layers=2, seed=10)
    make_case("haste_layout", "nn.GRU(4, 6) stored as haste W [C, 3H], R [H, 3H], bx, br (gates z, r, n)",
              C=4, H=6, T=5, N=2, layout="haste", seed=11)
    make_case("haste_two_layers_bidirectional", "nn.GRU(3, 4, 2 layers, bidirectional) as haste W_l{k}[_reverse]",
              C=3, H=4, T=3, N=2, num_layers=2, bidirectional=True, layout="haste", seed=12)
    make_case("prefix_no_bias", "nn.GRU(4, 6, bias=False) under 'encoder.rnn.' beside a linear head", C=4, H=6,
              T=5, N=2, bias=False, prefix="encoder.rnn.",
              extra={"head.weight": np.ones((3, 6), np.float32), "head.bias": np.zeros(3, np.float32)}, seed=13)
    make_case("f16_weights", "nn.GRU(4, 8) with weights stored as F16", C=4, H=8, T=4, N=2,
              weight_dtype=np.float16, seed=14)
    make_case("f64_weights", "nn.GRU(4, 8, bidirectional=True) with weights stored as F64", C=4, H=8, T=4, N=2,
              bidirectional=True, weight_dtype=np.float64, seed=15)
    make_case("haste_module_names", "nn.GRU(5, 7) as haste_pytorch.GRU parameters (kernel, recurrent_kernel, bias, "
              "recurrent_bias) under 'rnn.'", C=5, H=7, T=4, N=2, layout="haste_module", prefix="rnn.",
              extra={"head.weight": np.ones((2, 7), np.float32), "head.bias": np.zeros(2, np.float32)}, seed=17)
    make_cell_case("gru_cell", "nn.GRUCell(4, 6) under 'cell.', stepped over T = 5 by hand", C=4, H=6, T=5, N=3,
                   seed=16)


if __name__ == "__main__":
    main()
