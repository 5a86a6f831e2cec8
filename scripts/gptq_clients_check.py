#!/usr/bin/env python3
"""Checks qgru's GPTQ checkpoints with the real clients: GPTQModel.load and transformers'
AutoModelForCausalLM.from_pretrained (through optimum and GPTQModel) on the CPU.

Run by scripts/gptq_clients_check.sh, which makes the private venv with the pinned client versions; not run
by CI. For every combination of bits, sym, format, column order and static groups asked for:
  1. `qgru gptq --manifest` quantizes every linear layer of a small Llama (random weights, biases on, seeded)
     into a whole-model checkpoint from activations captured on calibration tokens;
  2. each client loads the folder (config.json carries quantize_config.json as its quantization_config);
  3. for every layer, the client's dequantized weight is compared with qgru's Ŵ (from `qgru linear` on the
     identity, so Ŵ exactly): both rounded to fp16, bit for bit;
  4. the client's layer output on fresh activations (bias included) is compared with `qgru linear`'s, within
     fp16 rounding (the clients compute in fp16).
Prints one Markdown table row per combination and exits 1 on any difference.
"""
import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch

ORDERS = ["natural", "act-order", "group-aware"]
GROUP = 32


def combos(args):
    def listed(text, convert):
        return [convert(item) for item in text.split(",")]
    truth = {"sym": True, "asym": False}
    for combo in itertools.product(listed(args.bits, int), listed(args.sym, truth.__getitem__), listed(args.formats, str),
                                   listed(args.orders, str), listed(args.static, lambda t: t == "static")):
        if args.quick and not (combo[3] == "group-aware" and not combo[4]):
            continue
        yield combo


