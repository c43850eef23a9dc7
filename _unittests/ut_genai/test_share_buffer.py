"""The package's decoder reads the cache length from ``attention_mask``: genai may share
one buffer of ``max_length`` positions between the past and present caches
(``past_present_share_buffer: true``), greedy generation still gives the tokens of
transformers' eager ``generate``, and the same model runs in a plain
``onnxruntime.InferenceSession`` with a cache of the valid length."""

import json
import os

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from experimental_experiment.genai import package_model
from experimental_experiment.genai.generate import eager_greedy_sequence
from experimental_experiment.genai.share_buffer import PRESENT_LENGTH, share_past_buffer
from experimental_experiment.torch_models.causal_lm import perturb_norm_weights
from experimental_experiment.torch_models.llm_helper import build_causal_lm, get_tiny_config

og = pytest.importorskip("onnxruntime_genai")

PROMPT, NEW_TOKENS = 40, 20

#: two sizes: the tiny configuration and a wider, deeper one (4 queries per key head)
SIZES = {
    "tiny": {},
    "wider": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=8,
        num_key_value_heads=2,
    ),
}


def _decoder(size: str):
    config = get_tiny_config("llama", **SIZES[size])
    return perturb_norm_weights(build_causal_lm(config, seed=0), 1)


def _prompt(model, length: int = PROMPT) -> torch.Tensor:
    gen = torch.Generator().manual_seed(length)
    return torch.randint(3, model.config.vocab_size, (1, length), generator=gen)


def _eager(model, ids: torch.Tensor) -> list[int]:
    return eager_greedy_sequence(model, ids, NEW_TOKENS)


def _genai(folder: str, ids: torch.Tensor, max_length: int) -> list[int]:
    """Greedy tokens, genai's buffer of ``max_length`` positions (larger than needed)."""
    model = og.Model(folder)
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=max_length)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array([ids[0].tolist()], dtype=np.int32))
    while len(generator.get_sequence(0)) < ids.shape[1] + NEW_TOKENS:
        generator.generate_next_token()
    return [int(t) for t in generator.get_sequence(0)]


