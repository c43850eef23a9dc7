"""Patches of single architectures: the exported model keeps a dynamic sequence length
and onnxruntime matches eager (unpatched) on two sizes."""

import numpy as np
import onnxruntime
import pytest
import torch

from experimental_experiment.ext_test_case import check_token_model
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.onnx_export_errors import (
    bypass_export_some_errors,
)
from experimental_experiment.torch_interpreter.patches.patch_models import get_model_patches

pytestmark = pytest.mark.usefixtures("quiet_transformers")


def _check(model, vocab, names, output=lambda out: out.logits):
    def patched():
        assert any(p.name.endswith(names) for p in get_model_patches())

    check_token_model(model, vocab, patched=patched, output=output)


def test_cpmant_dynamic_sequence():
    from transformers import CpmAntConfig, CpmAntForCausalLM

    torch.manual_seed(0)
    config = CpmAntConfig(
        vocab_size=128,
        hidden_size=32,
        num_attention_heads=4,
        dim_head=8,
        dim_ff=64,
        num_hidden_layers=2,
        prompt_length=4,
        use_cache=False,
    )
    _check(CpmAntForCausalLM(config).eval(), 128, "_prepare_attention_mask")


def test_dbrx_experts_without_data_dependent_loop():
    from transformers import DbrxConfig, DbrxForCausalLM

    torch.manual_seed(0)
    config = DbrxConfig(
        d_model=32,
        n_heads=4,
        n_layers=2,
        max_seq_len=64,
        vocab_size=128,
        attn_config=dict(kv_n_heads=2, rope_theta=10000.0, clip_qkv=8.0),
        ffn_config=dict(ffn_hidden_size=32, moe_num_experts=4, moe_top_k=2),
        use_cache=False,
    )
    _check(DbrxForCausalLM(config).eval(), 128, "DbrxExperts.forward")


def test_switch_transformers_experts_without_data_dependent_loop():
    from transformers import SwitchTransformersConfig, SwitchTransformersEncoderModel

    torch.manual_seed(0)
    config = SwitchTransformersConfig(
        vocab_size=128,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_heads=4,
        num_layers=2,
        num_sparse_encoder_layers=1,
        num_experts=4,
        expert_capacity=8,
        use_cache=False,
    )
    encoder = SwitchTransformersEncoderModel(config).eval()

    class Encoder(torch.nn.Module):
        def forward(self, ids):
            mask = torch.ones_like(ids)
            return encoder(input_ids=ids, attention_mask=mask).last_hidden_state

    _check(Encoder().eval(), 128, "SwitchTransformersExperts.forward", output=lambda t: t)


def test_reformer_axial_positions_keep_the_batch_dynamic():
    from transformers import ReformerConfig, ReformerForMaskedLM

    torch.manual_seed(0)
    config = ReformerConfig(
        vocab_size=128,
        hidden_size=32,
        num_attention_heads=2,
        attention_head_size=16,
        feed_forward_size=64,
        attn_layers=["local", "local"],
        axial_pos_embds_dim=[16, 16],
        axial_pos_shape=[4, 8],
        local_attn_chunk_length=4,
        is_decoder=False,
        use_cache=False,
    )
    _check(ReformerForMaskedLM(config).eval(), 128, "AxialPositionEmbeddings.forward")


def test_longcat_flash_experts_without_data_dependent_loop():
    from transformers import LongcatFlashConfig, LongcatFlashForCausalLM

    torch.manual_seed(0)
    config = LongcatFlashConfig(
        vocab_size=128,
        hidden_size=64,
        num_layers=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        ffn_hidden_size=128,
        q_lora_rank=32,
        kv_lora_rank=32,
        qk_nope_head_dim=16,
        qk_rope_head_dim=16,
        head_dim=16,
        v_head_dim=16,
        moe_topk=2,
        n_routed_experts=4,
        zero_expert_num=2,
        use_cache=False,
    )
    model = LongcatFlashForCausalLM(config).eval()
    with torch.no_grad():  # a router initialised at zero ties the experts: random scores
        for name, p in model.named_parameters():
            if "router" in name:
                p.normal_()
    _check(model, 128, "LongcatFlashExperts.forward")


