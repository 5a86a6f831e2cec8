#!/usr/bin/env python3
"""qgru.Hessian(device="cuda").add of rows already on the GPU (PyTorch CUDA tensors, read in place) on a GPU
(scripts/gpu_session.sh, mode gptq; the package from the pack's python/ folder on PYTHONPATH, PyTorch with CUDA).

Each case's H against an independent float64 reference 2·XᵀX formed by PyTorch on the CPU from the same float32
rows, within 1e-12 of H's largest entry (float32 products are exact in float64; only the summation order
differs): float32 [3, 200, K] rows, bfloat16 rows, a transposed view, rows padded inside a wider tensor (read
with their stride), rows in two calls, and host rows on the same accumulator. Stream order: rows written on a
side stream after a long sleep kernel, added while that stream is current (a missing wait reads the zeros the
buffer held before and fails). A NaN row refused naming the rows, nothing accumulated. qgru.gptq given CUDA
activations on device cuda: the same qweight as from the Hessian fed the same chunks, its error within 1% of
the CPU path's. Then the seconds of one
add of 16,384 × 4096 rows in place and through the host (median of 3), a figure for docs/benchmarks/gptq.md.
Prints one line per case; exits 1 on any failure."""
import sys
import time

import numpy as np
import torch

import qgru

K = 256


def reference(chunks):
    H = torch.zeros((K, K), dtype=torch.float64)
    for chunk in chunks:
        x = chunk.detach().reshape(-1, K).float().cpu().double()
        H += 2.0 * x.T @ x
    return H.numpy()


def compare(name, hessian, chunks):
    want, got = reference(chunks), hessian.matrix()
    scale = float(np.max(np.abs(want)))
    diff = float(np.max(np.abs(got - want)))
    tokens = sum(c.reshape(-1, K).shape[0] for c in chunks)
    bad = not (diff <= 1e-12 * scale) or hessian.tokens != tokens
    print(f"{'FAIL' if bad else 'ok  '} {name}: max |H - ref| / max |ref| = {diff / scale:.2e}, "
          f"tokens {hessian.tokens} (expected {tokens})")
    return int(bad)


def main():
    if not torch.cuda.is_available():
        print("FAIL: PyTorch sees no GPU")
        return 1
    torch.manual_seed(20261129)
    dev = torch.device("cuda")
    failures = 0
    x = torch.randn((3, 200, K), device=dev)
    failures += compare("float32 [3, 200, K]", qgru.Hessian(K, "cuda").add(x), [x])
    xb = torch.randn((500, K), device=dev).to(torch.bfloat16)
    failures += compare("bfloat16 [500, K]", qgru.Hessian(K, "cuda").add(xb), [xb])
    xt = torch.randn((K, 300), device=dev).T  # a transposed view: made contiguous on the GPU
    failures += compare("transposed view [300, K]", qgru.Hessian(K, "cuda").add(xt), [xt])
    wide = torch.randn((400, K + 64), device=dev)
    wide[:, K:] = float("nan")  # the padding: reading it would poison H or be refused
    failures += compare("rows padded to K + 64", qgru.Hessian(K, "cuda").add(wide[:, :K]), [wide[:, :K]])
    host = np.random.default_rng(7).standard_normal((100, K)).astype(np.float32)
    mixed = qgru.Hessian(K, "cuda").add(x[0]).add(host).add(x[1:])
    failures += compare("device, host, device rows", mixed, [x[0], torch.from_numpy(host), x[1:]])

    # Stream order: the rows are written on a side stream, after a kernel that sleeps ~0.1 s.
    rows = torch.zeros((2048, K), device=dev)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        rows.copy_(x.reshape(-1, K)[:2048].repeat(4, 1)[:2048] * 2.0)
        ordered = qgru.Hessian(K, "cuda").add(rows)
    failures += compare("rows written on a side stream", ordered, [rows])

    bad = torch.randn((64, K), device=dev)
    bad[17, 5] = float("nan")
    refusing = qgru.Hessian(K, "cuda").add(x[0])
    try:
        refusing.add(bad)
        print("FAIL NaN rows: accepted")
        failures += 1
    except qgru.Error as e:
        expected = "hessian rows: an element is NaN or infinite (as float32); activations must be finite"
        ok = str(e) == expected and refusing.tokens == 200
        print(f"{'ok  ' if ok else 'FAIL'} NaN rows refused: {e}")
        failures += not ok
        failures += compare("after the refusal", refusing, [x[0]])

    # qgru.gptq with CUDA-tensor activations on device cuda: the Hessian read in place, the same H as the
    # accumulator fed the same chunks (so the same checkpoint), and GPTQ's error within 1% of the CPU path's.
    weight = torch.randn((64, K), device=dev)
    chunks = [x[0], x[1:].reshape(-1, K)]
    direct = qgru.gptq(weight, chunks, group_size=64, device="cuda")
    via = qgru.gptq(weight, hessian=qgru.Hessian(K, "cuda").add(chunks[0]).add(chunks[1]), group_size=64, device="cuda")
    cpu = qgru.gptq(weight.cpu(), [c.cpu() for c in chunks], group_size=64)
    same = np.array_equal(direct.qweight, via.qweight) and direct.tokens == 600
    close = abs(direct.gptq_error - cpu.gptq_error) <= 0.01 * cpu.gptq_error
    print(f"{'ok  ' if same and close else 'FAIL'} qgru.gptq(CUDA activations, device='cuda'): qweight as from the "
          f"Hessian {'yes' if same else 'no'}, tokens {direct.tokens}, gptq_error {direct.gptq_error:.6g} "
          f"(cpu {cpu.gptq_error:.6g})")
    failures += not (same and close)

    big = torch.randn((16384, 4096), device=dev)
    for name, make in (("in place", lambda: big), ("through the host", lambda: big.cpu().numpy())):
        seconds = []
        for _ in range(3):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            qgru.Hessian(4096, "cuda").add(make()).matrix()
            seconds.append(time.perf_counter() - t0)
        print(f"time   16384 x 4096 float32 rows {name}, add + matrix(): {sorted(seconds)[1]:.3f} s (median of 3)")
    print(f"{'FAIL' if failures else 'ok'}: {failures} failing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
