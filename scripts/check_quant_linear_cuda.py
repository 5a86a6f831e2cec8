#!/usr/bin/env python3
"""qgru.QuantLinear(device="cuda") against device="cpu" on a GPU (scripts/gpu_session.sh, mode gptq; the package from
the pack's python/ folder on PYTHONPATH). Layers written by qgru.gptq: 4 and 8 bits, v1 (zero points of 0 included)
and v2, group-aware and act-order, with a bias; x of [1, K], [5, K], [2, 3, K] and [40, K], twice on one upload.

The GPU rounds x and each weight to fp16, sums in fp32 and rounds y to fp16 before the fp32 bias; the CPU sums x·ŵ in
fp32. Tolerance per output (test/cuda/capi_check.cpp's): 2^-10·|ref| + 3·2^-11·mag + 2·K·2^-23·mag + 2^-22 with
mag = |x|·|Ŵ|ᵀ + |bias|, Ŵ read back from the CPU layer itself (identity rows through the layer without its bias:
one product per output, exact). Also: a 2-bit layer refused on CUDA naming the layer.
Before the layers, the package's GPTQ on the GPU against its CPU path (the bindings' CUDA job device, which the GPU
self-test's gptq check does not go through): qgru.Hessian(K, device="cuda") against device="cpu" from the same two
chunks (float64 sums of exact products: max |dH| <= 1e-11 max |H|, exactly symmetric, the same token count), and
qgru.gptq(device="cuda") from the rows and from that Hessian against device="cpu" (gptq_error within 1%, as
gpu_session.sh's CLI comparison).
Prints one line per case; exits 1 on any failure. Needs NumPy and a CUDA-built qgru package."""
import os
import sys
import tempfile

import numpy as np

import qgru

N, K, GROUP = 256, 512, 128


def check(path, rng):
    cpu, gpu = qgru.QuantLinear(path), qgru.QuantLinear(path, device="cuda")
    w_hat_t = qgru.QuantLinear(path, no_bias=True)(np.eye(K, dtype=np.float32)).astype(np.float64)  # [K, N]
    bias = cpu(np.zeros((1, K), np.float32))[0].astype(np.float64)
    failures = 0
    for shape in ((1, K), (5, K), (2, 3, K), (40, K), (5, K)):
        x = rng.standard_normal(shape).astype(np.float32)
        want, got = cpu(x).astype(np.float64), gpu(x).astype(np.float64)
        mag = np.abs(x.reshape(-1, K).astype(np.float64)) @ np.abs(w_hat_t) + np.abs(bias)
        ref = want.reshape(-1, N)
        tol = 2.0**-10 * np.abs(ref) + 3 * 2.0**-11 * mag + 2 * K * 2.0**-23 * mag + 2.0**-22
        bad = got.shape != want.shape or not np.all(np.abs(got.reshape(-1, N) - ref) <= tol)
        worst = float(np.max(np.abs(got.reshape(-1, N) - ref) / tol)) if got.shape == want.shape else float("nan")
        print(f"{'FAIL' if bad else 'ok  '} {os.path.basename(os.path.dirname(path))} x {list(shape)}: "
              f"max |cuda - cpu| / tol = {worst:.3f}")
        failures += bad
    return failures


def check_gptq_devices(weight, activations):
    failures = 0
    half = activations.shape[0] // 2
    cpu_h = qgru.Hessian(K, device="cpu").add(activations[:half]).add(activations[half:])
    gpu_h = qgru.Hessian(K, device="cuda").add(activations[:half]).add(activations[half:])
    want, got = cpu_h.matrix(), gpu_h.matrix()
    ratio = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    symmetric = bool(np.array_equal(got, got.T))
    bad = not (ratio <= 1e-11) or not symmetric or gpu_h.tokens != activations.shape[0]
    print(f"{'FAIL' if bad else 'ok  '} Hessian cuda vs cpu: max |dH| / max |H| = {ratio:.3g}, symmetric {symmetric}, "
          f"tokens {gpu_h.tokens}")
    failures += bad
    cpu_error = qgru.gptq(weight, activations, group_size=GROUP, device="cpu").gptq_error
    for how, result in (("rows", qgru.gptq(weight, activations, group_size=GROUP, device="cuda")),
                        ("Hessian", qgru.gptq(weight, hessian=gpu_h, group_size=GROUP, device="cuda"))):
        bad = not (abs(result.gptq_error - cpu_error) <= 0.01 * cpu_error)
        print(f"{'FAIL' if bad else 'ok  '} gptq cuda from its {how} vs cpu: gptq_error {result.gptq_error:.6g} vs "
              f"{cpu_error:.6g}")
        failures += bad
    return failures


def main():
    rng = np.random.default_rng(20261128)
    failures = 0
    with tempfile.TemporaryDirectory() as folder:
        weight = rng.standard_normal((N, K)).astype(np.float32)
        weight[::4] = np.abs(weight[::4])  # rows >= 0: asymmetric zero points of 0
        bias = rng.standard_normal(N).astype(np.float32)
        activations = rng.standard_normal((1024, K)).astype(np.float32)
        try:
            failures += check_gptq_devices(weight, activations)
        except qgru.Error as error:  # the QuantLinear cases still run
            print(f"FAIL GPTQ on cuda: {error}")
            failures += 1
        for bits in (4, 8):
            for fmt in ("gptq", "gptq_v2"):
                for order in ("group-aware", "act-order"):
                    case = os.path.join(folder, f"{bits}bit-{fmt}-{order}")
                    os.mkdir(case)
                    path = os.path.join(case, "q.safetensors")
                    qgru.gptq(weight, activations, bits=bits, group_size=GROUP, order=order, format=fmt,
                              name="fc.weight", bias=bias, checkpoint=path)
                    failures += check(path, rng)
        os.mkdir(os.path.join(folder, "2bit"))
        path = os.path.join(folder, "2bit", "q.safetensors")
        qgru.gptq(weight, activations, bits=2, group_size=GROUP, name="fc.weight", checkpoint=path)
        try:
            qgru.QuantLinear(path, device="cuda")
            print("FAIL 2-bit layer on cuda: accepted")
            failures += 1
        except qgru.Error as error:
            ok = str(error).startswith(f"{path}: layer 'fc': device cuda: ")
            print(f"{'ok  ' if ok else 'FAIL'} 2-bit layer on cuda refused: {error}")
            failures += not ok
    print(f"GPTQ and QuantLinear cuda vs cpu: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
