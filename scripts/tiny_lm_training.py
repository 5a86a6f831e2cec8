"""The training loop the small-model scripts share (train_tiny_llama.py, gptq_defaults_study.py): next-token
loss on random windows of a token-id tensor, AdamW with a one-cycle schedule, gradients clipped to norm 1, the
window draws seeded (1) so a run is repeatable. Imported by its neighbours in scripts/; not run on its own."""

import time

import torch


def train_causal_lm(model, ids, steps, *, lr, batch, seq, log_every):
    """Trains ``model`` (a transformers causal LM) for ``steps`` steps of ``batch`` windows of ``seq`` tokens of
    ``ids`` (a 1-D tensor), printing the loss every ``log_every`` steps and at the last; leaves it in eval mode and
    returns the last step's loss."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps, pct_start=0.05)
    generator = torch.Generator().manual_seed(1)
    started = time.time()
    for step in range(steps):
        starts = torch.randint(0, len(ids) - seq - 1, (batch,), generator=generator)
        windows = torch.stack([ids[s:s + seq] for s in starts])
        loss = model(windows, labels=windows).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % log_every == 0 or step == steps - 1:
            print(f"step {step}: loss {loss.item():.3f} ({time.time() - started:.0f} s)", flush=True)
    model.eval()
    return loss.item()
