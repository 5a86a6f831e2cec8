"""The runtime from Python: zero-copy input, executors and threads, streams equal to whole runs, the GIL
released while computing, and refusals of bad shapes and dtypes."""

import threading
import time

import numpy as np
import pytest

import qgru
from qgru import _qgru
from qgru._runtime import runtime_array
from conftest import random_gru_state_dict


@pytest.fixture(scope="module")
def two_layer():
    """A 2-layer unidirectional int8 artifact (H = 33: no SIMD-friendly width) and its calibration data."""
    weights = random_gru_state_dict(11, 6, 33, num_layers=2)
    x = np.random.default_rng(5).standard_normal((12, 7, 6)).astype(np.float32)
    return qgru.quantize(weights, qgru.calibrate(weights, x)), x


def test_float32_and_int32_contiguous_input_is_read_in_place(digits_artifact, digits):
    x = np.load(digits["test"])
    assert x.dtype == np.float32 and x.flags.c_contiguous
    array, is_codes = runtime_array(x, "x")
    assert array is x and not is_codes
    assert _qgru._data_address(array) == x.ctypes.data
    codes = digits_artifact.quantize_input(x)
    array, is_codes = runtime_array(codes, "x")
    assert array is codes and is_codes
    assert _qgru._data_address(array) == codes.ctypes.data
    # Other dtypes and layouts are converted: a copy, with the same results.
    converted, _ = runtime_array(x.astype(np.float64), "x")
    assert converted.dtype == np.float32 and converted.ctypes.data != x.ctypes.data
    np.testing.assert_array_equal(digits_artifact.run(x.astype(np.float64))[0], digits_artifact.run(x)[0])
    np.testing.assert_array_equal(digits_artifact.run(codes.astype(np.int16))[0], digits_artifact.run(codes)[0])
    np.testing.assert_array_equal(digits_artifact.run(x[:, ::2])[0], digits_artifact.run(np.ascontiguousarray(x[:, ::2]))[0])


def test_batch_first_gives_the_swapped_run(digits_artifact, digits):
    x = np.load(digits["test"])[:, :40]
    y, h_n = digits_artifact.run(x)
    y_bf, h_n_bf = digits_artifact.run(np.ascontiguousarray(x.swapaxes(0, 1)), batch_first=True)
    np.testing.assert_array_equal(y_bf, y.swapaxes(0, 1))
    np.testing.assert_array_equal(h_n_bf, h_n)  # h_n stays [L*D, N, H], as nn.GRU's


def test_every_executor_and_thread_count_gives_the_same_codes(two_layer):
    artifact, x = two_layer
    codes = artifact.quantize_input(x)
    expected = artifact.run(codes, executor="reference", threads=1)
    for executor, threads in (("fast", 0), ("fast", 1), ("fast", 2), ("reference", 2)):
        y, h_n = artifact.run(codes, executor=executor, threads=threads)
        np.testing.assert_array_equal(y, expected[0])
        np.testing.assert_array_equal(h_n, expected[1])
    assert artifact.executor(executor="reference").startswith("cpu reference")
    assert artifact.executor().startswith("cpu ")


def test_h0_values_and_codes(two_layer):
    artifact, x = two_layer
    h0 = np.random.default_rng(9).uniform(-0.5, 0.5, (2, 7, 33)).astype(np.float32)
    y, h_n = artifact.run(x, h0)
    assert not np.array_equal(y, artifact.run(x)[0])
    h0_codes = np.stack([qgru_quantize(h0[layer], artifact.quant("h", layer)) for layer in range(2)])
    y_codes, _ = artifact.run(artifact.quantize_input(x), h0_codes)
    np.testing.assert_array_equal(artifact.dequantize_output(y_codes), y)


def qgru_quantize(values, quant):
    """Reference quantization (docs/FIXED_POINT.md): round half away from zero, saturate; float64 math."""
    scaled = values.astype(np.float64) * 2.0 ** quant["shift"]
    rounded = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5) + quant["zero_point"]
    return np.clip(rounded, quant["code_min"], quant["code_max"]).astype(np.int32)


def test_quantize_input_is_the_reference_rounding(two_layer):
    artifact, x = two_layer
    quant = artifact.quant("x")
    edges = np.array([0.5, -0.5, 1.5, -1.5, 2.5, 1e9, -1e9, 0.0], np.float64) * 2.0 ** -quant["shift"]
    values = np.concatenate([x.ravel(), edges.astype(np.float32)])
    np.testing.assert_array_equal(artifact.quantize_input(values), qgru_quantize(values, quant))
    assert quant["scale"] == 2.0 ** -quant["shift"]


