"""The package against the CLI on the bundled example: the same files for the same inputs, byte for byte, the
same codes, the same figures, the same error lines."""

import json
import os

import numpy as np
import pytest

import qgru
from conftest import read_bytes, run_cli


@pytest.mark.parametrize("config, method, scales", [("int8", None, None), ("int16", "kl", None),
                                                    ("int8", None, "multiplier")])
def test_calibrate_and_quantize_write_the_cli_bytes(cli, digits, tmp_path, config, method, scales):
    method_args = [] if method is None else ["--method", method]
    scales_args = [] if scales is None else ["--scales", scales]
    run_cli(cli, "calibrate", "--model", digits["model"], "--data", digits["calib"], *method_args,
            "-o", tmp_path / "cli_stats.json")
    (tmp_path / "cli").mkdir()
    (tmp_path / "py").mkdir()
    run_cli(cli, "quantize", "--model", digits["model"], "--stats", tmp_path / "cli_stats.json", "--config", config,
            *scales_args, "-o", tmp_path / "cli" / "model.qgru.json")

    stats = qgru.calibrate(digits["model"], digits["calib"], method=method)
    stats.save(tmp_path / "py_stats.json")
    assert read_bytes(tmp_path / "py_stats.json") == read_bytes(tmp_path / "cli_stats.json")

    # The artifact records the statistics' path: give the CLI's file, as `--stats` does.
    artifact = qgru.quantize(digits["model"], os.fspath(tmp_path / "cli_stats.json"), config=config, scales=scales)
    artifact.save(tmp_path / "py" / "model.qgru.json")
    for name in ("model.qgru.json", "model.qgru.safetensors"):
        assert read_bytes(tmp_path / "py" / name) == read_bytes(tmp_path / "cli" / name), name


def test_statistics_saved_then_quantized_record_the_saved_path(cli, digits, tmp_path):
    stats = qgru.calibrate(digits["model"], digits["calib"])
    stats.save(tmp_path / "stats.json")
    (tmp_path / "cli").mkdir()
    (tmp_path / "py").mkdir()
    qgru.quantize(digits["model"], stats).save(tmp_path / "py" / "model.qgru.json")
    run_cli(cli, "quantize", "--model", digits["model"], "--stats", tmp_path / "stats.json",
            "-o", tmp_path / "cli" / "model.qgru.json")
    assert read_bytes(tmp_path / "py" / "model.qgru.json") == read_bytes(tmp_path / "cli" / "model.qgru.json")


def test_merge_writes_the_cli_merge(cli, digits, tmp_path):
    x = np.load(digits["calib"])
    shards = []
    for index, part in enumerate(np.array_split(x, 3, axis=1)):
        path = tmp_path / f"shard{index}.npy"
        np.save(path, part)
        run_cli(cli, "calibrate", "--model", digits["model"], "--data", path, "-o", tmp_path / f"shard{index}.json")
        shards.append(qgru.Statistics.load(tmp_path / f"shard{index}.json"))
    run_cli(cli, "calibrate", "--merge", *[tmp_path / f"shard{i}.json" for i in range(3)], "-o", tmp_path / "cli.json")
    qgru.Statistics.merge(*shards).save(tmp_path / "py.json")
    assert read_bytes(tmp_path / "py.json") == read_bytes(tmp_path / "cli.json")
    # Any way of calling merge gives the same statistics.
    assert shards[0].merge(shards[1], shards[2]).to_json() == read_bytes(tmp_path / "cli.json").decode()
    assert qgru.Statistics.merge(shards).to_json() == read_bytes(tmp_path / "cli.json").decode()


