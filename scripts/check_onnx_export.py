#!/usr/bin/env python3
"""`qgru export --onnx` in onnxruntime: parity with qgru's float GRU, and how close the float-equivalent is.

Three jobs, each with the qgru binary given (default build/apps/qgru/qgru):

  check (default)     For every case of test/data/onnx_export/ (options.json says how it was exported), export it
                      again with today's qgru, check the graph with onnx.checker (full check), run it in onnxruntime
                      and compare with qgru's float GRU on the exported weights (`qgru run --model exported.onnx`,
                      x quantized and dequantized in numpy exactly as ONNX's QuantizeLinear does when the case
                      quantizes x): at most 1e-5 apart. Also compares onnxruntime's output with the committed
                      y.npy / h_n.npy (the fixture the C++ tests use) and says whether today's export is
                      byte-identical to the committed exported.onnx apart from the producer version.
  --write-fixtures    Remake test/data/onnx_export/: the artifacts (calibrate + quantize from test/data/onnx
                      models), their exports, the inputs, and onnxruntime's outputs y.npy / h_n.npy.
  --closeness         On the bundled example (examples/digits) and the trained models of test/data/models, for each
                      preset: the SQNR of the exported model's output (run in onnxruntime) against the integer
                      executor's dequantized output (`qgru run --model model.qgru.json`) and against the original
                      float model, the integer executor's own SQNR against float, and the test metric of each;
                      with and without --quantize-input. Prints a Markdown table (docs/ONNX.md).

onnx, onnxruntime (and numpy) come from PyPI into a private venv (/tmp/qgru-onnx-venv, scripts/onnx_venv.py), as
for scripts/make_onnx_fixtures.py.

    scripts/check_onnx_export.py [--qgru build/apps/qgru/qgru] [--write-fixtures [--only CASE] | --closeness]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from onnx_venv import DEFAULT_VENV as VENV, run_with_onnx  # noqa: E402
FIXTURES = os.path.join(ROOT, "test", "data", "onnx_export")
ONNX_DATA = os.path.join(ROOT, "test", "data", "onnx")
DIGITS = os.path.join(ROOT, "examples", "digits")
TOLERANCE = 1e-5


def qgru(binary, *args, cwd=None):
    subprocess.run([binary, "-q", *args], check=True, stdout=subprocess.DEVNULL, cwd=cwd)


# ---- the fixture cases --------------------------------------------------------------------------------------
# model: a float model under test/data/onnx; config: a preset or a config file in the case folder (None: the
# float model itself is exported); options: the export's flags (options.json); x: (T, N, seed, ties) the input.
CASES = {
    # Two bidirectional layers, int8: the plain export at the default opset.
    "int8_l2_bidir": dict(model="pytorch_l2_bidir_external", config="int8", options=dict(opset=17), x=(9, 5, 21, False)),
    # 16-bit x codes: INT16 QuantizeLinear (opset 21), batch-first, h0 and sequence_lens as graph inputs; x holds
    # values exactly halfway between grid points (ONNX rounds them to even) and values beyond x's range.
    "int16act_qdq_options": dict(model="pytorch_l2", config="int16-activations",
                                 options=dict(opset=21, quantize_input=True, batch_first=True, h0_input=True,
                                              lengths_input=True),
                                 x=(7, 4, 22, True), lengths=[7, 2, 5, 1]),
    # 6-bit unsigned x (a config of the case's own): UINT8 QuantizeLinear + Clip at the 6-bit range, opset 13.
    "x6bit_qdq_clip": dict(model="pytorch_l2_bidir_lengths", config="config.json",
                           options=dict(opset=13, quantize_input=True), x=(6, 3, 23, True)),
    # A float linear_before_reset = 0 model exported as it is (no artifact): linear_before_reset = 0 in the
    # graph, and Squeeze's axes attribute (opset 11).
    "float_lbr0": dict(model="lbr0_l2_opset11", config=None, options=dict(opset=11), x=(5, 3, 24, False)),
    # An artifact of the linear_before_reset = 0 cell (version 2, docs/FIXED_POINT.md §3a), bidirectional, int8:
    # exported as that cell.
    "int8_lbr0_bidir": dict(model="lbr0_bidir_lengths", config="int8", options=dict(opset=17), x=(7, 4, 25, False)),
}

def x6_config():
    """The config of x6bit_qdq_clip: the int16 preset with 6-bit unsigned x, so the case's numbers are about x."""
    config = json.load(open(os.path.join(ROOT, "configs", "int16.json")))
    config["name"] = "x6-unsigned"
    config["description"] = "6-bit unsigned x, int16 elsewhere (export fixture: QuantizeLinear to UINT8 and a Clip)"
    config["range_method"] = "minmax"
    config["tensors"]["x"] = {"bits": 6, "signed": False, "symmetric": False}
    return config


