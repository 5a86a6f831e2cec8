#!/usr/bin/env python3
"""Held-out perplexity of a small trained Llama (scripts/train_tiny_llama.py) in float, round-to-nearest, qgru's
whole-model GPTQ (qgru.gptq_model) and GPTQModel's own quantizer, and a check that transformers loads qgru's
checkpoint folder and computes what qgru's dequantized model computes. Not run by CI (torch, transformers and
GPTQModel in a venv: docs/benchmarks/gptq.md has the command and the figures).

  1. Calibration: --calib-windows windows of 128 tokens drawn (seeded) from the model's training text;
     evaluation: the first --eval-windows non-overlapping windows of 128 tokens of the held-out text (files of
     the standard library the model never saw; corpus.json's sha256 is checked).
  2. Float; RTN: every decoder-block linear rounded to the nearest point of the same grid (bits, group size,
     asymmetric, groups' min/max from the float W: qgru's quantizer with no error feedback, i.e. qgru.gptq with
     an identity Hessian, which makes no update); qgru: qgru.gptq_model (group-aware order, damp 0.01,
     asymmetric, v1, true sequential) into OUT/qgru; GPTQModel: GPTQModel.load + quantize with the same
     options (QuantizeConfig(bits, group_size, sym=False, desc_act=False, act_group_aware=True,
     damp_percent=0.01)) into OUT/gptqmodel, its folder loaded back by transformers as qgru's is.
  3. qgru's folder loaded by transformers (AutoModelForCausalLM.from_pretrained, float32, CPU; transformers
     loads GPTQ checkpoints through optimum and GPTQModel): per layer, the loader's dequantize_weight() against
     the weight qgru.gptq_model left in the model (equal as they are, and after rounding both to fp16), the
     loaded model's held-out perplexity and logits, and greedy generation from held-out prompts against qgru's
     dequantized model (identical sequences; where one parts, the position and qgru's top-two logit margin);
     the same folder loaded by GPTQModel.load (BACKEND.TORCH, fp16: its Ŵ, perplexity, and generation against
     qgru's model in fp16).
Prints a Markdown table and writes OUT/results.json.

Usage: gptq_model_eval.py --model DIR --out DIR [--bits 4] [--group-size 128] [--threads 1] [--skip-gptqmodel]
"""
import argparse
import copy
import hashlib
import json
import os
import platform
import shutil
import sys
import time

import numpy as np

SEQ = 128
# GPTQModel 7.7.0 sizes its CPU worker pool to half the cores and then asks for 2 loader workers from it, which a
# 2-core machine refuses ("Virtual pool 'model_loader:cpu' requests 2 workers but parent 'cpu' only has 1").
os.environ.setdefault("GPTQMODEL_CPU_WORKERS", "2")


def held_out_and_train_text(model_dir):
    with open(os.path.join(model_dir, "corpus.json")) as f:
        corpus = json.load(f)
    texts = {}
    for split in ("train", "held_out"):
        files = [os.path.join(corpus["stdlib"], name) for name in corpus[split]["files"]]
        text = "\n".join(open(f, encoding="utf-8", errors="replace").read() for f in files)
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != corpus[split]["sha256"]:
            sys.exit(f"{model_dir}/corpus.json: the {split} text of {corpus['stdlib']} differs from the one the "
                     "model was trained with (another Python?)")
        texts[split] = text
    return texts["train"], texts["held_out"]


def perplexity(model, windows):
    import torch

    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(windows), 16):
            batch = windows[start:start + 16]
            logits = model(batch, use_cache=False).logits.float()
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                     batch[:, 1:].reshape(-1), reduction="sum")
            total += loss.item()
            count += batch[:, 1:].numel()
    return float(np.exp(total / count)), total / count


def rtn_model(float_model, bits, group_size):
    """Every decoder-block linear as qgru's quantizer rounds it with no error feedback: qgru.gptq with inputs the
    identity (H = 2·I: every column's update is zero), natural order."""
    import torch

    import qgru
    from qgru._gptq_checkpoint import dequantize

    model = copy.deepcopy(float_model)
    with torch.no_grad():
        for name, linear in model.named_modules():
            if isinstance(linear, torch.nn.Linear) and name.startswith("model.layers."):
                N, K = linear.weight.shape
                result = qgru.gptq(linear, np.eye(K, dtype=np.float32), bits=bits, group_size=group_size,
                                   order="natural", name="w.weight")
                linear.weight.copy_(torch.from_numpy(dequantize(result.tensors, "w", bits, "gptq", N, K)))
    return model


