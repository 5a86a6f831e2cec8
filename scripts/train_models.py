#!/usr/bin/env python3
"""Train the models of the fidelity table (test/data/models/, docs/CALIBRATION.md) with NumPy alone.

Each model is a PyTorch-layout GRU (nn.GRU state_dict names under "gru.", gates r, z, n) with a linear head,
trained here by backpropagation through time (the gradients are checked against finite differences with
--check) and Adam. Data are public or synthetic, made by fixed seeds (numpy RandomState, whose streams are
stable across NumPy versions):

  digits_l2_bidir   2 layers, bidirectional, H = 24, on examples/digits (scikit-learn's digits, 8 rows of 8
                    pixels): trained on its 1000 calibration images, labelled by the bundled classifier (their
                    true labels are not shipped), measured on the 597 held-out images against their true
                    labels; the head reads the mean over time of the output. Task metric: accuracy.
  waves_h128        1 layer, H = 128, T = 32, C = 4: which of 6 noisy waveforms (sine, square, sawtooth, chirp
                    up, chirp down, bursts) a sequence holds; the head reads the last step. Task: accuracy.
  denoise_l2        2 layers, H = 48, T = 32, C = 12: per step, the clean band energies of a synthetic
                    harmonic signal from its noisy band energies after a ReLU (about 35% exact zeros), as a
                    speech-enhancement front end sees them. Task metric: R² (%) of the head's prediction.
  waves_lbr0_l2     2 layers, H = 64, Keras's classic cell (reset_after=False, ONNX linear_before_reset = 0), on
                    the waves task; written as model.onnx (the GRU stack) and head.safetensors. Task: accuracy.

Writes test/data/models/<name>/: gru.safetensors (GRU + head.weight/head.bias, F32; for a Keras-style cell
model.onnx and head.safetensors instead), model.json (task, head pooling, data files), and, except for digits (which reads examples/digits/), calib.npy, test.npy and
test_labels.npy or test_targets.npy (float16 inputs keep the files small; qgru reads any float dtype).
Deterministic; about two minutes on one core:
    python3 scripts/train_models.py [--only NAME] [--check]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from example_accuracy import read_safetensors  # noqa: E402
from onnx_file import onnx_model, onnx_node, onnx_tensor  # noqa: E402
from safetensors_file import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "test", "data", "models")


def sigmoid(v):
    return 0.5 * (1.0 + np.tanh(0.5 * v))


class GruLayer:
    """One direction of one layer, PyTorch's formulation (gates r, z, n along the 3H axis):
    r = σ(W_r x + b_ir + R_r h + b_hr), z = σ(W_z x + b_iz + R_z h + b_hz),
    n = tanh(W_n x + b_in + r ⊙ (R_n h + b_hn)), h' = (1 − z) ⊙ n + z ⊙ h;
    with reset_after=False Keras's classic cell (ONNX linear_before_reset = 0): n = tanh(W_n x + b_in + R_n (r ⊙ h) + b_hn)."""

    def __init__(self, rng, c, h, reset_after=True):
        k = 1.0 / np.sqrt(h)
        self.p = {"w_ih": rng.uniform(-k, k, (3 * h, c)), "w_hh": rng.uniform(-k, k, (3 * h, h)),
                  "b_ih": rng.uniform(-k, k, 3 * h), "b_hh": rng.uniform(-k, k, 3 * h)}
        self.h = h
        self.reset_after = reset_after

    def forward(self, x, reverse):
        """x [T, N, C] -> y [T, N, H] (y[t] is the state after step t in this direction)."""
        T, N, _ = x.shape
        H = self.h
        w_ih, w_hh, b_ih, b_hh = self.p["w_ih"], self.p["w_hh"], self.p["b_ih"], self.p["b_hh"]
        gi = x @ w_ih.T + b_ih  # [T, N, 3H]
        y = np.zeros((T, N, H))
        cache = []
        h = np.zeros((N, H))
        for t in (range(T - 1, -1, -1) if reverse else range(T)):
            gh = h @ w_hh.T + b_hh
            r = sigmoid(gi[t, :, :H] + gh[:, :H])
            z = sigmoid(gi[t, :, H:2 * H] + gh[:, H:2 * H])
            if self.reset_after:
                n = np.tanh(gi[t, :, 2 * H:] + r * gh[:, 2 * H:])
            else:  # gh's n part is replaced by R_n (r ⊙ h) + b_hn
                n = np.tanh(gi[t, :, 2 * H:] + (r * h) @ w_hh[2 * H:].T + b_hh[2 * H:])
            h_new = (1 - z) * n + z * h
            cache.append((t, h, r, z, n, gh[:, 2 * H:]))
            y[t] = h = h_new
        self.cache = (x, cache)
        return y

    def backward(self, dy):
        """dy [T, N, H] -> dx [T, N, C]; parameter gradients in self.g."""
        x, cache = self.cache
        H = self.h
        w_ih, w_hh = self.p["w_ih"], self.p["w_hh"]
        g = {k: np.zeros_like(v) for k, v in self.p.items()}
        dgi = np.zeros(x.shape[:2] + (3 * H,))
        dh = np.zeros_like(dy[0])
        for t, h, r, z, n, gh_n in reversed(cache):
            dh = dh + dy[t]
            dn = dh * (1 - z)
            dz = dh * (h - n)
            dh_prev = dh * z
            dan = dn * (1 - n * n)
            daz = dz * z * (1 - z)
            if self.reset_after:
                dar = dan * gh_n * r * (1 - r)
                dgh = np.concatenate([dar, daz, dan * r], axis=1)
                g["w_hh"] += dgh.T @ h
                g["b_hh"] += dgh.sum(0)
                dh = dh_prev + dgh @ w_hh
            else:  # n's recurrent input is R_n (r ⊙ h) + b_hn: its gradient reaches r and h through r ⊙ h
                drh = dan @ w_hh[2 * H:]
                dar = drh * h * r * (1 - r)
                dgh = np.concatenate([dar, daz], axis=1)
                g["w_hh"][:2 * H] += dgh.T @ h
                g["w_hh"][2 * H:] += dan.T @ (r * h)
                g["b_hh"] += np.concatenate([dgh, dan], axis=1).sum(0)
                dh = dh_prev + dgh @ w_hh[:2 * H] + drh * r
            dgi[t] = np.concatenate([dar, daz, dan], axis=1)
        g["w_ih"] = np.einsum("tng,tnc->gc", dgi, x)
        g["b_ih"] = dgi.sum((0, 1))
        self.g = g
        return dgi @ w_ih


