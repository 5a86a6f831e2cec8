#!/usr/bin/env python3
"""The torch peer of the quantized-linear benchmark (scripts/bench_cuda_linear.sh runs both).

Times torch._weight_int4pack_mm (tinygemm: W4A16 with bf16 activations, group 128) at the shapes and row counts
of test/cuda/bench_linear.cpp, under the same rules: the weights rotate over enough copies that their total
exceeds twice the L2, a sample is --iters calls between two CUDA events, the median of --rounds samples is
reported, and a device-to-device copy measured in the same process gives the practical ceiling. Writes the
same JSON rows as the C++ benchmark (engine "tinygemm", and "d2d-copy" with detail "torch") to --json, and a
markdown table to stdout.

torch is imported only when timing (it lives on the GPU machine); --self-test checks the argument parsing and
the row / JSON / markdown code with made-up timings and needs no torch.
"""
import argparse
import contextlib
import datetime
import io
import json
import math
import sys

KEYS = ("bits", "K", "N", "M", "engine", "us", "weight_gb_per_s", "hbm_fraction", "card", "date", "commit")
DEFAULT_SHAPES = "4096x4096,4096x11008,11008x4096,8192x8192"
DEFAULT_MS = "1,4,16,64,256"
NOMINAL_HBM_GBPS = {"H200": 4800.0}  # by the vendor's datasheet; others: --hbm-gbps


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        k, sep, n = item.partition("x")
        if not sep or not k.isdigit() or not n.isdigit():
            raise argparse.ArgumentTypeError(f"shape '{item}': expected KxN, e.g. 4096x11008")
        k, n = int(k), int(n)
        if k % 128 or n % 8 or k <= 0 or n <= 0:
            raise argparse.ArgumentTypeError(f"shape '{item}': K must be a multiple of 128 and N of 8")
        shapes.append((k, n))
    return shapes


