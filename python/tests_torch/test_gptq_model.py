"""qgru.gptq_model on tiny random Llama (and Qwen2) models: the layers quantized in the forward's order and
true-sequentially, each layer's checkpoint tensors equal to qgru.gptq of the inputs a plain whole-model forward
gives it (a reference written here without the block walker), the folder's config and tensors, resume after a
simulated kill, and the refusals (nothing written)."""

import copy
import json
import os

import numpy as np
import pytest
import torch
from transformers import AutoConfig, GPT2Config, GPT2LMHeadModel, GPTQConfig, LlamaConfig, LlamaForCausalLM

import qgru
from qgru import _gptq_model
from qgru._gptq_checkpoint import PROGRESS_DIR

GROUPS = [["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], ["self_attn.o_proj"],
          ["mlp.gate_proj", "mlp.up_proj"], ["mlp.down_proj"]]
ORDER = [name for group in GROUPS for name in group]


def tiny_llama(seed=0, intermediate=256, layers=2):
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=200, hidden_size=128, intermediate_size=intermediate, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=False)
    return LlamaForCausalLM(config).eval()


def calibration(count=6, length=48, seed=1):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 200, (length,), generator=generator) for _ in range(count)]


@pytest.fixture(scope="module")
def float_model():
    return tiny_llama()


@pytest.fixture(scope="module")
def quantized(float_model, tmp_path_factory):
    """gptq_model of a copy of the float model: (the copy, now holding Ŵ, the result, the folder)."""
    model = copy.deepcopy(float_model)
    out = tmp_path_factory.mktemp("gm") / "out"
    result = qgru.gptq_model(model, calibration(), out, bits=4, group_size=128, verbose=False)
    return model, result, out


def decoded(path, K):
    """Ŵ [N, K] by qgru linear's reader (the CLI's decoding, not gptq_model's)."""
    return torch.from_numpy(qgru.gptq_linear(path, np.eye(K, dtype=np.float32)).T.copy())


def reference_tensors(model, calib, folder, **options):
    """Sequential GPTQ without gptq_model: for each block and each group of layers in order, the whole model runs
    forward on the calibration (a hook keeps the group's input), each layer of the group is quantized by
    qgru.gptq and its weight replaced by Ŵ as qgru linear decodes it."""
    tensors = {}
    os.makedirs(folder, exist_ok=True)
    for index, block in enumerate(model.model.layers):
        modules = dict(block.named_modules())
        for group in GROUPS:
            inputs = []
            hook = modules[group[0]].register_forward_hook(
                lambda module, args, output: inputs.append(args[0].reshape(-1, args[0].shape[-1]).numpy().copy()))
            with torch.no_grad():
                for ids in calib:
                    model(ids.unsqueeze(0), use_cache=False)
            hook.remove()
            for name in group:
                prefix = f"model.layers.{index}.{name}"
                path = os.path.join(folder, f"{prefix}.safetensors")
                result = qgru.gptq(modules[name], inputs, name=f"{prefix}.weight", checkpoint=path, **options)
                with torch.no_grad():
                    modules[name].weight.copy_(decoded(path, modules[name].in_features))
                tensors.update(result.tensors)
    return tensors


def test_layers_in_forward_order_and_equal_to_sequential_gptq_of_their_inputs(float_model, quantized, tmp_path):
    model, result, out = quantized
    assert [layer["name"] for layer in result.layers] == [f"model.layers.{i}.{n}" for i in range(2) for n in ORDER]
    assert all(layer["tokens"] == 6 * 48 and layer["gptq_error"] < layer["rtn_error"] for layer in result.layers)
    reference_model = copy.deepcopy(float_model)
    reference = reference_tensors(reference_model, calibration(), tmp_path / "ref")
    written = qgru.read_tensors(out / "model.safetensors")
    for name, value in reference.items():
        np.testing.assert_array_equal(written[name], value, err_msg=name)
    # The model gptq_model returns holds Ŵ, as the reference model does, and as qgru linear decodes the folder.
    for name, linear in model.named_modules():
        if isinstance(linear, torch.nn.Linear) and name.startswith("model.layers."):
            reference_linear = dict(reference_model.named_modules())[name]
            assert torch.equal(linear.weight, reference_linear.weight), name
            assert not torch.equal(linear.weight, dict(float_model.named_modules())[name].weight), name