class Model:
    """A stack of GRU layers (one or two directions, concatenated as nn.GRU does) and a linear head on the
    output: pool "last" (y[T-1]), "mean" (mean over time) or "each" (every step, for regression). reset_after:
    PyTorch's cell (True) or Keras's classic one (False, GruLayer)."""

    def __init__(self, seed, c, h, layers, directions, outputs, pool, reset_after=True):
        rng = np.random.RandomState(seed)
        self.layers = [[GruLayer(rng, c if l == 0 else h * directions, h, reset_after) for _ in range(directions)]
                       for l in range(layers)]
        k = 1.0 / np.sqrt(h * directions)
        self.head = {"w": rng.uniform(-k, k, (outputs, h * directions)), "b": np.zeros(outputs)}
        self.pool = pool

    def params(self):
        for l, cells in enumerate(self.layers):
            for d, cell in enumerate(cells):
                for name in cell.p:
                    yield (l, d, name), cell.p, cell, name
        for name in self.head:
            yield ("head", name), self.head, None, name

    def forward(self, x):
        for cells in self.layers:
            x = np.concatenate([cell.forward(x, reverse=d == 1) for d, cell in enumerate(cells)], axis=2)
        self.y = x
        if self.pool == "last":
            self.feature = x[-1]
        elif self.pool == "mean":
            self.feature = x.mean(0)
        else:
            self.feature = x
        return self.feature @ self.head["w"].T + self.head["b"]

    def backward(self, dout):
        feature = self.feature
        if self.pool == "each":
            self.head_g = {"w": np.einsum("tno,tnf->of", dout, feature), "b": dout.sum((0, 1))}
        else:
            self.head_g = {"w": dout.T @ feature, "b": dout.sum(0)}
        dfeature = dout @ self.head["w"]
        dy = np.zeros_like(self.y)
        if self.pool == "last":
            dy[-1] = dfeature
        elif self.pool == "mean":
            dy[:] = dfeature / self.y.shape[0]
        else:
            dy = dfeature
        for cells in reversed(self.layers):
            H = cells[0].h
            dx = sum(cell.backward(dy[:, :, d * H:(d + 1) * H]) for d, cell in enumerate(cells))
            dy = dx

    def gradients(self):
        for key, store, cell, name in self.params():
            yield key, store, name, (self.head_g[name] if cell is None else cell.g[name])

    def state_dict(self):
        out = {}
        for l, cells in enumerate(self.layers):
            for d, cell in enumerate(cells):
                suffix = f"_l{l}" + ("_reverse" if d == 1 else "")
                for name, value in cell.p.items():
                    kind, part = name.split("_")
                    out[f"gru.{kind}_{part}{suffix}".replace("w_", "weight_").replace("b_", "bias_")] = value
        out = {k.replace("gru.w_", "gru.weight_").replace("gru.b_", "gru.bias_"): v for k, v in out.items()}
        out["head.weight"] = self.head["w"]
        out["head.bias"] = self.head["b"]
        return {k: v.astype(np.float32) for k, v in out.items()}

    def onnx_model(self, name):
        """The GRU stack as an ONNX graph the way Keras converters write a reset_after=False GRU: GRU nodes with
        linear_before_reset = 0 (the attribute left at its default), gates z, r, h, biases [Wb, Rb], Squeeze
        (axes as an input, opset 14) between layers. Forward only (no Transpose + Reshape for two directions)."""
        assert all(len(cells) == 1 for cells in self.layers), "onnx_model writes one direction"
        nodes, inits = [], []
        current = "x"
        for l, (cell,) in enumerate(self.layers):
            H = cell.h
            zrn = lambda a: np.concatenate([a[H:2 * H], a[:H], a[2 * H:]])  # PyTorch r, z, n -> ONNX z, r, h
            inits += [onnx_tensor(f"W{l}", zrn(cell.p["w_ih"])[None].astype(np.float32)),
                      onnx_tensor(f"R{l}", zrn(cell.p["w_hh"])[None].astype(np.float32)),
                      onnx_tensor(f"B{l}", np.concatenate([zrn(cell.p["b_ih"]), zrn(cell.p["b_hh"])])[None].astype(np.float32)),
                      onnx_tensor(f"axes{l}", np.array([1], dtype=np.int64))]
            attrs = [("hidden_size", H)] + ([("linear_before_reset", 1)] if cell.reset_after else [])
            nodes += [onnx_node("GRU", [current, f"W{l}", f"R{l}", f"B{l}"], [f"Y{l}"], f"{name}/gru_{l}", attrs),
                      onnx_node("Squeeze", [f"Y{l}", f"axes{l}"], [f"out{l}"], f"{name}/squeeze_{l}")]
            current = f"out{l}"
        shapes = {"x": ["T", "N", self.layers[0][0].p["w_ih"].shape[1]], current: ["T", "N", self.layers[-1][0].h]}
        return onnx_model(nodes, inits, outputs=(current,), producer="scripts/train_models.py", shapes=shapes)


