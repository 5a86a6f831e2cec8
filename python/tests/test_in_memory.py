"""Models and data held in memory (a state dict, arrays, generators) give what the same model and data read
from files give; the names and hashes of what was in memory are what differs."""

import json

import numpy as np
import pytest

import qgru
from conftest import random_gru_state_dict


def artifact_without_provenance(artifact, tmp_path, name):
    artifact.save(tmp_path / f"{name}.qgru.json")
    text = json.loads((tmp_path / f"{name}.qgru.json").read_text())
    text.pop("provenance")
    text.pop("tensor_file")
    return text, (tmp_path / f"{name}.qgru.safetensors").read_bytes()


def test_state_dict_and_arrays_give_the_artifact_of_the_files(digits, digits_state_dict, tmp_path):
    from_files = qgru.quantize(digits["model"], qgru.calibrate(digits["model"], digits["calib"]))
    stats = qgru.calibrate(digits_state_dict, np.load(digits["calib"]))
    assert stats.to_dict()["tensors"] == qgru.calibrate(digits["model"], digits["calib"]).to_dict()["tensors"]
    from_memory = qgru.quantize(digits_state_dict, stats)
    assert artifact_without_provenance(from_memory, tmp_path, "memory") == artifact_without_provenance(
        from_files, tmp_path, "files")
    provenance = json.loads((tmp_path / "memory.qgru.json").read_text())["provenance"]
    assert provenance["model"]["path"] == "" and len(provenance["model"]["sha256"]) == 64
    assert provenance["stats"]["path"] == ""
    # The prefix of the state dict does not matter, nor do float64 arrays.
    bare = {name[len("gru."):]: value.astype(np.float64) for name, value in digits_state_dict.items()}
    assert artifact_without_provenance(qgru.quantize(bare, stats), tmp_path, "bare")[1] == \
        artifact_without_provenance(from_files, tmp_path, "files")[1]


