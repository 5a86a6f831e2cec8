#!/usr/bin/env python3
"""docs/CUDA.md's roofline of the quantized-linear benchmark shapes on an H100 SXM5: bytes, FLOPs and the bound
time of each W4A16 / W8A16 call and of the fp16 cuBLAS GEMM it is benchmarked against, as a Markdown table.

    cuda_roofline.py            the table
    cuda_roofline.py --values   "roofline.KEY = VALUE" lines: the ridge point and the largest speed-ups at M <= 64

Model (docs/CUDA.md "Roofline on an H100"): bytes = qweight K·N·bits/8 + scales 2·G·N + qzeros G·N·bits/8 +
A 2·M·K + C 2·M·N (group 128, G = K/128); FLOPs = 2·M·N·K; time = max(bytes / BW, FLOPs / peak). The fp16 GEMM
moves a 2·K·N-byte weight. BW and peak are the datasheet's, not measurements.
"""
import sys

HBM_BYTES_PER_S = 3.35e12  # H100 SXM5 80 GB: HBM3
FP16_FLOP_PER_S = 989e12   # dense fp16 tensor-core, fp32 accumulation
GROUP = 128
SHAPES = [(4096, 4096), (4096, 11008)]
BATCHES = [1, 16, 64, 256]


def call(bits, K, N, M):
    G = K // GROUP
    bytes_ = K * N * bits // 8 + 2 * G * N + G * N * bits // 8 + 2 * M * K + 2 * M * N
    flops = 2 * M * N * K
    t_mem, t_flop = bytes_ / HBM_BYTES_PER_S * 1e6, flops / FP16_FLOP_PER_S * 1e6
    fp16_bytes = 2 * K * N + 2 * M * K + 2 * M * N
    fp16 = max(fp16_bytes / HBM_BYTES_PER_S * 1e6, t_flop)
    return bytes_, flops, t_mem, t_flop, max(t_mem, t_flop), fp16


def main():
    if sys.argv[1:] == ["--values"]:
        print(f"roofline.ridge = {FP16_FLOP_PER_S / HBM_BYTES_PER_S!r}")
        for bits in (4, 8):
            best = max(call(bits, K, N, M)[5] / call(bits, K, N, M)[4] for K, N in SHAPES for M in BATCHES if M <= 64)
            print(f"roofline.w{bits}_speedup = {best!r}")
        return
    if sys.argv[1:]:
        sys.exit("usage: cuda_roofline.py [--values]")
    print("| layer | K×N | M | MB / call | GFLOP / call | FLOP/B | t_mem µs | t_flop µs | **roofline µs** | "
          "fp16 GEMM roofline µs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for bits in (4, 8):
        for K, N in SHAPES:
            for M in BATCHES:
                bytes_, flops, t_mem, t_flop, roof, fp16 = call(bits, K, N, M)
                intensity = flops / bytes_
                intensity_text = f"{intensity:.1f}" if intensity < 10 else f"{intensity:.0f}"
                print(f"| W{bits}A16 | {K}×{N} | {M} | {bytes_ / 1e6:.2f} | {flops / 1e9:.3f} | {intensity_text} | "
                      f"{t_mem:.2f} | {t_flop:.2f} | **{roof:.2f}** | {fp16:.2f} |")


if __name__ == "__main__":
    main()