def loss_and_grad(model, x, target, task):
    out = model.forward(x)
    if task == "classify":
        shifted = out - out.max(1, keepdims=True)
        prob = np.exp(shifted)
        prob /= prob.sum(1, keepdims=True)
        n = len(target)
        loss = -np.log(prob[np.arange(n), target] + 1e-300).mean()
        dout = prob
        dout[np.arange(n), target] -= 1
        dout /= n
    else:
        diff = out - target
        loss = (diff ** 2).mean()
        dout = 2 * diff / diff.size
    model.backward(dout)
    return loss


def train(model, x, target, task, epochs, batch, lr, seed):
    rng = np.random.RandomState(seed)
    m = {key: np.zeros_like(store[name]) for key, store, _, name in model.params()}
    v = {key: np.zeros_like(store[name]) for key, store, _, name in model.params()}
    step = 0
    n = x.shape[1]
    for epoch in range(epochs):
        order = rng.permutation(n)
        for begin in range(0, n, batch):
            idx = order[begin:begin + batch]
            loss = loss_and_grad(model, x[:, idx], target[idx] if task == "classify" else target[:, idx], task)
            step += 1
            grads = list(model.gradients())
            norm = np.sqrt(sum((g ** 2).sum() for _, _, _, g in grads))
            scale = min(1.0, 5.0 / (norm + 1e-12))  # clip the global gradient norm at 5
            for key, store, name, g in grads:
                g = g * scale
                m[key] = 0.9 * m[key] + 0.1 * g
                v[key] = 0.999 * v[key] + 0.001 * g * g
                mhat = m[key] / (1 - 0.9 ** step)
                vhat = v[key] / (1 - 0.999 ** step)
                store[name] -= lr * mhat / (np.sqrt(vhat) + 1e-8)
        if epoch % 5 == 4 or epoch == epochs - 1:
            print(f"  epoch {epoch + 1}: loss {loss:.4f}", file=sys.stderr)