def test_a_state_dict_twice_is_the_same_artifact_byte_for_byte(digits_state_dict, digits, tmp_path):
    x = np.load(digits["calib"])[:, :200]
    a = qgru.quantize(digits_state_dict, qgru.calibrate(digits_state_dict, x))
    b = qgru.quantize(dict(digits_state_dict), qgru.calibrate(dict(digits_state_dict), x.copy()))
    for name, artifact in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        artifact.save(tmp_path / name / "m.qgru.json")
    for name in ("m.qgru.json", "m.qgru.safetensors"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_data_as_a_list_a_generator_and_pairs_is_one_pass_in_order(digits_state_dict, digits):
    x = np.load(digits["calib"])
    parts = np.array_split(x, 4, axis=1)
    as_list = qgru.calibrate(digits_state_dict, parts)
    as_generator = qgru.calibrate(digits_state_dict, (part for part in parts))
    as_pairs = qgru.calibrate(digits_state_dict, [(part, np.zeros(part.shape[1])) for part in parts])
    assert as_list.to_json() == as_generator.to_json() == as_pairs.to_json()
    # Counts, min/max and histograms equal one pass over all the data (the EMA runs per part).
    whole = qgru.calibrate(digits_state_dict, x).to_dict()["tensors"]
    for merged, single in zip(as_list.to_dict()["tensors"], whole):
        for key in ("count", "min", "max", "histogram"):
            assert merged[key] == single[key], key
    assert as_list.total_sequences == 1000
    files = as_list.to_dict()["data_files"]
    assert [f["path"] for f in files] == ["data[0]", "data[1]", "data[2]", "data[3]"]


def test_batch_first_and_max_samples(digits_state_dict, digits):
    x = np.load(digits["calib"])
    time_major = qgru.calibrate(digits_state_dict, x, max_samples=300)
    batch_first = qgru.calibrate(digits_state_dict, np.ascontiguousarray(x.swapaxes(0, 1)), batch_first=True,
                                 max_samples=300)
    assert time_major.to_dict()["tensors"] == batch_first.to_dict()["tensors"]
    assert time_major.total_sequences == 300


def test_statistics_round_trip_and_merge_refuses_another_model(digits_state_dict, digits, tmp_path):
    stats = qgru.calibrate(digits_state_dict, np.load(digits["calib"])[:, :100])
    stats.save(tmp_path / "s.json")
    loaded = qgru.Statistics.load(tmp_path / "s.json")
    assert loaded.to_json() == stats.to_json() and loaded.path == str(tmp_path / "s.json")
    other = qgru.calibrate(random_gru_state_dict(1, 8, 64), np.load(digits["calib"])[:, :100])
    with pytest.raises(qgru.Error, match="sha256|weights"):
        qgru.Statistics.merge(stats, other)
    with pytest.raises(qgru.Error, match="expected qgru.Statistics"):
        stats.merge("s.json")


def test_bad_models_and_data_are_refused_with_one_line(digits_state_dict, digits):
    x = np.load(digits["calib"])[:, :10]
    with pytest.raises(qgru.Error, match=r"^state dict: .*weight_hh"):
        broken = dict(digits_state_dict)
        broken["gru.weight_hh_l0"] = broken["gru.weight_hh_l0"][:, :10]
        qgru.calibrate(broken, x)
    with pytest.raises(qgru.Error, match=r"^data\[0\]: calibration data has shape \[10, 8\], expected \[T, N, C\] with C = 8$"):
        qgru.calibrate(digits_state_dict, x[0])
    with pytest.raises(qgru.Error, match=r"^data\[1\]: calibration data has dtype I64, expected a float dtype$"):
        qgru.calibrate(digits_state_dict, [x, x.astype(np.int64)])
    with pytest.raises(qgru.Error, match=r"^data\[0\]: an array of an unsupported dtype"):
        qgru.calibrate(digits_state_dict, x.astype(np.complex64))
    bad = x.copy()
    bad[3, 4, 5] = np.inf
    with pytest.raises(qgru.Error, match=r"\(t=3, n=4, c=5\)"):
        qgru.calibrate(digits_state_dict, bad)
    with pytest.raises(qgru.Error, match="no calibration data"):
        qgru.calibrate(digits_state_dict, [])
    with pytest.raises(qgru.Error, match="expected a path"):
        qgru.calibrate(42, x)
    with pytest.raises(qgru.Error, match="unknown|config"):
        qgru.quantize(digits_state_dict, qgru.calibrate(digits_state_dict, x), config="int7")
    stats = qgru.calibrate(digits_state_dict, x)
    artifact = qgru.quantize(digits_state_dict, stats)
    with pytest.raises(qgru.Error, match=r"^data: expected \[T, N, 8\] with C = 8, got \[10, 7\]$"):
        qgru.verify(digits_state_dict, artifact, np.zeros((10, 7), np.float32))
    with pytest.raises(qgru.Error, match=r"^h0: expected h0 \[L\*D, N, H\] = \[1, 10, 64\], got \[1, 10, 63\]$"):
        qgru.verify(digits_state_dict, artifact, x, h0=np.zeros((1, 10, 63), np.float32))


def test_multi_layer_bidirectional_from_arrays(tmp_path):
    weights = random_gru_state_dict(7, 5, 33, num_layers=2, bidirectional=True)
    x = np.random.default_rng(3).standard_normal((6, 9, 5)).astype(np.float32)
    stats = qgru.calibrate(weights, x, method="minmax")
    artifact = qgru.quantize(weights, stats, config="int16")
    assert (artifact.num_layers, artifact.num_directions, artifact.hidden_size) == (2, 2, 33)
    y, h_n = artifact.run(x)
    assert y.shape == (6, 9, 66) and h_n.shape == (4, 9, 33)
    report = qgru.verify(weights, artifact, x)
    assert report.sqnr_db > 40  # int16 on its own calibration data
    assert {(t.layer, t.direction) for t in report.tensors} == {(0, 0), (0, 1), (1, 0), (1, 1)}