def save_tokenizer(model_dir):
    """A word-level tokenizer of 256 tokens: GPTQModel.load wants one beside the weights."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {f"t{i}": i for i in range(255)}
    vocab["<unk>"] = 255
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<unk>",
                            eos_token="t0", bos_token="t1").save_pretrained(model_dir)


def make_model(work):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
                         attention_bias=True, mlp_bias=True, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and module.bias is not None:
                module.bias.normal_(0.0, 0.05)  # biases on: the checkpoint carries them and readers add them
            if isinstance(module, torch.nn.Linear):
                module.weight[:8].abs_()  # 8 rows >= 0: asymmetric zero points of 0, the v1 borrow case
    model_dir = os.path.join(work, "float")
    model.save_pretrained(model_dir, safe_serialization=True)
    save_tokenizer(model_dir)
    linears = {name: m for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and name.startswith("model.layers.")}
    captured = {name: [] for name in linears}
    hooks = [m.register_forward_hook(lambda mod, inp, out, name=name: captured[name].append(inp[0].detach()))
             for name, m in linears.items()]
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        model(torch.randint(0, 256, (8, 64), generator=generator))  # calibration: 512 tokens
        model(torch.randint(0, 256, (1, 16), generator=generator))  # fresh: 16 tokens
    for h in hooks:
        h.remove()
    manifest = []
    for name, chunks in captured.items():
        calib = chunks[0].reshape(-1, chunks[0].shape[-1]).numpy().astype(np.float32)
        fresh = chunks[1].reshape(-1, chunks[1].shape[-1]).numpy().astype(np.float32)
        np.save(os.path.join(work, f"x_{name}.npy"), calib)
        np.save(os.path.join(work, f"fresh_{name}.npy"), fresh)
        manifest.append({"tensor": name + ".weight", "activations": [f"x_{name}.npy"]})
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    for K in sorted({m.in_features for m in linears.values()}):
        np.save(os.path.join(work, f"eye_{K}.npy"), np.eye(K, dtype=np.float32))
    return model_dir, {name: (m.in_features, m.out_features) for name, m in linears.items()}


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def quantize(qgru, work, model_dir, combo):
    bits, sym, fmt, order, static = combo
    name = f"b{bits}_{'sym' if sym else 'asym'}_{fmt}_{order}{'_static' if static else ''}"
    out = os.path.join(work, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cmd = [qgru, "-q", "gptq", "--weights", os.path.join(model_dir, "model.safetensors"), "--manifest",
           os.path.join(work, "manifest.json"), "--bits", str(bits), "--group-size", str(GROUP), "--format", fmt,
           "--order", order, "--keep-other-tensors", "-o", os.path.join(out, "model.safetensors")]
    if sym:
        cmd.append("--sym")
    if static:
        cmd.append("--static-groups")
    stderr = run(cmd).stderr  # warnings only: -q keeps the rest quiet
    zeros_of_zero = sum(int(line.split(" zero point(s) are 0")[0].rsplit(" ", 1)[1])
                        for line in stderr.splitlines() if " zero point(s) are 0" in line)
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(out, "quantize_config.json")) as f:
        config["quantization_config"] = json.load(f)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for file in os.listdir(model_dir):
        if file.startswith(("tokenizer", "special_tokens")):
            shutil.copy(os.path.join(model_dir, file), out)
    return name, out, zeros_of_zero


def qgru_weights(qgru, work, out, layers):
    """Ŵᵀ [K, N] per layer, exactly: qgru linear on the identity, without the bias."""
    result = {}
    for name, (K, _) in layers.items():
        y = os.path.join(out, f"w_{name}.npy")
        run([qgru, "-q", "linear", "--checkpoint", os.path.join(out, "model.safetensors"), "--layer", name,
             "--input", os.path.join(work, f"eye_{K}.npy"), "--output", y, "--no-bias"])
        result[name] = np.load(y)
    return result


def qgru_outputs(qgru, work, out, layers):
    result = {}
    for name in layers:
        y = os.path.join(out, f"y_{name}.npy")
        run([qgru, "-q", "linear", "--checkpoint", os.path.join(out, "model.safetensors"), "--layer", name,
             "--input", os.path.join(work, f"fresh_{name}.npy"), "--output", y])
        result[name] = np.load(y)
    return result


def load_gptqmodel(out):
    from gptqmodel import BACKEND, GPTQModel
    return GPTQModel.load(out, device="cpu", backend=BACKEND.TORCH, dtype=torch.float16).model


def load_transformers(out):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(out, device_map="cpu", dtype=torch.float16)


def compare(model, work, layers, W_qgru, Y_qgru):
    """(layers whose fp16 Ŵ differs anywhere, worst output difference relative to max |y|)."""
    modules = dict(model.named_modules())
    differing, worst = 0, 0.0
    for name in layers:
        module = modules[name]
        with torch.no_grad():
            W_client = module.dequantize_weight().to(torch.float16).cpu().numpy()  # [K, N]
            x = torch.from_numpy(np.load(os.path.join(work, f"fresh_{name}.npy"))).to(torch.float16)
            y_client = module(x).float().numpy()
        mine = W_qgru[name].astype(np.float16)
        if W_client.shape != mine.shape or not np.array_equal(W_client.view(np.uint16), mine.view(np.uint16)):
            differing += 1
        y_ref = Y_qgru[name]
        worst = max(worst, float(np.abs(y_client - y_ref).max() / np.abs(y_ref).max()))
    return differing, worst


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qgru", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--quick", action="store_true", help="only the default order without static groups")
    parser.add_argument("--bits", default="2,3,4,8")
    parser.add_argument("--sym", default="asym,sym")
    parser.add_argument("--formats", default="gptq,gptq_v2")
    parser.add_argument("--orders", default=",".join(ORDERS))
    parser.add_argument("--static", default="dynamic,static")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    import gptqmodel
    import optimum.version
    import transformers
    print(f"clients: gptqmodel {gptqmodel.__version__}, transformers {transformers.__version__}, "
          f"optimum {optimum.version.__version__}, torch {torch.__version__}; {time.strftime('%Y-%m-%d')}")
    model_dir, layers = make_model(args.work)
    print("| bits | sym | format | order | static | v1 zero points of 0 | GPTQModel Ŵ | transformers Ŵ | "
          "output vs qgru linear (max/max|y|) |")
    print("|---|---|---|---|---|---|---|---|---|")
    failures = 0
    for combo in combos(args):
        bits, sym, fmt, order, static = combo
        name, out, zeros_of_zero = quantize(args.qgru, args.work, model_dir, combo)
        W_qgru = qgru_weights(args.qgru, args.work, out, layers)
        Y_qgru = qgru_outputs(args.qgru, args.work, out, layers)
        cells = []
        worst_all = 0.0
        for loader in (load_gptqmodel, load_transformers):
            try:
                differing, worst = compare(loader(out), args.work, layers, W_qgru, Y_qgru)
            except Exception as e:  # a refusal is a result: say it and count it
                cells.append(f"refused: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
                failures += 1
                continue
            worst_all = max(worst_all, worst)
            cells.append("identical" if differing == 0 else f"{differing} of {len(layers)} layers differ")
            failures += differing > 0 or worst > 4e-3
        zeros_cell = zeros_of_zero if fmt == "gptq" else "-"
        print(f"| {bits} | {sym} | {fmt} | {order} | {static} | {zeros_cell} | {cells[0]} | {cells[1]} | "
              f"{worst_all:.1e} |", flush=True)
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
