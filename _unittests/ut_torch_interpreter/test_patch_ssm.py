"""The closed-form selective scan (patch of Mamba's reference scan): same results as
transformers' sequential loop, and a Mamba model exported with a dynamic sequence
length runs in onnxruntime like eager on two sizes."""

import inspect

import numpy as np
import onnxruntime
import pytest
import torch

from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.onnx_export_errors import (
    bypass_export_some_errors,
)
from experimental_experiment.torch_interpreter.patches.patch_ssm import (
    get_ssm_patches,
    selective_scan_closed_form,
)

pytestmark = pytest.mark.usefixtures("quiet_transformers")


def _scan_inputs(batch, d, n, seq, seed):
    g = torch.Generator().manual_seed(seed)
    return dict(
        hidden_states=torch.randn(batch, d, seq, generator=g),
        dt=torch.randn(batch, d, seq, generator=g),
        A=-torch.rand(d, n, generator=g) * 4,
        B=torch.randn(batch, n, seq, generator=g),
        C=torch.randn(batch, n, seq, generator=g),
        D=torch.randn(d, generator=g),
        z=torch.randn(batch, d, seq, generator=g),
        delta_bias=torch.randn(d, generator=g),
    )


@pytest.mark.parametrize("seq", [1, 5, 12])
@pytest.mark.parametrize("last", [False, True])
def test_closed_form_matches_the_loop(seq, last):
    from transformers.models.mamba import modeling_mamba

    loop = inspect.unwrap(modeling_mamba.mamba_selective_scan)
    kw = _scan_inputs(2, 6, 4, seq, seed=seq)
    expected = loop(**kw, delta_softplus=True, return_last_state=last)
    got = selective_scan_closed_form(**kw, delta_softplus=True, return_last_state=last)
    for e, g in zip(*(((x,) if not last else x) for x in (expected, got))):
        assert e.shape == g.shape
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


def _tiny_mamba():
    from transformers import MambaConfig, MambaForCausalLM

    torch.manual_seed(0)
    config = MambaConfig(
        vocab_size=64,
        hidden_size=32,
        state_size=8,
        num_hidden_layers=2,
        intermediate_size=64,
        time_step_rank=4,
        use_cache=False,
    )
    return MambaForCausalLM(config).eval()


def _check_dynamic_sequence(model, while_patched=lambda: None):
    """Exports with a dynamic batch and sequence (``while_patched`` runs inside the
    patches), compares onnxruntime with the unpatched model on two sizes."""
    ids = torch.randint(0, 64, (2, 3))
    with bypass_export_some_errors(patch_transformers=True):
        while_patched()
        onx = to_onnx(model, (ids,), dynamic_shapes=({0: "batch", 1: "seq"},))
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in [(2, 3), (3, 7)]:
        ids = torch.randint(0, 64, shape)
        with torch.no_grad():
            expected = model(ids).logits.numpy()  # the unpatched sequential loop
        got = sess.run(None, {sess.get_inputs()[0].name: ids.numpy()})[0]
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)


def test_mamba_dynamic_sequence_to_onnx():
    model = _tiny_mamba()
    assert get_ssm_patches(), "modeling_mamba is imported: the scan is patched"
    _check_dynamic_sequence(model)


def test_jamba_dynamic_sequence_to_onnx():
    """Jamba's mamba layers call their own copy of the reference scan."""
    from transformers import JambaConfig, JambaForCausalLM
    from transformers.models.jamba import modeling_jamba

    torch.manual_seed(0)
    config = JambaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_layer_period=2,
        attn_layer_offset=1,
        expert_layer_period=2,
        expert_layer_offset=1,
        num_experts=2,
        mamba_d_state=8,
        mamba_expand=2,
        mamba_dt_rank=4,
        use_cache=False,
        use_mamba_kernels=False,
    )
    model = JambaForCausalLM(config).eval()

    def patched():
        assert modeling_jamba.mamba_selective_scan is selective_scan_closed_form

    _check_dynamic_sequence(model, patched)
