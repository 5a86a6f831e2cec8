#!/usr/bin/env python3
"""Trains a small Llama-style causal LM on the CPU, offline, to give qgru.gptq_model a real model to quantize
(scripts/gptq_model_eval.py measures it; docs/benchmarks/gptq.md has the figures). Not run by CI.

Text: the Python standard library's own sources (the ``.py`` files directly in the running interpreter's stdlib
folder, sorted by name), which every Python installation ships; every 20th file is held out for evaluation and
never trained on. Tokenizer: a byte-level BPE (``tokenizers``) of ``--vocab`` tokens trained on the training
files only. Model: ``transformers.LlamaConfig`` with hidden 256, MLP 768, 4 layers, 8 heads (every linear's K is
256 or 768, multiples of the group size 128 and of every packing), untied embeddings. AdamW with a one-cycle
schedule, fixed seeds, ``--threads`` torch threads (1 by default: on the shared 2-core development machine, busy
with other work, torch's OpenMP team of 2 threads waited at its barriers for a core and ran each step more than
ten times slower than 1 thread did). Writes OUT/ (``save_pretrained``: config.json,
model.safetensors, the tokenizer files) and OUT/corpus.json (the interpreter's version, the files of each split
and the sha256 of their text, so the evaluation reads the same held-out text).

Usage: train_tiny_llama.py --out DIR [--steps 800] [--threads 1]
"""
import argparse
import hashlib
import json
import os
import sys
import sysconfig
import time

SEQ = 128
BATCH = 16


def corpus_files():
    stdlib = sysconfig.get_paths()["stdlib"]
    names = sorted(n for n in os.listdir(stdlib) if n.endswith(".py") and os.path.isfile(os.path.join(stdlib, n)))
    train = [os.path.join(stdlib, n) for i, n in enumerate(names) if i % 20 != 19]
    held_out = [os.path.join(stdlib, n) for i, n in enumerate(names) if i % 20 == 19]
    return train, held_out


def read_text(files):
    return "\n".join(open(f, encoding="utf-8", errors="replace").read() for f in files)


def split_description(files, text):
    return {"files": [os.path.basename(f) for f in files], "characters": len(text),
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


def train_tokenizer(text, vocab):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator([text], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>", bos_token="<|endoftext|>")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--vocab", type=int, default=2048)
    args = parser.parse_args()

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tiny_lm_training import train_causal_lm

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    train_files, held_out_files = corpus_files()
    train_text, held_out_text = read_text(train_files), read_text(held_out_files)
    started = time.time()
    tokenizer = train_tokenizer(train_text, args.vocab)
    train_ids = torch.tensor(tokenizer(train_text)["input_ids"], dtype=torch.long)
    print(f"tokenizer: {len(tokenizer)} tokens, training text {len(train_text)} characters = {len(train_ids)} tokens "
          f"({time.time() - started:.0f} s)", flush=True)

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=SEQ,
                         tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    model = LlamaForCausalLM(config)
    started = time.time()
    final_loss = train_causal_lm(model, train_ids, args.steps, lr=3e-3, batch=BATCH, seq=SEQ, log_every=50)
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    with open(os.path.join(args.out, "corpus.json"), "w") as f:
        json.dump({"python": sys.version.split()[0], "stdlib": sysconfig.get_paths()["stdlib"], "seq": SEQ,
                   "steps": args.steps, "batch": BATCH, "train_seconds": round(time.time() - started, 1),
                   "final_train_loss": round(final_loss, 4),
                   "train": split_description(train_files, train_text),
                   "held_out": split_description(held_out_files, held_out_text)}, f, indent=1)
    print(f"saved {args.out} ({sum(p.numel() for p in model.parameters())} parameters)", flush=True)


if __name__ == "__main__":
    main()
