#!/usr/bin/env python3
"""docs/FIXED_POINT.md §3's worked example: one element of one step, every quantity of B-1, B-2 and C-1..C-4
written out with the numbers of an artifact, as Markdown.

    worked_example.py --artifact int8.qgru.json --golden golden.safetensors [--cell l0.d0] --t 1 --n 0 --j 5

Each value is computed here from the artifact's parameters and the golden vectors' inputs of the step (q_x[t, n],
q_h_prev[t, n]) by the formulas of §3, in Python integers, and must equal the golden vectors' own value (qgru's
executor); a difference stops the script (exit 1). The artifact's gates must be tables (the int8 preset).
Needs NumPy.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from example_accuracy import read_safetensors  # noqa: E402


def rshift_round(v, s):
    """v · 2^-s rounded half away from zero (docs/FIXED_POINT.md §1)."""
    if s <= 0:
        return v << -s
    magnitude = (abs(v) + (1 << (s - 1))) >> s
    return magnitude if v >= 0 else -magnitude


def is_tie(v, s):
    return s > 0 and abs(v) % (1 << s) == 1 << (s - 1)


def call(v, s):
    """'rshift_round(v, s)' and, for a tie, the note that it rounds away from zero."""
    note = f" ({v}/2^{s} = {v / (1 << s):g}, a tie: away from zero)" if is_tie(v, s) else ""
    return f"rshift_round({v}, {s})", note


def signed(v):
    return f"({v})" if v < 0 else f"{v}"


def minus(v):
    """' - v' with v's sign folded: ' - 5', ' + 5'."""
    return f" - {v}" if v >= 0 else f" + {-v}"


