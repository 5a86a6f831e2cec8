#!/usr/bin/env python3
"""Generate the malformed-input corpus in test/corpus/ (run by test/cli/corpus.sh).

Usage: /usr/bin/python3 scripts/make_corpus.py --qgru build/apps/qgru/qgru [--out test/corpus]

1. Valid baselines, small on purpose (the corpus is committed): a tiny PyTorch-layout GRU (C=4, H=5, one layer),
   input sequences, then the real tool's outputs: `qgru calibrate` (statistics), `qgru quantize` (artifact
   JSON + tensor file), `qgru gptq` (a GPTQ checkpoint with quantize_config.json).
2. Mutations of each baseline: truncations, lengths and offsets past the end, dtype/shape mismatches, absurd
   dimensions, shifts and bit widths out of range, NaN/Inf, empty data, wrong rank, disagreeing layers, a
   tensor file whose sha256 does not match, future schema versions, non-UTF-8 names, duplicate names, ...
3. cases.tsv: one row per case, tab-separated:
     name  expect  file  keyword  args
   expect   ok (exit 0), fail (exit 1, one stderr line naming `file` and matching `keyword`, nothing written),
            or known (a known bug in a reader: not run by default, see docs/HARDENING.md)
   file     path relative to the corpus folder; its base name must appear in the error line
   keyword  extended regular expression (case-insensitive) the error line must match
   args     qgru arguments; {C} is the corpus folder, {OUT} an empty scratch folder per case
The generator is deterministic (fixed seeds, no timestamps: zip entries dated 1980, the tool run inside the corpus
folder so that the paths it records are relative); rerun it when a format or the tool version changes and commit
the result. `--check` writes the corpus into a scratch folder instead and compares it with --out byte for byte
(ctest cli_corpus_reproducible): exit 1 naming the files that differ.
"""
import argparse
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_file import onnx_model, onnx_node, onnx_tensor, pb_field  # noqa: E402  (ONNX by hand: numpy only)

C_IN, HID = 4, 5  # tiny model: input size, hidden size

# Cases that show a bug in a reader, not yet fixed (docs/HARDENING.md, "Bugs found by this work"): written with expect
# "known", so corpus.sh skips them unless QGRU_CORPUS_KNOWN=1. Remove a name here once its fix lands.
KNOWN = {
}


# ---------------------------------------------------------------------------------------------------- writers
def st_bytes(entries, metadata=None, pad=True):
    """entries: list of (name, dtype, shape, raw bytes), laid out in the given order."""
    header = {}
    offset = 0
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(e[3] for e in entries)


def st_raw(header_text, data):
    """A safetensors file with a hand-written header (bytes)."""
    return struct.pack("<Q", len(header_text)) + header_text + data


def st_parse(blob):
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = []
    for name, v in header.items():
        if name == "__metadata__":
            continue
        b, e = v["data_offsets"]
        out.append((name, v["dtype"], v["shape"], data[b:e]))
    out.sort(key=lambda t: t[0])
    return out, header.get("__metadata__")