def check_gradients():
    """Finite differences against the analytic gradients on a tiny bidirectional 2-layer model."""
    rng = np.random.RandomState(1)
    for task, pool, reset_after in (("classify", "mean", True), ("regress", "each", True), ("classify", "last", True),
                                    ("classify", "mean", False), ("regress", "each", False)):
        model = Model(3, 3, 4, 2, 2, 3, pool, reset_after)
        x = rng.randn(5, 2, 3)
        target = rng.randint(0, 3, 2) if task == "classify" else rng.randn(5, 2, 3)
        loss_and_grad(model, x, target, task)
        worst = 0.0
        for key, store, name, g in list(model.gradients()):
            for i in sorted(set(np.linspace(0, store[name].size - 1, 12).astype(int))):  # entries of every gate
                flat = store[name].reshape(-1)
                saved = flat[i]
                flat[i] = saved + 1e-6
                up = loss_and_grad(model, x, target, task)
                flat[i] = saved - 1e-6
                down = loss_and_grad(model, x, target, task)
                flat[i] = saved
                numeric = (up - down) / 2e-6
                worst = max(worst, abs(numeric - g.reshape(-1)[i]) / max(1e-4, abs(numeric) + abs(g.reshape(-1)[i])))
        loss_and_grad(model, x, target, task)
        cell = "PyTorch" if reset_after else "Keras reset_after=False"
        print(f"gradient check ({task}, pool {pool}, {cell} cell): worst relative difference {worst:.2e}")
        if worst > 1e-5:
            sys.exit("gradient check failed")


# ---- data ----------------------------------------------------------------------------------------------

def waves(n, seed, T=32):
    """[T, n, 4] noisy waveforms of 6 kinds and their labels. Channels: the signal, its first difference, a
    slow noisy copy (two-step average) and a rectified copy."""
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 6, n)
    t = np.arange(T)[:, None]
    freq = rng.uniform(0.15, 0.45, n)[None, :]
    phase = rng.uniform(0, 2 * np.pi, n)[None, :]
    amp = rng.uniform(0.5, 1.5, n)[None, :]
    base = np.zeros((T, n))
    angle = freq * t + phase
    kinds = [np.sin(angle), np.sign(np.sin(angle)), ((angle / np.pi) % 2) - 1,
             np.sin(phase + freq * 0.3 * t + 0.012 * t * t), np.sin(phase + freq * t - 0.008 * t * t),
             np.sin(3 * angle) * (np.sin(0.2 * t + phase) > 0.3)]
    for k in range(6):
        base[:, labels == k] = kinds[k][:, labels == k]
    s = amp * base + 0.25 * rng.randn(T, n)
    diff = np.vstack([np.zeros((1, n)), np.diff(s, axis=0)])
    slow = np.vstack([s[:1], 0.5 * (s[1:] + s[:-1])])
    x = np.stack([s, diff, slow, np.maximum(s, 0)], axis=2)
    return x.astype(np.float16).astype(np.float64), labels