def parse_ms(text):
    try:
        ms = [int(m) for m in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ms '{text}': expected row counts, e.g. 1,4,16") from None
    if any(m < 1 for m in ms):
        raise argparse.ArgumentTypeError(f"--ms '{text}': every row count must be at least 1")
    return ms


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", type=parse_shapes, default=parse_shapes(DEFAULT_SHAPES))
    p.add_argument("--ms", type=parse_ms, default=parse_ms(DEFAULT_MS))
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--hbm-gbps", type=float, default=0.0, help="nominal HBM bandwidth (default: known for the H200)")
    p.add_argument("--commit", default="unknown")
    p.add_argument("--json", help="write the JSON rows here")
    p.add_argument("--self-test", action="store_true", help="check the row/JSON/markdown code without torch")
    args = p.parse_args(argv)
    if args.iters < 1 or args.rounds < 1:
        p.error("--iters and --rounds must be at least 1")
    return args


def nominal_gbps(card, override):
    if override > 0:
        return override
    for name, gbps in NOMINAL_HBM_GBPS.items():
        if name in card:
            return gbps
    return 0.0


def make_row(bits, K, N, M, engine, detail, us, weight_bytes, nominal, card, date, commit):
    gbps = weight_bytes / (us * 1e3)
    return {"bits": bits, "K": K, "N": N, "M": M, "engine": engine, "detail": detail, "us": round(us, 3),
            "weight_gb_per_s": round(gbps, 1), "hbm_fraction": round(gbps / nominal, 4) if nominal > 0 else None,
            "card": card, "date": date, "commit": commit}


def markdown(rows, copy_gbps):
    lines = ["| bits | K x N | M | engine | detail | µs | weight GB/s | of nominal HBM | of measured copy |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        nominal = "n/a" if r["hbm_fraction"] is None else f"{100 * r['hbm_fraction']:.0f}%"
        lines.append(f"| {r['bits']} | {r['K']}x{r['N']} | {r['M']} | {r['engine']} | {r['detail']} | {r['us']:.1f} | "
                     f"{r['weight_gb_per_s']:.0f} | {nominal} | {100 * r['weight_gb_per_s'] / copy_gbps:.0f}% |")
    return "\n".join(lines)


def check_rows(rows):
    """Every row carries every key of the JSON contract, with sane values; raises ValueError otherwise."""
    for r in rows:
        missing = [k for k in KEYS if k not in r]
        if missing:
            raise ValueError(f"row {r} lacks {missing}")
        if not (r["us"] > 0 and math.isfinite(r["us"]) and r["weight_gb_per_s"] > 0):
            raise ValueError(f"row {r}: time and bandwidth must be positive")


def self_test(args):
    date = datetime.date(2026, 1, 1).isoformat()
    copy = make_row(0, 0, 0, 0, "d2d-copy", "torch", 100.0, 2 * 200e6, 4800.0, "NVIDIA H200", date, "abc1234")
    row = make_row(4, 4096, 4096, 1, "tinygemm", "torch._weight_int4pack_mm", 4.0, 4096 * 4096 / 2, 4800.0,
                   "NVIDIA H200", date, "abc1234")
    check_rows([copy, row])
    assert abs(copy["weight_gb_per_s"] - 4000.0) < 1e-6, copy
    assert abs(row["weight_gb_per_s"] - 2097.2) < 0.1 and abs(row["hbm_fraction"] - 0.4369) < 1e-4, row
    assert make_row(4, 128, 8, 1, "tinygemm", "", 1.0, 512, 0.0, "card", date, "x")["hbm_fraction"] is None
    table = markdown([row], copy["weight_gb_per_s"])
    assert "| 4 | 4096x4096 | 1 | tinygemm |" in table and "44%" in table and "52%" in table, table
    text = json.dumps([copy, row])
    assert json.loads(text)[1]["engine"] == "tinygemm"
    try:
        check_rows([{"bits": 4}])
        raise AssertionError("check_rows accepted a row without keys")
    except ValueError:
        pass
    for bad in (["--shapes", "4096"], ["--shapes", "100x8"], ["--ms", "0"], ["--iters", "0"]):
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                parse_args(bad)
            raise AssertionError(f"parse_args accepted {bad}")
        except SystemExit:
            pass
    assert args.shapes and args.ms
    print("bench_linear_torch self-test: OK")
    return 0


def pack_for_tinygemm(torch, codes_nk, inner_k_tiles=8):
    """codes [N, K] int32 in [0, 15] -> the tinygemm layout; torch >= 2.5 takes two codes per uint8 (even k in
    the high nibble), older versions the int32 codes themselves."""
    try:
        packed = ((codes_nk[:, ::2] << 4) | codes_nk[:, 1::2]).to(torch.uint8)
        return torch._convert_weight_to_int4pack(packed, inner_k_tiles)
    except (RuntimeError, TypeError):
        return torch._convert_weight_to_int4pack(codes_nk, inner_k_tiles)


def run(args):
    import torch  # only here: torch lives on the GPU machine

    if not torch.cuda.is_available():
        print("no usable GPU: torch.cuda.is_available() is False\nbenchmark NOT RUN")
        return 1
    props = torch.cuda.get_device_properties(0)
    card = props.name
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    nominal = nominal_gbps(card, args.hbm_gbps)
    date = datetime.datetime.now(datetime.timezone.utc).date().isoformat()

    def sample_us(fn):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(args.iters):
            fn(i)
        stop.record()
        stop.synchronize()
        return 1000.0 * start.elapsed_time(stop) / args.iters

    rows = []
    copy_bytes = max(256 << 20, 8 * l2)
    src = torch.zeros(copy_bytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_us = sorted(sample_us(lambda i: dst.copy_(src)) for _ in range(args.rounds))[args.rounds // 2]
    rows.append(make_row(0, 0, 0, 0, "d2d-copy", "torch", copy_us, 2 * copy_bytes, nominal, card, date, args.commit))
    del src, dst
    copy_gbps = rows[0]["weight_gb_per_s"]

    gen = torch.Generator(device="cuda").manual_seed(42)
    for K, N in args.shapes:
        weight_bytes = K * N / 2
        copies = max(2, int(2 * l2 / weight_bytes) + 1)
        try:
            weights = []
            for _ in range(copies):
                codes = torch.randint(0, 16, (N, K), dtype=torch.int32, device="cuda", generator=gen)
                scales_zeros = torch.rand((K // 128, N, 2), dtype=torch.bfloat16, device="cuda", generator=gen) * 0.01
                weights.append((pack_for_tinygemm(torch, codes), scales_zeros))
                del codes
        except Exception as e:  # an API this torch lacks: say so, time nothing
            print(f"tinygemm {K}x{N}: NOT RUN: {type(e).__name__}: {e}")
            continue
        for M in args.ms:
            x = torch.rand((M, K), dtype=torch.bfloat16, device="cuda", generator=gen) - 0.5

            def call(i):
                w, sz = weights[i % len(weights)]
                torch._weight_int4pack_mm(x, w, 128, sz)

            try:
                sample_us(call)  # warm-up
                us = sorted(sample_us(call) for _ in range(args.rounds))[args.rounds // 2]
            except Exception as e:
                print(f"tinygemm {K}x{N} M={M}: NOT RUN: {type(e).__name__}: {e}")
                continue
            rows.append(make_row(4, K, N, M, "tinygemm", "torch._weight_int4pack_mm, bf16", us, weight_bytes, nominal, card,
                                 date, args.commit))
        del weights
    check_rows(rows)
    print(f"GPU: {card} (torch {torch.__version__}), L2 {l2 >> 20} MiB, device-to-device copy {copy_gbps:.0f} GB/s "
          f"(read + write); group 128, {args.rounds} rounds of {args.iters} calls, weights rotated over > 2x L2\n")
    print(markdown(rows, copy_gbps))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return self_test(args) if args.self_test else run(args)


if __name__ == "__main__":
    sys.exit(main())
