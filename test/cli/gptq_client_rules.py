#!/usr/bin/env python3
"""The rules GPTQ clients apply when they load a checkpoint, written down from their source (GPTQModel 7.7.0,
transformers 5.24.0 with optimum 2.3.0; docs/GPTQ.md, "Clients"), checked on checkpoints qgru wrote, without
the clients installed. Used by gptq_clients.sh:

    gptq_client_rules.py FOLDER...   each FOLDER holds model.safetensors, quantize_config.json, and for at
                                     least one layer w_<layer>.npy: qgru's Ŵᵀ [K, N] (`qgru linear` on the
                                     identity, no bias)

For each folder: the config keys, the tensors' dtypes and shapes, g_idx, and Ŵ decoded by the clients'
formula compared bit for bit with qgru's. Prints one Markdown table row per folder; exit 1 on any violation.
"""
import json
import os
import struct
import sys

import numpy as np

# GPTQModel quantization/config.py: MIN_VERSION_WITH_V2 = "0.9.0"; the loader (models/loader.py) refuses
# sym=False with format gptq unless meta.quantizer has a "gptqmodel:<version >= 0.9.0>" entry.
MIN_VERSION_WITH_V2 = (0, 9, 0)
# utils/model.py convert_gptq_v1_to_v2_format_module, int32 words: qzeros += these (2, 4, 8 bits).
V1_WORD_OFFSET = {2: 0b01010101010101010101010101010101, 4: 0b00010001000100010001000100010001,
                  8: 0b00000001000000010000000100000001}


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    dtypes = {"I32": np.int32, "F16": np.float16, "F32": np.float32, "BF16": None}
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        dtype = dtypes[meta["dtype"]]
        if dtype is not None:
            tensors[name] = (meta["dtype"], np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dtype).reshape(meta["shape"]))
        else:
            tensors[name] = (meta["dtype"], None)
    return tensors


def version_tuple(text):
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts + [0] * (3 - len(parts)))


def check_config(config, problems):
    """GPTQModel QuantizeConfig.from_quant_config / GPTQConfig.__post_init__ / loader, transformers GPTQConfig."""
    fmt = config.get("format", config.get("checkpoint_format"))
    if "format" in config and "checkpoint_format" in config and config["format"] != config["checkpoint_format"]:
        problems.append("format and checkpoint_format disagree")
    if fmt not in ("gptq", "gptq_v2"):
        problems.append(f"format {fmt!r}")
    if config.get("quant_method") != "gptq":
        problems.append("quant_method is not gptq")
    if config.get("bits") not in (2, 3, 4, 8):  # transformers GPTQConfig.post_init
        problems.append(f"bits {config.get('bits')}")
    gs = config.get("group_size")
    if not isinstance(gs, int) or (gs != -1 and gs <= 0):
        problems.append(f"group_size {gs}")
    if "sym" not in config:  # GPTQModel defaults a missing sym to True ("may result in silent errors")
        problems.append("sym missing")
    damp = config.get("damp_percent")
    if not (isinstance(damp, (int, float)) and 0 < damp < 1):  # both clients: 0 < damp_percent < 1
        problems.append(f"damp_percent {damp}")
    meta = config.get("meta", {})
    if config.get("desc_act") and meta.get("act_group_aware"):  # GPTQConfig: act_group_aware requires not desc_act
        problems.append("desc_act with act_group_aware")
    quantizers = meta.get("quantizer", [])
    if not isinstance(quantizers, list) or not all(isinstance(q, str) and len(q.split(":")) >= 2 for q in quantizers):
        problems.append(f"meta.quantizer {quantizers!r} is not a list of 'name:version'")
        quantizers = []
    if fmt == "gptq" and not config.get("sym", True):
        ok = any(q.split(":")[0].lower() == "gptqmodel" and version_tuple(q.split(":")[1]) >= MIN_VERSION_WITH_V2
                 for q in quantizers)
        if not ok:
            problems.append("asymmetric v1 without a gptqmodel >= 0.9.0 quantizer entry: GPTQModel.load refuses it")
    return fmt


def unpack_rows(words, bits, count):
    """GPTQModel TorchQuantLinear.dequantize_weight: qweight [rows, N] -> codes [count, N]."""
    words = words.view(np.uint32).astype(np.uint64)
    if bits in (2, 4, 8):
        per = 32 // bits
        codes = np.stack([(words >> np.uint64(bits * i)) & np.uint64((1 << bits) - 1) for i in range(per)], axis=1)
        return codes.reshape(-1, words.shape[1])[:count].astype(np.int64)
    return unpack_3bit(words.T, count).T  # 3 bits: 32 codes in 3 words


def unpack_3bit(words, count):
    """GPTQModel model_dequant._unpack_cols_3bit along the last axis: [R, 3·B] words -> [R, 32·B] codes."""
    rows = words.shape[0]
    w = words.reshape(rows, -1, 3)
    w0, w1, w2 = w[:, :, 0], w[:, :, 1], w[:, :, 2]
    out = np.zeros((rows, w.shape[1], 32), dtype=np.int64)
    for idx in range(10):
        out[:, :, idx] = (w0 >> np.uint64(3 * idx)) & np.uint64(7)
        out[:, :, 11 + idx] = (w1 >> np.uint64(1 + 3 * idx)) & np.uint64(7)
        out[:, :, 22 + idx] = (w2 >> np.uint64(2 + 3 * idx)) & np.uint64(7)
    out[:, :, 10] = ((w0 >> np.uint64(30)) & np.uint64(3)) | ((w1 << np.uint64(2)) & np.uint64(4))
    out[:, :, 21] = ((w1 >> np.uint64(31)) & np.uint64(1)) | ((w2 << np.uint64(1)) & np.uint64(6))
    return out.reshape(rows, -1)[:, :count]