def test_stream_equals_run(two_layer):
    artifact, x = two_layer
    codes = artifact.quantize_input(x)
    y_codes, h_codes = artifact.run(codes)
    y_values, _ = artifact.run(x)
    for executor in ("fast", "reference"):
        stream = artifact.stream(batch=7, executor=executor)
        stepped = np.stack([stream.step(codes[t]) for t in range(12)])
        np.testing.assert_array_equal(stepped, y_codes)
        np.testing.assert_array_equal(stream.state, h_codes)
        stream.reset()
        frames = np.concatenate([stream.step(codes[:5]), stream.step(codes[5:6]), stream.step(codes[6:])])
        np.testing.assert_array_equal(frames, y_codes)
        stream.reset()
        floats = np.stack([stream.step(x[t]) for t in range(12)])
        np.testing.assert_array_equal(floats, y_values)
    # A state set from another run's h_n continues that run.
    stream = artifact.stream(batch=7)
    _, h_first = artifact.run(codes[:4])
    stream.state = h_first
    np.testing.assert_array_equal(np.stack([stream.step(codes[t]) for t in range(4, 12)]), y_codes[4:])


def test_gil_is_released_while_running(digits_artifact, digits):
    # A run long enough to tell (at least 0.2 s on this machine): the test set tiled along T until it is.
    test = np.load(digits["test"])
    digits_artifact.run(test[:2], threads=1)  # the context is made before timing
    for reps in (4, 8, 16, 32, 64, 128):
        x = np.tile(test, (reps, 4, 1))
        started = time.perf_counter()
        digits_artifact.run(x, threads=1)
        if time.perf_counter() - started > 0.2:
            break
    ticks = []
    running = threading.Event()
    done = threading.Event()

    def ticker():
        running.wait()
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    thread = threading.Thread(target=ticker)
    thread.start()
    running.set()
    time.sleep(0.01)
    start = time.perf_counter()
    digits_artifact.run(x, threads=1)
    end = time.perf_counter()
    done.set()
    thread.join()
    inside = [t for t in ticks if start < t < end]
    # Holding the GIL for the whole run would leave at most a tick or two at its edges.
    assert end - start > 0.05, "the run is too short to tell"
    assert len(inside) >= 10, f"{len(inside)} ticks of another thread during a {end - start:.3f} s run"


def test_a_padded_batch_gives_each_sequence_what_it_gets_alone():
    """lengths: each sequence of a padded batch equals its run alone over its own frames; the padding's y is
    0.0 (its code), h_n is the state after the last frame, and a reverse direction starts at that frame."""
    weights = random_gru_state_dict(4, 6, 20, num_layers=2, bidirectional=True)
    x = np.random.default_rng(8).standard_normal((12, 7, 6)).astype(np.float32)
    artifact = qgru.quantize(weights, qgru.calibrate(weights, x))
    lengths = [12, 0, 5, 1, 7, 3, 11]
    codes = artifact.quantize_input(x)
    zero_code = np.repeat([artifact.quant("h", 1, d)["zero_point"] for d in (0, 1)], 20)  # y's columns: d*H + j
    for executor in ("fast", "reference"):
        y, h_n = artifact.run(x, lengths=np.array(lengths, np.int64), executor=executor)
        y_codes, h_codes = artifact.run(codes, lengths=lengths, executor=executor)
        for n, steps in enumerate(lengths):
            y_alone, h_alone = artifact.run(x[:steps, n:n + 1], executor=executor)
            np.testing.assert_array_equal(y[:steps, n], y_alone[:, 0])
            np.testing.assert_array_equal(y[steps:, n], 0.0)
            np.testing.assert_array_equal(h_n[:, n], h_alone[:, 0])
            yc_alone, hc_alone = artifact.run(codes[:steps, n:n + 1], executor=executor)
            np.testing.assert_array_equal(y_codes[:steps, n], yc_alone[:, 0])
            padding = y_codes[steps:, n]
            np.testing.assert_array_equal(padding, np.broadcast_to(zero_code, padding.shape))
            np.testing.assert_array_equal(h_codes[:, n], hc_alone[:, 0])
    # batch_first keeps lengths per sequence; every length T is the run without lengths.
    y_bf, _ = artifact.run(np.ascontiguousarray(x.swapaxes(0, 1)), lengths=lengths, batch_first=True)
    np.testing.assert_array_equal(y_bf, artifact.run(x, lengths=lengths)[0].swapaxes(0, 1))
    np.testing.assert_array_equal(artifact.run(x, lengths=[12] * 7)[0], artifact.run(x)[0])
    with pytest.raises(qgru.Error, match=r"^lengths: dtype float64, expected integer sequence lengths$"):
        artifact.run(x, lengths=np.full(7, 3.0))
    with pytest.raises(qgru.Error, match=r"^lengths: shape \[6\], expected \[N\] with N = 7$"):
        artifact.run(x, lengths=[3] * 6)
    with pytest.raises(qgru.Error, match=r"qgru_rt_run_lengths: lengths\[2\] = 13, expected a length in \[0, T = 12\]"):
        artifact.run(x, lengths=[3, 3, 13, 3, 3, 3, 3])
    with pytest.raises(qgru.Error, match=r"lengths\[1\] = -1"):
        artifact.run(codes, lengths=[3, -1, 3, 3, 3, 3, 3])
    with pytest.raises(qgru.Error, match=r"^lengths: lengths\[0\] = 4294967296"):
        artifact.run(x, lengths=np.array([2**32] + [1] * 6, np.int64))