def test_folder_config_and_tensors(float_model, quantized):
    model, result, out = quantized
    assert sorted(os.listdir(out)) == ["config.json", "generation_config.json", "model.safetensors",
                                       "quantize_config.json"]
    config = AutoConfig.from_pretrained(out)
    quant = config.quantization_config
    assert (quant["quant_method"], quant["bits"], quant["group_size"], quant["desc_act"], quant["sym"],
            quant["checkpoint_format"], quant["true_sequential"]) == ("gptq", 4, 128, False, False, "gptq", True)
    gptq_config = GPTQConfig.from_dict(quant)
    assert (gptq_config.bits, gptq_config.group_size, gptq_config.desc_act, gptq_config.sym) == (4, 128, False, False)
    with open(out / "quantize_config.json") as f:
        assert json.load(f) == quant
    assert config.hidden_size == 128 and config.num_hidden_layers == 2
    tensors = qgru.read_tensors(out / "model.safetensors")
    expected = {f"model.layers.{i}.{n}.{part}" for i in range(2) for n in ORDER
                for part in ("qweight", "qzeros", "scales", "g_idx")}
    float_state = float_model.state_dict()
    untouched = {name for name in float_state if not any(name == f"{p}.weight" for p in
                                                       (f"model.layers.{i}.{n}" for i in range(2) for n in ORDER))}
    assert set(tensors) == expected | untouched
    for name in untouched:  # embeddings, norms, lm_head: unchanged
        np.testing.assert_array_equal(tensors[name], float_state[name].numpy(), err_msg=name)
    q = tensors["model.layers.1.mlp.down_proj.qweight"]
    assert q.dtype == np.int32 and q.shape == (256 * 4 // 32, 128)
    assert tensors["model.layers.1.mlp.down_proj.scales"].shape == (2, 128)


def test_resume_after_a_kill_gives_the_uninterrupted_checkpoint(float_model, quantized, tmp_path, monkeypatch):
    _, result, out = quantized
    real_gptq = _gptq_model.gptq

    def killed_in_block_1(weight, activations=None, *, name, **options):
        if name.startswith("model.layers.1."):
            raise KeyboardInterrupt
        return real_gptq(weight, activations, name=name, **options)

    monkeypatch.setattr(_gptq_model, "gptq", killed_in_block_1)
    with pytest.raises(KeyboardInterrupt):
        qgru.gptq_model(copy.deepcopy(float_model), calibration(), tmp_path / "out", verbose=False)
    # Block 0 is kept, and the folder is not a checkpoint.
    assert os.listdir(tmp_path / "out") == [PROGRESS_DIR]
    assert sorted(os.listdir(tmp_path / "out" / PROGRESS_DIR)) == ["block-0000.safetensors", "manifest.json"]
    with pytest.raises(ValueError, match="Should have a `model_type` key"):
        AutoConfig.from_pretrained(tmp_path / "out")
    # Another call with other options is refused, the progress kept.
    with pytest.raises(qgru.Error, match="started differently"):
        qgru.gptq_model(copy.deepcopy(float_model), calibration(), tmp_path / "out", bits=8, verbose=False)
    # ... and so is a model whose block 0 is not the float block 0 was quantized from.
    other = copy.deepcopy(float_model)
    with torch.no_grad():
        other.model.layers[0].mlp.up_proj.weight[0, 0] += 1
    with pytest.raises(qgru.Error, match="block 0 was quantized from other float weights"):
        qgru.gptq_model(other, calibration(), tmp_path / "out", verbose=False)
    monkeypatch.setattr(_gptq_model, "gptq", real_gptq)
    calls = []

    def counting(weight, activations=None, *, name, **options):
        calls.append(name)
        return real_gptq(weight, activations, name=name, **options)

    monkeypatch.setattr(_gptq_model, "gptq", counting)
    resumed = qgru.gptq_model(copy.deepcopy(float_model), calibration(), tmp_path / "out", verbose=False)
    assert resumed.blocks_resumed == 1 and all(name.startswith("model.layers.1.") for name in calls)
    def without_time(layers):
        return [{key: value for key, value in layer.items() if key != "seconds"} for layer in layers]

    assert without_time(resumed.layers) == without_time(result.layers)  # block 0's reports from the manifest
    assert [layer["name"] for layer in resumed.layers] == [layer["name"] for layer in result.layers]
    whole, again = qgru.read_tensors(out / "model.safetensors"), qgru.read_tensors(tmp_path / "out" / "model.safetensors")
    assert sorted(whole) == sorted(again)
    for name in whole:
        np.testing.assert_array_equal(again[name], whole[name], err_msg=name)
    assert not os.path.exists(tmp_path / "out" / PROGRESS_DIR)


def test_true_sequential_false_quantizes_every_layer_from_the_float_block(float_model, quantized, tmp_path):
    _, _, out = quantized
    qgru.gptq_model(copy.deepcopy(float_model), calibration(), tmp_path / "out", true_sequential=False, verbose=False)
    with open(tmp_path / "out" / "config.json") as f:
        assert json.load(f)["quantization_config"]["true_sequential"] is False
    seq, flat = qgru.read_tensors(out / "model.safetensors"), qgru.read_tensors(tmp_path / "out" / "model.safetensors")
    # q/k/v of block 0 read the float block's input either way; o_proj reads the quantized q/k/v's outputs only
    # when sequential.
    np.testing.assert_array_equal(flat["model.layers.0.self_attn.v_proj.qweight"],
                                  seq["model.layers.0.self_attn.v_proj.qweight"])
    assert not np.array_equal(flat["model.layers.0.self_attn.o_proj.qweight"],
                              seq["model.layers.0.self_attn.o_proj.qweight"])


def test_qwen2_biases_are_stored_as_fp16_and_used(tmp_path):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(3)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=200, hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=64)).eval()
    with torch.no_grad():
        model.model.layers[0].self_attn.q_proj.bias.normal_(0, 0.3)
    float_bias = model.model.layers[0].self_attn.q_proj.bias.detach().clone()
    result = qgru.gptq_model(model, calibration(), tmp_path / "out", verbose=False)
    assert [layer["name"].split(".", 3)[3] for layer in result.layers] == ORDER
    tensors = qgru.read_tensors(tmp_path / "out" / "model.safetensors")
    bias = tensors["model.layers.0.self_attn.q_proj.bias"]
    assert bias.dtype == np.float16
    np.testing.assert_array_equal(bias, float_bias.numpy().astype(np.float16))
    assert torch.equal(model.model.layers[0].self_attn.q_proj.bias, torch.from_numpy(bias.astype(np.float32)))