def _config(folder: str) -> dict:
    with open(os.path.join(folder, "genai_config.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("size", sorted(SIZES))
def test_shared_buffer_generates_eager_tokens(size, tmp_path, quiet_transformers):
    model = _decoder(size)
    out = str(tmp_path / "pkg")
    report = package_model(model, out, progress=False)
    layers = model.config.num_hidden_layers
    assert report.op_types.get("com.microsoft.GroupQueryAttention") == layers
    assert _config(out)["search"]["past_present_share_buffer"] is True
    onx = onnx.load(os.path.join(out, "model.onnx"), load_external_data=False)
    past = {i.name for i in onx.graph.input if i.name.startswith("past_key_values.")}
    readers = {n.op_type for n in onx.graph.node if set(n.input) & past}
    # the cache length is no longer read on the past inputs
    assert readers == {"GroupQueryAttention"}, readers
    ids = _prompt(model)
    expected = _eager(model, ids)
    assert len(expected) == PROMPT + NEW_TOKENS  # no end of sequence on the way
    for max_length in (PROMPT + NEW_TOKENS, 128):
        assert _genai(out, ids, max_length) == expected, (size, max_length)


def test_int4_shares_the_buffer(tmp_path, quiet_transformers):
    model = _decoder("tiny")
    out = str(tmp_path / "pkg")
    package_model(model, out, precision="int4", progress=False)
    assert _config(out)["search"]["past_present_share_buffer"] is True
    ids = _prompt(model)
    got, expected = _genai(out, ids, 128), _eager(model, ids)
    assert len(got) == len(expected)
    assert got[: PROMPT + 4] == expected[: PROMPT + 4], (got, expected)


def test_no_group_query_attention_keeps_separate_buffers(tmp_path, quiet_transformers):
    """Without onnxruntime's fusions the cache is concatenated: no shared buffer."""
    model = _decoder("tiny")
    out = str(tmp_path / "pkg")
    report = package_model(model, out, progress=False, patterns="default")
    assert "com.microsoft.GroupQueryAttention" not in report.op_types
    assert _config(out)["search"]["past_present_share_buffer"] is False
    ids = _prompt(model, 11)
    assert _genai(out, ids, 64) == _eager(model, ids)


def test_inference_session_with_valid_cache(tmp_path, quiet_transformers):
    """The package runs in onnxruntime with a cache of the valid length: prompt, then
    one token, the logits of the eager model on the whole sequence."""
    import onnxruntime as ort

    model = _decoder("wider")
    out = str(tmp_path / "pkg")
    package_model(model, out, progress=False)
    sess = ort.InferenceSession(os.path.join(out, "model.onnx"), providers=["CPUExecutionProvider"])
    layers, heads, size = 3, 2, 8
    ids = _prompt(model, 9)
    with torch.no_grad():
        expected = model(ids, attention_mask=torch.ones_like(ids)).logits.numpy()
    empty = np.zeros((1, heads, 0, size), dtype=np.float32)
    feeds = {
        "input_ids": ids[:, :8].numpy(),
        "attention_mask": np.ones((1, 8), dtype=np.int64),
        "position_ids": np.arange(8, dtype=np.int64)[None],
    }
    for i in range(layers):
        feeds[f"past_key_values.{i}.key"] = feeds[f"past_key_values.{i}.value"] = empty
    names = [o.name for o in sess.get_outputs()]
    got = dict(zip(names, sess.run(None, feeds)))
    np.testing.assert_allclose(got["logits"], expected[:, :8], atol=1e-4)
    feeds = {
        "input_ids": ids[:, 8:].numpy(),
        "attention_mask": np.ones((1, 9), dtype=np.int64),
        "position_ids": np.array([[8]], dtype=np.int64),
    }
    for i in range(layers):
        feeds[f"past_key_values.{i}.key"] = got[f"present.{i}.key"]
        feeds[f"past_key_values.{i}.value"] = got[f"present.{i}.value"]
    step = dict(zip(names, sess.run(None, feeds)))
    np.testing.assert_allclose(step["logits"], expected[:, 8:], atol=1e-4)
    assert step["present.0.key"].shape == (1, heads, 9, size)


def _tiny_graph(reader: str) -> onnx.ModelProto:
    """One layer: present.0.key = reader(past, new), present.0.value the same."""
    names = ["input_ids", "attention_mask", "past_key_values.0.key", "past_key_values.0.value"]
    inputs = [
        helper.make_tensor_value_info(names[0], TensorProto.INT64, [1, "s"]),
        helper.make_tensor_value_info(names[1], TensorProto.INT64, [1, "t"]),
        helper.make_tensor_value_info(names[2], TensorProto.FLOAT, [1, 1, "p", 2]),
        helper.make_tensor_value_info(names[3], TensorProto.FLOAT, [1, 1, "p", 2]),
    ]
    outputs = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1, "p", 2])
        for n in ("present.0.key", "present.0.value")
    ]
    nodes = [
        helper.make_node(reader, [names[2], names[2]], ["present.0.key"], axis=2),
        helper.make_node(reader, [names[3], names[3]], ["present.0.value"], axis=2),
    ]
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs))


def test_concatenated_cache_is_left_untouched():
    onx = _tiny_graph("Concat")
    before = onx.SerializeToString()
    assert share_past_buffer(onx, 1) is False
    assert onx.SerializeToString() == before


def test_present_length_is_renamed(tmp_path, quiet_transformers):
    out = str(tmp_path / "pkg")
    package_model(_decoder("tiny"), out, progress=False)
    onx = onnx.load(os.path.join(out, "model.onnx"), load_external_data=False)
    present = [o for o in onx.graph.output if o.name.startswith("present.")]
    assert {o.type.tensor_type.shape.dim[2].dim_param for o in present} == {PRESENT_LENGTH}