def test_depth_pro_keeps_the_batch_dynamic():
    from transformers import DepthProConfig, DepthProModel

    torch.manual_seed(0)
    vit = dict(
        model_type="dinov2",
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        image_size=8,
        patch_size=8,
        out_features=["stage2"],
        out_indices=[2],
    )
    config = DepthProConfig(
        fusion_hidden_size=32,
        patch_size=8,
        intermediate_hook_ids=[1, 0],
        intermediate_feature_dims=[32, 32],
        scaled_images_ratios=[0.25, 0.5, 1],
        scaled_images_overlap_ratios=[0.0, 0.5, 0.25],
        scaled_images_feature_dims=[64, 64, 32],
        use_fov_model=False,
        image_model_config=vit,
        patch_model_config=vit,
        fov_model_config=vit,
    )
    model = DepthProModel(config).eval()
    with bypass_export_some_errors(patch_transformers=True):
        assert any(p.name.endswith("DepthProPatchEncoder.forward") for p in get_model_patches())
        onx = to_onnx(model, (torch.randn(2, 3, 32, 32),), dynamic_shapes=({0: "batch"},))
    assert onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (2, 3):
        x = torch.randn(batch, 3, 32, 32)
        with torch.no_grad():
            expected = model(x).last_hidden_state.numpy()
        got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)


def _siglip2_inputs(shapes, patches, channels):
    """Patchified images of ``(height, width)`` patches, padded to ``patches``."""
    mask = torch.zeros(len(shapes), patches, dtype=torch.int64)
    for i, (h, w) in enumerate(shapes):
        mask[i, : h * w] = 1
    return dict(
        pixel_values=torch.randn(len(shapes), patches, channels),
        pixel_attention_mask=mask,
        spatial_shapes=torch.tensor(shapes, dtype=torch.int64),
    )


def test_siglip2_resized_positions_keep_the_batch_dynamic():
    from transformers import Siglip2VisionConfig, Siglip2VisionModel

    torch.manual_seed(0)
    config = Siglip2VisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_channels=3,
        patch_size=2,
        num_patches=16,
    )
    model = Siglip2VisionModel(config).eval()
    channels, patches = 3 * 2 * 2, 24
    names = ("pixel_values", "pixel_attention_mask", "spatial_shapes")
    ds = ({0: "batch", 1: "patches"}, {0: "batch", 1: "patches"}, {0: "batch"})
    inputs = _siglip2_inputs([(2, 3), (4, 5)], patches, channels)
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        assert any(p.name.endswith("resize_positional_embeddings") for p in get_model_patches())
        onx = to_onnx(model, (), inputs, dynamic_shapes=dict(zip(names, ds)))
    assert [i.type.tensor_type.shape.dim[0].dim_param for i in onx.graph.input] == ["batch"] * 3
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    # upsampled, downsampled, padded and unpadded grids, another batch and length
    for shapes, length in (([(2, 3), (4, 5)], patches), ([(6, 4), (1, 7), (4, 4)], 30)):
        feeds = _siglip2_inputs(shapes, length, channels)
        with torch.no_grad():
            expected = model(**feeds).last_hidden_state.numpy()
        got = sess.run(None, {k: v.numpy() for k, v in feeds.items()})[0]
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)


def _check_with_mask(model, vocab, names, shapes, output=lambda out: out.last_hidden_state):
    """Exports ``model(input_ids, attention_mask)`` on ``shapes[0]`` with a dynamic batch
    and sequence, compares onnxruntime with eager on every shape, the end of the
    second row of every mask being padding."""

    def feeds(shape):
        mask = torch.ones(shape, dtype=torch.int64)
        mask[1, shape[1] * 2 // 3 :] = 0
        return dict(input_ids=torch.randint(0, vocab, shape), attention_mask=mask)

    ds = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        active = [p.name for p in get_model_patches()]
        assert all(any(a.endswith(n) for a in active) for n in names), active
        onx = to_onnx(model, (), feeds(shapes[0]), dynamic_shapes=ds)
    for i in onx.graph.input:
        assert [d.dim_param for d in i.type.tensor_type.shape.dim] == ["batch", "seq"]
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in shapes:
        inputs = feeds(shape)
        with torch.no_grad():
            expected = output(model(**inputs)).numpy()
        got = sess.run(None, {k: v.numpy() for k, v in inputs.items()})[0]
        assert got.shape == expected.shape, shape
        np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4, err_msg=str(shape))


def test_canine_keeps_the_sequence_dynamic():
    from transformers import CanineConfig, CanineModel

    torch.manual_seed(0)
    config = CanineConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        downsampling_rate=4,
        local_transformer_stride=5,
        num_hash_buckets=64,
        num_hash_functions=4,
    )
    model = CanineModel(config).eval()
    # one chunk, chunks with remainders, a chunk of padding only, lengths % 4 != 0
    _check_with_mask(
        model,
        1000,
        ("_downsample_attention_mask", "CanineAttention.forward"),
        [(2, 12), (3, 13), (2, 23), (2, 4)],
    )


