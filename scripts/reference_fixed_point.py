#!/usr/bin/env python3
"""An independent implementation of qgru's fixed-point GRU, written from docs/FIXED_POINT.md.

Integer arithmetic only (NumPy int64, every rounding shift checked against the 2^62 bound of the
document), no floating point anywhere on the data path (a multiplier-scale artifact's multipliers are derived
once at load from its scales, in float64 as the document says, then the data path is integer again). Reads an artifact (model.qgru.json and its
safetensors tensor file, parsed by hand) and a golden-vector file written by qgru (its input codes
`input.q_x`, `input.q_h0`), recomputes every quantity of the document and compares each with the golden
file, code for code.

    python3 scripts/reference_fixed_point.py --artifact model.qgru.json --golden golden.safetensors

Exit 0 when every code of every tensor is equal; 1 on the first differing tensor (the first differing
element is printed with its (t, n, channel) and both values) or on a malformed input. Needs only numpy.
"""
import argparse
import hashlib
import json
import math
import os
import struct
import sys

import numpy as np

LIMIT = 1 << 62  # |value| bound of every rounding shift (docs/FIXED_POINT.md, section 1)


class Mismatch(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------
# safetensors, by hand: 8-byte little-endian header length, JSON header, raw little-endian data.
_DTYPES = {"I8": "<i1", "U8": "<u1", "I16": "<i2", "I32": "<i4", "I64": "<i8", "F32": "<f4", "F64": "<f8"}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > len(data) - 8:
        raise ValueError(f"{path}: header length {header_len} exceeds the file")
    header = json.loads(data[8:8 + header_len].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    body = memoryview(data)[8 + header_len:]
    tensors = {}
    for name, entry in header.items():
        dtype = _DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name}: dtype {entry['dtype']} not expected here")
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        array = np.frombuffer(body[begin:end], dtype=dtype)
        count = int(np.prod(shape)) if shape else 1
        if array.size != count:
            raise ValueError(f"{path}: tensor {name}: {array.size} values for shape {list(shape)}")
        tensors[name] = array.reshape(shape)
    return tensors, metadata


# ---------------------------------------------------------------------------------------------------------
# Section 1: the two primitives.
def rshift_round(v, s):
    """v * 2^-s rounded half away from zero (s > 0), v (s = 0), v * 2^-s exactly (s < 0). Elementwise."""
    v = np.asarray(v, dtype=np.int64)
    s = np.broadcast_to(np.asarray(s, dtype=np.int64), v.shape)
    if np.any(np.abs(s) > 62):
        raise Mismatch("a rescale shift outside -62..62")
    magnitude = np.abs(v)
    if np.any(magnitude > LIMIT):
        raise Mismatch("a value beyond 2^62 reaches a rounding shift (the overflow contract is broken)")
    right = np.where(s > 0, s, 1)
    # floor((|v| + 2^(s-1)) / 2^s), sign put back: round half away from zero.
    rounded = np.right_shift(magnitude + np.left_shift(np.int64(1), right - 1), right)
    rounded = np.where(v < 0, -rounded, rounded)
    left = np.where(s < 0, -s, 0)
    if np.any(magnitude > np.right_shift(np.int64(LIMIT), left)):
        raise Mismatch("a left shift leaves the 2^62 bound")
    shifted_left = v * np.left_shift(np.int64(1), left)
    return np.where(s > 0, rounded, np.where(s == 0, v, shifted_left))


def multiply_rshift_round(v, m, s):
    """Section 1a: v * m * 2^-s rounded half away from zero, the 64-bit product v * m first (checked <= 2^62)."""
    v = np.asarray(v, dtype=np.int64)
    m = np.broadcast_to(np.asarray(m, dtype=np.int64), v.shape)
    if np.any(m < 1) or np.any(np.abs(v) > np.int64(LIMIT) // m):
        raise Mismatch("a multiplier product beyond 2^62 (the overflow contract is broken)")
    return rshift_round(v * m, s)


def multiplier_rescale(ratio, input_bound):
    """Section 1a: (multiplier, shift) of a real ratio, the multiplier's bits from the bound on |input|."""
    _, bound_exponent = math.frexp(max(float(input_bound), 1.0))
    bits = min(max(62 - bound_exponent, 1), 31)
    fraction, exponent = math.frexp(ratio)
    multiplier = math.floor(math.ldexp(fraction, bits) + 0.5)  # exact: fraction * 2^bits < 2^31
    if multiplier == 1 << bits:
        multiplier >>= 1
        exponent += 1
    return multiplier, bits - exponent


def round_half_away(x):
    """std::round for a finite double, exactly: x - floor(x) is exact."""
    r = math.floor(abs(x))
    if abs(x) - r >= 0.5:
        r += 1
    return -r if x < 0 else r


class Space:
    """bits, unsigned, shift, zp (and a real scale's mantissa) of one tensor and its code range."""

    def __init__(self, obj):
        self.bits = int(obj["bits"])
        self.unsigned = bool(obj["unsigned"])
        self.shift = int(obj["shift"])
        self.zp = int(obj["zp"])
        self.mantissa = float(obj.get("mantissa", 1.0))  # 1: a power of two (section 1a)
        self.scale = math.ldexp(self.mantissa, -self.shift)
        self.q_min = 0 if self.unsigned else -(1 << (self.bits - 1))
        self.q_max = (1 << self.bits) - 1 if self.unsigned else (1 << (self.bits - 1)) - 1

    def sat(self, v):
        return np.clip(np.asarray(v, dtype=np.int64), self.q_min, self.q_max)

    def span(self):
        return float(self.q_max - self.q_min)

    def same(self, other):
        return (self.bits, self.unsigned, self.shift, self.zp) == (other.bits, other.unsigned, other.shift, other.zp)


# ---------------------------------------------------------------------------------------------------------
# Section 4: activations.
class Activation:
    def __init__(self, obj, tensors, prefix):
        self.impl = obj["impl"]
        self.input = Space(obj["input"])
        self.output = Space(obj["output"])
        if self.impl == "table":
            self.table = tensors[prefix + ".table"].astype(np.int64)
            if self.table.size != self.input.q_max - self.input.q_min + 1:
                raise Mismatch(f"{prefix}.table has {self.table.size} entries")
        elif self.impl == "pwl":
            self.threshold = tensors[prefix + ".pwl_threshold"].astype(np.int64)
            self.q_b = tensors[prefix + ".pwl_q_b"].astype(np.int64)
            self.term_c = tensors[prefix + ".pwl_term_c"].astype(np.int64)
            self.shift = tensors[prefix + ".pwl_shift"].astype(np.int64)
            if self.threshold[0] != self.input.q_min or np.any(np.diff(self.threshold) <= 0):
                raise Mismatch(f"{prefix}.pwl_threshold does not start at q_in_min or does not increase")
        else:
            raise Mismatch(f"{prefix}: unknown impl {self.impl}")

    def __call__(self, q_in):
        q = np.clip(q_in, self.input.q_min, self.input.q_max)
        if self.impl == "table":
            return self.table[q - self.input.q_min]
        i = np.searchsorted(self.threshold, q, side="right") - 1  # largest i with threshold[i] <= q
        return self.output.sat(rshift_round(self.q_b[i] * q + self.term_c[i], self.shift[i]))


# ---------------------------------------------------------------------------------------------------------
# The artifact (section 6), with every derived quantity recomputed and checked against the stored one.
ACTIVATION_TENSORS = ["x", "h", "weight_ih_linear", "weight_hh_linear", "update_gate_input", "update_gate_output",
                      "reset_gate_input", "reset_gate_output", "new_gate_input", "new_gate_output"]


class Cell:
    def __init__(self, cell, tensors, linear_before_reset=True, multiplier_scales=False):
        self.layer, self.direction = int(cell["layer"]), int(cell["direction"])
        self.linear_before_reset = linear_before_reset  # False: section 3a's cell
        self.C, self.H = int(cell["input_size"]), int(cell["hidden_size"])
        p = f"layer{self.layer}.dir{self.direction}."
        self.where = p[:-1]
        sp = {name: Space(cell["tensors"][name]) for name in ACTIVATION_TENSORS}
        self.sp = sp
        H3 = 3 * self.H
        t = lambda name: tensors[p + name].astype(np.int64)  # noqa: E731
        self.W, self.R, self.bw, self.br = t("W"), t("R"), t("bw"), t("br")
        if self.W.shape != (H3, self.C) or self.R.shape != (H3, self.H):
            raise Mismatch(f"{self.where}: W {self.W.shape} / R {self.R.shape} do not match C={self.C}, H={self.H}")
        shift_W, shift_R, shift_bw, shift_br = t("shift_W"), t("shift_R"), t("shift_bw"), t("shift_br")
        sx, sh = sp["x"].shift, sp["h"].shift
        # Step A
        self.W_sum = self.W.sum(axis=1)
        self.R_sum = self.R.sum(axis=1)
        self._check("W_sum", self.W_sum, t("W_sum"))
        self._check("R_sum", self.R_sum, t("R_sum"))
        # B-1 / B-2 per-channel shifts
        self.shift_gemm_x_to_ih = shift_W + sx - sp["weight_ih_linear"].shift
        self.shift_bw_to_gemm_x = shift_bw - (shift_W + sx)
        self.shift_gemm_h_to_hh = shift_R + sh - sp["weight_hh_linear"].shift
        self.shift_br_to_gemm_h = shift_br - (shift_R + sh)
        if not multiplier_scales:  # else derived with their multipliers from the scales (_derive_multipliers)
            self._check("shift_gemm_x_to_weight_ih_linear", self.shift_gemm_x_to_ih, t("shift_gemm_x_to_weight_ih_linear"))
            self._check("shift_bw_to_gemm_x", self.shift_bw_to_gemm_x, t("shift_bw_to_gemm_x"))
            self._check("shift_gemm_h_to_weight_hh_linear", self.shift_gemm_h_to_hh, t("shift_gemm_h_to_weight_hh_linear"))
            self._check("shift_br_to_gemm_h", self.shift_br_to_gemm_h, t("shift_br_to_gemm_h"))
        # C-1 .. C-4 scalar shifts
        s_ih, s_hh = sp["weight_ih_linear"].shift, sp["weight_hh_linear"].shift
        su = sp["update_gate_output"]
        d = {
            "shift_weight_ih_linear_to_update_gate_input": s_ih - sp["update_gate_input"].shift,
            "shift_weight_hh_linear_to_update_gate_input": s_hh - sp["update_gate_input"].shift,
            "shift_weight_ih_linear_to_reset_gate_input": s_ih - sp["reset_gate_input"].shift,
            "shift_weight_hh_linear_to_reset_gate_input": s_hh - sp["reset_gate_input"].shift,
            "shift_weight_ih_linear_to_new_gate_input": s_ih - sp["new_gate_input"].shift,
            "shift_new_gate_output_to_h": sp["new_gate_output"].shift - sh,
            "shift_update_gate_output": su.shift,
            # round(2^shift) half away from zero, in integers: 2^shift, 1 for shift = -1, 0 below.
            "quant_one_in_update_gate_scale": ((1 << su.shift) if su.shift >= 0 else (1 if su.shift == -1 else 0)) + su.zp,
        }
        if linear_before_reset:
            d["shift_reset_mul_hh_to_new_gate_input"] = sp["reset_gate_output"].shift + s_hh - sp["new_gate_input"].shift
        else:  # section 3a: r ⊙ h into h's space, C-3 as C-1's sum
            d["shift_reset_mul_h_to_h"] = sp["reset_gate_output"].shift + sh - sh
            d["shift_weight_hh_linear_to_new_gate_input"] = s_hh - sp["new_gate_input"].shift
        self.multiplier = {}  # name of a shift -> its multiplier (section 1a); empty: every rescale a pure shift
        if multiplier_scales:
            self._derive_multipliers(cell, tensors, p, d, sp, su)
            d.update({"multiplier_" + name[6:]: m for name, m in self.multiplier.items() if name in d})
        if sorted(cell["derived"]) != sorted(d):
            raise Mismatch(f"{self.where}: derived holds {sorted(cell['derived'])}, the document gives {sorted(d)}")
        for name, value in d.items():
            if int(cell["derived"][name]) != value:
                raise Mismatch(f"{self.where}: derived.{name} = {cell['derived'][name]}, the document gives {value}")
        self.d = d
        self.act = {g: Activation(cell["activations"][g], tensors, p + g)
                    for g in ("update_gate", "reset_gate", "new_gate")}
        for g, inp, out in (("update_gate", "update_gate_input", "update_gate_output"),
                            ("reset_gate", "reset_gate_input", "reset_gate_output"),
                            ("new_gate", "new_gate_input", "new_gate_output")):
            if not (self.act[g].input.same(sp[inp]) and self.act[g].output.same(sp[out])):
                raise Mismatch(f"{self.where}: activation {g} spaces differ from the tensors {inp} / {out}")

    def _derive_multipliers(self, cell, tensors, p, d, sp, su):
        """Section 1a: every rescale's multiplier and shift from the real scales (float64, the document's order)."""
        t = lambda name: tensors[p + name]  # noqa: E731
        bits = lambda name: int(cell["tensors"][name]["bits"])  # noqa: E731
        scale = lambda name: [math.ldexp(float(m), -int(s)) for m, s in zip(t("mantissa_" + name), t("shift_" + name))]  # noqa: E731
        d["quant_one_in_update_gate_scale"] = round_half_away(math.ldexp(1.0, su.shift) / su.mantissa) + su.zp
        for side, weight, bias, inp, out, K in (("x", "W", "bw", sp["x"], sp["weight_ih_linear"], self.C),
                                                ("h", "R", "br", sp["h"], sp["weight_hh_linear"], self.H)):
            s_w, s_b = scale(weight), scale(bias)
            bias_bound = math.ldexp(1.0, bits(bias) - 1)
            corrected_bound = K * math.ldexp(1.0, bits(weight) - 1) * inp.span()
            m_bias, s_bias, m_out, s_out = [], [], [], []
            for c in range(3 * self.H):
                gemm_scale = s_w[c] * inp.scale
                bias_ratio = s_b[c] / gemm_scale
                m, s = multiplier_rescale(bias_ratio, bias_bound)
                m_bias.append(m), s_bias.append(s)
                m, s = multiplier_rescale(gemm_scale / out.scale, corrected_bound + math.ceil(bias_bound * bias_ratio) + 1.0)
                m_out.append(m), s_out.append(s)
            linear = "weight_ih_linear" if side == "x" else "weight_hh_linear"
            shifts = {f"shift_{bias}_to_gemm_{side}": s_bias, f"shift_gemm_{side}_to_{linear}": s_out}
            multipliers = {f"multiplier_{bias}_to_gemm_{side}": m_bias, f"multiplier_gemm_{side}_to_{linear}": m_out}
            for name, values in list(shifts.items()) + list(multipliers.items()):
                self._check(name, np.array(values, dtype=np.int64), t(name).astype(np.int64))
            if side == "x":
                self.shift_bw_to_gemm_x, self.shift_gemm_x_to_ih = np.array(s_bias), np.array(s_out)
                self.m_bw_to_gemm_x, self.m_gemm_x_to_ih = np.array(m_bias), np.array(m_out)
            else:
                self.shift_br_to_gemm_h, self.shift_gemm_h_to_hh = np.array(s_bias), np.array(s_out)
                self.m_br_to_gemm_h, self.m_gemm_h_to_hh = np.array(m_bias), np.array(m_out)
        ih, hh, h, r, ngi = sp["weight_ih_linear"], sp["weight_hh_linear"], sp["h"], sp["reset_gate_output"], sp["new_gate_input"]
        rescales = {}
        for src, src_name in ((ih, "weight_ih_linear"), (hh, "weight_hh_linear")):
            for g in ("update_gate", "reset_gate", "new_gate"):
                if src_name == "weight_hh_linear" and g == "new_gate" and self.linear_before_reset:
                    continue
                rescales[f"shift_{src_name}_to_{g}_input"] = multiplier_rescale(src.scale / sp[g + "_input"].scale, src.span())
        if self.linear_before_reset:
            rescales["shift_reset_mul_hh_to_new_gate_input"] = multiplier_rescale((r.scale * hh.scale) / ngi.scale, r.span() * hh.span())
        else:
            rescales["shift_reset_mul_h_to_h"] = multiplier_rescale(r.scale, r.span() * h.span())
        n, u = sp["new_gate_output"], su
        n_to_h = n.scale / h.scale
        rescales["shift_new_gate_output_to_h"] = multiplier_rescale(n_to_h, n.span())
        one = float(d["quant_one_in_update_gate_scale"])
        one_minus_u = max(abs(one - u.q_min), abs(one - u.q_max))
        rescales["shift_update_gate_output"] = multiplier_rescale(u.scale, u.span() * h.span() + one_minus_u * (math.ceil(n.span() * n_to_h) + 1.0))
        for name, (m, s) in rescales.items():
            d[name] = s
            self.multiplier[name] = m

    def rescale(self, v, name):
        """A scalar rescale of section 3 by its derived shift (and multiplier, section 1a)."""
        if name in self.multiplier:
            return multiply_rshift_round(v, self.multiplier[name], self.d[name])
        return rshift_round(v, self.d[name])

    def _check(self, name, mine, stored):
        if mine.shape != stored.shape or np.any(mine != stored):
            raise Mismatch(f"{self.where}: tensor {name} differs from the value the document gives")

    def step(self, q_x, q_h_prev):
        """Section 3 (3a for the linear_before_reset = 0 cell) for all sequences at once: q_x [N, C], q_h_prev [N, H]
        -> dict of every quantity."""
        sp, d, H = self.sp, self.d, self.H
        out = {}
        # B-1
        gemm_x = q_x @ self.W.T                                             # S_W[c]·S_x
        gemm_x_corrected = gemm_x - self.W_sum * sp["x"].zp
        per_channel = (lambda v, m, s: multiply_rshift_round(v, m, s)) if self.multiplier else (lambda v, m, s: rshift_round(v, s))
        q_bw_in_gemm_x = per_channel(self.bw, getattr(self, "m_bw_to_gemm_x", 1), self.shift_bw_to_gemm_x)
        ih = sp["weight_ih_linear"].sat(
            per_channel(gemm_x_corrected + q_bw_in_gemm_x, getattr(self, "m_gemm_x_to_ih", 1), self.shift_gemm_x_to_ih)
            + sp["weight_ih_linear"].zp)
        zp_ih, zp_hh, zp_h = sp["weight_ih_linear"].zp, sp["weight_hh_linear"].zp, sp["h"].zp
        q_br_in_gemm_h = per_channel(self.br, getattr(self, "m_br_to_gemm_h", 1), self.shift_br_to_gemm_h)

        def b2(gemm_h):  # B-2 from raw accumulators whose operand lies in h's space
            corrected = gemm_h - self.R_sum * zp_h                          # S_R[c]·S_h
            return corrected, sp["weight_hh_linear"].sat(
                per_channel(corrected + q_br_in_gemm_h, getattr(self, "m_gemm_h_to_hh", 1), self.shift_gemm_h_to_hh) + zp_hh)

        def gate(g, ih_g, hh_g):  # C-1, C-2 (and 3a's C-3): two terms rounded separately, then added
            inp = sp[f"{g}_input"]
            q_in = inp.sat(self.rescale(ih_g - zp_ih, f"shift_weight_ih_linear_to_{g}_input")
                           + self.rescale(hh_g - zp_hh, f"shift_weight_hh_linear_to_{g}_input") + inp.zp)
            return q_in, self.act[g](q_in)

        # B-2 (the linear_before_reset = 0 cell: its n channels come after C-2a, below)
        gemm_h = q_h_prev @ self.R.T                                        # S_R[c]·S_h
        gemm_h_corrected, hh = b2(gemm_h)
        ih_z, ih_r, ih_n = ih[:, :H], ih[:, H:2 * H], ih[:, 2 * H:]
        ugi, ugo = gate("update_gate", ih_z, hh[:, :H])
        rgi, rgo = gate("reset_gate", ih_r, hh[:, H:2 * H])
        if self.linear_before_reset:
            # C-3
            product = (rgo - sp["reset_gate_output"].zp) * (hh[:, 2 * H:] - zp_hh)  # S_r·S_hh
            q_rh = self.rescale(product, "shift_reset_mul_hh_to_new_gate_input")
            ngi = sp["new_gate_input"].sat(
                self.rescale(ih_n - zp_ih, "shift_weight_ih_linear_to_new_gate_input") + q_rh + sp["new_gate_input"].zp)
            ngo = self.act["new_gate"](ngi)
        else:
            # C-2a: r ⊙ h into h's space; the second GEMM R_n against it, B-2 on it; C-3 as C-1's sum
            product = (rgo - sp["reset_gate_output"].zp) * (q_h_prev - zp_h)       # S_r·S_h
            q_reset_hidden = sp["h"].sat(self.rescale(product, "shift_reset_mul_h_to_h") + zp_h)
            gemm_h[:, 2 * H:] = q_reset_hidden @ self.R[2 * H:].T
            gemm_h_corrected, hh = b2(gemm_h)
            ngi, ngo = gate("new_gate", ih_n, hh[:, 2 * H:])
            out["q_reset_hidden"] = q_reset_hidden
        # C-4
        aligned = self.rescale(ngo - sp["new_gate_output"].zp, "shift_new_gate_output_to_h") + zp_h
        old = (ugo - sp["update_gate_output"].zp) * (q_h_prev - zp_h)     # S_u·S_h
        new = (d["quant_one_in_update_gate_scale"] - ugo) * (aligned - zp_h)
        h_new = sp["h"].sat(self.rescale(old + new, "shift_update_gate_output") + zp_h)
        out.update(q_x=q_x, gemm_x=gemm_x, gemm_x_corrected=gemm_x_corrected, q_weight_ih_linear=ih,
                   q_h_prev=q_h_prev, gemm_h=gemm_h, gemm_h_corrected=gemm_h_corrected, q_weight_hh_linear=hh,
                   q_update_gate_input=ugi, q_update_gate_output=ugo, q_reset_gate_input=rgi,
                   q_reset_gate_output=rgo, q_new_gate_input=ngi, q_new_gate_output=ngo,
                   q_new_gate_aligned_to_h=aligned, q_h_new=h_new)
        return out, q_bw_in_gemm_x, q_br_in_gemm_h


def load_artifact(json_path):
    with open(json_path, "r", encoding="utf-8") as f:
        root = json.load(f)
    if root.get("schema") != "qgru.artifact" or root.get("version") not in (1, 2, 3):
        raise Mismatch(f"{json_path}: not a version 1, 2 or 3 qgru.artifact")
    # Version 2 names the cell variant (section 6); version 1 is the linear_before_reset = 1 cell; version 3 is a
    # multiplier-scale model (section 1a) of either cell.
    if root["version"] >= 2 and not isinstance(root.get("linear_before_reset"), bool):
        raise Mismatch(f"{json_path}: a version {root['version']} artifact needs linear_before_reset true or false")
    multiplier_scales = root["version"] == 3
    if multiplier_scales != (root.get("scales") == "multiplier"):
        raise Mismatch(f"{json_path}: \"scales\": \"multiplier\" belongs to version 3 and only there")
    if root["version"] == 1 and "linear_before_reset" in root:
        raise Mismatch(f"{json_path}: a version 1 artifact has no linear_before_reset key")
    linear_before_reset = root.get("linear_before_reset", True)
    tensor_path = os.path.join(os.path.dirname(json_path), root["tensor_file"])
    with open(tensor_path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != root["tensor_file_sha256"]:
        raise Mismatch(f"{tensor_path}: sha256 {digest} differs from the artifact's tensor_file_sha256")
    tensors, _ = read_safetensors(tensor_path)
    shapes = root["shapes"]
    L, D = int(shapes["num_layers"]), int(shapes["num_directions"])
    cells = {}
    for c in root["cells"]:
        cell = Cell(c, tensors, linear_before_reset, multiplier_scales)
        cells[(cell.layer, cell.direction)] = cell
    if sorted(cells) != [(l, d) for l in range(L) for d in range(D)]:
        raise Mismatch(f"{json_path}: cells {sorted(cells)} do not match {L} layer(s) x {D} direction(s)")
    return root, cells, L, D


# ---------------------------------------------------------------------------------------------------------
# Section 5: the time loop, directions and layers.
def run_model(cells, L, D, q_x, q_h0):
    """q_x [T, N, C] layer-0 codes, q_h0 [L*D, N, H]. Returns every quantity under the golden names."""
    T, N = q_x.shape[0], q_x.shape[1]
    result = {}
    layer_input = q_x.astype(np.int64)
    h_n = np.zeros_like(q_h0, dtype=np.int64)
    for l in range(L):
        H = cells[(l, 0)].H
        layer_out = np.zeros((T, N, D * H), dtype=np.int64)
        for d in range(D):
            cell = cells[(l, d)]
            per_t = {}
            h = q_h0[l * D + d].astype(np.int64)
            order = range(T) if d == 0 else range(T - 1, -1, -1)
            for t in order:
                values, bw_in_gemm, br_in_gemm = cell.step(layer_input[t], h)
                per_t[t] = values
                h = values["q_h_new"]
                layer_out[t, :, d * H:(d + 1) * H] = h
            h_n[l * D + d] = h
            prefix = f"l{l}.d{d}."
            for name in per_t[0]:
                result[prefix + name] = np.stack([per_t[t][name] for t in range(T)])
            result[prefix + "q_bw_in_gemm_x"] = bw_in_gemm
            result[prefix + "q_br_in_gemm_h"] = br_in_gemm
        if l + 1 < L:
            nxt = cells[(l + 1, 0)].sp["x"]
            for d in range(1, D):
                if not cells[(l + 1, d)].sp["x"].same(nxt):
                    raise Mismatch(f"layer {l + 1}: the directions' x spaces differ")
            layer_input = np.zeros_like(layer_out)
            for d in range(D):
                hs = cells[(l, d)].sp["h"]
                block = layer_out[:, :, d * H:(d + 1) * H]
                if hs.mantissa == 1.0 and nxt.mantissa == 1.0:
                    moved = rshift_round(block - hs.zp, hs.shift - nxt.shift)
                else:  # section 5 with real scales: the multiplier of S_h / S_x
                    moved = multiply_rshift_round(block - hs.zp, *multiplier_rescale(hs.scale / nxt.scale, hs.span()))
                layer_input[:, :, d * H:(d + 1) * H] = nxt.sat(moved + nxt.zp)
        else:
            result["output.q_y"] = layer_out
    result["output.q_h_n"] = h_n
    return result


def describe_index(name, index):
    """(t, n, channel) for per-step tensors, (cell, n, j) for states, (channel) for per-channel ones."""
    if name in ("input.q_h0", "output.q_h_n"):
        labels = ["cell", "n", "j"]
    elif len(index) == 3:
        labels = ["t", "n", "channel (gate * H + j)" if "linear" in name or "gemm" in name else "channel"]
    else:
        labels = ["channel"]
    return ", ".join(f"{k}={v}" for k, v in zip(labels, index))


def compare(golden, computed, verbose):
    names = sorted(k for k in golden if not k.startswith("input."))
    missing = [k for k in names if k not in computed]
    if missing:
        raise Mismatch(f"the golden file holds tensors this reference does not compute: {missing}")
    extra = [k for k in computed if k not in golden]
    if extra:
        raise Mismatch(f"the golden file lacks tensors: {extra}")
    total = 0
    for name in names:
        dtype = golden[name].dtype
        want = golden[name].astype(np.int64)
        got = np.asarray(computed[name], dtype=np.int64)
        if want.shape != got.shape:
            raise Mismatch(f"{name}: golden shape {list(want.shape)}, computed {list(got.shape)}")
        bad = np.argwhere(want != got)
        if bad.size:
            first = tuple(int(i) for i in bad[0])
            raise Mismatch(f"{name}: {len(bad)} of {want.size} codes differ; first at "
                           f"({describe_index(name, first)}): golden {int(want[first])}, "
                           f"reference {int(got[first])}")
        total += want.size
        if verbose:
            print(f"equal  {name:40s} {str(list(want.shape)):16s} {dtype}")
    return len(names), total


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifact", required=True, help="model.qgru.json (its tensor file beside it)")
    parser.add_argument("--golden", required=True, help="golden vectors (.safetensors) written by qgru")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the summary")
    args = parser.parse_args(argv)
    try:
        root, cells, L, D = load_artifact(args.artifact)
        golden, meta = read_safetensors(args.golden)
        if meta.get("format") != "qgru.golden_vectors":
            raise Mismatch(f"{args.golden}: not a qgru.golden_vectors file (format {meta.get('format')!r})")
        with open(args.artifact, "rb") as f:
            artifact_sha = hashlib.sha256(f.read()).hexdigest()
        if meta.get("artifact_sha256") != artifact_sha:
            raise Mismatch(f"{args.golden}: made from the artifact with sha256 {meta.get('artifact_sha256')}, "
                           f"but {args.artifact} has {artifact_sha}")
        q_x, q_h0 = golden["input.q_x"].astype(np.int64), golden["input.q_h0"].astype(np.int64)
        x_space = cells[(0, 0)].sp["x"]
        if np.any(q_x < x_space.q_min) or np.any(q_x > x_space.q_max):
            raise Mismatch("input.q_x holds codes outside layer 0's x range")
        computed = run_model(cells, L, D, q_x, q_h0)
        tensors, codes = compare(golden, computed, not args.quiet)
    except (Mismatch, KeyError, ValueError, OSError) as e:
        print(f"reference_fixed_point: MISMATCH or bad input: {e}", file=sys.stderr)
        return 1
    print(f"reference_fixed_point: all {tensors} tensors equal ({codes} codes; {L} layer(s), {D} direction(s), "
          f"T={q_x.shape[0]}, N={q_x.shape[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