def _gqa_graph() -> onnx.ModelProto:
    """One GroupQueryAttention layer; the cache length read twice on the past inputs:
    ``Shape(start=2, end=3)`` (1-D) and ``Gather(Shape, -2)`` (a scalar)."""
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    inputs = [
        helper.make_tensor_value_info("input_ids", i64, [1, "s"]),
        helper.make_tensor_value_info("attention_mask", i64, [1, "t"]),
        helper.make_tensor_value_info("q", f, [1, "s", 2]),
        helper.make_tensor_value_info("past_key_values.0.key", f, [1, 1, "p", 2]),
        helper.make_tensor_value_info("past_key_values.0.value", f, [1, 1, "p", 2]),
    ]
    outputs = [
        helper.make_tensor_value_info(n, f, [1, 1, "p+s", 2])
        for n in ("present.0.key", "present.0.value")
    ] + [helper.make_tensor_value_info(n, i64, None) for n in ("length_1d", "length", "batch")]
    nodes = [
        helper.make_node(
            "GroupQueryAttention",
            ["q", "q", "q", "past_key_values.0.key", "past_key_values.0.value", "sk", "tot"],
            ["y", "present.0.key", "present.0.value"],
            domain="com.microsoft",
            num_heads=1,
            kv_num_heads=1,
        ),
        helper.make_node("Shape", ["past_key_values.0.key"], ["length_1d"], start=2, end=3),
        helper.make_node("Shape", ["past_key_values.0.value"], ["shape"]),
        helper.make_node("Gather", ["shape", "minus2"], ["length"], axis=0),
        helper.make_node("Shape", ["past_key_values.0.value"], ["batch"], start=0, end=1),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        inputs,
        outputs,
        [onnx.numpy_helper.from_array(np.array(-2, dtype=np.int64), "minus2")],
    )
    return helper.make_model(graph)


def test_cache_length_read_on_the_mask():
    from onnx.reference import ReferenceEvaluator

    onx = _gqa_graph()
    assert share_past_buffer(onx, 1) is True
    readers = [
        n.op_type
        for n in onx.graph.node
        if {"past_key_values.0.key", "past_key_values.0.value"} & set(n.input)
    ]
    # the batch dimension is still read on the past (the same with a shared buffer)
    assert sorted(readers) == ["GroupQueryAttention", "Shape"]
    # the contrib operator is not in the reference evaluator: the lengths only
    kept = [n for n in onx.graph.node if n.op_type != "GroupQueryAttention"]
    del onx.graph.node[:]
    onx.graph.node.extend(kept)
    del onx.graph.output[:2]
    feeds = {
        "input_ids": np.zeros((1, 1), dtype=np.int64),
        "attention_mask": np.ones((1, 7), dtype=np.int64),
        "q": np.zeros((1, 1, 2), dtype=np.float32),
        # a shared buffer of max_length 32 holding 6 valid positions
        "past_key_values.0.key": np.zeros((1, 1, 32, 2), dtype=np.float32),
        "past_key_values.0.value": np.zeros((1, 1, 32, 2), dtype=np.float32),
    }
    length_1d, length, batch = ReferenceEvaluator(onx).run(None, feeds)
    assert length_1d.tolist() == [6] and length.shape == () and int(length) == 6
    assert batch.tolist() == [1]


def test_batch_of_two_prompts_of_different_lengths(tmp_path, quiet_transformers):
    """Two prompts (40 and 25 tokens) in one generator over the shared buffer, the
    shorter padded on the right with genai's pad token (the convention under which the
    model builder's package also gives the eager tokens; with left padding both
    packages repeat one token): each sequence gets the tokens of its own eager
    ``generate``."""
    model = _decoder("tiny")
    out = str(tmp_path / "pkg")
    package_model(model, out, progress=False)
    config = _config(out)
    assert config["search"]["past_present_share_buffer"] is True
    pad = config["model"]["pad_token_id"]
    long, short = _prompt(model, PROMPT), _prompt(model, 25)
    expected_long, expected_short = _eager(model, long), _eager(model, short)
    genai_model = og.Model(out)
    params = og.GeneratorParams(genai_model)
    params.set_search_options(do_sample=False, max_length=PROMPT + NEW_TOKENS, batch_size=2)
    generator = og.Generator(genai_model, params)
    padded = short[0].tolist() + [pad] * (PROMPT - 25)
    generator.append_tokens(np.array([long[0].tolist(), padded], dtype=np.int32))
    while not generator.is_done():
        generator.generate_next_token()
    got_long = [int(t) for t in generator.get_sequence(0)]
    got_short = [int(t) for t in generator.get_sequence(1)]
    assert got_long == expected_long
    # the short prompt's new tokens follow its padding
    assert got_short[PROMPT:] == expected_short[25 : 25 + NEW_TOKENS]
