#!/usr/bin/python3
"""Reference GPTQ for checking `qgru gptq` (run by hand; tests never need Python or torch).

The algorithm is a transcription of IST-DASLab/gptq (gptq.py GPTQ.add_batch / fasterquant, quant.py
Quantizer / quantize) with AutoGPTQ's g_idx / static-groups bookkeeping, and the packing loops of AutoGPTQ's
QuantLinear.pack (qweight, qzeros with the v1 "zeros - 1"). Uses torch (CPU) and numpy only.

  make-data  --out DIR --n N --k K --m M --kind iso|corr [--seed S]
             writes DIR/weights.safetensors ("layer.weight" F32 [N, K]) and DIR/x.npy (F32 [M, K])
  run        --weights W.safetensors --tensor NAME --activations x.npy [--bits 4 --group-size 128
             --act-order --static-groups --sym --damp 0.01 --dtype float32|float64 --threads 2]
             [--ours qgru_out.safetensors --ours-format gptq|gptq_v2] [-o ref_out.safetensors]
             prints the reference's ‖(W-Ŵ)X‖²/‖WX‖², RTN's, the time, and with --ours the same for qgru's
             checkpoint plus the fraction of codes that agree.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch

# --------------------------------------------------------------------------------------------- safetensors
_DT = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "F64": np.float64}
_DT_NAME = {np.dtype(v): k for k, v in _DT.items()}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + e], dtype=_DT[info["dtype"]]).reshape(info["shape"])
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        raw = a.tobytes()
        header[name] = {"dtype": _DT_NAME[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


# ------------------------------------------------------------------------------------- reference quantizer
def quantize(x, scale, zero, maxq):  # quant.py
    q = torch.clamp(torch.round(x / scale) + zero, 0, maxq)
    return scale * (q - zero)


class Quantizer:  # quant.py Quantizer(perchannel=True, sym, mse=False), find_params(weight=True)
    def __init__(self, bits, sym):
        self.maxq = torch.tensor(2 ** bits - 1)
        self.sym = sym

    def find_params(self, x):
        tmp = torch.zeros(x.shape[0], dtype=x.dtype)
        xmin = torch.minimum(x.min(1)[0], tmp)
        xmax = torch.maximum(x.max(1)[0], tmp)
        if self.sym:
            xmax = torch.maximum(torch.abs(xmin), xmax)
            tmp = xmin < 0
            if torch.any(tmp):
                xmin[tmp] = -xmax[tmp]
        tmp = (xmin == 0) & (xmax == 0)
        xmin[tmp] = -1
        xmax[tmp] = +1
        self.scale = (xmax - xmin) / self.maxq
        if self.sym:
            self.zero = torch.full_like(self.scale, (self.maxq + 1) / 2)
        else:
            self.zero = torch.round(-xmin / self.scale)
        self.scale = self.scale.unsqueeze(1)
        self.zero = self.zero.unsqueeze(1)


def hessian(X, dtype):  # GPTQ.add_batch for a linear layer fed all rows of X [M, K] at once
    inp = X.to(dtype).t()
    nsamples = X.shape[0]
    inp = math.sqrt(2 / nsamples) * inp
    return inp.matmul(inp.t())


def fasterquant(W, H, bits, groupsize, actorder, static_groups, sym, percdamp, blocksize=128):
    """gptq.py fasterquant with AutoGPTQ's scale/zero/g_idx lists. Returns Q (dequantized), scale, zero,
    g_idx as AutoGPTQ's quantize() hands them to pack()."""
    W = W.clone()
    H = H.clone()
    columns = W.shape[1]
    quantizer = Quantizer(bits, sym)
    quantizer.find_params(W)
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    g = groupsize if groupsize != -1 else columns
    scale, zero, groups = [], [], []
    if static_groups and groupsize != -1:
        for i in range(0, columns, groupsize):
            q = Quantizer(bits, sym)
            q.find_params(W[:, i:(i + groupsize)])
            scale.append(q.scale)
            zero.append(q.zero)
            groups.append(q)
    perm = torch.arange(columns)
    if actorder:
        perm = torch.argsort(torch.diag(H), descending=True, stable=True)
        W = W[:, perm]
        H = H[perm][:, perm]
        invperm = torch.argsort(perm)
    Q = torch.zeros_like(W)
    damp = percdamp * torch.mean(torch.diag(H))
    diag = torch.arange(columns)
    H[diag, diag] += damp
    H = torch.linalg.cholesky(H)
    H = torch.cholesky_inverse(H)
    H = torch.linalg.cholesky(H, upper=True)
    Hinv = H
    now_idx = 1
    for i1 in range(0, columns, blocksize):
        i2 = min(i1 + blocksize, columns)
        count = i2 - i1
        W1 = W[:, i1:i2].clone()
        Q1 = torch.zeros_like(W1)
        Err1 = torch.zeros_like(W1)
        Hinv1 = Hinv[i1:i2, i1:i2]
        for i in range(count):
            w = W1[:, i]
            d = Hinv1[i, i]
            if groupsize != -1:
                if not static_groups:
                    if (i1 + i) % groupsize == 0:
                        quantizer.find_params(W[:, (i1 + i):(i1 + i + groupsize)])
                    if ((i1 + i) // groupsize) - now_idx == -1:
                        scale.append(quantizer.scale)
                        zero.append(quantizer.zero)
                        now_idx += 1
                else:
                    idx = i1 + i
                    if actorder:
                        idx = perm[idx]
                    quantizer = groups[idx // groupsize]
            q = quantize(w.unsqueeze(1), quantizer.scale, quantizer.zero, quantizer.maxq).flatten()
            Q1[:, i] = q
            err1 = (w - q) / d
            W1[:, i:] -= err1.unsqueeze(1).matmul(Hinv1[i, i:].unsqueeze(0))
            Err1[:, i] = err1
        Q[:, i1:i2] = Q1
        W[:, i2:] -= Err1.matmul(Hinv[i1:i2, i2:])
    if static_groups and actorder:
        g_idx = [int(perm[i]) // g for i in range(columns)]
    else:
        g_idx = [i // g for i in range(columns)]
    g_idx = torch.tensor(g_idx, dtype=torch.int32)
    if actorder:
        Q = Q[:, invperm]
        g_idx = g_idx[invperm]
    if not scale:
        scale.append(quantizer.scale)
        zero.append(quantizer.zero)
    return Q, torch.cat(scale, dim=1), torch.cat(zero, dim=1), g_idx


def rtn(W, bits, groupsize, sym):
    g = groupsize if groupsize != -1 else W.shape[1]
    Q = torch.zeros_like(W)
    for i in range(0, W.shape[1], g):
        q = Quantizer(bits, sym)
        q.find_params(W[:, i:i + g])
        Q[:, i:i + g] = quantize(W[:, i:i + g], q.scale, q.zero, q.maxq)
    return Q


# ----------------------------------------------------------------------------------- AutoGPTQ pack loops
def pack_rows(intweight, bits):  # intweight [K, N] uint32 → [K/32*bits, N]
    q = np.zeros((intweight.shape[0] // 32 * bits, intweight.shape[1]), dtype=np.uint32)
    i = row = 0
    while row < q.shape[0]:
        if bits in (2, 4, 8):
            for j in range(i, i + 32 // bits):
                q[row] |= intweight[j] << (bits * (j - i))
            i += 32 // bits
            row += 1
        else:
            for j in range(i, i + 10):
                q[row] |= intweight[j] << (3 * (j - i))
            i += 10
            q[row] |= intweight[i] << 30
            row += 1
            q[row] |= (intweight[i] >> 2) & 1
            i += 1
            for j in range(i, i + 10):
                q[row] |= intweight[j] << (3 * (j - i) + 1)
            i += 10
            q[row] |= intweight[i] << 31
            row += 1
            q[row] |= (intweight[i] >> 1) & 0x3
            i += 1
            for j in range(i, i + 10):
                q[row] |= intweight[j] << (3 * (j - i) + 2)
            i += 10
            row += 1
    return q


def pack(Q, scale, zero, g_idx, bits, v2):
    """QuantLinear.pack: codes recomputed from Q with fp16 scales, zeros minus one for v1."""
    scales = scale.t().contiguous()  # [G, N]
    zeros = zero.t().contiguous()
    scale_zeros = zeros * scales
    scales_h = scales.half()
    gi = g_idx.long()
    intweight = torch.round((Q + scale_zeros[gi].t()) / scales_h[gi].t().float()).to(torch.int64)  # [N, K]
    intweight = intweight.t().contiguous().numpy().astype(np.uint32)
    qweight = pack_rows(intweight, bits).astype(np.int32)
    z = zeros.numpy().astype(np.int64)
    if not v2:
        z = z - 1
    z = (z & (2 ** bits - 1)).astype(np.uint32)  # AutoGPTQ ORs the raw value; masked here
    qzeros = pack_rows(z.T.copy(), bits).T.copy().astype(np.int32)
    return {"qweight": qweight, "qzeros": qzeros, "scales": scales_h.numpy(), "g_idx": g_idx.numpy().astype(np.int32)}


def unpack_codes(words, count, bits):  # bit stream along axis 0 → [count, cols]
    w = words.astype(np.uint32).astype(np.uint64)
    out = np.zeros((count, w.shape[1]), dtype=np.int64)
    for i in range(count):
        bit = i * bits
        word, shift = bit // 32, bit % 32
        v = w[word] >> np.uint64(shift)
        if shift + bits > 32:
            v |= w[word + 1] << np.uint64(32 - shift)
        out[i] = (v & np.uint64(2 ** bits - 1)).astype(np.int64)
    return out


def dequant_checkpoint(t, prefix, bits, v2, K):
    codes = unpack_codes(t[prefix + ".qweight"], K, bits).T  # [N, K]
    G, N = t[prefix + ".scales"].shape
    zeros = unpack_codes(t[prefix + ".qzeros"].T.copy(), N, bits).T  # [G, N]
    if not v2:
        zeros = zeros + 1
    s = t[prefix + ".scales"].astype(np.float64)
    g = t[prefix + ".g_idx"].astype(np.int64)
    return s[g].T * (codes - zeros[g].T), codes


def rel_err(W, Wq, X):
    return float(((W - Wq) @ X.T).pow(2).sum() / (W @ X.T).pow(2).sum())


# ------------------------------------------------------------------------------------------------ main
def make_data(a):
    rng = np.random.default_rng(a.seed)
    W = (rng.standard_normal((a.n, a.k)) * 0.02).astype(np.float32)
    if a.kind == "iso":
        X = rng.standard_normal((a.m, a.k))
    else:  # correlated features (rank k/16 latent factors + 5% noise), channel scales exp(N(0, 1))
        r = max(1, a.k // 16)
        X = rng.standard_normal((a.m, r)) @ rng.standard_normal((r, a.k)) + 0.05 * rng.standard_normal((a.m, a.k))
        X *= np.exp(rng.standard_normal(a.k))[None, :]
    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "weights.safetensors"), {"layer.weight": W})
    np.save(os.path.join(a.out, "x.npy"), X.astype(np.float32))


def run(a):
    torch.set_num_threads(a.threads)
    dtype = torch.float64 if a.dtype == "float64" else torch.float32
    W0 = torch.from_numpy(read_safetensors(a.weights)[a.tensor].astype(np.float32))
    X = torch.from_numpy(np.load(a.activations).astype(np.float32).reshape(-1, W0.shape[1]))
    W, Xd = W0.to(dtype), X.to(torch.float64)
    t0 = time.time()
    H = hessian(X, dtype)
    t1 = time.time()
    Q, scale, zero, g_idx = fasterquant(W, H, a.bits, a.group_size, a.act_order, a.static_groups, a.sym, a.damp)
    t2 = time.time()
    W64 = W0.to(torch.float64)
    packed = pack(Q.to(torch.float32), scale.to(torch.float32), zero.to(torch.float32), g_idx, a.bits, a.format == "gptq_v2")
    prefix = a.tensor[:-len(".weight")] if a.tensor.endswith(".weight") else a.tensor
    ckpt = {prefix + "." + k: v for k, v in packed.items()}
    Wref, ref_codes = dequant_checkpoint(ckpt, prefix, a.bits, a.format == "gptq_v2", W0.shape[1])
    result = {
        "shape": list(W0.shape), "tokens": int(X.shape[0]), "dtype": a.dtype, "threads": a.threads,
        "ref_hessian_s": round(t1 - t0, 3), "ref_gptq_s": round(t2 - t1, 3),
        "ref_rel_err": rel_err(W64, torch.from_numpy(Wref), Xd),
        "ref_rel_err_float_scales": rel_err(W64, Q.to(torch.float64), Xd),
        "rtn_rel_err": rel_err(W64, rtn(W64, a.bits, a.group_size, a.sym), Xd),
    }
    result["ref_over_rtn"] = result["ref_rel_err"] / result["rtn_rel_err"]
    if a.ours:
        ours = read_safetensors(a.ours)
        Wours, codes = dequant_checkpoint(ours, prefix, a.bits, a.ours_format == "gptq_v2", W0.shape[1])
        result["ours_rel_err"] = rel_err(W64, torch.from_numpy(Wours), Xd)
        result["ours_over_ref"] = result["ours_rel_err"] / result["ref_rel_err"]
        result["code_agreement"] = float((codes == ref_codes).mean())
        result["g_idx_equal"] = bool((ours[prefix + ".g_idx"] == packed["g_idx"]).all())
    if a.output:
        write_safetensors(a.output, ckpt)
    print(json.dumps(result, indent=1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make-data")
    m.add_argument("--out", required=True)
    m.add_argument("--n", type=int, default=256)
    m.add_argument("--k", type=int, default=256)
    m.add_argument("--m", type=int, default=1024)
    m.add_argument("--kind", choices=["iso", "corr"], default="corr")
    m.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("run")
    r.add_argument("--weights", required=True)
    r.add_argument("--tensor", default="layer.weight")
    r.add_argument("--activations", required=True)
    r.add_argument("--bits", type=int, default=4)
    r.add_argument("--group-size", type=int, default=128)
    r.add_argument("--act-order", action="store_true")
    r.add_argument("--static-groups", action="store_true")
    r.add_argument("--sym", action="store_true")
    r.add_argument("--damp", type=float, default=0.01)
    r.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    r.add_argument("--threads", type=int, default=2)
    r.add_argument("--format", choices=["gptq", "gptq_v2"], default="gptq_v2")
    r.add_argument("--ours")
    r.add_argument("--ours-format", choices=["gptq", "gptq_v2"], default="gptq")
    r.add_argument("-o", "--output")
    a = p.parse_args()
    make_data(a) if a.cmd == "make-data" else run(a)


if __name__ == "__main__":
    sys.exit(main())
