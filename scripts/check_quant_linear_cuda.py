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
PyTorch CUDA tensors (x kept on the GPU, the call queued on PyTorch's current stream): the float32 CUDA tensor
returned equals the host path's array bit for bit, for fp32 and fp16 x, a view with an odd offset (copied to
16-byte alignment), x written on a side stream after a sleep kernel (a missing wait reads the zeros it held), and
calls on two streams at once (ordered on the GPU by the layer's event), and a host-array call made while a
CUDA-tensor call is still queued (it waits for it).
Prints one line per case; exits 1 on any failure. Needs NumPy, PyTorch with CUDA and a CUDA-built qgru package."""
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


def check_tensors(path, rng):
    """The GPU path for PyTorch CUDA tensors against the host path, bit for bit."""
    import torch

    gpu = qgru.QuantLinear(path, device="cuda")
    name = os.path.basename(os.path.dirname(path))
    failures = 0

    def same(label, x_host, y_tensor):
        nonlocal failures
        want = gpu(x_host)
        got = y_tensor.cpu().numpy()
        bad = not (y_tensor.is_cuda and y_tensor.dtype == torch.float32 and got.shape == want.shape and
                   np.array_equal(got.view(np.uint32), want.view(np.uint32)))
        print(f"{'FAIL' if bad else 'ok  '} {name} CUDA tensor {label}: {list(got.shape)}, "
              f"bit for bit {'no' if bad else 'yes'}")
        failures += bad

    x = rng.standard_normal((2, 3, K)).astype(np.float32)
    same("fp32 [2, 3, K]", x, gpu(torch.from_numpy(x).cuda()))
    x64 = rng.standard_normal((3, K))
    same("fp64 [3, K]", x64, gpu(torch.from_numpy(x64).cuda()))
    x16 = torch.from_numpy(rng.standard_normal((5, K)).astype(np.float32)).cuda().half()
    same("fp16 [5, K]", x16.float().cpu().numpy(), gpu(x16))
    wide = torch.from_numpy(rng.standard_normal((4, K + 1)).astype(np.float32)).cuda().half()
    view = wide[:, 1:]  # starts 2 bytes in: not 16-byte aligned, rows not contiguous
    same("fp16 view at an odd offset", view.float().cpu().numpy(), gpu(view))
    # x written on a side stream after ~0.1 s of sleep; the call is queued on that stream.
    source = rng.standard_normal((8, K)).astype(np.float32)
    source_gpu = torch.from_numpy(source).cuda()
    late = torch.zeros((8, K), device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        late.copy_(source_gpu)  # device to device: queued behind the sleep, the host does not wait
        y_late = gpu(late)
    torch.cuda.synchronize()
    same("written on a side stream", source, y_late)
    # A host-array call right behind a CUDA-tensor call still queued on a side stream: it waits for it.
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        y_queued = gpu(source_gpu)
    y_host_now = gpu(source)
    torch.cuda.synchronize()
    same("queued, then a host call at once", source, y_queued)
    want = gpu(source)
    ok = np.array_equal(y_host_now.view(np.uint32), want.view(np.uint32))
    print(f"{'ok  ' if ok else 'FAIL'} {name} host call behind a queued CUDA-tensor call: bit for bit {'yes' if ok else 'no'}")
    failures += not ok
    # Two streams calling the one layer at once: each result as if alone.
    xs = [rng.standard_normal((3, K)).astype(np.float32) for _ in range(2)]
    streams = [torch.cuda.Stream() for _ in xs]
    ys = []
    for s, xi in zip(streams, xs):
        with torch.cuda.stream(s):
            ys.append(gpu(torch.from_numpy(xi).cuda()))
    torch.cuda.synchronize()
    for i, (xi, yi) in enumerate(zip(xs, ys)):
        same(f"stream {i} of 2 at once", xi, yi)
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
            import torch
            torch_gpu = torch.cuda.is_available()
        except ImportError:
            torch_gpu = False
        if not torch_gpu:  # the other cases still run
            print("FAIL PyTorch CUDA tensors: no PyTorch that sees a GPU in this python3")
            failures += 1
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
                    if torch_gpu:
                        failures += check_tensors(path, rng)
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