def test_run_gives_the_cli_outputs_and_codes(cli, digits, digits_artifact, tmp_path):
    digits_artifact.save(tmp_path / "model.qgru.json")
    run_cli(cli, "run", "--model", tmp_path / "model.qgru.json", "--input", digits["test"], "--output", tmp_path / "y.npy",
            "--codes", tmp_path / "codes.npy", "--hn", tmp_path / "hn.npy")
    x = np.load(digits["test"])
    y, h_n = digits_artifact.run(x)
    assert y.dtype == np.float32 and y.shape == (8, 597, 64)
    np.testing.assert_array_equal(y, np.load(tmp_path / "y.npy"))
    np.testing.assert_array_equal(h_n, np.load(tmp_path / "hn.npy"))
    y_codes, h_codes = digits_artifact.run(digits_artifact.quantize_input(x))
    assert y_codes.dtype == np.int32
    np.testing.assert_array_equal(y_codes, np.load(tmp_path / "codes.npy"))
    np.testing.assert_array_equal(digits_artifact.dequantize_output(y_codes), y)
    # The CLI reading the same codes as its input gives the same codes.
    np.save(tmp_path / "x_codes.npy", digits_artifact.quantize_input(x))
    run_cli(cli, "run", "--model", tmp_path / "model.qgru.json", "--input", tmp_path / "x_codes.npy",
            "--output", tmp_path / "y2.npy", "--codes", tmp_path / "codes2.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "codes2.npy"), y_codes)


def test_loaded_artifact_runs_and_saves_the_same_files(cli, digits, digits_artifact, tmp_path):
    digits_artifact.save(tmp_path / "a.qgru.json")
    loaded = qgru.load(tmp_path / "a.qgru.json")
    assert loaded.path == os.fspath(tmp_path / "a.qgru.json")
    loaded.save(tmp_path / "b.qgru.json")
    assert read_bytes(tmp_path / "b.qgru.safetensors") == read_bytes(tmp_path / "a.qgru.safetensors")
    a = json.loads(read_bytes(tmp_path / "a.qgru.json"))
    b = json.loads(read_bytes(tmp_path / "b.qgru.json"))
    assert b.pop("tensor_file") == "b.qgru.safetensors" and a.pop("tensor_file") == "a.qgru.safetensors"
    assert a == b
    x = np.load(digits["test"])[:, :50]
    np.testing.assert_array_equal(loaded.run(x)[0], digits_artifact.run(x)[0])


def test_verify_reports_the_cli_figures(cli, digits, digits_artifact, tmp_path):
    digits_artifact.save(tmp_path / "model.qgru.json")
    run_cli(cli, "verify", "--model", digits["model"], "--artifact", tmp_path / "model.qgru.json", "--input", digits["test"],
            "--report", tmp_path / "cli_report.json")
    report = qgru.verify(digits["model"], qgru.load(tmp_path / "model.qgru.json"), digits["test"])
    cli_report = json.loads(read_bytes(tmp_path / "cli_report.json"))
    assert report.to_dict() == cli_report
    assert report.sqnr_db == cli_report["output"]["sqnr_db"]
    assert report.tensor("update_gate_output").sqnr_db == next(
        t["sqnr_db"] for t in cli_report["tensors"] if t["tensor"] == "update_gate_output")
    assert len(report.output.per_step_sqnr_db) == 8
    # The README's figure for int8 on the bundled example.
    assert round(report.sqnr_db, 1) == 30.0
    assert "output" in str(report) and "sqnr_db" in str(report)


def test_html_reports_are_written(digits, digits_artifact, tmp_path):
    stats = qgru.calibrate(digits["model"], digits["calib"])
    report = qgru.verify(digits["model"], digits_artifact, np.load(digits["test"])[:, :40])
    report.to_html(tmp_path / "verify.html", stats=stats)
    stats.to_html(tmp_path / "calibration.html")
    verify_page = read_bytes(tmp_path / "verify.html").decode()
    assert 'id="summary"' in verify_page and "plot-hist-l0-d0-" in verify_page
    assert 'class="summary"' in read_bytes(tmp_path / "calibration.html").decode()


def write_bad_input(tmp_path):
    rank2 = tmp_path / "rank2.npy"
    np.save(rank2, np.zeros((8, 8), np.float32))
    wrong_c = tmp_path / "wrong_c.npy"
    np.save(wrong_c, np.zeros((8, 4, 7), np.float32))
    nan = tmp_path / "nan.npy"
    values = np.zeros((3, 2, 8), np.float32)
    values[2, 1, 5] = np.nan
    np.save(nan, values)
    return rank2, wrong_c, nan


def test_errors_are_the_cli_lines(cli, digits, tmp_path):
    rank2, wrong_c, nan = write_bad_input(tmp_path)
    for data in (rank2, wrong_c, nan):
        line = run_cli(cli, "calibrate", "--model", digits["model"], "--data", data, "-o", tmp_path / "s.json",
                       expect_failure=True)
        with pytest.raises(qgru.Error) as error:
            qgru.calibrate(digits["model"], os.fspath(data))
        assert str(error.value) == line

    line = run_cli(cli, "calibrate", "--model", digits["model"], "--data", digits["calib"], "--method", "median",
                   "-o", tmp_path / "s.json", expect_failure=True)
    with pytest.raises(qgru.Error) as error:
        qgru.calibrate(digits["model"], digits["calib"], method="median")
    assert str(error.value) == line

    stats = qgru.calibrate(digits["model"], digits["calib"])
    stats.save(tmp_path / "stats.json")
    artifact = qgru.quantize(digits["model"], stats)
    artifact.save(tmp_path / "model.qgru.json")
    for data in (rank2, wrong_c, nan):
        line = run_cli(cli, "verify", "--model", digits["model"], "--artifact", tmp_path / "model.qgru.json",
                       "--input", data, expect_failure=True)
        with pytest.raises(qgru.Error) as error:
            qgru.verify(digits["model"], artifact, os.fspath(data))
        assert str(error.value) == line

    # Statistics of another model shape.
    other = tmp_path / "other.json"
    text = read_bytes(tmp_path / "stats.json").decode().replace('"hidden_size": 64', '"hidden_size": 32', 1)
    other.write_text(text)
    line = run_cli(cli, "quantize", "--model", digits["model"], "--stats", other, "-o", tmp_path / "o.qgru.json",
                   expect_failure=True)
    with pytest.raises(qgru.Error) as error:
        qgru.quantize(digits["model"], os.fspath(other))
    assert str(error.value) == line

    # An artifact whose tensor file was changed.
    tensors = tmp_path / "model.qgru.safetensors"
    tensors.write_bytes(read_bytes(tensors)[:-1] + b"\x01")
    line = run_cli(cli, "run", "--model", tmp_path / "model.qgru.json", "--input", digits["test"],
                   "--output", tmp_path / "y.npy", expect_failure=True)
    with pytest.raises(qgru.Error) as error:
        qgru.load(tmp_path / "model.qgru.json")
    assert str(error.value) == line


def test_range_search_writes_the_cli_artifact(cli, digits, tmp_path):
    run_cli(cli, "calibrate", "--model", digits["model"], "--data", digits["calib"], "-o", tmp_path / "stats.json")
    for who in ("cli", "py"):
        (tmp_path / who).mkdir()
    run_cli(cli, "quantize", "--model", digits["model"], "--stats", tmp_path / "stats.json", "--range-method", "search",
            "--data", digits["calib"], "--search-evaluations", 30, "--search-sequences", 64,
            "-o", tmp_path / "cli" / "model.qgru.json")
    artifact = qgru.quantize(digits["model"], os.fspath(tmp_path / "stats.json"), range_method="search",
                             data=digits["calib"], search_evaluations=30, search_sequences=64)
    artifact.save(tmp_path / "py" / "model.qgru.json")
    for name in ("model.qgru.json", "model.qgru.safetensors"):
        assert read_bytes(tmp_path / "py" / name) == read_bytes(tmp_path / "cli" / name), name
    assert json.loads(read_bytes(tmp_path / "py" / "model.qgru.json"))["provenance"]["range_search"]["evaluations"] <= 30
    # Loading and saving again keeps the search's record.
    qgru.load(tmp_path / "py" / "model.qgru.json").save(tmp_path / "py" / "again.qgru.json")
    again = json.loads(read_bytes(tmp_path / "py" / "again.qgru.json"))
    assert again["provenance"] == json.loads(read_bytes(tmp_path / "py" / "model.qgru.json"))["provenance"]
    with pytest.raises(qgru.Error, match="range method 'search' needs calibration data: give data="):
        qgru.quantize(digits["model"], os.fspath(tmp_path / "stats.json"), range_method="search")
    with pytest.raises(qgru.Error, match="data= belongs to the range method 'search'"):
        qgru.quantize(digits["model"], os.fspath(tmp_path / "stats.json"), data=digits["calib"])


def test_onnx_models_prefix_and_lengths_as_the_cli(cli, digits, tmp_path):
    onnx = os.path.join(os.environ.get("QGRU_SOURCE_DIR", ""), "test", "data", "onnx", "pytorch_l2_bidir_lengths")
    model, x, lengths = (os.path.join(onnx, name) for name in ("model.onnx", "x.npy", "lengths.npy"))
    for who in ("cli", "py"):
        (tmp_path / who).mkdir()
    run_cli(cli, "calibrate", "--model", model, "--data", x, "--lengths", lengths, "--method", "minmax",
            "-o", tmp_path / "cli" / "stats.json")
    run_cli(cli, "quantize", "--model", model, "--stats", tmp_path / "cli" / "stats.json", "--config", "int16",
            "-o", tmp_path / "cli" / "model.qgru.json")
    run_cli(cli, "verify", "--model", model, "--artifact", tmp_path / "cli" / "model.qgru.json", "--input", x,
            "--lengths", lengths, "--report", tmp_path / "cli" / "report.json")
    stats = qgru.calibrate(model, x, method="minmax", lengths=lengths)
    stats.save(tmp_path / "py" / "stats.json")
    assert read_bytes(tmp_path / "py" / "stats.json") == read_bytes(tmp_path / "cli" / "stats.json")
    artifact = qgru.quantize(model, os.fspath(tmp_path / "cli" / "stats.json"), config="int16")
    artifact.save(tmp_path / "py" / "model.qgru.json")
    for name in ("model.qgru.json", "model.qgru.safetensors"):
        assert read_bytes(tmp_path / "py" / name) == read_bytes(tmp_path / "cli" / name), name
    report = qgru.verify(model, artifact, x, lengths=np.load(lengths))
    cli_report = json.loads(read_bytes(tmp_path / "cli" / "report.json"))
    cli_report["artifact"] = report.to_dict()["artifact"]  # the artifact in memory is named so
    assert report.to_dict() == cli_report
    # Lengths as arrays equal lengths files; a bad length names its row.
    assert qgru.calibrate(model, np.load(x), method="minmax", lengths=np.load(lengths)).to_dict()["tensors"] == \
        stats.to_dict()["tensors"]
    bad = np.load(lengths).copy()
    bad[1] = 99
    with pytest.raises(qgru.Error, match=r"sequence length 99 of row 1 is outside \[0, T = "):
        qgru.verify(model, artifact, x, lengths=bad)

    # --prefix: one GRU of a full state dict (the example's file also holds its classifier head).
    full = qgru.read_tensors(digits["model"])
    run_cli(cli, "calibrate", "--model", digits["model"], "--prefix", "gru", "--data", digits["calib"],
            "-o", tmp_path / "cli" / "digits.json")
    qgru.calibrate(digits["model"], digits["calib"], prefix="gru").save(tmp_path / "py" / "digits.json")
    assert read_bytes(tmp_path / "py" / "digits.json") == read_bytes(tmp_path / "cli" / "digits.json")
    assert qgru.calibrate(full, digits["calib"], prefix="gru.").to_dict()["tensors"] == \
        qgru.Statistics.load(tmp_path / "cli" / "digits.json").to_dict()["tensors"]


def test_saves_never_replace_an_input(cli, digits, tmp_path):
    """Every write of the package goes through the CLI's output policy: an output that is one of the files the
    object was made from, or that collides with its own derived file, is refused with the CLI's line."""
    data = tmp_path / "calib.npy"
    data.write_bytes(read_bytes(digits["calib"]))
    line = run_cli(cli, "calibrate", "--model", digits["model"], "--data", data, "-o", data,
                   expect_failure=True, exit_code=2)
    stats = qgru.calibrate(digits["model"], os.fspath(data))
    with pytest.raises(qgru.Error) as error:
        stats.save(data)
    assert str(error.value) == line
    assert read_bytes(data) == read_bytes(digits["calib"])

    stats_path = tmp_path / "stats.qgru.json"
    stats.save(stats_path)
    stats.save(stats_path)  # again to the file it was saved to: the same bytes, allowed
    line = run_cli(cli, "quantize", "--model", digits["model"], "--stats", stats_path, "-o", stats_path,
                   expect_failure=True, exit_code=2)
    artifact = qgru.quantize(digits["model"], stats)
    with pytest.raises(qgru.Error) as error:
        artifact.save(stats_path)
    assert str(error.value) == line

    artifact.save(tmp_path / "model.qgru.json")
    loaded = qgru.load(tmp_path / "model.qgru.json")
    report = qgru.verify(digits["model"], loaded, digits["test"])
    for target, flag in ((tmp_path / "model.qgru.safetensors", "--report"), (tmp_path / "model.qgru.json", "--html")):
        line = run_cli(cli, "verify", "--model", digits["model"], "--artifact", tmp_path / "model.qgru.json",
                       "--input", digits["test"], flag, target, expect_failure=True, exit_code=2)
        with pytest.raises(qgru.Error) as error:
            report.to_json(target) if flag == "--report" else report.to_html(target)
        assert str(error.value) == line
    qgru.load(tmp_path / "model.qgru.json")  # both files intact

    rng = np.random.default_rng(3)
    weight = rng.standard_normal((16, 64)).astype(np.float32)
    activations = rng.standard_normal((256, 64)).astype(np.float32)
    qgru.write_tensors(tmp_path / "w.safetensors", {"fc.weight": weight})
    np.save(tmp_path / "x.npy", activations)
    line = run_cli(cli, "gptq", "--weights", tmp_path / "w.safetensors", "--tensor", "fc.weight", "--activations",
                   tmp_path / "x.npy", "--group-size", "32", "-o", tmp_path / "quantize_config.json",
                   expect_failure=True, exit_code=2)
    with pytest.raises(qgru.Error) as error:
        qgru.gptq(weight, activations, group_size=32, name="fc.weight", checkpoint=tmp_path / "quantize_config.json")
    assert str(error.value) == line
    assert not (tmp_path / "quantize_config.json").exists()


def test_linear_before_reset_0_model_as_the_cli(cli, tmp_path):
    """An ONNX GRU with linear_before_reset = 0: the package writes the CLI's artifact (version 2) and runs it
    to the CLI's outputs."""
    onnx = os.path.join(os.environ.get("QGRU_SOURCE_DIR", ""), "test", "data", "onnx", "lbr0_bidir_lengths")
    model, x = os.path.join(onnx, "model.onnx"), os.path.join(onnx, "x.npy")
    for who in ("cli", "py"):
        (tmp_path / who).mkdir()
    run_cli(cli, "calibrate", "--model", model, "--data", x, "-o", tmp_path / "stats.json")
    run_cli(cli, "quantize", "--model", model, "--stats", tmp_path / "stats.json", "-o", tmp_path / "cli" / "m.qgru.json")
    run_cli(cli, "run", "--model", tmp_path / "cli" / "m.qgru.json", "--input", x, "--output", tmp_path / "y.npy",
            "--hn", tmp_path / "hn.npy")
    artifact = qgru.quantize(model, os.fspath(tmp_path / "stats.json"))
    artifact.save(tmp_path / "py" / "m.qgru.json")
    for name in ("m.qgru.json", "m.qgru.safetensors"):
        assert read_bytes(tmp_path / "py" / name) == read_bytes(tmp_path / "cli" / name), name
    assert json.loads(read_bytes(tmp_path / "py" / "m.qgru.json"))["linear_before_reset"] is False
    y, h_n = artifact.run(np.load(x))
    np.testing.assert_array_equal(y, np.load(tmp_path / "y.npy"))
    np.testing.assert_array_equal(h_n, np.load(tmp_path / "hn.npy"))


def test_saves_never_replace_an_onnx_models_external_data(cli, tmp_path):
    onnx = os.path.join(os.environ.get("QGRU_SOURCE_DIR", ""), "test", "data", "onnx", "pytorch_l2_bidir_external")
    (tmp_path / "ext").mkdir()
    for name in ("model.onnx", "weights.bin"):
        (tmp_path / "ext" / name).write_bytes(read_bytes(os.path.join(onnx, name)))
    model, weights, x = tmp_path / "ext" / "model.onnx", tmp_path / "ext" / "weights.bin", os.path.join(onnx, "x.npy")
    line = run_cli(cli, "calibrate", "--model", model, "--data", x, "-o", weights, expect_failure=True, exit_code=2)
    stats = qgru.calibrate(os.fspath(model), x)
    with pytest.raises(qgru.Error) as error:
        stats.save(weights)
    assert str(error.value) == line
    assert "(its external data)" in line
    assert read_bytes(weights) == read_bytes(os.path.join(onnx, "weights.bin"))