def client_zeros(qzeros, bits, N, fmt):
    """v1 -> v2 as GPTQModel converts it, then the fields."""
    words = qzeros.view(np.uint32).astype(np.uint64)
    if fmt == "gptq" and bits != 3:
        words = (words + np.uint64(V1_WORD_OFFSET[bits])) & np.uint64(0xFFFFFFFF)
    if bits == 3:
        zeros = unpack_3bit(words, N)
        return (zeros + 1) & 7 if fmt == "gptq" else zeros  # _correct_gptq_v1_qzeros: per field, masked
    per = 32 // bits
    zeros = np.stack([(words >> np.uint64(bits * i)) & np.uint64((1 << bits) - 1) for i in range(per)], axis=2)
    return zeros.reshape(words.shape[0], -1)[:, :N].astype(np.int64)


def check_folder(folder):
    problems = []
    config = json.load(open(os.path.join(folder, "quantize_config.json")))
    fmt = check_config(config, problems)
    bits, gs = config["bits"], config["group_size"]
    tensors = read_safetensors(os.path.join(folder, "model.safetensors"))
    layers = sorted(name[:-len(".qweight")] for name in tensors if name.endswith(".qweight"))
    if not layers:
        problems.append("no layer")
    compared = 0
    zero_points_of_zero = [0]
    for layer in layers:
        (qw_t, qweight), (qz_t, qzeros) = tensors[layer + ".qweight"], tensors[layer + ".qzeros"]
        (sc_t, scales), (gi_t, g_idx) = tensors[layer + ".scales"], tensors[layer + ".g_idx"]
        N = qweight.shape[1]
        K = qweight.shape[0] * 32 // bits
        G = -(-K // (gs if gs != -1 else K))  # GPTQModel: ceil(in_features / group_size)
        want = {"qweight": ("I32", (K * bits // 32, N)), "qzeros": ("I32", (G, N * bits // 32)),
                "scales": ("F16", (G, N)), "g_idx": ("I32", (K,))}
        for part, (dtype, shape) in want.items():
            got_dtype, got = tensors[layer + "." + part]
            if got_dtype != dtype or tuple(got.shape) != shape:
                problems.append(f"{layer}.{part} is {got_dtype} {list(got.shape)}, clients expect {dtype} {list(shape)}")
        if layer + ".bias" in tensors and (tensors[layer + ".bias"][0] != "F16" or tensors[layer + ".bias"][1].shape != (N,)):
            problems.append(f"{layer}.bias is not F16 [{N}]")
        # g_idx (GPTQModel quantization/gptq.py): k // group_size unless desc_act without static groups, where
        # it is a permutation of it (every group keeps its size).
        trivial = np.arange(K) // (gs if gs != -1 else K)
        if config.get("desc_act") and not config.get("static_groups"):
            if not np.array_equal(np.sort(g_idx), trivial):
                problems.append(f"{layer}.g_idx is not a permutation of k // group_size")
        elif not np.array_equal(g_idx, trivial):
            problems.append(f"{layer}.g_idx is not k // group_size although desc_act is false or groups are static")
        mine_path = os.path.join(folder, f"w_{layer}.npy")
        if problems or not os.path.exists(mine_path):
            continue
        compared += 1
        codes = unpack_rows(qweight, bits, K)                     # [K, N]
        zeros = client_zeros(qzeros, bits, N, fmt)                 # [G, N]
        W = scales.astype(np.float64)[g_idx] * (codes - zeros[g_idx])  # exact in float64
        if fmt == "gptq" and not config.get("sym", True):
            zero_points_of_zero[0] += int(np.sum(zeros == 0))
        mine = np.load(mine_path).astype(np.float64)
        if mine.shape != W.shape or not np.array_equal(mine, W):
            bad = int(np.sum(mine != W)) if mine.shape == W.shape else -1
            problems.append(f"{layer}: Ŵ differs from the clients' decoding in {bad} weight(s)")
    if fmt == "gptq" and not config.get("sym", True) and zero_points_of_zero[0] == 0 and not problems:
        problems.append("no zero point of 0 in this asymmetric v1 checkpoint: the borrow case went untested")
    if compared == 0 and not problems:
        problems.append("no layer with qgru's Ŵ (w_<layer>.npy) to compare")
    return config, layers, problems, zero_points_of_zero[0]


def main(folders):
    print("| bits | sym | format | order | static groups | layers | v1 zero points of 0 | Ŵ: qgru vs the clients' formula |")
    print("|---|---|---|---|---|---|---|---|")
    failures = 0
    for folder in folders:
        config, layers, problems, zeros_of_zero = check_folder(folder)
        meta = config.get("meta", {})
        order = "act-order" if config.get("desc_act") else "group-aware" if meta.get("act_group_aware") else "natural"
        verdict = "identical" if not problems else "; ".join(problems)
        print(f"| {config.get('bits')} | {config.get('sym')} | {config.get('format')} | {order} | "
              f"{config.get('static_groups')} | {len(layers)} | {zeros_of_zero} | {verdict} |")
        failures += bool(problems)
    print(f"gptq_client_rules: {len(folders) - failures} checkpoint(s) as the clients read them, {failures} not")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