class Check:
    def __init__(self):
        self.failures = []

    def __call__(self, name, ours, golden):
        if int(ours) != int(golden):
            self.failures.append(f"{name}: formula gives {ours}, the golden vectors hold {golden}")
        return int(ours)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--artifact", required=True)
    parser.add_argument("--golden", required=True)
    parser.add_argument("--cell", default="l0.d0", help="l<layer>.d<direction>")
    parser.add_argument("--t", type=int, required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--j", type=int, required=True, help="hidden unit")
    args = parser.parse_args()

    with open(args.artifact) as f:
        artifact = json.load(f)
    layer, direction = (int(part[1:]) for part in args.cell.split("."))
    cell = next(c for c in artifact["cells"] if c["layer"] == layer and c["direction"] == direction)
    H = cell["hidden_size"]
    prefix = f"layer{layer}.dir{direction}."
    names = ["W", "R", "bw", "br", "W_sum", "R_sum", "shift_bw_to_gemm_x", "shift_gemm_x_to_weight_ih_linear",
             "shift_br_to_gemm_h", "shift_gemm_h_to_weight_hh_linear"]
    for gate in ("update_gate", "reset_gate", "new_gate"):
        if cell["activations"][gate]["impl"] != "table":
            sys.exit(f"worked_example: {args.artifact}: {gate} is {cell['activations'][gate]['impl']}; tables only")
        names.append(f"{gate}.table")
    tensor_file = os.path.join(os.path.dirname(args.artifact), artifact["tensor_file"])
    p = {name: read_safetensors(tensor_file, [prefix + name])[prefix + name].astype(int) for name in names}
    golden_names = ["q_x", "q_h_prev", "gemm_x", "gemm_x_corrected", "q_bw_in_gemm_x", "q_weight_ih_linear", "gemm_h",
                    "gemm_h_corrected", "q_br_in_gemm_h", "q_weight_hh_linear", "q_update_gate_input",
                    "q_update_gate_output", "q_reset_gate_input", "q_reset_gate_output", "q_new_gate_input",
                    "q_new_gate_output", "q_new_gate_aligned_to_h", "q_h_new"]
    golden = {name: value.astype(int) for name, value in
              read_safetensors(args.golden, [f"{args.cell}.{name}" for name in golden_names]).items()}
    g = {name: golden[f"{args.cell}.{name}"] for name in golden_names}
    q = {name: t for name, t in cell["tensors"].items()}
    zp = {name: q[name]["zp"] for name in q if "zp" in q[name]}
    d = cell["derived"]
    t, n, j = args.t, args.n, args.j
    check = Check()
    x = g["q_x"][t, n]
    h_prev = g["q_h_prev"][t, n]

    def sat(name, v):
        lo = 0 if q[name]["unsigned"] else -(1 << (q[name]["bits"] - 1))
        hi = (1 << q[name]["bits"]) - 1 if q[name]["unsigned"] else (1 << (q[name]["bits"] - 1)) - 1
        return min(max(v, lo), hi)

    rows = {key: [] for key in ("gemm_x", "corr_x", "bw", "ih", "gemm_h", "corr_h", "br", "hh")}

    def linear_half(c, codes, weight, space, gemm, bias, linear, keys):
        """B-1 (W, x) or B-2 (R, h) for channel c: the GEMM, its zero-point correction, the bias in the GEMM space
        and the rounding into the linear output's space; each checked, each written into its row."""
        value = check(f"{gemm}[{c}]", int(sum(int(w) * int(v) for w, v in zip(p[weight][c], codes))),
                      g[gemm][t, n, c])
        corrected = check(f"{gemm}_corrected[{c}]", value - p[f"{weight}_sum"][c] * zp[space],
                          g[f"{gemm}_corrected"][t, n, c])
        bias_shift = p[f"shift_{bias}_to_{gemm}"][c]
        bias_in_gemm = check(f"q_{bias}_in_{gemm}[{c}]", rshift_round(p[bias][c], bias_shift), g[f"q_{bias}_in_{gemm}"][c])
        shift = p[f"shift_{gemm}_to_{linear}"][c]
        rounded = rshift_round(corrected + bias_in_gemm, shift)
        result = check(f"q_{linear}[{c}]", sat(linear, rounded + zp[linear]), g[f"q_{linear}"][t, n, c])
        text, note = call(corrected + bias_in_gemm, shift)
        if result != rounded + zp[linear]:
            note += " (saturated)"
        row_gemm, row_corrected, row_bias, row_linear = keys
        rows[row_gemm].append(f"{value}")
        rows[row_corrected].append(f"{value} - {signed(p[f'{weight}_sum'][c])}{signed(zp[space])} = {corrected}")
        rows[row_bias].append(f"rshift_round({p[bias][c]}, {bias_shift}) = {bias_in_gemm}")
        rows[row_linear].append(f"{text}{minus(-zp[linear])} = {rounded}{minus(-zp[linear])} = {result}{note}")
        return result

    ih, hh = {}, {}
    for gate, c in (("z", j), ("r", H + j), ("n", 2 * H + j)):
        ih[gate] = linear_half(c, x, "W", "x", "gemm_x", "bw", "weight_ih_linear", ("gemm_x", "corr_x", "bw", "ih"))
        hh[gate] = linear_half(c, h_prev, "R", "h", "gemm_h", "br", "weight_hh_linear", ("gemm_h", "corr_h", "br", "hh"))

    def table(gate, q_in):
        activation = cell["activations"][gate]["input"]
        q_min = 0 if activation["unsigned"] else -(1 << (activation["bits"] - 1))
        return int(p[f"{gate}.table"][q_in - q_min]), q_min

    out = []
    out.append(f"One element of the golden vectors `golden.safetensors` made above: cell {args.cell}, time t = {t}, "
               f"sequence n = {n}, hidden unit j = {j} (H = {H}, so the channels are z: {j}, r: {H + j}, n: {2 * H + j}); "
               f"`q_h_prev` is the golden vectors' state before the step, `table` the gate's table tensor.")
    out.append("")
    out.append(f"| step | z (c = {j}) | r (c = {H + j}) | n (c = {2 * H + j}) |")
    out.append("|---|---|---|---|")
    for key, label in (("gemm_x", "`gemm_x`"), ("corr_x", "`- W_sum·zp_x`"), ("bw", "`q_bw_in_gemm_x`"),
                       ("ih", "`q_weight_ih_linear`"), ("gemm_h", "`gemm_h` (with `q_h_prev`)"),
                       ("corr_h", "`- R_sum·zp_h`"), ("br", "`q_br_in_gemm_h`"), ("hh", "`q_weight_hh_linear`")):
        out.append(f"| {label} | " + " | ".join(rows[key]) + " |")
    out.append("")

    # C-1, C-2: two terms rounded separately, then added.
    for step, gate, name, letter in (("C-1", "update_gate", "update", "z"), ("C-2", "reset_gate", "reset", "r")):
        s_ih, s_hh = d[f"shift_weight_ih_linear_to_{gate}_input"], d[f"shift_weight_hh_linear_to_{gate}_input"]
        a, b = rshift_round(ih[letter] - zp["weight_ih_linear"], s_ih), rshift_round(hh[letter] - zp["weight_hh_linear"], s_hh)
        gate_in = check(f"q_{gate}_input", sat(f"{gate}_input", a + b + zp[f"{gate}_input"]), g[f"q_{gate}_input"][t, n, j])
        gate_out, q_min = table(gate, gate_in)
        gate_out = check(f"q_{gate}_output", gate_out, g[f"q_{gate}_output"][t, n, j])
        notes = "".join(note for _, note in (call(ih[letter] - zp["weight_ih_linear"], s_ih),
                                             call(hh[letter] - zp["weight_hh_linear"], s_hh)))
        out.append(f"{step}: `q_{gate}_input = rshift_round({ih[letter]}{minus(zp['weight_ih_linear'])}, {s_ih}) + "
                   f"rshift_round({hh[letter]}{minus(zp['weight_hh_linear'])}, {s_hh}){minus(-zp[f'{gate}_input'])} = "
                   f"{a}{minus(-b)}{minus(-zp[f'{gate}_input'])} = {gate_in}`{notes},")
        out.append(f"`q_{gate}_output = table[{gate_in} - ({q_min})] = {gate_out}`.")
        if letter == "z":
            z_out = gate_out
        else:
            r_out = gate_out

    # C-3: the product rounded directly into new_gate_input.
    r_diff, hh_diff = r_out - zp["reset_gate_output"], hh["n"] - zp["weight_hh_linear"]
    product = r_diff * hh_diff
    s_rh = d["shift_reset_mul_hh_to_new_gate_input"]
    q_rh = rshift_round(product, s_rh)
    s_ihn = d["shift_weight_ih_linear_to_new_gate_input"]
    ih_shifted = rshift_round(ih["n"] - zp["weight_ih_linear"], s_ihn)
    new_in = check("q_new_gate_input", sat("new_gate_input", ih_shifted + q_rh + zp["new_gate_input"]), g["q_new_gate_input"][t, n, j])
    new_out, q_min = table("new_gate", new_in)
    new_out = check("q_new_gate_output", new_out, g["q_new_gate_output"][t, n, j])
    out.append(f"C-3: `product = ({r_out}{minus(zp['reset_gate_output'])})·({hh['n']}{minus(zp['weight_hh_linear'])}) = "
               f"{product}`, `q_rh = rshift_round({product}, {s_rh}) = {q_rh}`{call(product, s_rh)[1]},")
    out.append(f"`ih_shifted = rshift_round({ih['n']}{minus(zp['weight_ih_linear'])}, {s_ihn}) = {ih_shifted}`"
               f"{call(ih['n'] - zp['weight_ih_linear'], s_ihn)[1]},")
    out.append(f"`q_new_gate_input = {ih_shifted}{minus(-q_rh)}{minus(-zp['new_gate_input'])} = {new_in}`, "
               f"`q_new_gate_output = table[{new_in} - ({q_min})] = {new_out}`.")

    # C-4: the new state.
    s_nh = d["shift_new_gate_output_to_h"]
    aligned = check("q_new_gate_aligned_to_h", rshift_round(new_out - zp["new_gate_output"], s_nh) + zp["h"],
                    g["q_new_gate_aligned_to_h"][t, n, j])
    h_old = int(h_prev[j])
    old = (z_out - zp["update_gate_output"]) * (h_old - zp["h"])
    one = d["quant_one_in_update_gate_scale"]
    new = (one - z_out) * (aligned - zp["h"])
    s_u = d["shift_update_gate_output"]
    h_new = check("q_h_new", sat("h", rshift_round(old + new, s_u) + zp["h"]), g["q_h_new"][t, n, j])
    out.append(f"C-4: `q_new_gate_aligned_to_h = rshift_round({new_out}{minus(zp['new_gate_output'])}, {s_nh})"
               f"{minus(-zp['h'])} = {aligned}`; with `q_h_prev = {h_old}`:")
    out.append(f"`old = ({z_out}{minus(zp['update_gate_output'])})·({h_old}{minus(zp['h'])}) = {old}`, "
               f"`new = ({one} - {z_out})·({aligned}{minus(zp['h'])}) = {new}`,")
    out.append(f"`q_h_new = rshift_round({old + new}, {s_u}){minus(-zp['h'])} = {rshift_round(old + new, s_u)}"
               f"{minus(-zp['h'])} = {h_new}`{call(old + new, s_u)[1]}.")
    if check.failures:
        sys.exit("worked_example: the formulas and qgru's golden vectors disagree:\n  " + "\n  ".join(check.failures))
    print("\n".join(out))


if __name__ == "__main__":
    main()