def export_args(case_dir, output):
    spec = json.load(open(os.path.join(case_dir, "options.json")))
    args = ["export", "--onnx", "--model", os.path.normpath(os.path.join(case_dir, spec["model"])), "-o", output,
            "--opset", str(spec["opset"])]
    for key, flag in [("batch_first", "--batch-first"), ("h0_input", "--h0-input"), ("lengths_input", "--lengths-input"),
                      ("quantize_input", "--quantize-input")]:
        if spec.get(key):
            args.append(flag)
    return args, spec


def x_quantization(onnx_model):
    """(scale, zero point, code range low/high, clip low/high) of an exported graph's QuantizeLinear, or None."""
    from onnx import numpy_helper
    inits = {t.name: numpy_helper.to_array(t) for t in onnx_model.graph.initializer}
    if "x_scale" not in inits:
        return None
    zp = inits["x_zero_point"]
    info = __import__("numpy").iinfo(zp.dtype)
    clip = (float(inits["x_min"]), float(inits["x_max"])) if "x_min" in inits else None
    return float(inits["x_scale"]), int(zp), info.min, info.max, clip


def onnx_fake_quantize(x, quant):
    """x through QuantizeLinear -> DequantizeLinear (-> Clip) with ONNX's semantics: round half to even."""
    import numpy as np
    scale, zp, lo, hi, clip = quant
    codes = np.clip(np.rint(x.astype(np.float32) / np.float32(scale)) + zp, lo, hi)
    y = ((codes - zp) * np.float32(scale)).astype(np.float32)
    if clip is not None:
        y = np.clip(y, np.float32(clip[0]), np.float32(clip[1])).astype(np.float32)
    return y


def run_onnxruntime(path, feeds):
    import onnxruntime as ort
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    y, h_n = session.run(["y", "h_n"], feeds)
    return y, h_n


def case_feeds(case_dir, spec):
    import numpy as np
    feeds = {"x": np.load(os.path.join(case_dir, "x.npy"))}
    if spec.get("h0_input"):
        feeds["h0"] = np.load(os.path.join(case_dir, "h0.npy"))
    if spec.get("lengths_input"):
        feeds["sequence_lens"] = np.load(os.path.join(case_dir, "lengths.npy")).astype(np.int32)
    return feeds


def qgru_float_run(binary, exported, case_dir, spec, x, work):
    """qgru's float GRU on the exported graph's weights (the importer ignores the QDQ nodes: x comes in as ONNX
    would hand it to the first GRU)."""
    import numpy as np
    np.save(os.path.join(work, "x_in.npy"), x)
    args = ["run", "--model", exported, "--input", os.path.join(work, "x_in.npy"), "--output", os.path.join(work, "y_q.npy"),
            "--hn", os.path.join(work, "hn_q.npy")]
    if spec.get("batch_first"):
        args.append("--batch-first")
    if spec.get("h0_input"):
        args += ["--h0", os.path.join(case_dir, "h0.npy")]
    if spec.get("lengths_input"):
        args += ["--lengths", os.path.join(case_dir, "lengths.npy")]
    qgru(binary, *args)
    return np.load(os.path.join(work, "y_q.npy")), np.load(os.path.join(work, "hn_q.npy"))


def producer_free(path):
    import onnx
    model = onnx.load(path)
    model.producer_version = ""
    return model.SerializeToString(deterministic=True)


