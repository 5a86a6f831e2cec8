#!/usr/bin/env python3
"""ONNX GRU fixtures for qgru's importer tests, and onnxruntime's outputs for them.

Builds small GRU graphs the way exporters write them (PyTorch's torch.onnx.export: GRU nodes chained through
Squeeze, or Transpose + Reshape for two directions; Keras-style linear_before_reset = 0 cells), runs each in
onnxruntime and writes, per case, into test/data/onnx/<case>/:
    model.onnx             the graph (weights as initializers; `external` keeps them in weights.bin)
    x.npy                  input [T, N, C] float32
    lengths.npy            (cases with sequence_lens) int64 [N]
    y.npy, h_n.npy         onnxruntime's output [T, N, D*H] and final states [L*D, N, H] (float32)
The C++ tests compare qgru's float GRU with y.npy / h_n.npy (tolerance 1e-5), so they need no Python.

    scripts/make_onnx_fixtures.py [--out test/data/onnx] [--python-venv /tmp/qgru-onnx-venv]

Needs onnx, onnxruntime and numpy: run with a python that has them, or let the script make the private venv
(scripts/onnx_venv.py: python3 -m venv --system-site-packages, pip install onnx onnxruntime).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_venv import DEFAULT_VENV as VENV, run_with_onnx  # noqa: E402


def build(case, spec, out_dir):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import onnxruntime as ort

    rng = np.random.RandomState(spec["seed"])
    C, H, L, D, T, N = spec["C"], spec["H"], spec["L"], spec["D"], spec["T"], spec["N"]
    lbr = spec["lbr"]
    opset = spec.get("opset", 14)
    direction = "bidirectional" if D == 2 else "forward"
    k = 1.0 / np.sqrt(H)
    inits, nodes = [], []
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, N, C])]
    if spec.get("lengths"):
        graph_inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [N]))
    outputs = []
    current = "x"
    for l in range(L):
        c_in = C if l == 0 else D * H
        W = rng.uniform(-k, k, (D, 3 * H, c_in)).astype(np.float32)
        R = rng.uniform(-k, k, (D, 3 * H, H)).astype(np.float32)
        B = rng.uniform(-k, k, (D, 6 * H)).astype(np.float32)
        inits += [numpy_helper.from_array(W, f"W{l}"), numpy_helper.from_array(R, f"R{l}")]
        inputs = [current, f"W{l}", f"R{l}"]
        if spec.get("bias", True):
            inits.append(numpy_helper.from_array(B, f"B{l}"))
            inputs.append(f"B{l}")
        else:
            inputs.append("")
        inputs.append("sequence_lens" if spec.get("lengths") else "")
        attrs = dict(hidden_size=H, direction=direction)
        if lbr is not None:
            attrs["linear_before_reset"] = lbr
        nodes.append(helper.make_node("GRU", inputs, [f"Y{l}", f"Y_h{l}"], name=f"/rnn/GRU_{l}", **attrs))
        outputs.append(helper.make_tensor_value_info(f"Y_h{l}", TensorProto.FLOAT, [D, N, H]))
        # Layer output [T, D, N, H] -> [T, N, D*H], as PyTorch's exporter writes it, or another spelling.
        if l + 1 < L and spec.get("link"):
            link_nodes, link_inits = LINKS[spec["link"]](l, T, N, D, H)
            nodes += link_nodes
            inits += [numpy_helper.from_array(np.array(v, dtype=np.int64), name) for name, v in link_inits]
        elif D == 1:
            if opset >= 13:
                inits.append(numpy_helper.from_array(np.array([1], dtype=np.int64), f"axes{l}"))
                nodes.append(helper.make_node("Squeeze", [f"Y{l}", f"axes{l}"], [f"out{l}"], name=f"/rnn/Squeeze_{l}"))
            else:
                nodes.append(helper.make_node("Squeeze", [f"Y{l}"], [f"out{l}"], axes=[1], name=f"/rnn/Squeeze_{l}"))
        else:
            nodes.append(helper.make_node("Transpose", [f"Y{l}"], [f"tr{l}"], perm=[0, 2, 1, 3], name=f"/rnn/Transpose_{l}"))
            inits.append(numpy_helper.from_array(np.array([0, 0, -1], dtype=np.int64), f"shape{l}"))
            nodes.append(helper.make_node("Reshape", [f"tr{l}", f"shape{l}"], [f"out{l}"], name=f"/rnn/Reshape_{l}"))
        current = f"out{l}"
    outputs.insert(0, helper.make_tensor_value_info(current, TensorProto.FLOAT, [T, N, D * H]))
    graph = helper.make_graph(nodes, case, graph_inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="qgru fixtures")
    model.ir_version = 7
    onnx.checker.check_model(model)

    folder = os.path.join(out_dir, case)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    if spec.get("external"):
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
                        size_threshold=64)  # the small shape tensors stay inline
    else:
        onnx.save_model(model, path)

    x = rng.normal(0, 1.0, (T, N, C)).astype(np.float32)
    feeds = {"x": x}
    if spec.get("lengths"):
        lengths = np.array(spec["lengths"], dtype=np.int32)
        feeds["sequence_lens"] = lengths
        np.save(os.path.join(folder, "lengths.npy"), lengths.astype(np.int64))
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    results = session.run(None, feeds)
    np.save(os.path.join(folder, "x.npy"), x)
    np.save(os.path.join(folder, "y.npy"), results[0].astype(np.float32))
    np.save(os.path.join(folder, "h_n.npy"), np.concatenate(results[1:], axis=0).astype(np.float32))
    print(f"{case}: C={C} H={H} L={L} D={D} T={T} N={N} linear_before_reset={lbr} -> {folder}")


def _node(op, inputs, output, name, **attrs):
    from onnx import helper
    return helper.make_node(op, inputs, [output], name=name, **attrs)


# Other spellings of the link between layers l and l + 1 (Y{l} [T, D, N, H] -> out{l} [T, N, D*H]), each one
# onnxruntime runs as the plain stacked GRU: (nodes, [(initializer name, int64 values)]).
LINKS = {
    # One direction, Transpose + Reshape to a constant [T, N, H] (the bidirectional idiom with D = 1).
    "transpose_reshape_constant": lambda l, T, N, D, H: (
        [_node("Transpose", [f"Y{l}"], f"tr{l}", f"/link/Transpose_{l}", perm=[0, 2, 1, 3]),
         _node("Reshape", [f"tr{l}", f"shape{l}"], f"out{l}", f"/link/Reshape_{l}")],
        [(f"shape{l}", [T, N, D * H])]),
    # One Reshape with a -1 for N: [T, 1, N, H] -> [0, -1, H].
    "reshape_minus_one": lambda l, T, N, D, H: (
        [_node("Reshape", [f"Y{l}", f"shape{l}"], f"out{l}", f"/link/Reshape_{l}")],
        [(f"shape{l}", [0, -1, D * H])]),
    # Squeeze, Identity, Unsqueeze at the front, Squeeze it again (opset 13 axes inputs).
    "squeeze_identity_unsqueeze": lambda l, T, N, D, H: (
        [_node("Squeeze", [f"Y{l}", f"axes1_{l}"], f"sq{l}", f"/link/Squeeze_{l}"),
         _node("Identity", [f"sq{l}"], f"id{l}", f"/link/Identity_{l}"),
         _node("Unsqueeze", [f"id{l}", f"axes0_{l}"], f"un{l}", f"/link/Unsqueeze_{l}"),
         _node("Squeeze", [f"un{l}", f"axes0_{l}"], f"out{l}", f"/link/Squeeze2_{l}")],
        [(f"axes1_{l}", [1]), (f"axes0_{l}", [0])]),
    # Two directions: Transpose, Flatten to [T*N, 2H], Reshape to a constant N with T from -1.
    "bidir_flatten_reshape": lambda l, T, N, D, H: (
        [_node("Transpose", [f"Y{l}"], f"tr{l}", f"/link/Transpose_{l}", perm=[0, 2, 1, 3]),
         _node("Flatten", [f"tr{l}"], f"fl{l}", f"/link/Flatten_{l}", axis=2),
         _node("Reshape", [f"fl{l}", f"shape{l}"], f"out{l}", f"/link/Reshape_{l}")],
        [(f"shape{l}", [-1, N, D * H])]),
    # Two directions: Transpose to [N, T, D, H], Reshape to [N, T, D*H] with 0s, Transpose back to time-major.
    "bidir_batch_major_detour": lambda l, T, N, D, H: (
        [_node("Transpose", [f"Y{l}"], f"tr{l}", f"/link/Transpose_{l}", perm=[2, 0, 1, 3]),
         _node("Reshape", [f"tr{l}", f"shape{l}"], f"rs{l}", f"/link/Reshape_{l}"),
         _node("Transpose", [f"rs{l}"], f"out{l}", f"/link/Transpose2_{l}", perm=[1, 0, 2])],
        [(f"shape{l}", [0, 0, -1])]),
}

CASES = {
    # PyTorch nn.GRU(5, 7, num_layers=2) as exported: linear_before_reset = 1, Squeeze between layers (opset 14).
    "pytorch_l2": dict(seed=1, C=5, H=7, L=2, D=1, T=6, N=4, lbr=1),
    # nn.GRU(5, 7, num_layers=2, bidirectional=True): Transpose + Reshape between layers; weights in weights.bin.
    "pytorch_l2_bidir_external": dict(seed=2, C=5, H=7, L=2, D=2, T=6, N=4, lbr=1, external=True),
    # The ONNX default cell (linear_before_reset absent = 0), Keras reset_after=False; Squeeze with an axes
    # attribute (opset 11), no bias.
    "lbr0_l2_opset11": dict(seed=3, C=4, H=6, L=2, D=1, T=5, N=3, lbr=None, opset=11, bias=False),
    # linear_before_reset = 0, bidirectional, and a batch of unequal lengths fed as sequence_lens.
    "lbr0_bidir_lengths": dict(seed=4, C=3, H=5, L=1, D=2, T=7, N=4, lbr=0, lengths=[7, 3, 1, 5]),
    # linear_before_reset = 1, two layers, unequal lengths.
    "pytorch_l2_bidir_lengths": dict(seed=5, C=3, H=4, L=2, D=2, T=6, N=3, lbr=1, lengths=[2, 6, 4]),
    # Other spellings of the link between layers (LINKS), each a plain stacked GRU in onnxruntime.
    "link_transpose_reshape_constant": dict(seed=6, C=4, H=5, L=2, D=1, T=6, N=3, lbr=1,
                                            link="transpose_reshape_constant"),
    "link_reshape_minus_one": dict(seed=7, C=4, H=5, L=3, D=1, T=5, N=2, lbr=0, link="reshape_minus_one"),
    "link_squeeze_identity_unsqueeze": dict(seed=8, C=3, H=4, L=2, D=1, T=4, N=3, lbr=1,
                                            link="squeeze_identity_unsqueeze"),
    "link_bidir_flatten_reshape": dict(seed=9, C=3, H=4, L=2, D=2, T=5, N=2, lbr=1, link="bidir_flatten_reshape"),
    "link_bidir_batch_major_detour": dict(seed=10, C=3, H=4, L=2, D=2, T=4, N=3, lbr=0,
                                          link="bidir_batch_major_detour"),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "test", "data", "onnx"))
    parser.add_argument("--python-venv", default=VENV)
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="only these cases (repeatable)")
    args = parser.parse_args()
    run_with_onnx(args.python_venv)
    for case, spec in CASES.items():
        if not args.case or case in args.case:
            build(case, spec, args.out)


if __name__ == "__main__":
    main()
