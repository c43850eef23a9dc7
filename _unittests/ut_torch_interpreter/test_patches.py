"""bypass_export_some_errors: cache registration with readable names, patches applied
then removed (even on an exception), modificator, dim names of cache inputs."""

import copy

import numpy as np
import onnxruntime
import pytest
import torch
from torch.utils import _pytree
from transformers import cache_utils, masking_utils
from transformers.cache_utils import DynamicCache, EncoderDecoderCache, StaticCache

from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.onnx_export_errors import (
    UnknownCacheError,
    bypass_export_some_errors,
)
from experimental_experiment.torch_interpreter.patches import Patch, apply_patches
from experimental_experiment.torch_interpreter.patches.patch_transformers import (
    get_transformers_patches,
)
from experimental_experiment.torch_models.llm_helper import cache_argument_name

DYN = torch.export.Dim.DYNAMIC


pytestmark = pytest.mark.usefixtures("quiet_transformers")


def _cache(batch, past, layers=2, heads=2, dim=8):
    cache = DynamicCache()
    for i in range(layers):
        cache.update(torch.randn(batch, heads, past, dim), torch.randn(batch, heads, past, dim), i)
    return cache


class AttentionStep(torch.nn.Module):
    def forward(self, query, cache):
        keys = torch.cat([cache.layers[0].keys, cache.layers[1].keys], dim=-1)
        values = torch.cat([cache.layers[0].values, cache.layers[1].values], dim=-1)
        return torch.softmax(query @ keys.transpose(2, 3), dim=-1) @ values


def _state():
    """Everything the context manager may change."""
    from transformers.integrations.moe import ExpertsInterface
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    return (
        set(_pytree.SUPPORTED_NODES),
        dict(vars(masking_utils)),
        dict(vars(cache_utils.DynamicSlidingWindowLayer)),
        torch.nn.functional.scaled_dot_product_attention,
        dict(vars(ExpertsInterface)),
        dict(vars(LlamaRotaryEmbedding)),
        dict(vars(masking_utils.AttentionMaskInterface)),
    )


@pytest.fixture(scope="module", autouse=True)
def _imported():
    """Imports what the patches import (importing transformers' models registers
    their outputs with pytree for good, that is not a patch)."""
    with bypass_export_some_errors(patch_transformers=True):
        pass


def test_nothing_leaks_after_exit():
    before = _state()
    with bypass_export_some_errors(patch_transformers=True):
        during = _state()
        assert DynamicCache in _pytree.SUPPORTED_NODES
        assert StaticCache in _pytree.SUPPORTED_NODES
        assert EncoderDecoderCache in _pytree.SUPPORTED_NODES
        assert during[1]["_vmap_expansion_sdpa"] is not before[1]["_vmap_expansion_sdpa"]
        # transformers' own patches are applied too
        assert during[2]["update"] is not before[2]["update"]
        assert during[4]["_global_mapping"] is not before[4]["_global_mapping"]
        assert during[5]["forward"] is not before[5]["forward"]
        assert during[6]["_global_mapping"] is not before[6]["_global_mapping"]
    assert _state() == before


def test_nothing_leaks_after_an_exception():
    before = _state()
    with pytest.raises(RuntimeError, match="boom"):
        with bypass_export_some_errors(patch_transformers=True):
            assert _state() != before
            raise RuntimeError("boom")
    assert _state() == before


def test_previous_registration_restored():
    """A registration made before (here transformers' own) comes back on exit."""
    from transformers.exporters.exporter_dynamo import register_pytree_node

    assert DynamicCache not in _pytree.SUPPORTED_NODES
    register_pytree_node(DynamicCache)
    try:
        theirs = _pytree.SUPPORTED_NODES[DynamicCache]
        cache = _cache(2, 3)
        with bypass_export_some_errors(patch_transformers=True):
            paths = [p for p, _ in _pytree.tree_flatten_with_path(cache)[0]]
            assert [p[0].key for p in paths] == ["key_0", "key_1", "value_0", "value_1"]
        assert _pytree.SUPPORTED_NODES[DynamicCache] is theirs
        assert len(_pytree.tree_leaves(cache)) == 4
    finally:
        _pytree._deregister_pytree_node(DynamicCache)


def test_apply_patches_inherited_attribute():
    class Base:
        def f(self):
            return 1

    class Child(Base):
        pass

    with pytest.raises(ValueError):
        with apply_patches([Patch(Child, "f", lambda orig: lambda self: 2)]):
            assert Child().f() == 2
            raise ValueError()
    assert "f" not in vars(Child) and Child().f() == 1


def test_apply_patches_restores_a_staticmethod():
    class Owner:
        @staticmethod
        def f(x):
            return x

    with apply_patches([Patch(Owner, "f", lambda orig: staticmethod(lambda x: -x))]):
        assert Owner().f(1) == -1
    assert isinstance(vars(Owner)["f"], staticmethod) and Owner().f(1) == 1


def test_every_patch_is_documented():
    for patch in get_transformers_patches():
        assert "Fixes" in patch.doc, patch.name