def test_qwen4_exp_indexer_selects_the_same_tokens():
    """The vectorized indexer keeps the tokens the per-query loops keep (two sizes, a
    cache, left padding), on the zoo's tiny Qwen4Exp; the exported model is checked by
    the zoo (qwen4_exp passes in onnxruntime against eager)."""
    import copy
    import sys

    from experimental_experiment.bench.zoo_cases import ZooCase, build_case
    from experimental_experiment.torch_interpreter.patches.patch_sparse_attention import (
        _qwen4_exp_indexer,
    )

    data = build_case(ZooCase("qwen4_exp", "causal-lm"))
    model = data["model"]
    indexer = sys.modules[type(model).__module__].Qwen4ExpTextQSAIndexer
    original = indexer.forward
    patched = _qwen4_exp_indexer(original)
    compared = []

    class Replay:  # gives the patched forward the keys the cache gave the original
        def __init__(self, keys):
            self.keys = keys

        def update_indexer(self, keys, layer_idx):
            return self.keys

    def both(self, hidden, positions, mask, cache):
        seen = {}
        if cache is not None:
            update = cache.update_indexer
            cache.update_indexer = lambda k, i: seen.setdefault("keys", update(k, i))
        expected = original(self, hidden, positions, mask, cache)
        if cache is not None:
            del cache.update_indexer
        got = patched(
            self, hidden, positions, mask, Replay(seen["keys"]) if cache is not None else None
        )
        compared.append((tuple(expected.shape), bool((expected == got).all())))
        return expected

    ids = torch.randint(0, 50, (2, 12))
    padded = torch.cat(
        [torch.zeros(2, 3, dtype=torch.int64), torch.ones(2, 9, dtype=torch.int64)], 1
    )
    try:
        indexer.forward = both
        with torch.no_grad():
            model(**copy.deepcopy(data["inputs"]))
            model(**copy.deepcopy(data["check_inputs"]))
            model(input_ids=ids, attention_mask=padded, use_cache=False)
    finally:
        indexer.forward = original
    assert len(compared) >= 3 and all(same for _, same in compared), compared


@pytest.mark.parametrize("size", [(32, 32), (32, 64)])
def test_dots3_note_vision_attention_keeps_the_query_key_norms(size):
    """The vision tower of the zoo's tiny Dots3-Note exported on two image sizes matches
    eager (unpatched) in onnxruntime: transformers' own export patch of its attention
    drops the norms of the queries and keys (features 2% off)."""
    from experimental_experiment.torch_models.multimodal.cases import build_multimodal
    from experimental_experiment.torch_models.multimodal.export import export_part
    from experimental_experiment.torch_models.multimodal.parts import VisionEncoder

    case = build_multimodal("dots3_note", image_size=size)
    vision = VisionEncoder(case.model, **case.constants)
    pixels = tuple(case.vision_inputs.values())
    with torch.no_grad():
        expected = vision(*pixels).numpy()
    onx = export_part(vision, pixels)
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    got = np.asarray(sess.run(None, {sess.get_inputs()[0].name: pixels[0].numpy()})[0])
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-4)


def test_glm5_next_indexer_one_new_token():
    """The decoder of the zoo's tiny GLM-5-Next exported for one new token (the indexer
    pools its keys without dropping the pools no row uses) matches eager in
    onnxruntime after caches of two lengths."""
    from experimental_experiment.torch_interpreter.patches.cache_layers import flatten_cache
    from experimental_experiment.torch_models.multimodal.cases import build_model
    from experimental_experiment.torch_models.multimodal.export import (
        decoder_example,
        export_part,
    )
    from experimental_experiment.torch_models.multimodal.parts import Decoder
    from experimental_experiment.torch_models.onnx_outputs import user_outputs

    model = build_model("glm5_next")
    args, ds = decoder_example(model, False, batch=2, seq=1, past=5, layout="hybrid")
    names = list(ds)
    onx = export_part(Decoder(model), (), dynamic_shapes=ds, kwargs=dict(zip(names, args)))
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    inputs = [i.name for i in sess.get_inputs()]
    for batch, past in [(2, 6), (3, 11)]:
        embeds, mask, positions, cache = decoder_example(
            model, False, batch=batch, seq=1, past=past, seed=past, layout="hybrid"
        )[0]
        leaves = [t.numpy() for t in flatten_cache(cache)[0]]
        feeds = dict(zip(inputs, [embeds.numpy(), mask.numpy(), positions.numpy(), *leaves]))
        got = np.asarray(user_outputs(sess, list(sess.run(None, feeds)))[0])
        with torch.no_grad():
            expected = Decoder(model)(embeds, mask, positions, cache)[0].numpy()
        np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-3)