def denoise(n, seed, T=32, bands=12):
    """[T, n, bands] noisy band energies after a ReLU (log domain, offset so that about a third are exact
    zeros) and [T, n, bands] clean band energies: harmonic sources switching on and off over time."""
    rng = np.random.RandomState(seed)
    k = np.arange(bands)[None, None, :]
    f0 = rng.uniform(1.0, 3.0, (1, n, 1))
    onset = rng.randint(0, T // 2, (1, n, 1))
    length = rng.randint(T // 4, T, (1, n, 1))
    t = np.arange(T)[:, None, None]
    active = ((t >= onset) & (t < onset + length)).astype(float)
    drift = 1 + 0.02 * (t - onset)
    harmonic = np.exp(-0.5 * ((k % (f0 * drift)) ** 2) / 0.3)  # peaks at the harmonics of f0
    clean = active * (1.0 + rng.uniform(0.5, 1.5, (1, n, 1))) * harmonic
    noise = rng.gamma(1.5, 0.35, (T, n, bands)) * rng.uniform(0.4, 1.2, (1, n, 1))
    noisy = np.log1p(4 * (clean + noise))
    x = np.maximum(noisy - 1.0, 0.0)
    target = np.log1p(4 * clean)
    return x.astype(np.float16).astype(np.float64), target.astype(np.float16).astype(np.float64)


def digits():
    """examples/digits: its calibration images (the first 1000 training images) labelled by the bundled
    classifier (its own training data, which it fits; the true labels of those images are not shipped), and
    the held-out images with their true labels."""
    d = os.path.join(ROOT, "examples", "digits")
    calib = np.load(os.path.join(d, "calib.npy")).astype(np.float64)
    names = ["gru.weight_ih_l0", "gru.weight_hh_l0", "gru.bias_ih_l0", "gru.bias_hh_l0", "head.weight", "head.bias"]
    weights = read_safetensors(os.path.join(d, "gru.safetensors"), names)
    teacher = Model(0, 8, 64, 1, 1, 10, "last")
    cell = teacher.layers[0][0]
    for name, key in (("w_ih", "weight_ih_l0"), ("w_hh", "weight_hh_l0"), ("b_ih", "bias_ih_l0"), ("b_hh", "bias_hh_l0")):
        cell.p[name] = weights["gru." + key].astype(np.float64)
    teacher.head = {"w": weights["head.weight"].astype(np.float64), "b": weights["head.bias"].astype(np.float64)}
    labels = teacher.forward(calib).argmax(1)
    test, test_labels = np.load(os.path.join(d, "test.npy")).astype(np.float64), np.load(os.path.join(d, "test_labels.npy"))
    print(f"  the bundled classifier on examples/digits/test.npy: {(teacher.forward(test).argmax(1) == test_labels).mean():.4f}",
          file=sys.stderr)
    return calib, labels, test, test_labels


# ---- models ------------------------------------------------------------------------------------------------

def evaluate(model, x, target, task):
    out = model.forward(x)
    if task == "classify":
        return float((out.argmax(1) == target).mean())
    residual = ((out - target) ** 2).sum()
    total = ((target - target.mean((0, 1))) ** 2).sum()
    return float(1 - residual / total)


def save(name, model, files, manifest, metric):
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    metadata = {"source": "scripts/train_models.py", "model": name, "float_test_metric": f"{metric:.4f}"}
    if model.layers[0][0].reset_after:
        write_safetensors(os.path.join(folder, "gru.safetensors"), model.state_dict(), metadata)
    else:  # a Keras-style cell exists as ONNX only (safetensors state dicts are PyTorch's cell): GRU and head apart
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(model.onnx_model(name))
        state = model.state_dict()
        write_safetensors(os.path.join(folder, "head.safetensors"),
                          {k: v for k, v in state.items() if k.startswith("head.")}, metadata)
        manifest = dict(manifest, model="model.onnx", head="head.safetensors")
    for file_name, array in files.items():
        np.save(os.path.join(folder, file_name), array)
    manifest["float_test_metric"] = round(metric, 4)
    with open(os.path.join(folder, "model.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"{name}: float test {manifest['metric']} {metric:.4f}")


def make_digits_l2_bidir():
    calib, labels, test, test_labels = digits()
    model = Model(0, 8, 24, 2, 2, 10, "mean")
    train(model, calib, labels, "classify", epochs=60, batch=50, lr=1e-2, seed=0)
    metric = evaluate(model, test, test_labels, "classify")
    save("digits_l2_bidir", model, {},
         {"task": "classify", "pool": "mean", "metric": "accuracy", "calib": "../../../../examples/digits/calib.npy",
          "test": "../../../../examples/digits/test.npy", "labels": "../../../../examples/digits/test_labels.npy"},
         metric)


# Synthetic models: data maker, sequences for training / test / calibration (the first training sequences),
# data seeds, Model(seed 0, C, H, layers, directions, outputs, pool) and training.
SYNTHETIC = {
    "waves_h128": {"data": waves, "sizes": (3000, 500, 400), "seeds": (1, 2), "model": (4, 128, 1, 1, 6, "last"),
                   "task": "classify", "epochs": 25, "lr": 3e-3},
    "denoise_l2": {"data": denoise, "sizes": (2000, 300, 300), "seeds": (3, 4), "model": (12, 48, 2, 1, 12, "each"),
                   "task": "regress", "epochs": 30, "lr": 5e-3},
    "waves_lbr0_l2": {"data": waves, "sizes": (3000, 500, 400), "seeds": (1, 2), "model": (4, 64, 2, 1, 6, "last"),
                      "task": "classify", "epochs": 25, "lr": 3e-3, "reset_after": False},
}


def make_synthetic(name):
    spec = SYNTHETIC[name]
    n_train, n_test, n_calib = spec["sizes"]
    x, target = spec["data"](n_train, seed=spec["seeds"][0])
    test, test_target = spec["data"](n_test, seed=spec["seeds"][1])
    model = Model(0, *spec["model"], reset_after=spec.get("reset_after", True))
    train(model, x, target, spec["task"], epochs=spec["epochs"], batch=100, lr=spec["lr"], seed=0)
    metric = evaluate(model, test, test_target, spec["task"])
    print(f"  exact zeros in the inputs: {(x == 0).mean():.1%}", file=sys.stderr)
    classify = spec["task"] == "classify"
    answers = "test_labels.npy" if classify else "test_targets.npy"
    save(name, model, {"calib.npy": x[:, :n_calib].astype(np.float16), "test.npy": test.astype(np.float16),
                       answers: test_target.astype(np.int64 if classify else np.float16)},
         {"task": spec["task"], "pool": spec["model"][-1], "metric": "accuracy" if classify else "r2",
          "calib": "calib.npy", "test": "test.npy", ("labels" if classify else "targets"): answers}, metric)


MODELS = {"digits_l2_bidir": make_digits_l2_bidir, "waves_h128": lambda: make_synthetic("waves_h128"),
          "denoise_l2": lambda: make_synthetic("denoise_l2"), "waves_lbr0_l2": lambda: make_synthetic("waves_lbr0_l2")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(MODELS), help="train this model only")
    parser.add_argument("--check", action="store_true", help="check the gradients by finite differences, then stop")
    args = parser.parse_args()
    if args.check:
        check_gradients()
        return
    for name, make in MODELS.items():
        if args.only in (None, name):
            make()


if __name__ == "__main__":
    main()