def test_dim_names_of_cache_inputs():
    """The names given in a list for the cache reach the ONNX inputs (not ``s15``)."""
    model, query = AttentionStep(), torch.randn(2, 2, 3, 16)
    ds = ({0: "batch", 2: "seq"}, [{0: "batch", 2: "past"}] * 4)
    with bypass_export_some_errors(patch_transformers=True) as modificator:
        onx = to_onnx(model, modificator((query, _cache(2, 5))), dynamic_shapes=ds)
    dims = {
        i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
        for i in onx.graph.input
    }
    # a transformers cache keeps the names past_key_values_* whatever the argument name
    assert dims["past_key_values_key_0"] == ["batch", 2, "past", 8]
    assert dims["past_key_values_value_1"] == ["batch", 2, "past", 8]
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    query, cache = torch.randn(3, 2, 4, 16), _cache(3, 7)
    feeds = (
        [query] + [layer.keys for layer in cache.layers] + [layer.values for layer in cache.layers]
    )
    got = sess.run(None, {i.name: t.numpy() for i, t in zip(sess.get_inputs(), feeds)})[0]
    np.testing.assert_allclose(model(query, cache).numpy(), got, atol=1e-5)


def test_torch_export_export_and_module():
    model = AttentionStep()
    with bypass_export_some_errors(patch_transformers=True) as modificator:
        ep = torch.export.export(
            model,
            modificator((torch.randn(2, 2, 3, 16), _cache(2, 5))),
            dynamic_shapes=({0: DYN, 2: DYN}, [{0: DYN, 2: DYN}] * 4),
        )
        query, cache = torch.randn(3, 2, 4, 16), _cache(3, 7)
        torch.testing.assert_close(ep.module()(query, cache), model(query, cache))


def test_modificator():
    keys = [torch.randn(2, 2, 3, 8) for _ in range(4)]
    with bypass_export_some_errors(patch_transformers=True) as modificator:
        inputs = modificator(
            {"x": keys[0], "past_key_values": ((keys[0], keys[1]), (keys[2], keys[3]))}
        )
        cache = inputs["past_key_values"]
        assert isinstance(cache, DynamicCache)
        assert torch.equal(cache.layers[1].values, keys[3])
        # a copy: growing it does not grow the user's cache
        copied = modificator(cache)
        copied.update(torch.randn(2, 2, 1, 8), torch.randn(2, 2, 1, 8), 0)
        assert cache.layers[0].keys.shape[2] == 3 and copied.layers[0].keys.shape[2] == 4

        class MyCache(cache_utils.Cache):
            def __init__(self):
                super().__init__(layers=[])

        with pytest.raises(UnknownCacheError, match="MyCache"):
            modificator({"past_key_values": MyCache()})


def test_encoder_decoder_cache_roundtrip():
    with bypass_export_some_errors(patch_transformers=True):
        cache = EncoderDecoderCache(_cache(2, 3), _cache(2, 6))
        leaves, spec = _pytree.tree_flatten_with_path(cache)
        names = ["_".join(str(k.key) for k in path) for path, _ in leaves]
        assert names[0] == "self_attention_cache_key_0"
        assert names[-1] == "cross_attention_cache_value_1"
        rebuilt = _pytree.tree_unflatten([t for _, t in leaves], spec)
        assert rebuilt.cross_attention_cache.layers[1].values.shape == (2, 2, 6, 8)
        assert rebuilt.get_seq_length() == 3


def test_static_cache_to_onnx():
    """StaticCache: keys, values and the length tensor are inputs, updated in place."""
    from experimental_experiment.torch_models.llm_helper import get_tiny_llm

    data = get_tiny_llm("llama", with_cache=False)
    model, config = data["model"], data["config"]
    cache = StaticCache(config=config, max_cache_len=8)
    cache.early_initialization(
        batch_size=2, num_heads=2, head_dim=8, dtype=torch.float32, device="cpu"
    )
    inputs = dict(
        input_ids=data["inputs"]["input_ids"],
        attention_mask=torch.ones(2, 8, dtype=torch.int64),
        position_ids=data["inputs"]["position_ids"],
    )
    inputs[cache_argument_name(model)] = cache
    with bypass_export_some_errors(patch_transformers=True) as modificator:
        onx = to_onnx(model, (), modificator(inputs))
        feeds = [t.numpy() for t in _pytree.tree_leaves(modificator(inputs))]
    names = [i.name for i in onx.graph.input]
    assert "past_key_values_cumulative_length_1" in names
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, dict(zip(names, feeds)))
    expected = model(**copy.deepcopy(inputs)).logits
    np.testing.assert_allclose(expected.detach().numpy(), got[0], atol=1e-4)