def npy_bytes(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def npy_raw(header_dict, data, version=(1, 0)):
    """A .npy file with a hand-written header dict (str)."""
    text = header_dict.encode("latin1")
    lenbytes = 2 if version[0] == 1 else 4
    total = 6 + 2 + lenbytes + len(text) + 1
    text += b" " * ((64 - total % 64) % 64) + b"\n"
    length = struct.pack("<H" if lenbytes == 2 else "<I", len(text))
    return b"\x93NUMPY" + bytes(version) + length + text + data


def npz_bytes(members, compress=False):
    """members: list of (name, bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
            z.writestr(info, data)
    return buf.getvalue()


def f32(a):
    return np.ascontiguousarray(a, dtype="<f4").tobytes()


# ---------------------------------------------------------------------------------------------------- corpus
class Corpus:
    def __init__(self, root, qgru):
        self.root = root
        self.qgru = qgru
        self.rows = []
        self.names = set()

    def path(self, rel):
        p = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def write(self, rel, data):
        if isinstance(data, str):
            data = data.encode()
        with open(self.path(rel), "wb") as f:
            f.write(data)
        return rel

    def case(self, name, expect, file, keyword, args):
        assert name not in self.names, name
        if name in KNOWN:
            expect = "known"
        keyword = keyword or "-"  # tab-separated fields may not be empty (read collapses them)
        assert "\t" not in args and "\t" not in keyword
        self.names.add(name)
        self.rows.append((name, expect, file, keyword, args))

    def run(self, *args):
        # Run inside the corpus folder with paths relative to it: the statistics and artifacts record the paths
        # they were made from, and an absolute one (where the corpus was written) would differ on every checkout.
        cmd = [self.qgru, "-q"] + [a.replace("{C}/", "").replace("{C}", ".") for a in args]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=self.root)
        if r.returncode != 0:
            sys.exit("make_corpus: baseline command failed: %s\n%s" % (" ".join(cmd), r.stderr))

    def save_manifest(self):
        with open(os.path.join(self.root, "cases.tsv"), "w") as f:
            f.write("# name\texpect\tfile\tkeyword\targs  (generated by scripts/make_corpus.py; see its docstring)\n")
            for row in self.rows:
                f.write("\t".join(row) + "\n")


def tiny_model(rng, layers=1, hidden=HID, inp=C_IN):
    entries = []
    for layer in range(layers):
        c = inp if layer == 0 else hidden
        s = 1.0 / np.sqrt(hidden)
        entries += [
            ("gru.weight_ih_l%d" % layer, "F32", [3 * hidden, c], f32(rng.uniform(-s, s, (3 * hidden, c)))),
            ("gru.weight_hh_l%d" % layer, "F32", [3 * hidden, hidden], f32(rng.uniform(-s, s, (3 * hidden, hidden)))),
            ("gru.bias_ih_l%d" % layer, "F32", [3 * hidden], f32(rng.uniform(-s, s, (3 * hidden,)))),
            ("gru.bias_hh_l%d" % layer, "F32", [3 * hidden], f32(rng.uniform(-s, s, (3 * hidden,)))),
        ]
    entries.sort(key=lambda e: e[0])
    return entries


def build(c):
    rng = np.random.default_rng(20261122)
    # ---------------------------------------------------------------- baselines
    model = tiny_model(rng)
    model_blob = st_bytes(model, {"source": "scripts/make_corpus.py"})
    c.write("base/model.safetensors", model_blob)
    x = rng.uniform(-1, 1, (6, 3, C_IN)).astype("<f4")
    x_blob = npy_bytes(x)
    c.write("base/x.npy", x_blob)
    c.write("base/x.npz", npz_bytes([("x.npy", x_blob)]))
    M = "{C}/base/model.safetensors"
    X = "{C}/base/x.npy"
    c.run("calibrate", "--model", M, "--data", X, "-o", "{C}/base/stats.json")
    c.run("quantize", "--model", M, "--stats", "{C}/base/stats.json", "--config", "int8", "-o",
          "{C}/base/art.qgru.json")
    # GPTQ: a [N=8, K=32] linear, activations [M=64, K=32].
    w = rng.normal(0, 0.1, (8, 32)).astype("<f4")
    c.write("base/linear.safetensors", st_bytes([("fc.weight", "F32", [8, 32], f32(w))]))
    acts = rng.normal(0, 1, (64, 32)).astype("<f4")
    c.write("base/acts.npy", npy_bytes(acts))
    c.path("gptq/base.safetensors")  # creates the folder
    c.run("gptq", "--weights", "{C}/base/linear.safetensors", "--tensor", "fc.weight", "--activations",
          "{C}/base/acts.npy", "--group-size", "16", "-o", "{C}/gptq/base.safetensors")

    # Baselines must pass: the mutations then fail for the reason they name.
    calib = "calibrate --model %s --data %s -o {OUT}/stats.json"
    c.case("base_calibrate", "ok", "base/model.safetensors", "", calib % (M, X))
    c.case("base_calibrate_npz", "ok", "base/x.npz", "", calib % (M, "{C}/base/x.npz"))
    c.case("base_merge", "ok", "base/stats.json", "", "calibrate --merge {C}/base/stats.json -o {OUT}/merged.json")
    c.case("base_quantize", "ok", "base/stats.json", "",
           "quantize --model %s --stats {C}/base/stats.json --config int8 -o {OUT}/a.qgru.json" % M)
    c.case("base_verify", "ok", "base/art.qgru.json", "",
           "verify --model %s --artifact {C}/base/art.qgru.json --input %s --report {OUT}/report.json" % (M, X))
    c.case("base_linear", "ok", "gptq/base.safetensors", "",
           "linear --checkpoint {C}/gptq/base.safetensors --layer fc --input {C}/base/acts.npy --output {OUT}/y.npy")

    # ---------------------------------------------------------------- safetensors (through calibrate --model)
    def st_case(name, blob, keyword, expect="fail"):
        rel = c.write("safetensors/%s.safetensors" % name, blob)
        c.case("st_" + name, expect, rel, keyword, calib % ("{C}/" + rel, X))

    n = struct.unpack("<Q", model_blob[:8])[0]
    st_case("empty", b"", "at least 8 bytes")
    st_case("truncated_length", model_blob[:5], "at least 8 bytes")
    st_case("truncated_header", model_blob[:8 + n // 2], "longer than the file")
    st_case("truncated_data", model_blob[:len(model_blob) - 7], "beyond|truncated")
    st_case("header_length_huge", struct.pack("<Q", 1 << 40) + model_blob[8:], "at most 100000000")
    st_case("header_length_past_end", struct.pack("<Q", len(model_blob)) + model_blob[8:], "longer than the file")
    st_case("header_not_json", st_raw(b"{not json at all}      ", b""), "JSON")
    st_case("header_not_object", st_raw(b"[1, 2, 3]", b""), "starting with|object")
    st_case("header_deep_nesting", st_raw(b"{\"a\":" + b"[" * 1000 + b"]" * 1000 + b"}", b""), "nested")
    first = model[0]
    st_case("offsets_overlap", st_raw(json.dumps({
        "gru.a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "gru.b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}).encode(), b"\0" * 12), "overlap")
    st_case("offsets_gap", st_raw(json.dumps({
        "gru.a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "gru.b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}}).encode(), b"\0" * 20), "gap")
    st_case("offsets_past_end", st_raw(json.dumps({
        "gru.a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode(), b"\0" * 8), "beyond")
    st_case("offsets_negative", st_raw(json.dumps({
        "gru.a": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}}).encode(), b""), "non-negative")
    st_case("offsets_reversed", st_raw(json.dumps({
        "gru.a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}}).encode(), b"\0" * 8), "begin <= end")
    st_case("trailing_bytes", model_blob + b"\0" * 16, "after the last tensor")
    st_case("dtype_shape_mismatch", st_raw(json.dumps({
        "gru.a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}).encode(), b"\0" * 8), "span")
    st_case("terabyte_tensor", st_raw(json.dumps({
        "gru.weight_ih_l0": {"dtype": "F32", "shape": [1000000, 1000000], "data_offsets": [0, 4000000000000]}}).encode(),
        b"\0" * 16), "beyond")
    st_case("shape_overflow", st_raw(json.dumps({
        "gru.a": {"dtype": "F32", "shape": [1 << 62, 1 << 62], "data_offsets": [0, 16]}}).encode(), b"\0" * 16),
        "overflow")
    # 2^32 * (2^32 - 1) fits in uint64 but not in int64; the zero extent makes the data empty (bug 7).
    st_case("shape_partial_product_overflow", st_raw(json.dumps({
        "gru.a": {"dtype": "F32", "shape": [1 << 32, (1 << 32) - 1, 0], "data_offsets": [0, 0]}}).encode(), b""),
        "overflow")
    st_case("dtype_unsupported", st_raw(json.dumps({
        "gru.a": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}}).encode(), b"\0" * 2), "not supported")
    st_case("dtype_missing", st_raw(json.dumps({
        "gru.a": {"shape": [2], "data_offsets": [0, 8]}}).encode(), b"\0" * 8), "dtype")
    # Duplicate and non-UTF-8 names need hand-written header bytes.
    hdr = (b'{"gru.a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
           b'"gru.a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}')
    st_case("duplicate_names", st_raw(hdr, b"\0" * 16), "twice")
    hdr = b'{"gru.\xff\xfe":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    st_case("name_not_utf8", st_raw(hdr, b"\0" * 8), "UTF-8")
    st_case("metadata_not_strings", st_bytes(model, {"version": 3}), "__metadata__")
    st_case("npy_given_as_model", x_blob, "npy")
    st_case("npz_given_as_model", npz_bytes([("x.npy", x_blob)]), "ZIP|npz")

    # Valid safetensors, invalid model.
    def model_with(replace=None, drop=None, add=None):
        out = []
        for e in model:
            if drop and e[0] == drop:
                continue
            if replace and e[0] in replace:
                e = replace[e[0]]
            out.append(e)
        if add:
            out += add
        return st_bytes(out)

    by_name = {e[0]: e for e in model}
    w_ih = np.frombuffer(by_name["gru.weight_ih_l0"][3], dtype="<f4").reshape(3 * HID, C_IN).copy()
    bad = w_ih.copy()
    bad[3, 1] = np.nan
    st_case("weights_nan", model_with({"gru.weight_ih_l0": ("gru.weight_ih_l0", "F32", [3 * HID, C_IN], f32(bad))}),
            "NaN|finite")
    bad = w_ih.copy()
    bad[0, 0] = np.inf
    st_case("weights_inf", model_with({"gru.weight_ih_l0": ("gru.weight_ih_l0", "F32", [3 * HID, C_IN], f32(bad))}),
            "inf|finite")
    st_case("weights_wrong_rank", model_with({"gru.weight_ih_l0": ("gru.weight_ih_l0", "F32", [3 * HID * C_IN],
                                                                   f32(w_ih))}), "shape|rank")
    st_case("weights_not_3h", model_with({"gru.weight_ih_l0": ("gru.weight_ih_l0", "F32", [C_IN, 3 * HID],
                                                               f32(w_ih))}), "shape|expected")
    st_case("weights_empty", model_with({"gru.weight_ih_l0": ("gru.weight_ih_l0", "F32", [0, C_IN], b""),
                                         }), "shape|expected|empty")
    st_case("weights_int_dtype", model_with({"gru.weight_ih_l0": ("gru.weight_ih_l0", "I32", [3 * HID, C_IN],
                                                                  w_ih.astype("<i4").tobytes())}), "dtype|float")
    st_case("missing_weight_hh", model_with(drop="gru.weight_hh_l0"), "weight_hh|missing|expected")
    st_case("no_gru_tensors", st_bytes([("head.weight", "F32", [2], f32(np.zeros(2)))]), "GRU|weight|expected")
    two = tiny_model(np.random.default_rng(7), layers=2)
    two = [(e[0], e[1], [3 * HID, 7], f32(np.zeros((3 * HID, 7)))) if e[0] == "gru.weight_ih_l1" else e for e in two]
    st_case("layers_disagree", st_bytes(two), "weight_ih_l1|layer")
    gap = [e for e in tiny_model(np.random.default_rng(8), layers=3) if not e[0].endswith("_l1")]
    st_case("layer_missing_in_middle", st_bytes(gap), "l1|layer|missing")

    # ---------------------------------------------------------------- npy (through calibrate --data)
    def npy_case(name, blob, keyword, expect="fail", ext="npy"):
        rel = c.write("npy/%s.%s" % (name, ext), blob)
        c.case("npy_" + name, expect, rel, keyword, calib % (M, "{C}/" + rel))

    npy_case("empty", b"", "empty")
    npy_case("bad_magic", b"\x93NUMPX" + x_blob[6:], "magic")
    npy_case("short_preamble", x_blob[:9], "preamble")
    npy_case("version_9", x_blob[:6] + b"\x09\x00" + x_blob[8:], "version")
    npy_case("header_length_past_end", x_blob[:8] + struct.pack("<H", 0xFFF0) + x_blob[10:200], "longer than the file")
    npy_case("header_length_huge_v2", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
                                              b"\0" * 4, (2, 0))[:8] + struct.pack("<I", 0x7FFFFFFF) + b"{}",
             "at most")
    npy_case("truncated_data", x_blob[:-5], "truncated")
    npy_case("trailing_bytes", x_blob + b"\0" * 4, "trailing")
    npy_case("big_endian", npy_bytes(x.astype(">f4")), "big-endian")
    npy_case("fortran_order", npy_bytes(np.asfortranarray(x)), "fortran|C order")
    npy_case("bool_dtype", npy_bytes(x > 0), "bool")
    npy_case("structured_dtype", npy_bytes(np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")])), "structured")
    npy_case("complex_dtype", npy_bytes(np.zeros((6, 3, 4), dtype="<c8")), "dtype")
    npy_case("header_extra_key", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1, }",
                                         b"\0" * 4), "keys")
    npy_case("header_repeated_key", npy_raw("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
                                            b"\0" * 4), "twice")
    npy_case("header_missing_shape", npy_raw("{'descr': '<f4', 'fortran_order': False, }", b"\0" * 4), "shape")
    npy_case("header_garbage", npy_raw("\xff\xfe garbage", b""), "header")
    npy_case("shape_negative", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (6, -3, 4), }", b""),
             "non-negative")
    npy_case("terabyte_shape", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000, 4), }",
                                       b"\0" * 64), "data bytes")
    npy_case("shape_overflow", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, "
                                       "4611686018427387904, 4), }", b""), "overflow")
    # 2^32 * (2^32 - 1) fits in uint64 but not in int64; the zero extent makes the data empty. NumPy refuses the
    # shape ("array is too big"), and so does the reader (bug 7: it used to accept it, and Tensor::numel()
    # overflowed int64 on the way to 0).
    npy_case("shape_partial_product_overflow", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': "
                                                       "(4294967296, 4294967295, 0), }", b""), "non-zero extents.*overflow")
    npy_case("extent_too_long", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999, 4), }",
                                        b""), "64 bits")
    bad = x.copy()
    bad[2, 1, 3] = np.nan
    npy_case("data_nan", npy_bytes(bad), "non-finite|NaN")
    bad = x.copy()
    bad[5, 2, 0] = -np.inf
    npy_case("data_inf", npy_bytes(bad), "non-finite|inf")
    npy_case("data_f16_overflow", npy_bytes(np.full((2, 2, 4), 65504, dtype="<f2").astype("<f2")), "", "ok")
    npy_case("wrong_rank", npy_bytes(x.reshape(6, 12)), "shape")
    npy_case("wrong_channels", npy_bytes(np.zeros((6, 3, 5), dtype="<f4")), "C = 5|input_size")
    npy_case("int_dtype", npy_bytes(np.zeros((6, 3, 4), dtype="<i4")), "dtype")
    npy_case("empty_data", npy_bytes(np.zeros((0, 3, 4), dtype="<f4")), "empty|T >= 1|sequences|no data")
    npy_case("empty_data_absurd_T", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (2000000000, 0, 4), }",
                                            b""), "empty|N >= 1|sequences|no data")

    # ---------------------------------------------------------------- npz (through calibrate --data)
    def npz_case(name, blob, keyword, expect="fail", suffix=""):
        rel = c.write("npz/%s.npz" % name, blob)
        if suffix:  # calibrate --data checks that the file exists: name the member through run --input
            c.case("npz_" + name, expect, rel, keyword,
                   "run --model %s --input {C}/%s%s --output {OUT}/y.npy" % (M, rel, suffix))
        else:
            c.case("npz_" + name, expect, rel, keyword, calib % (M, "{C}/" + rel))

    good = npz_bytes([("x.npy", x_blob)])
    npz_case("truncated", good[:len(good) // 2], "end-of-central-directory|truncated")
    npz_case("empty", b"", "at least 22 bytes")
    npz_case("deflated", npz_bytes([("x.npy", x_blob)], compress=True), "deflate|savez_compressed")
    # Corrupt one data byte: the CRC-32 no longer matches (the .npy stays valid, so only the CRC can tell).
    pos = good.index(b"\x93NUMPY") + len(x_blob) - 3
    npz_case("crc_mismatch", good[:pos] + bytes([good[pos] ^ 0x55]) + good[pos + 1:], "CRC")
    npz_case("two_arrays", npz_bytes([("x.npy", x_blob), ("y.npy", x_blob)]), "exactly one array")
    npz_case("missing_key", good, "named 'nope'", suffix=":nope")
    npz_case("not_npy_member", npz_bytes([("x.txt", b"hello")]), "npy members")
    npz_case("inner_npy_truncated", npz_bytes([("x.npy", x_blob[:-8])]), "truncated")
    npz_case("inner_npy_nan", npz_bytes([("x.npy", npy_bytes(np.full((2, 2, 4), np.nan, dtype="<f4")))]),
             "non-finite|NaN")
    dup = npz_bytes([("x.npy", x_blob), ("z.npy", x_blob)]).replace(b"z.npy", b"x.npy")
    npz_case("duplicate_member", dup, "twice")
    # Central directory offset pointing past the end of the file.
    eocd = good.rindex(b"PK\x05\x06")
    bad = bytearray(good)
    struct.pack_into("<I", bad, eocd + 16, len(good) + 1000)
    npz_case("directory_past_end", bytes(bad), "central directory|outside")
    # Entry count far beyond what the directory can hold.
    bad = bytearray(good)
    struct.pack_into("<HH", bad, eocd + 8, 65535, 65535)
    npz_case("entry_count_huge", bytes(bad), "room for")
    # Local header offset past the directory.
    cd = good.index(b"PK\x01\x02")
    bad = bytearray(good)
    struct.pack_into("<I", bad, cd + 42, 0x7FFFFFF0)
    npz_case("local_header_past_end", bytes(bad), "local header|outside")
    bad = bytearray(good)
    struct.pack_into("<H", bad, cd + 8, 1)  # encrypted flag in the central directory
    npz_case("encrypted", bytes(bad), "encrypted")
    # Stored size claiming 4 GiB via ZIP64.
    bad = bytearray(good)
    struct.pack_into("<II", bad, cd + 20, 0xFFFFFFFF, 0xFFFFFFFF)
    npz_case("zip64_sizes_missing", bytes(bad), "ZIP64|extra")

    # ---------------------------------------------------------------- statistics JSON
    stats_text = open(c.path("base/stats.json")).read()
    stats = json.loads(stats_text)

    def stats_case(name, text, keyword, expect="fail", via="merge"):
        rel = c.write("stats/%s.json" % name, text)
        if via == "merge":
            args = "calibrate --merge {C}/%s -o {OUT}/merged.json" % rel
        else:
            args = "quantize --model %s --stats {C}/%s --config int8 -o {OUT}/a.qgru.json" % (M, rel)
        c.case("stats_" + name, expect, rel, keyword, args)

    def mutated(fn):
        s = json.loads(stats_text)
        fn(s)
        return json.dumps(s)

    stats_case("empty", "", "JSON")
    stats_case("truncated", stats_text[:len(stats_text) // 2], "JSON")
    stats_case("not_utf8", stats_text.replace('"minmax"', '"min\udcffmax"', 1).encode("utf-8", "surrogateescape")
               if '"minmax"' in stats_text else stats_text.encode() + b"\xff", "JSON|UTF-8")
    stats_case("wrong_schema", mutated(lambda s: s.update(schema="qgru.artifact")), "schema")
    stats_case("future_version", mutated(lambda s: s.update(schema_version=99)), "schema_version")
    stats_case("missing_tensors", mutated(lambda s: s.pop("tensors")), "tensors")
    stats_case("missing_one_tensor", mutated(lambda s: s["tensors"].pop(3)), "missing")
    stats_case("duplicate_tensor", mutated(lambda s: s["tensors"].append(s["tensors"][0])), "twice")
    stats_case("min_exceeds_max", mutated(lambda s: s["tensors"][0].update(min=5.0, max=-5.0)), "min exceeds max")
    stats_case("count_negative", mutated(lambda s: s["tensors"][0].update(count=-1)), "count")
    stats_case("zero_count_exceeds", mutated(lambda s: s["tensors"][0].update(zero_count=s["tensors"][0]["count"] + 1)),
               "zero_count")
    stats_case("histogram_total_mismatch", mutated(lambda s: s["tensors"][1]["histogram"]["runs"][0].__setitem__(1, 10 ** 9)),
               "histogram holds")
    stats_case("histogram_run_past_end", mutated(lambda s: s["tensors"][1]["histogram"]["runs"].append([131071, 1, 1])),
               "outside")
    stats_case("histogram_exponent_huge", mutated(lambda s: s["tensors"][1]["histogram"].update(exponent=100000)),
               "outside")
    stats_case("histogram_exponent_negative", mutated(lambda s: s["tensors"][1]["histogram"].update(exponent=-100000)),
               "outside")
    stats_case("layer_out_of_range", mutated(lambda s: s["tensors"][0].update(layer=7)), "outside")
    stats_case("unknown_tensor", mutated(lambda s: s["tensors"][0].update(tensor="W")), "not an observed tensor")
    stats_case("bins_layout_changed", mutated(lambda s: s["histogram_layout"].update(bins=4096)), "bins")
    stats_case("min_huge_number", stats_text.replace('"min": ', '"min": 1e999, "x": ', 1)
               if '"min": ' in stats_text else stats_text.replace('"min":', '"min":-1e999,"x":', 1), "JSON|number|range|min")
    stats_case("model_shape_mismatch", mutated(lambda s: s["model"].update(hidden_size=HID + 1)), "hidden|shape|model",
               via="quantize")
    stats_case("model_layers_mismatch", mutated(lambda s: s["model"].update(num_layers=2)), "layer|missing", via="merge")
    # Cases of fixed bugs (docs/HARDENING.md, bugs 1 and 2): ordinary refusals that guard the fixes.
    stats_case("histogram_run_int64_max",
               mutated(lambda s: s["tensors"][1]["histogram"]["runs"].__setitem__(0, [9223372036854775807, 1])),
               "outside|overlap", expect="fail")
    # 1024 layers x 2 directions claimed by 10 entries: refused by the entry count before 20 GiB of histograms.
    stats_case("num_layers_huge_allocation", mutated(lambda s: s["model"].update(num_layers=1024, num_directions=2)),
               "10 entries, expected 20480", expect="fail")

    # ---------------------------------------------------------------- bit-width config (through quantize --config)
    cfg_text = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "int8.json")).read()

    def cfg_case(name, text, keyword, expect="fail"):
        rel = c.write("config/%s.json" % name, text)
        c.case("cfg_" + name, expect, rel, keyword,
               "quantize --model %s --stats {C}/base/stats.json --config {C}/%s -o {OUT}/a.qgru.json" % (M, rel))

    def cfg(fn):
        d = json.loads(cfg_text)
        fn(d)
        return json.dumps(d, indent=1)

    cfg_case("bits_1", cfg(lambda d: d["tensors"]["W"].update(bits=1)), "outside 2..16")
    cfg_case("bits_17", cfg(lambda d: d["tensors"]["h"].update(bits=17)), "outside 2..16")
    cfg_case("bits_huge", cfg(lambda d: d["tensors"]["x"].update(bits=18446744073709551615)), "outside 2..16")
    cfg_case("bits_not_integer", cfg(lambda d: d["tensors"]["x"].update(bits=8.5)), "integer")
    cfg_case("future_version", cfg(lambda d: d.update(version=2)), "version")
    cfg_case("wrong_schema", cfg(lambda d: d.update(schema="qgru.calibration_stats")), "schema")
    cfg_case("unknown_key", cfg(lambda d: d.update(bitz=8)), "unknown key")
    cfg_case("missing_tensor", cfg(lambda d: d["tensors"].pop("R")), "missing")
    cfg_case("not_a_gru_tensor", cfg(lambda d: d["tensors"].update(Q={"bits": 8})), "not a GRU tensor")
    cfg_case("unsigned_symmetric", cfg(lambda d: d["tensors"]["x"].update(signed=False, symmetric=True)), "unsigned")
    cfg_case("weights_asymmetric", cfg(lambda d: d["tensors"]["W"].update(symmetric=False)), "symmetric")
    cfg_case("table_16_bit_input", cfg(lambda d: d["tensors"]["update_gate_input"].update(bits=16)), "12 bits")
    cfg_case("pwl_segments_huge", cfg(lambda d: d["activations"]["new_gate"].update(impl="pwl", segments=10 ** 9)),
             "outside 1..4096")
    cfg_case("not_json", cfg_text[:100], "JSON")
    cfg_case("empty", "", "JSON")
    cfg_case("number_overflow", cfg_text.replace('"version": 1', '"version": 1e999', 1), "JSON|number|version")

    # ---------------------------------------------------------------- artifact (through verify)
    art_text = open(c.path("base/art.qgru.json")).read()
    art_blob = open(c.path("base/art.qgru.safetensors"), "rb").read()

    def art_case(name, text, keyword, tensors=None, expect="fail", file=None):
        rel = "artifact/%s.qgru.json" % name
        if tensors is not None:  # a tensor file of its own, named by the JSON
            tname = "%s.qgru.safetensors" % name
            c.write("artifact/" + tname, tensors)
            d = json.loads(text)
            d["tensor_file"] = tname
            text = json.dumps(d, indent=1)
        c.write(rel, text)
        c.case("art_" + name, expect, file or rel, keyword,
               "verify --model %s --artifact {C}/%s --input %s --report {OUT}/report.json" % (M, rel, X))

    def art(fn, text=art_text):
        d = json.loads(text)
        fn(d)
        return json.dumps(d, indent=1)

    import hashlib

    def with_tensors(mutate_entries, fn=None):
        """Rewrite the tensor file through `mutate_entries` and record its true sha256 (so only the content is wrong)."""
        entries, meta = st_parse(art_blob)
        entries = mutate_entries(entries)
        blob = st_bytes(entries, meta)
        d = json.loads(art_text)
        d["tensor_file_sha256"] = hashlib.sha256(blob).hexdigest()
        if fn:
            fn(d)
        return json.dumps(d, indent=1), blob

    c.write("artifact/art.qgru.safetensors", art_blob)
    art_case("truncated_json", art_text[:len(art_text) // 3], "JSON")
    art_case("future_version", art(lambda d: d.update(version=99)), "newer")
    # Version 2 names the GRU cell (linear_before_reset); version 1 holds PyTorch's cell only.
    art_case("v2_without_cell", art(lambda d: d.update(version=2)), "linear_before_reset: missing")
    art_case("v1_with_cell", art(lambda d: d.update(linear_before_reset=False)), "needs version 2")
    art_case("wrong_schema", art(lambda d: d.update(schema="qgru.calibration_stats")), "schema")
    art_case("sha256_mismatch", art(lambda d: d.update(tensor_file="sha.qgru.safetensors")), "sha256",
             tensors=art_blob[:-1] + bytes([art_blob[-1] ^ 1]))
    art_case("tensor_file_missing", art(lambda d: d.update(tensor_file="absent.qgru.safetensors")), "absent|cannot open",
             file="artifact/absent.qgru.safetensors")
    art_case("number_overflow", art_text.replace('"tool_version"', '"big": 1e999, "tool_version"', 1), "JSON|number")
    art_case("tensor_file_path_escape", art(lambda d: d.update(tensor_file="../base/art.qgru.safetensors")),
             "file name")
    art_case("tensor_file_truncated", art(lambda d: d.update(tensor_file="short.qgru.safetensors")), "sha256",
             tensors=art_blob[:len(art_blob) // 2])

    def cell_tensor(key, **kv):
        return art(lambda d: d["cells"][0]["tensors"][key].update(**kv))

    art_case("shift_huge", cell_tensor("h", shift=100000), "shift|outside")
    art_case("shift_negative_huge", cell_tensor("x", shift=-100000), "shift|outside")
    art_case("bits_1", cell_tensor("x", bits=1), "bits|outside")
    art_case("bits_17", cell_tensor("update_gate_output", bits=17), "bits|outside")
    art_case("zp_out_of_range", cell_tensor("x", zp=100000), "zp|outside")
    art_case("cells_count", art(lambda d: d["shapes"].update(num_layers=2)), "cells")
    art_case("shapes_disagree", art(lambda d: d["cells"][0].update(hidden_size=HID + 1)), "hidden_size")
    art_case("derived_mismatch", art(lambda d: d["cells"][0]["derived"].update(
        {k: v + 1 for k, v in d["cells"][0]["derived"].items() if isinstance(v, int)})), "differs|derived")
    art_case("config_bits_17", art(lambda d: d["config"]["tensors"]["x"].update(bits=17)), "outside 2..16")

    def bump_w(entries):
        out = []
        for name, dt, shape, raw in entries:
            if name.endswith(".W"):
                a = bytearray(raw)
                a[0] = (a[0] + 1) & 0xFF if a[0] != 0x7F else 0x7E
                raw = bytes(a)
            out.append((name, dt, shape, raw))
        return out

    text, blob = with_tensors(bump_w)
    art_case("row_sums_mismatch", text, "W_sum|row sums", tensors=blob)

    def w_as_i16(entries):
        return [(n, "I16", s, np.frombuffer(r, dtype="i1").astype("<i2").tobytes()) if n.endswith(".W") else (n, dt, s, r)
                for n, dt, s, r in entries]

    text, blob = with_tensors(w_as_i16)
    art_case("weight_wrong_dtype", text, "dtype", tensors=blob)

    def drop_r(entries):
        return [e for e in entries if not e[0].endswith(".R")]

    text, blob = with_tensors(drop_r)
    art_case("weight_missing", text, "missing", tensors=blob)

    def w_shape(entries):
        return [(n, dt, [s[0] * s[1]], r) if n.endswith(".W") else (n, dt, s, r) for n, dt, s, r in entries]

    text, blob = with_tensors(w_shape)
    art_case("weight_wrong_rank", text, "shape", tensors=blob)

    def shift_tensor(entries):
        out = []
        for n, dt, s, r in entries:
            if n.endswith(".shift_W"):
                a = np.frombuffer(r, dtype="<i4").copy()
                a[0] = 1 << 30
                r = a.tobytes()
            out.append((n, dt, s, r))
        return out

    text, blob = with_tensors(shift_tensor)
    art_case("channel_shift_huge", text, "shift|outside", tensors=blob)

    # ---------------------------------------------------------------- GPTQ checkpoint (through linear)
    gq_blob = open(c.path("gptq/base.safetensors"), "rb").read()
    qc_text = open(c.path("gptq/quantize_config.json")).read()
    ACTS = "{C}/base/acts.npy"

    def gq_case(name, blob, keyword, config=None, expect="fail", input_path=ACTS, layer="fc", file=None):
        folder = "gptq" if config is None else "gptq_%s" % name
        rel = c.write("%s/%s.safetensors" % (folder, name), blob)
        if config is not None:
            c.write("%s/quantize_config.json" % folder, config)
        c.case("gq_" + name, expect, file or (rel if config is None else "%s/quantize_config.json" % folder), keyword,
               "linear --checkpoint {C}/%s --layer %s --input %s --output {OUT}/y.npy" % (rel, layer, input_path))

    def gq_mut(fn):
        entries, meta = st_parse(gq_blob)
        return st_bytes(fn(entries), meta)

    gq_case("truncated", gq_blob[:len(gq_blob) - 9], "beyond|truncated")
    gq_case("missing_qzeros", gq_mut(lambda es: [e for e in es if not e[0].endswith("qzeros")]), "qzeros")
    gq_case("qweight_f32", gq_mut(lambda es: [(n, "F32" if n.endswith("qweight") else dt, s, r) for n, dt, s, r in es]),
            "qweight")
    gq_case("qweight_rank_3", gq_mut(lambda es: [(n, dt, [1] + list(s) if n.endswith("qweight") else s, r)
                                                 for n, dt, s, r in es]), "qweight")

    def g_idx_bad(es):
        out = []
        for n, dt, s, r in es:
            if n.endswith("g_idx"):
                a = np.frombuffer(r, dtype="<i4").copy()
                a[5] = 1000
                r = a.tobytes()
            out.append((n, dt, s, r))
        return out

    gq_case("g_idx_out_of_range", gq_mut(g_idx_bad), "g_idx")
    gq_case("scales_wrong_shape", gq_mut(lambda es: [(n, dt, [s[0] * s[1], 1] if n.endswith("scales") else s, r)
                                                     for n, dt, s, r in es]), "scales")
    gq_case("qzeros_wrong_shape", gq_mut(lambda es: [(n, dt, [s[0] * s[1]] if n.endswith("qzeros") else s, r)
                                                     for n, dt, s, r in es]), "qzeros")
    gq_case("absurd_rows_empty", gq_mut(lambda es: [(n, dt, [576460752303423488, 0] if n.endswith("qweight") else s,
                                                     b"" if n.endswith("qweight") else r) for n, dt, s, r in es]),
            "qweight|g_idx|scales|overflow|too large")
    gq_case("layer_absent", gq_blob, "nope", layer="nope")
    gq_case("config_bits_5", gq_blob, "bits", config=qc_text.replace('"bits": 4', '"bits": 5'))
    gq_case("config_bits_string", gq_blob, "bits|type", config=qc_text.replace('"bits": 4', '"bits": "4"'))
    gq_case("config_group_size_zero", gq_blob, "group_size", config=qc_text.replace('"group_size": 16', '"group_size": 0'))
    gq_case("config_not_json", gq_blob, "JSON", config=qc_text[:20])
    gq_case("input_wrong_k", gq_blob, "shape|expected", input_path="{C}/base/x.npy", file="base/x.npy")

    # ---------------------------------------------------------------- ONNX (through calibrate --model)
    s = 1.0 / np.sqrt(HID)
    W = rng.uniform(-s, s, (1, 3 * HID, C_IN))
    R = rng.uniform(-s, s, (1, 3 * HID, HID))
    B = rng.uniform(-s, s, (1, 6 * HID))

    def gru(name="gru", attrs=(), x="x", prefix=""):
        return onnx_node("GRU", [x, prefix + "W", prefix + "R", prefix + "B"], ["Y"], name,
                         [("hidden_size", HID)] + list(attrs))

    def weights(prefix="", w=None, r=None, b=None):
        return [onnx_tensor(prefix + "W", W if w is None else w), onnx_tensor(prefix + "R", R if r is None else r),
                onnx_tensor(prefix + "B", B if b is None else b)]

    base_onnx = onnx_model([gru()], weights())
    c.write("onnx/base.onnx", base_onnx)
    onnx_calib = "calibrate --model {C}/%s --data " + X + " -o {OUT}/stats.json"
    c.case("base_onnx_calibrate", "ok", "onnx/base.onnx", "", onnx_calib % "onnx/base.onnx")

    def onnx_case(name, blob, keyword, extra=""):
        rel = c.write("onnx/%s.onnx" % name, blob)
        c.case("onnx_" + name, "fail", rel, keyword, (onnx_calib % rel) + extra)

    onnx_case("truncated", base_onnx[:len(base_onnx) // 2], "not a valid ONNX model")
    onnx_case("no_gru", onnx_model([onnx_node("Relu", ["x"], ["Y"], "relu")], []), "no GRU node")
    onnx_case("clip", onnx_model([gru(attrs=[("clip", 3.0)])], weights()), "clip")
    onnx_case("activations", onnx_model([gru(attrs=[("activations", ["Relu", "Tanh"])])], weights()), "activations")
    onnx_case("reverse", onnx_model([gru(attrs=[("direction", "reverse")])], weights()), "reverse")
    onnx_case("w_wrong_shape", onnx_model([gru()], weights(w=W[:, 1:, :])), "W has shape")
    onnx_case("r_wrong_shape", onnx_model([gru()], weights(r=R[:, :HID])), "R has shape")
    onnx_case("raw_data_short", onnx_model([gru()], [onnx_tensor("W", W, raw=W.astype("<f4").tobytes()[:-4])] +
                                           weights()[1:]), "raw_data holds")
    nan_w = W.copy()
    nan_w[0, 3, 1] = np.nan
    onnx_case("nan_weight", onnx_model([gru()], weights(w=nan_w)), "NaN")
    onnx_case("huge_dims", onnx_model([gru()], [onnx_tensor("W", dims=[1, 3 * HID, 1 << 40], raw=b"")] + weights()[1:]),
              "W has shape|not valid")
    onnx_case("external_escape", onnx_model([gru()], [onnx_tensor("W", dims=[1, 3 * HID, C_IN],
                                                                  external=[("location", "../base/x.npy")])] +
                                            weights()[1:]), "inside the model's folder")
    onnx_case("external_missing", onnx_model([gru()], [onnx_tensor("W", dims=[1, 3 * HID, C_IN],
                                                                   external=[("location", "absent.bin")])] +
                                             weights()[1:]), "cannot open the external data file")
    onnx_case("two_stacks", onnx_model([gru("a"), gru("b", prefix="b")], weights() + weights("b")), "--node")
    onnx_case("node_absent", base_onnx, "not a GRU node", " --node nope")
    # A node after the GRU with no outputs at all (a malformed graph the fuzzer found): the stack walk stops
    # there and the GRU alone is read.
    rel = c.write("onnx/squeeze_without_output.onnx",
                  onnx_model([gru(), onnx_node("Squeeze", ["Y"], [], "squeeze", [("axes", [1])])], weights()))
    c.case("onnx_squeeze_without_output", "ok", rel, "", onnx_calib % rel)
    # A GRU node of another domain than ONNX's after the Squeeze (the fuzzer made one): the stack walk reached it
    # and looked it up among ONNX's GRU nodes, and the exception left the process. It is not ONNX's GRU: the first
    # GRU alone is read.
    other_domain = onnx_node("GRU", ["s", "bW", "bR", "bB"], ["Y2"], "b", [("hidden_size", HID)]) + pb_field(7, "com.example")
    rel = c.write("onnx/gru_of_other_domain_in_stack.onnx",
                  onnx_model([gru(), onnx_node("Squeeze", ["Y"], ["s"], "squeeze", [("axes", [1])]), other_domain],
                             weights() + weights("b", w=R), outputs=("Y2",)))
    c.case("onnx_gru_of_other_domain_in_stack", "ok", rel, "", onnx_calib % rel)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qgru", required=True, help="the qgru binary (makes the valid baselines)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "corpus"))
    ap.add_argument("--check", action="store_true",
                    help="make the corpus in a scratch folder and compare it with --out; write nothing there")
    args = ap.parse_args()
    if args.check:
        with tempfile.TemporaryDirectory(prefix="qgru-corpus-") as scratch:
            made = os.path.join(scratch, "corpus")
            generate(made, args.qgru)
            sys.exit(compare_trees(os.path.abspath(args.out), made))
    generate(os.path.abspath(args.out), args.qgru)


def tree_files(root):
    """Every file below root, as paths relative to it."""
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}


def compare_trees(committed, made):
    """0 when both trees hold the same files with the same bytes; else 1, the differences on stderr."""
    want, got = tree_files(committed), tree_files(made)
    problems = ["only in %s: %s" % (committed, rel) for rel in sorted(want - got)]
    problems += ["not in %s: %s (the script makes it)" % (committed, rel) for rel in sorted(got - want)]
    for rel in sorted(want & got):
        with open(os.path.join(committed, rel), "rb") as a, open(os.path.join(made, rel), "rb") as b:
            if a.read() != b.read():
                problems.append("differs: %s" % rel)
    if problems:
        print("make_corpus --check: the script does not reproduce %s (%d difference(s); rerun it without --check "
              "and commit the result if the change is meant):" % (committed, len(problems)), file=sys.stderr)
        for line in problems[:40]:
            print("  " + line, file=sys.stderr)
        return 1
    print("make_corpus --check: %d files reproduced byte for byte" % len(want))
    return 0


def generate(out, qgru):
    for sub in ("base", "safetensors", "npy", "npz", "stats", "config", "artifact", "gptq", "onnx"):
        shutil.rmtree(os.path.join(out, sub), ignore_errors=True)
    for entry in os.listdir(out) if os.path.isdir(out) else []:
        if entry.startswith("gptq_"):
            shutil.rmtree(os.path.join(out, entry))
    os.makedirs(out, exist_ok=True)
    c = Corpus(out, os.path.abspath(qgru))
    build(c)
    c.save_manifest()
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    print("make_corpus: %d cases, %d bytes in %s" % (len(c.rows), size, out))


if __name__ == "__main__":
    main()
