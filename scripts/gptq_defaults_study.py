#!/usr/bin/env python3
"""Measures qgru gptq's column order and damping on trained layers, to choose the defaults (docs/GPTQ.md,
"Defaults"). Run by scripts/gptq_defaults_study.sh in the venv of scripts/gptq_clients_check.sh.

  1. Trains a small character-level Llama (4 layers, hidden 256, seeded) on text that ships with the pinned
     transformers wheel (its Python sources), so the weights and activations are those of a trained model.
  2. Captures every linear layer's inputs on calibration text and on held-out text.
  3. For each setting (order x damp, at the bit widths asked for, group size 128), `qgru gptq --manifest`
     quantizes all 28 layers; per layer, the relative output error ||x·(W − Ŵ)ᵀ||² / ||x·Wᵀ||² is measured on
     the held-out inputs through `qgru linear`, and the held-out loss of the whole model with every layer
     quantized (each from the float model's own inputs) through transformers.
Prints, per bit width and setting: the geometric mean over layers of the error ratio to today's defaults
(natural order, damp 0.01), how many layers got worse, and the model's held-out loss. With --vs-gptqmodel,
instead GPTQModel's own GPTQ (gptqmodel.quantization.gptq.GPTQ, same order and damping: 0.01 and 0.05) on
the same layers and activations: the geometric mean of qgru's held-out error over GPTQModel's.
--reuse skips the training when the work folder already holds the trained model and activations.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

from tiny_lm_training import train_causal_lm

SEQ = 128


def corpus_text():
    import transformers
    root = os.path.dirname(transformers.__file__)
    files = []
    for dirpath, _, names in os.walk(root):
        files += [os.path.join(dirpath, n) for n in names if n.endswith(".py")]
    text = "".join(open(f, encoding="utf-8", errors="replace").read() for f in sorted(files))
    return text.encode("ascii", errors="replace").decode("ascii")


def split_corpus():
    text = corpus_text()
    data = torch.tensor(np.frombuffer(text.encode("ascii"), dtype=np.uint8).astype(np.int64))
    split = int(len(data) * 0.95)
    return data[:split], data[split:]


def train(work, steps):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    train_data, held_out = split_corpus()
    config = LlamaConfig(vocab_size=128, hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=SEQ,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    train_causal_lm(model, train_data, steps, lr=2e-3, batch=16, seq=SEQ, log_every=100)
    model_dir = os.path.join(work, "float")
    model.save_pretrained(model_dir, safe_serialization=True)
    return model, train_data, held_out, model_dir


def windows(data, count, seed):
    generator = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, len(data) - SEQ - 1, (count,), generator=generator)
    return torch.stack([data[i:i + SEQ] for i in idx])


def capture(model, work, calib, fresh):
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and n.startswith("model.layers.")}
    store = {n: [] for n in linears}
    hooks = [m.register_forward_hook(lambda mod, inp, out, n=n: store[n].append(inp[0].detach().reshape(-1, inp[0].shape[-1])))
             for n, m in linears.items()]
    with torch.no_grad():
        model(calib)
        calib_count = {n: len(v) for n, v in store.items()}
        model(fresh)
    for h in hooks:
        h.remove()
    manifest = []
    for n, chunks in store.items():
        c = calib_count[n]
        np.save(os.path.join(work, f"x_{n}.npy"), torch.cat(chunks[:c]).numpy().astype(np.float32))
        np.save(os.path.join(work, f"fresh_{n}.npy"), torch.cat(chunks[c:]).numpy().astype(np.float32))
        manifest.append({"tensor": n + ".weight", "activations": [f"x_{n}.npy"]})
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    return {n: m.weight.detach().double().numpy() for n, m in linears.items()}


def held_out_loss(model, fresh):
    with torch.no_grad():
        return model(fresh, labels=fresh).loss.item()


def quantized_model(model_dir, weights):
    """The float model with every layer's weight replaced by qgru's Ŵ (decoded by `qgru linear`)."""
    from transformers import LlamaForCausalLM
    model = LlamaForCausalLM.from_pretrained(model_dir).eval()
    modules = dict(model.named_modules())
    with torch.no_grad():
        for n, W_hat in weights.items():
            modules[n].weight.copy_(torch.from_numpy(W_hat.T.astype(np.float32)))
    return model


def run_setting(qgru, work, model_dir, W, bits, order, damp):
    out = os.path.join(work, f"q_b{bits}_{order}_{damp}")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    subprocess.run([qgru, "-q", "gptq", "--weights", os.path.join(model_dir, "model.safetensors"), "--manifest",
                    os.path.join(work, "manifest.json"), "--bits", str(bits), "--group-size", "128", "--order", order,
                    "--damp", str(damp), "-o", os.path.join(out, "model.safetensors")],
                   check=True, stdout=subprocess.DEVNULL)
    errors, decoded = {}, {}
    for n, Wf in W.items():
        K = Wf.shape[1]
        eye = os.path.join(work, f"eye_{K}.npy")
        if not os.path.exists(eye):
            np.save(eye, np.eye(K, dtype=np.float32))
        wpath = os.path.join(out, f"w_{n}.npy")
        subprocess.run([qgru, "-q", "linear", "--checkpoint", os.path.join(out, "model.safetensors"), "--layer", n,
                        "--input", eye, "--output", wpath], check=True, stdout=subprocess.DEVNULL)
        W_hat = np.load(wpath).astype(np.float64)  # [K, N]
        decoded[n] = W_hat
        x = np.load(os.path.join(work, f"fresh_{n}.npy")).astype(np.float64)
        ref = x @ Wf.T
        errors[n] = float(np.sum((x @ W_hat - ref) ** 2) / np.sum(ref ** 2))
    return errors, decoded


def gptqmodel_errors(work, W, bits, order, damp):
    """GPTQModel's own GPTQ per layer on the same calibration inputs: held-out relative output error."""
    from gptqmodel.quantization.config import QuantizeConfig
    from gptqmodel.quantization.gptq import GPTQ
    errors = {}
    for n, Wf in W.items():
        linear = torch.nn.Linear(Wf.shape[1], Wf.shape[0], bias=False)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(Wf.astype(np.float32)))
        cfg = QuantizeConfig(bits=bits, group_size=128, sym=False, desc_act=order == "act-order",
                             act_group_aware=order == "group-aware", damp_percent=damp)
        gptq = GPTQ(linear, cfg)
        gptq.quantizer.configure(perchannel=True)
        x = torch.from_numpy(np.load(os.path.join(work, f"x_{n}.npy")))
        gptq.add_batch(x.unsqueeze(0), linear(x).unsqueeze(0))
        W_hat = gptq.quantize()[0].double().numpy()  # [N, K]
        fresh = np.load(os.path.join(work, f"fresh_{n}.npy")).astype(np.float64)
        ref = fresh @ Wf.T
        errors[n] = float(np.sum((fresh @ W_hat.T - ref) ** 2) / np.sum(ref ** 2))
    return errors


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qgru", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--bits", default="4,3,2")
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--calib-windows", type=int, default=64, help="calibration windows of 128 characters")
    parser.add_argument("--vs-gptqmodel", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(os.cpu_count() or 1)
    model_dir = os.path.join(args.work, "float")
    if args.reuse and os.path.exists(os.path.join(model_dir, "model.safetensors")):
        from transformers import LlamaForCausalLM
        model = LlamaForCausalLM.from_pretrained(model_dir).eval()
        train_data, held_out = split_corpus()
    else:
        model, train_data, held_out, model_dir = train(args.work, args.steps)
    calib, fresh = windows(train_data, args.calib_windows, 2), windows(held_out, 32, 3)
    W = capture(model, args.work, calib, fresh)
    print(f"float model: held-out loss {held_out_loss(model, fresh):.4f} nats/char; {len(W)} layers; "
          f"calibration {calib.numel()} tokens, held-out {fresh.numel()} tokens")
    settings = [(o, d) for o in ("natural", "act-order", "group-aware") for d in (0.01, 0.05, 0.1)]
    if args.vs_gptqmodel:
        print("| bits | order | damp | geo-mean qgru / GPTQModel held-out error | max | min |")
        print("|---|---|---|---|---|---|")
        for bits in [int(b) for b in args.bits.split(",")]:
            for order in ("natural", "act-order", "group-aware"):
                for damp in (0.01, 0.05):
                    ours, _ = run_setting(args.qgru, args.work, model_dir, W, bits, order, damp)
                    theirs = gptqmodel_errors(args.work, W, bits, order, damp)
                    r = np.array([ours[n] / theirs[n] for n in W])
                    print(f"| {bits} | {order} | {damp} | {math.exp(np.mean(np.log(r))):.3f} | {r.max():.3f} | "
                          f"{r.min():.3f} |", flush=True)
        return 0
    print("| bits | order | damp | geo-mean error ratio to natural/0.01 | layers worse | worst ratio | held-out loss |")
    print("|---|---|---|---|---|---|---|")
    for bits in [int(b) for b in args.bits.split(",")]:
        base = None
        for order, damp in settings:
            errors, decoded = run_setting(args.qgru, args.work, model_dir, W, bits, order, damp)
            if base is None:
                base = errors
            ratios = np.array([errors[n] / base[n] for n in W])
            loss = held_out_loss(quantized_model(model_dir, decoded), fresh)
            print(f"| {bits} | {order} | {damp} | {math.exp(np.mean(np.log(ratios))):.3f} | "
                  f"{int(np.sum(ratios > 1.0 + 1e-9))} of {len(ratios)} | {ratios.max():.3f} | {loss:.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