def gptqmodel_run(model_dir, calib, out, bits, group_size):
    """GPTQModel's own quantizer on the same calibration; its folder loaded back as qgru's is (transformers)."""
    import torch
    from gptqmodel import GPTQModel, QuantizeConfig
    from transformers import AutoModelForCausalLM

    config = QuantizeConfig(bits=bits, group_size=group_size, sym=False, desc_act=False, act_group_aware=True,
                            damp_percent=0.01)
    started = time.time()
    model = GPTQModel.load(model_dir, config, device="cpu")
    model.quantize([{"input_ids": ids.unsqueeze(0), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
                    for ids in calib], batch_size=1)
    model.save(out)
    seconds = time.time() - started
    loaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, device_map="cpu").eval()
    return loaded, seconds


def generation_check(loaded, ours, held_ids, prompts, eos):
    """Greedy generation (32 new tokens) from held-out prompts by the loaded folder and by qgru's dequantized
    model: identical sequences, and for the others where they part and how close qgru's model's top two logits
    were there (a near-tie that arithmetic differences may flip)."""
    import torch

    identical, partings = 0, []
    for p in range(prompts):
        prompt = held_ids[p * 997:p * 997 + 32].unsqueeze(0)
        with torch.no_grad():
            a = loaded.generate(prompt, max_new_tokens=32, do_sample=False, pad_token_id=eos)
            b = ours.generate(prompt, max_new_tokens=32, do_sample=False, pad_token_id=eos)
        if torch.equal(a, b):
            identical += 1
            continue
        at = int((a[0] != b[0]).nonzero()[0])
        with torch.no_grad():
            logits = ours(b[:, :at], use_cache=False).logits[0, -1]
        top = torch.topk(logits, 2).values
        partings.append({"prompt": p, "new_token": at - 32, "ours_top2_margin": float(top[0] - top[1])})
    return identical, partings


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--bits", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (scripts/train_tiny_llama.py says why 1)")
    parser.add_argument("--calib-windows", type=int, default=128)
    parser.add_argument("--eval-windows", type=int, default=256)
    parser.add_argument("--generate", type=int, default=8, help="held-out prompts for the greedy generation check")
    parser.add_argument("--skip-gptqmodel", action="store_true")
    args = parser.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import qgru

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    args.model, args.out = os.path.abspath(args.model), os.path.abspath(args.out)
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    os.chdir(args.out)  # GPTQModel writes a logs/ folder into the working folder
    train_text, held_out_text = held_out_and_train_text(args.model)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    train_ids = torch.tensor(tokenizer(train_text)["input_ids"], dtype=torch.long)
    held_ids = torch.tensor(tokenizer(held_out_text)["input_ids"], dtype=torch.long)
    generator = torch.Generator().manual_seed(2)
    starts = torch.randint(0, len(train_ids) - SEQ, (args.calib_windows,), generator=generator)
    calib = [train_ids[s:s + SEQ] for s in starts]
    count = min(args.eval_windows, len(held_ids) // SEQ)
    windows = held_ids[:count * SEQ].reshape(count, SEQ)
    float_model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    rows, results = [], {"date": time.strftime("%Y-%m-%d"), "machine": platform.processor() or platform.machine(),
                         "threads": args.threads, "bits": args.bits, "group_size": args.group_size,
                         "calibration_tokens": args.calib_windows * SEQ, "eval_tokens": count * SEQ,
                         "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                                      "qgru": qgru.__version__}}

    def row(method, model, seconds, note=""):
        ppl, loss = perplexity(model, windows)
        rows.append((method, ppl, loss, seconds, note))
        print(f"{method}: perplexity {ppl:.4f} (loss {loss:.5f}), {seconds:.1f} s {note}", flush=True)

    row("float", float_model, 0.0)
    started = time.time()
    rtn = rtn_model(float_model, args.bits, args.group_size)
    row("RTN", rtn, time.time() - started)
    del rtn

    qgru_dir = os.path.join(args.out, "qgru")
    qgru_model = copy.deepcopy(float_model)
    started = time.time()
    report = qgru.gptq_model(qgru_model, calib, qgru_dir, bits=args.bits, group_size=args.group_size,
                             tokenizer=tokenizer)
    row("qgru gptq_model", qgru_model, time.time() - started,
        f"{len(report.layers)} layers, GPTQ/RTN layer error geo-mean "
        f"{np.exp(np.mean([np.log(l['gptq_error'] / l['rtn_error']) for l in report.layers])):.3f}")

    # transformers loads the folder (optimum + GPTQModel's kernels on the CPU).
    loaded = AutoModelForCausalLM.from_pretrained(qgru_dir, dtype=torch.float32, device_map="cpu").eval()
    ours = dict(qgru_model.named_modules())
    kinds, equal, equal_fp16, worst = set(), 0, 0, 0.0
    for name in (layer["name"] for layer in report.layers):
        module = dict(loaded.named_modules())[name]
        kinds.add(type(module).__name__)
        with torch.no_grad():
            W_loader = module.dequantize_weight().float().T  # the loaders' [K, N] as [N, K]
        W_ours = ours[name].weight
        equal += int(torch.equal(W_loader, W_ours))
        equal_fp16 += int(torch.equal(W_loader.half(), W_ours.half()))
        worst = max(worst, (W_loader - W_ours).abs().max().item())
    ppl_loaded, loss_loaded = perplexity(loaded, windows)
    with torch.no_grad():
        a, b = loaded(windows[:16], use_cache=False).logits, qgru_model(windows[:16], use_cache=False).logits
    logit_difference = float((a - b).abs().max() / b.abs().max())
    identical, partings = generation_check(loaded, qgru_model, held_ids, args.generate, tokenizer.eos_token_id)
    loading = {"modules": sorted(kinds), "layers": len(report.layers), "weights_equal": equal,
               "weights_equal_in_fp16": equal_fp16, "max_weight_difference": worst, "perplexity": ppl_loaded,
               "max_logit_difference_relative": logit_difference, "generation_prompts": args.generate,
               "generation_identical": identical, "generation_partings": partings}
    print(f"transformers loads {qgru_dir}: {sorted(kinds)}; dequantize_weight() equal to qgru's Ŵ in {equal} of "
          f"{len(report.layers)} layers, after rounding both to fp16 in {equal_fp16} (max difference {worst:.3g}); "
          f"perplexity {ppl_loaded:.4f}; logits on 16 windows differ by at most {logit_difference:.2g} of the "
          f"largest; greedy generation identical for {identical} of {args.generate} prompts (32 new tokens each), "
          f"the others part at {partings}", flush=True)
    results["transformers_load"] = loading
    rows.append(("qgru's folder loaded by transformers", ppl_loaded, loss_loaded, 0.0, ", ".join(sorted(kinds))))
    del loaded

    if not args.skip_gptqmodel:
        from gptqmodel import BACKEND, GPTQModel

        # GPTQModel's own loader with its plain torch kernel, which takes fp16 (its default CPU kernel,
        # TorchFusedLinear, computes in bfloat16 whatever dtype it is given, for its own folders as for qgru's);
        # compared with qgru's dequantized model in fp16.
        direct = GPTQModel.load(qgru_dir, device="cpu", backend=BACKEND.TORCH, dtype=torch.float16).model.eval()
        modules = dict(direct.named_modules())
        with torch.no_grad():
            equal_fp16 = sum(int(torch.equal(modules[n].dequantize_weight().T.half(), ours[n].weight.half()))
                             for n in (layer["name"] for layer in report.layers))
        ppl_direct, loss_direct = perplexity(direct, windows)
        qgru_fp16 = copy.deepcopy(qgru_model).half()
        identical, partings = generation_check(direct, qgru_fp16, held_ids, args.generate, tokenizer.eos_token_id)
        del qgru_fp16
        results["gptqmodel_load"] = {"weights_equal_in_fp16": equal_fp16, "perplexity": ppl_direct,
                                     "generation_identical": identical, "generation_partings": partings}
        print(f"GPTQModel.load {qgru_dir}: dequantize_weight() equal to qgru's Ŵ after rounding both to fp16 in "
              f"{equal_fp16} of {len(report.layers)} layers; perplexity {ppl_direct:.4f}; greedy generation identical "
              f"for {identical} of {args.generate} prompts with qgru's model in fp16, the others part at {partings}",
              flush=True)
        rows.append(("qgru's folder loaded by GPTQModel.load (fp16)", ppl_direct, loss_direct, 0.0,
                     type(modules[report.layers[0]["name"]]).__name__))
        del direct
        try:
            import gptqmodel

            results["versions"]["gptqmodel"] = gptqmodel.__version__
            model, seconds = gptqmodel_run(args.model, calib, os.path.join(args.out, "gptqmodel"), args.bits,
                                           args.group_size)
            row("GPTQModel quantize", model, seconds)
        except Exception as e:  # recorded, not hidden: the table says why there is no row
            print(f"GPTQModel: {type(e).__name__}: {e}", flush=True)
            results["gptqmodel_error"] = f"{type(e).__name__}: {e}"

    results["rows"] = [{"method": m, "perplexity": p, "loss": l, "seconds": s, "note": n} for m, p, l, s, n in rows]
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"\n{count * SEQ} held-out tokens, {args.calib_windows * SEQ} calibration tokens, {args.bits} bits, group "
          f"{args.group_size}\n")
    print("| method | held-out perplexity | loss (nats/token) | seconds | note |")
    print("|---|---|---|---|---|")
    for method, ppl, loss, seconds, note in rows:
        print(f"| {method} | {ppl:.3f} | {loss:.4f} | {seconds:.1f} | {note} |")


if __name__ == "__main__":
    main()