def test_vmap_mask_to_onnx():
    """A mask built with torch.vmap (use_vmap=True) converts once patched."""
    from transformers.masking_utils import causal_mask_function, sdpa_mask

    class Masked(torch.nn.Module):
        def forward(self, x, pad):
            mask = sdpa_mask(
                batch_size=x.shape[0],
                q_length=x.shape[1],
                kv_length=pad.shape[1],
                q_offset=0,
                kv_offset=0,
                mask_function=causal_mask_function,
                attention_mask=pad,
                use_vmap=True,
                allow_is_causal_skip=False,
            )
            return x[:, None, :, None] * mask

    pad = torch.ones(2, 5, dtype=torch.bool)
    with bypass_export_some_errors(patch_transformers=True):
        onx = to_onnx(
            Masked(), (torch.randn(2, 3), pad), dynamic_shapes=({0: "b", 1: "s"}, {0: "b", 1: "t"})
        )
    x, pad = torch.randn(3, 4), torch.rand(3, 6) > 0.3
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"x": x.numpy(), "pad": pad.numpy()})[0]
    np.testing.assert_allclose(Masked()(x, pad).numpy(), got)


def _voxtral_realtime():
    """A tiny VoxtralRealtimeForConditionalGeneration (8 audio frames per token)."""
    from transformers import VoxtralRealtimeConfig, VoxtralRealtimeForConditionalGeneration

    torch.manual_seed(0)
    small = dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        head_dim=16,
        vocab_size=128,
    )
    config = VoxtralRealtimeConfig(
        audio_config=dict(small, num_mel_bins=16), text_config=dict(small, num_key_value_heads=1)
    )
    return VoxtralRealtimeForConditionalGeneration(config).eval()


def _voxtral_inputs(model, batch, seq, past, padding):
    """Decoder inputs with a cache of ``past`` tokens; with ``padding``, the padding
    cache a first chunk leaves (the streaming case: an input updated in place)."""
    inputs = dict(
        input_ids=torch.randint(0, 128, (batch, seq)),
        input_features=torch.randn(batch, 16, seq * 8),
        attention_mask=torch.ones(batch, past + seq, dtype=torch.int64),
        position_ids=torch.arange(past, past + seq).expand(batch, -1),
    )
    inputs[cache_argument_name(model)] = _cache(batch, past, heads=1, dim=16)
    if padding:
        with torch.no_grad():
            inputs["padding_cache"] = model(**copy.deepcopy(inputs)).padding_cache
    return inputs


def test_voxtral_padding_cache_roundtrip():
    from transformers.models.voxtral_realtime.modeling_voxtral_realtime import (
        VoxtralRealtimeConv1dPaddingCache,
    )

    model = _voxtral_realtime()
    cache = _voxtral_inputs(model, 2, 3, 5, padding=True)["padding_cache"]
    assert VoxtralRealtimeConv1dPaddingCache not in _pytree.SUPPORTED_NODES
    with bypass_export_some_errors(patch_transformers=True):
        leaves, spec = _pytree.tree_flatten_with_path(cache)
        assert [path[0].key for path, _ in leaves] == ["conv1", "conv2"]
        rebuilt = _pytree.tree_unflatten([t for _, t in leaves], spec)
        assert rebuilt.layers["conv1"].left_pad == cache.layers["conv1"].left_pad
        assert rebuilt.layers["conv2"].cache is cache.layers["conv2"].cache
    assert VoxtralRealtimeConv1dPaddingCache not in _pytree.SUPPORTED_NODES


@pytest.mark.parametrize("padding", [False, True])
def test_voxtral_realtime_to_onnx(padding):
    """The padding cache is an output (and an input when streaming): dynamic batch,
    sequence and cache length, onnxruntime matches eager on two sizes."""
    from experimental_experiment.torch_models.llm_models import (
        compare_outputs,
        eager_outputs,
        ort_feeds,
    )

    model = _voxtral_realtime()
    inputs = _voxtral_inputs(model, 2, 3, 5, padding)
    ds = dict(
        input_ids={0: "batch", 1: "seq"},
        input_features={0: "batch", 2: "frames"},
        attention_mask={0: "batch", 1: "total"},
        position_ids={0: "batch", 1: "seq"},
    )
    ds[cache_argument_name(model)] = [{0: "batch", 2: "past"}] * 4
    if padding:
        ds["padding_cache"] = [{0: "batch"}] * 2
    with bypass_export_some_errors(patch_transformers=True) as modificator:
        onx = to_onnx(model, (), modificator(copy.deepcopy(inputs)), dynamic_shapes=ds)
    dims = {
        i.name: [d.dim_param for d in i.type.tensor_type.shape.dim[:3]] for i in onx.graph.input
    }
    assert dims["input_ids"][:2] == ["batch", "seq"]
    assert dims["past_key_values_key_0"] == ["batch", "", "past"]
    assert dims.get("padding_cache_conv1", ["batch"])[0] == "batch"
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for sizes in [(2, 3, 5), (3, 4, 7)]:
        inputs = _voxtral_inputs(model, *sizes, padding)
        expected = eager_outputs(model, inputs)
        with bypass_export_some_errors(patch_transformers=True):
            feeds = ort_feeds(sess, inputs)
        got = sess.run(None, feeds)  # padding inputs updated in place: extra outputs last
        assert len(expected) == 11 and len(got) == 11 + 2 * padding
        assert compare_outputs(expected, got[:11]) < 1e-4, f"sizes {sizes}"