def test_deepseek_v4_compressed_attention_keeps_the_sequence_dynamic():
    # exported with 3 tokens (no complete window), checked with 9 (two windows of the
    # sparse attention, top-3 of them) and 21 (two windows of the heavy compression)
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

    torch.manual_seed(0)
    config = DeepseekV4Config(
        vocab_size=128,
        hidden_size=32,
        moe_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        head_dim=16,
        q_lora_rank=16,
        n_routed_experts=4,
        num_experts_per_tok=2,
        layer_types=["heavily_compressed_attention", "compressed_sparse_attention"],
        mlp_layer_types=["moe", "moe"],
        compress_rates=dict(compressed_sparse_attention=4, heavily_compressed_attention=8),
        sliding_window=16,
        o_groups=2,
        o_lora_rank=16,
        index_n_heads=4,
        index_head_dim=16,
        index_topk=3,
        use_cache=False,
    )
    model = DeepseekV4ForCausalLM(config).eval()
    with torch.no_grad():  # routers and biases start at zero: ties between experts
        for p in model.parameters():
            if not p.any():
                p.normal_(0, 0.5)

    def patched():
        names = [p.name for p in get_model_patches()]
        assert any(n.endswith("DeepseekV4Indexer.forward") for n in names), names

    check_token_model(model, 128, patched=patched, shapes=((2, 3), (3, 9), (2, 21)))


def test_blt_entropy_patches_keep_the_sequence_dynamic():
    # the threshold is the median entropy: the rows of a batch have different numbers
    # of patches, the exported model keeps every possible patch (sentinel ones included)
    from transformers import BltForCausalLM

    from experimental_experiment.bench.zoo_configs import tiny_config

    torch.manual_seed(0)
    config = tiny_config("blt")
    config.use_cache = False
    model = BltForCausalLM(config).eval()
    vocab = config.vocab_size
    ids = torch.randint(0, vocab, (3, 9))
    with torch.no_grad():
        entropies, _, _ = model.model.patcher(ids)
    model.config.patching_threshold = float(entropies[:, 1:].median())
    with torch.no_grad():
        _, lengths, _ = model.model.patcher(ids, patch_size=4, threshold=config.patching_threshold)
    assert (lengths > 0).sum(1).unique().numel() > 1, lengths  # rows differ

    def patched():
        names = [p.name for p in get_model_patches()]
        assert any(n.endswith("patch_lengths_from_entropies") for n in names), names

    check_token_model(model, vocab, patched=patched, shapes=((2, 3), (3, 9), (2, 17)))


@pytest.mark.parametrize("separate_cls", [True, False])
@pytest.mark.parametrize("truncate_seq", [True, False])
def test_funnel_position_embeds_match_the_lists(separate_cls, truncate_seq):
    """The progressions give the tensors the lists of positions give, for every length
    the original accepts (one to four blocks)."""
    from transformers import FunnelConfig
    from transformers.models.funnel.modeling_funnel import FunnelAttentionStructure

    from experimental_experiment.torch_interpreter.patches.patch_models import (
        _funnel_position_embeds,
    )

    original = FunnelAttentionStructure.get_position_embeds
    patched = _funnel_position_embeds(original)
    checked = 0
    for blocks in range(1, 5):
        config = FunnelConfig(
            d_model=16,
            n_head=2,
            d_head=8,
            d_inner=32,
            block_sizes=[1] * blocks,
            separate_cls=separate_cls,
            truncate_seq=truncate_seq,
        )
        structure = FunnelAttentionStructure(config).eval()
        for seq in range(1, 34):
            try:
                expected = original(structure, seq, torch.float32, "cpu")
            except RuntimeError:  # too short for the blocks (an index out of the table)
                continue
            got = patched(structure, seq, torch.float32, "cpu")
            assert len(got) == len(expected)
            for e_block, g_block in zip(expected, got):
                for e, g in zip(e_block, g_block):
                    if e is None:
                        assert g is None
                    else:
                        torch.testing.assert_close(g, e, rtol=0, atol=0)
                        checked += 1
    assert checked > 100


def test_funnel_keeps_the_sequence_dynamic():
    """Three blocks pool the sequence twice: even and odd lengths."""
    from transformers import FunnelConfig, FunnelForMaskedLM

    torch.manual_seed(0)
    config = FunnelConfig(
        vocab_size=64,
        d_model=32,
        n_head=2,
        d_head=16,
        d_inner=64,
        block_sizes=[1, 1, 1],
        num_decoder_layers=1,
    )
    model = FunnelForMaskedLM(config).eval()
    _check_with_mask(
        model,
        64,
        ("FunnelAttentionStructure.get_position_embeds",),
        [(2, 12), (3, 9), (2, 17)],
        output=lambda out: out.logits,
    )