def test_blocks_of_each_attention_kind_get_their_own_mask(tmp_path, monkeypatch):
    """A model whose blocks take different masks (Qwen2 with a sliding window of 16 tokens on block 1 and 3,
    full attention on 0 and 2: config.layer_types): each block's layers are quantized from the inputs a plain
    whole-model forward gives them. Control: with every block given block 0's keyword arguments (the walk
    without kinds), the tensors differ, so the comparison sees the mask."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(4)
    config = Qwen2Config(vocab_size=200, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         use_sliding_window=True, sliding_window=16,
                         layer_types=["full_attention", "sliding_attention"] * 2, attn_implementation="sdpa")
    float_model = Qwen2ForCausalLM(config).eval()
    assert _gptq_model.block_kinds(float_model, float_model.model.layers) == config.layer_types
    result = qgru.gptq_model(copy.deepcopy(float_model), calibration(), tmp_path / "out", verbose=False)
    assert len(result.layers) == 4 * len(ORDER)
    reference = reference_tensors(copy.deepcopy(float_model), calibration(), tmp_path / "ref")
    written = qgru.read_tensors(tmp_path / "out" / "model.safetensors")
    for name, value in reference.items():
        np.testing.assert_array_equal(written[name], value, err_msg=name)

    monkeypatch.setattr(_gptq_model, "block_kinds", lambda model, blocks: [None] * len(blocks))
    qgru.gptq_model(copy.deepcopy(float_model), calibration(), tmp_path / "one-kind", verbose=False)
    one_kind = qgru.read_tensors(tmp_path / "one-kind" / "model.safetensors")
    differ = [name for name in reference if not np.array_equal(one_kind[name], reference[name])]
    assert differ and all(name.startswith(("model.layers.1.", "model.layers.2.", "model.layers.3."))
                          for name in differ), differ


@pytest.mark.parametrize("case", ["no blocks", "packing", "group", "short calibration", "float calibration",
                                  "bad damp", "not empty", "unknown option", "unknown device"])
def test_refusals_write_nothing(tmp_path, case):
    model, calib, options, out = tiny_llama(layers=1), calibration(), {}, tmp_path / "out"
    expected = {
        "no blocks": r"a GPT2LMHeadModel has no decoder blocks: looked for model.layers and layers",
        "packing": r"tensor 'model.layers.0.mlp.gate_proj.weight' is \[196, 128\]; 4-bit GPTQ checkpoints need N "
                   r"and K multiples of 8",
        "group": r"tensor 'model.layers.0.mlp.down_proj.weight' is \[128, 192\]; K must be a multiple of group_size 128",
        "short calibration": r"calibration has 100 tokens, fewer than one group \(128\)",
        "float calibration": r"calibration\[0\] is torch.float32; expected token ids",
        "bad damp": r"damp",
        "not empty": r"out: not empty \(notes.txt\)",
        "unknown option": r"unknown option 'dampening'",
        "unknown device": r"^gptq_model: device 'tpu': this qgru's GPTQ computes on cpu",
    }[case]
    if case == "no blocks":
        model = GPT2LMHeadModel(GPT2Config(n_embd=64, n_layer=1, n_head=2, vocab_size=200, n_positions=64))
    elif case == "packing":
        model = tiny_llama(intermediate=196, layers=1)
    elif case == "group":
        model = tiny_llama(intermediate=192, layers=1)
    elif case == "short calibration":
        calib = [torch.randint(0, 200, (100,))]
    elif case == "float calibration":
        calib = [torch.rand(200)]
    elif case == "bad damp":
        options = {"damp": 2.0}
    elif case == "not empty":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    elif case == "unknown option":
        options = {"dampening": 0.1}
    elif case == "unknown device":
        options = {"device": "tpu"}
    error = TypeError if case == "unknown option" else qgru.Error
    with pytest.raises(error, match=expected) as raised:
        qgru.gptq_model(model, calib, out, verbose=False, **options)
    assert "\n" not in str(raised.value)
    assert (sorted(os.listdir(out)) == ["notes.txt"]) if case == "not empty" else not os.path.exists(out)


def test_cuda_device_runs_or_is_refused_writing_nothing(float_model, quantized, tmp_path):
    """device="cuda" (the Hessians accumulated and GPTQ run on the GPU): where a GPU is usable, every layer's error
    is within a hundredth of the CPU walk's (the GPU path's contract); elsewhere one line says why and nothing
    is written."""
    _, cpu_result, _ = quantized
    try:
        result = qgru.gptq_model(copy.deepcopy(float_model), calibration(), tmp_path / "out", device="cuda",
                                 verbose=False)
    except qgru.Error as e:
        expected = ("device cuda: no usable CUDA device: " if "cuda" in qgru.gptq_devices()
                    else "gptq_model: device 'cuda': this qgru's GPTQ computes on cpu")
        assert str(e).startswith(expected) and "\n" not in str(e), str(e)
        assert not os.path.exists(tmp_path / "out")
    else:
        assert len(result.layers) == len(cpu_result.layers)
        for mine, cpu in zip(result.layers, cpu_result.layers):
            assert mine["name"] == cpu["name"]
            assert abs(mine["gptq_error"] - cpu["gptq_error"]) <= 0.01 * cpu["gptq_error"]


def test_bfloat16_tensors_stay_bfloat16_and_the_folder_is_written_tensor_by_tensor(tmp_path, monkeypatch):
    """A bfloat16 model: its untouched tensors (embeddings, norms, lm_head) are written as BF16 with their exact
    bits, and the final write reads each block file once, in order (one block's packed tensors held at a time)."""
    model = tiny_llama(seed=5).to(torch.bfloat16)
    embeddings = model.model.embed_tokens.weight.detach().clone()
    reads = []
    real_read = _gptq_model._qgru.read_tensors
    monkeypatch.setattr(_gptq_model._qgru, "read_tensors", lambda path: reads.append(os.path.basename(path)) or real_read(path))
    qgru.gptq_model(model, calibration(), tmp_path / "out", verbose=False)
    assert reads == ["block-0000.safetensors", "block-0001.safetensors"]
    layout = qgru._qgru.read_tensor_layout(os.fspath(tmp_path / "out" / "model.safetensors"))
    assert layout["model.embed_tokens.weight"] == ("BF16", [200, 128])
    assert layout["model.norm.weight"][0] == "BF16" and layout["lm_head.weight"][0] == "BF16"
    assert layout["model.layers.0.self_attn.q_proj.qweight"] == ("I32", [16, 128])
    back = qgru.read_tensors(tmp_path / "out" / "model.safetensors")["model.embed_tokens.weight"]
    assert torch.equal(torch.from_numpy(back), embeddings.float())
