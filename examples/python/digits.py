"""qgru from Python on the bundled digits GRU: float weights to integer-only inference, checked.

    python3 examples/python/digits.py [--out DIR]

Needs the package (`pip install ./python`) and NumPy; no PyTorch (a torch.nn.GRU works the same way: give it
where the state dict is given here). Each step is what the CLI's subcommand does, on arrays:

  1. the GRU's weights as a state dict, and the calibration and test data as arrays;
  2. calibrate once, quantize under two bit-width presets from the same statistics;
  3. run the integer model on integer codes (what a product runs), classify with the float head;
  4. verify integer against float (SQNR per tensor) and stream one image row by row;
  5. save the artifact for `qgru run` and the runtime C API.
"""

import argparse
import os
import tempfile

import numpy as np

import qgru

HERE = os.path.dirname(os.path.abspath(__file__))
DIGITS = os.path.join(HERE, "..", "digits")


def accuracy(y_last, head, labels):
    """Share of the images whose arg-max logit (the float head on the last step's h) is the label."""
    logits = y_last.astype(np.float64) @ head["weight"].T.astype(np.float64) + head["bias"]
    return float((logits.argmax(axis=1) == labels).mean())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="folder for the artifact (default: a temporary one)")
    args = parser.parse_args()

    # 1. The model as a state dict (nn.GRU names under the prefix "gru."; the head beside it is not the GRU's).
    tensors = qgru.read_tensors(os.path.join(DIGITS, "gru.safetensors"))
    gru = {name: value for name, value in tensors.items() if name.startswith("gru.")}
    head = {"weight": tensors["head.weight"], "bias": tensors["head.bias"]}
    x_calib = np.load(os.path.join(DIGITS, "calib.npy"))   # [T=8, N=1000, C=8] float32
    x_test = np.load(os.path.join(DIGITS, "test.npy"))     # [8, 597, 8]
    labels = np.load(os.path.join(DIGITS, "test_labels.npy"))

    # 2. Calibration statistics once; two presets quantized from them.
    stats = qgru.calibrate(gru, x_calib)
    print(f"calibrated on {stats.total_sequences} sequences (method {stats.method})")

    print(f"{'model':<8} {'accuracy':>8} {'SQNR dB':>8}")
    print(f"{'float':<8} {accuracy(float_last_step(gru, x_test), head, labels):>8.4f} {'-':>8}")
    for config in ("int8", "int16"):
        artifact = qgru.quantize(gru, stats, config=config)
        # 3. Integer in, integer out: x as codes in the model's input space, y as codes in its output space.
        x_codes = artifact.quantize_input(x_test)                       # int32 [8, 597, 8]
        y_codes, h_codes = artifact.run(x_codes)                        # int32 [8, 597, 64], [1, 597, 64]
        y = artifact.dequantize_output(y_codes)
        # 4. The integer model against the float one.
        report = qgru.verify(gru, artifact, x_test)
        print(f"{config:<8} {accuracy(y[-1], head, labels):>8.4f} {report.sqnr_db:>8.1f}")

    # Streaming (the int16 artifact): the first test image, one row at a time, gives the whole run's codes.
    stream = artifact.stream(batch=1)
    rows = [stream.step(x_codes[t, :1]) for t in range(x_codes.shape[0])]
    assert np.array_equal(np.stack(rows), y_codes[:, :1]), "a stream gives the codes of the whole run"
    print(f"streamed image 0 row by row: the same {len(rows)} x {rows[0].shape[1]} codes as the whole run")

    # 5. The artifact, for `qgru run --model ...` or qgru_rt_model_open().
    out = args.out or tempfile.mkdtemp(prefix="qgru-digits-")
    path = os.path.join(out, "digits.qgru.json")
    artifact.save(path)
    print(f"saved {path} ({artifact.executor()})")


def float_last_step(gru, x):
    """The float GRU's last output step (float64 NumPy, PyTorch's gate equations): the accuracy baseline."""
    W, R = gru["gru.weight_ih_l0"].astype(np.float64), gru["gru.weight_hh_l0"].astype(np.float64)
    bw, br = gru["gru.bias_ih_l0"].astype(np.float64), gru["gru.bias_hh_l0"].astype(np.float64)
    H = R.shape[1]
    h = np.zeros((x.shape[1], H))
    for t in range(x.shape[0]):
        gx, gh = x[t] @ W.T + bw, h @ R.T + br
        r = 1 / (1 + np.exp(-(gx[:, :H] + gh[:, :H])))
        z = 1 / (1 + np.exp(-(gx[:, H:2 * H] + gh[:, H:2 * H])))
        n = np.tanh(gx[:, 2 * H:] + r * gh[:, 2 * H:])
        h = (1 - z) * n + z * h
    return h


if __name__ == "__main__":
    main()
