#!/usr/bin/env python3
"""Time and peak memory of qgru.gptq_model on a random Llama of a chosen size (a benchmark, not a test).

The model is random (seeded): what is measured is the walk's cost (block forwards, Hessians, GPTQ, the folder),
which does not depend on what the weights learned. Prints one JSON line: the shape, the calibration, wall
seconds, the process's peak resident memory (ru_maxrss) and the largest single group of captured inputs a
walker that keeps every input row would hold (tokens × K × 4 bytes).

--walk rows runs the walk as it was before the Hessians were streamed, for a side by side in alternating processes
(ru_maxrss is a process's peak): every group's input rows kept on the host (float32) and each layer quantized
from them, q, k and v each accumulating its own Hessian from the same rows.

Usage: bench_gptq_model.py --out DIR [--walk hessian|rows] [--hidden 1024] [--mlp 2816] [--blocks 2] [--items 64]
       [--tokens 512]
"""
import argparse
import json
import os
import resource
import shutil
import sys
import time


def keep_rows():
    """The walk with every group's input rows kept: each group's rows collected instead of a Hessian, and each
    layer quantized from the rows by qgru.gptq (which accumulates its own Hessian from them)."""
    from qgru import _gptq_model

    class Rows:
        def __init__(self, K):
            self.chunks = []

        def add(self, rows):
            self.chunks.append(_gptq_model.host_array(rows))

    real_gptq = _gptq_model.gptq

    def gptq_from_rows(weight, activations=None, *, hessian=None, **options):
        return real_gptq(weight, hessian.chunks, **options)

    _gptq_model.Hessian = Rows
    _gptq_model.gptq = gptq_from_rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="scratch folder for the checkpoint (replaced)")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--mlp", type=int, default=2816)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--items", type=int, default=64, help="calibration sequences")
    parser.add_argument("--tokens", type=int, default=512, help="tokens per sequence")
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument("--walk", choices=("hessian", "rows"), default="hessian")
    args = parser.parse_args()

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    import qgru
    if args.walk == "rows":
        keep_rows()

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.mlp,
                         num_hidden_layers=args.blocks, num_attention_heads=args.heads,
                         num_key_value_heads=args.heads, max_position_embeddings=args.tokens)
    model = LlamaForCausalLM(config).eval()
    calibration = [torch.randint(0, args.vocab, (1, args.tokens)) for _ in range(args.items)]
    shutil.rmtree(args.out, ignore_errors=True)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.time()
    result = qgru.gptq_model(model, calibration, args.out, bits=4, group_size=128, verbose=False)
    seconds = time.time() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tokens = args.items * args.tokens
    print(json.dumps({"walk": args.walk, "hidden": args.hidden, "mlp": args.mlp, "blocks": args.blocks, "items": args.items,
                      "tokens_per_item": args.tokens, "layers": len(result.layers), "seconds": round(seconds, 2),
                      "peak_rss_mib": round(peak_kib / 1024, 1), "rss_before_mib": round(rss_before / 1024, 1),
                      "largest_group_rows_mib": round(tokens * max(args.hidden, args.mlp) * 4 / 2**20, 1),
                      "qgru": qgru.__version__ if hasattr(qgru, "__version__") else "?"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