def check_case(binary, case, work):
    import numpy as np
    import onnx
    case_dir = os.path.join(FIXTURES, case)
    exported = os.path.join(work, case + ".onnx")
    args, spec = export_args(case_dir, exported)
    qgru(binary, *args)
    model = onnx.load(exported)
    onnx.checker.check_model(model, full_check=True)
    feeds = case_feeds(case_dir, spec)
    y, h_n = run_onnxruntime(exported, feeds)
    quant = x_quantization(model)
    x = feeds["x"] if quant is None else onnx_fake_quantize(feeds["x"], quant)
    y_qgru, h_n_qgru = qgru_float_run(binary, exported, case_dir, spec, x, work)
    to_qgru = max(np.abs(y - y_qgru).max(), np.abs(h_n - h_n_qgru).max())
    to_fixture = max(np.abs(y - np.load(os.path.join(case_dir, "y.npy"))).max(),
                     np.abs(h_n - np.load(os.path.join(case_dir, "h_n.npy"))).max())
    same_graph = producer_free(exported) == producer_free(os.path.join(case_dir, "exported.onnx"))
    ok = to_qgru <= TOLERANCE and to_fixture <= TOLERANCE and same_graph
    print(f"{case}: onnxruntime vs qgru float GRU {to_qgru:.3g}, vs the committed outputs {to_fixture:.3g}, "
          f"export {'identical to' if same_graph else 'DIFFERS from'} the committed graph: {'OK' if ok else 'FAIL'}")
    return ok


def write_case(binary, case, work):
    import numpy as np
    spec = CASES[case]
    case_dir = os.path.join(FIXTURES, case)
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir)
    source = os.path.join(ONNX_DATA, spec["model"], "model.onnx")
    options = dict(spec["options"])
    if spec["config"] is None:
        options["model"] = os.path.relpath(source, case_dir)
    else:
        config = spec["config"]
        if config == "config.json":
            json.dump(x6_config(), open(os.path.join(case_dir, "config.json"), "w"), indent=2)
            config = os.path.join(case_dir, "config.json")
        # Paths relative to the repository (run from its root), so that the artifact's provenance names no
        # folder of this machine.
        relative = os.path.relpath(source, ROOT)
        calib = os.path.join(os.path.dirname(relative), "x.npy")
        stats = os.path.join(work, case + "_stats.json")
        qgru(binary, "calibrate", "--model", relative, "--data", calib, "--method", "minmax", "-o", stats, cwd=ROOT)
        qgru(binary, "quantize", "--model", relative, "--stats", stats, "--config", os.path.relpath(config, ROOT)
             if os.path.isabs(config) else config, "-o", os.path.join(case_dir, "model.qgru.json"), cwd=ROOT)
        options["model"] = "model.qgru.json"
    json.dump(options, open(os.path.join(case_dir, "options.json"), "w"), indent=2, sort_keys=True)

    exported = os.path.join(case_dir, "exported.onnx")
    args, _ = export_args(case_dir, exported)
    qgru(binary, *args)
    import onnx
    model = onnx.load(exported)
    onnx.checker.check_model(model, full_check=True)
    T, N, seed, ties = spec["x"]
    C = model.graph.input[0].type.tensor_type.shape.dim[2].dim_value
    rng = np.random.RandomState(seed)
    x = rng.normal(0.0, 1.0, (T, N, C)).astype(np.float32)
    quant = x_quantization(model)
    if ties and quant is not None:
        # Every third value exactly halfway between two grid points, and a few far beyond the range.
        scale = quant[0]
        flat = x.reshape(-1)
        flat[::3] = ((np.floor(flat[::3] / scale) + 0.5) * scale).astype(np.float32)
        flat[1::11] *= 40.0
    if options.get("batch_first"):
        x = np.ascontiguousarray(x.transpose(1, 0, 2))
    np.save(os.path.join(case_dir, "x.npy"), x)
    h_n_dims = model.graph.output[1].type.tensor_type.shape.dim  # [L*D, N, H]
    L_D, H = h_n_dims[0].dim_value, h_n_dims[2].dim_value
    if options.get("h0_input"):
        np.save(os.path.join(case_dir, "h0.npy"), rng.uniform(-0.8, 0.8, (L_D, N, H)).astype(np.float32))
    if options.get("lengths_input"):
        np.save(os.path.join(case_dir, "lengths.npy"), np.array(spec["lengths"], dtype=np.int64))
    y, h_n = run_onnxruntime(exported, case_feeds(case_dir, options))
    np.save(os.path.join(case_dir, "y.npy"), y.astype(np.float32))
    np.save(os.path.join(case_dir, "h_n.npy"), h_n.astype(np.float32))
    print(f"{case}: wrote {case_dir}")


# ---- closeness on the bundled example ------------------------------------------------------------------------
def sqnr_db(reference, test):
    import numpy as np
    reference = reference.astype(np.float64)
    noise = np.sum((reference - test.astype(np.float64)) ** 2)
    return float("inf") if noise == 0 else 10.0 * np.log10(np.sum(reference ** 2) / noise)