def test_bad_shapes_and_dtypes_are_refused(two_layer):
    artifact, x = two_layer
    with pytest.raises(qgru.Error, match=r"^x: shape \[12, 6\], expected \[T, N, C\] with C = 6$"):
        artifact.run(x[:, 0])
    with pytest.raises(qgru.Error, match=r"^x: shape \[12, 7, 5\], expected \[12, 7, 6\]$"):
        artifact.run(x[:, :, :5])
    with pytest.raises(qgru.Error, match=r"^x: dtype bool, expected float values or integer codes$"):
        artifact.run(x > 0)
    with pytest.raises(qgru.Error, match=r"^x: dtype complex64"):
        artifact.run(x.astype(np.complex64))
    with pytest.raises(qgru.Error, match=r"^x: code 4294967296 is outside int32"):
        artifact.run(np.full((2, 1, 6), 2**32, np.int64))
    with pytest.raises(qgru.Error, match="code"):
        artifact.run(np.full((2, 1, 6), 1000, np.int32))  # outside int8 codes: the C API's CODE_OUT_OF_RANGE
    with pytest.raises(qgru.Error, match=r"^h0: shape \[2, 7, 32\], expected \[2, 7, 33\]$"):
        artifact.run(x, np.zeros((2, 7, 32), np.float32))
    with pytest.raises(qgru.Error, match=r"^h0: codes given with float x"):
        artifact.run(x, np.zeros((2, 7, 33), np.int32))
    with pytest.raises(qgru.Error, match=r"^x: shape \[7, 12, 6\], expected \[N, T, C\]|batch_first"):
        artifact.run(x[0], batch_first=True)
    with pytest.raises(qgru.Error, match="executor 'fastest': expected fast or reference"):
        artifact.run(x, executor="fastest")
    with pytest.raises(qgru.Error, match="device 'tpu': expected cpu or cuda"):
        artifact.run(x, device="tpu")
    stream = artifact.stream(batch=7)
    with pytest.raises(qgru.Error, match=r"^frame: shape \[1, 6, 6\], expected \[1, 7, 6\]$"):
        stream.step(x[0, :6])
    with pytest.raises(qgru.Error, match=r"^frame: shape \[6\], expected \[N, C\] or \[F, N, C\]$"):
        stream.step(x[0, 0])
    with pytest.raises(qgru.Error, match=r"^state: shape \[1, 7, 33\], expected \[2, 7, 33\]$"):
        stream.state = np.zeros((1, 7, 33), np.int32)


def test_bidirectional_models_cannot_stream():
    weights = random_gru_state_dict(2, 4, 8, bidirectional=True)
    x = np.random.default_rng(1).standard_normal((3, 2, 4)).astype(np.float32)
    artifact = qgru.quantize(weights, qgru.calibrate(weights, x))
    with pytest.raises(qgru.Error, match="2 directions; streaming needs a unidirectional model"):
        artifact.stream()


def test_cuda_is_refused_by_a_package_without_it(two_layer):
    artifact, x = two_layer
    try:
        y, _ = artifact.run(x, device="cuda")
    except qgru.Error as error:  # not built in, or no GPU: the C API's message says which
        assert "cuda" in str(error).lower() or "device" in str(error).lower()
    else:
        np.testing.assert_array_equal(y, artifact.run(x)[0])