# (name, folder, calibration data, test data, metric command): the bundled example and the trained models of
# test/data/models (a 2-layer bidirectional classifier, H = 128, and a 2-layer regressor with continuous input).
MODELS = [
    ("digits", DIGITS, os.path.join(DIGITS, "calib.npy"), os.path.join(DIGITS, "test.npy"),
     ["example_accuracy.py"]),
] + [
    (name, os.path.join(ROOT, "test", "data", "models", name),
     os.path.join(ROOT, "examples", "digits", "calib.npy") if name == "digits_l2_bidir" else
     os.path.join(ROOT, "test", "data", "models", name, "calib.npy"),
     os.path.join(ROOT, "examples", "digits", "test.npy") if name == "digits_l2_bidir" else
     os.path.join(ROOT, "test", "data", "models", name, "test.npy"),
     ["task_metric.py", os.path.join(ROOT, "test", "data", "models", name)])
    for name in ["digits_l2_bidir", "waves_h128", "denoise_l2"]
]


def task_metric(command, y, work):
    """The model's test metric of output y ([T, N, D*H]) as the repository's metric scripts print it."""
    import numpy as np
    path = os.path.join(work, "metric_y.npy")
    np.save(path, y.astype(np.float32))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", command[0]), *command[1:], path],
                         check=True, capture_output=True, text=True).stdout.split()
    return out[0], float(out[1])


def closeness(binary, work, presets):
    import numpy as np
    print("| model | preset | export | vs integer executor (dB) | vs float model (dB) | integer vs float (dB) | "
          "metric: export / integer / float |")
    print("|---|---|---|---|---|---|---|")
    for name, folder, calib, test, metric in MODELS:
        model = os.path.join(folder, "gru.safetensors")
        x = np.load(test).astype(np.float32)
        y_float = os.path.join(work, "y_float.npy")
        qgru(binary, "run", "--model", model, "--input", test, "--output", y_float)
        y_float = np.load(y_float)
        metric_name, float_metric = task_metric(metric, y_float, work)
        stats = os.path.join(work, name + "_stats.json")
        qgru(binary, "calibrate", "--model", model, "--data", calib, "-o", stats)
        for preset in presets:
            artifact = os.path.join(work, name + "_" + preset + ".qgru.json")
            qgru(binary, "quantize", "--model", model, "--stats", stats, "--config", preset, "-o", artifact)
            y_int = os.path.join(work, "y_int.npy")
            qgru(binary, "run", "--model", artifact, "--input", test, "--output", y_int)
            y_int = np.load(y_int)
            for quantize_input in [False, True]:
                exported = os.path.join(work, "exported.onnx")
                qgru(binary, "export", "--onnx", "--model", artifact, "-o", exported,
                     *(["--quantize-input", "--opset", "21"] if quantize_input else []))
                y_onnx, _ = run_onnxruntime(exported, {"x": x})
                print(f"| {name} | {preset} | {'weights + x QDQ' if quantize_input else 'weights'} | "
                      f"{sqnr_db(y_int, y_onnx):.1f} | {sqnr_db(y_float, y_onnx):.1f} | {sqnr_db(y_float, y_int):.1f} | "
                      f"{metric_name} {task_metric(metric, y_onnx, work)[1]:.4f} / {task_metric(metric, y_int, work)[1]:.4f}"
                      f" / {float_metric:.4f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--qgru", default=os.path.join(ROOT, "build", "apps", "qgru", "qgru"))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write-fixtures", action="store_true")
    mode.add_argument("--closeness", action="store_true")
    parser.add_argument("--only", choices=sorted(CASES), help="--write-fixtures: remake this case only")
    parser.add_argument("--python-venv", default=VENV)
    args = parser.parse_args()
    run_with_onnx(args.python_venv)
    binary = os.path.abspath(args.qgru)
    import onnx
    import onnxruntime
    print(f"onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}, qgru {binary}")
    with tempfile.TemporaryDirectory() as work:
        if args.write_fixtures:
            for case in CASES:
                if args.only in (None, case):
                    write_case(binary, case, work)
        elif args.closeness:
            closeness(binary, work, ["int8", "int16-activations", "int16"])
        else:
            ok = all([check_case(binary, case, work) for case in sorted(os.listdir(FIXTURES))
                      if os.path.isdir(os.path.join(FIXTURES, case))])
            sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
