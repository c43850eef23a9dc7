"""Tiny configurations of the zoo: hybrid models keep a layer of every kind with their
per-layer lists and overrides, multi-head attention keeps as many key/value heads as
heads, state space dimensions stay consistent, real configurations build."""

import pytest

from experimental_experiment.bench.zoo_configs import (
    pick_layers,
    shrink_config_dict,
    tiny_config,
)


def test_pick_layers():
    assert pick_layers(["linear", "linear", "linear", "full"], 2) == [0, 3]
    assert pick_layers(["a"] * 5, 2) == [0, 1]
    assert pick_layers(["a", "b", "c"], 2) == [0, 1, 2]  # every kind, up to 4


def test_per_layer_lists_and_overrides():
    kinds = ["sliding"] * 5 + ["full"]
    d = shrink_config_dict(dict(
        num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=2, hidden_size=512,
        layer_types=kinds, intermediate_size=[1024] * 6,
        per_layer_config={"05": {"head_dim": 256}, "03": {"head_dim": 64}}))
    assert d["num_hidden_layers"] == 2 and d["layer_types"] == ["sliding", "full"]
    assert d["intermediate_size"] == [1024, 1024]  # a per-layer list is cut, not shrunk
    assert d["per_layer_config"] == {"1": {"head_dim": 16}}


def test_heads():
    mha = shrink_config_dict(dict(num_attention_heads=32, num_key_value_heads=32))
    gqa = shrink_config_dict(dict(num_attention_heads=32, num_key_value_heads=8))
    mla = shrink_config_dict(dict(num_attention_heads=32, num_key_value_heads=8,
                                  kv_lora_rank=512))
    assert (mha["num_key_value_heads"], gqa["num_key_value_heads"]) == (4, 2)
    assert mla["num_key_value_heads"] == 4
    none = shrink_config_dict(dict(num_attention_heads=32, hidden_size=4096, head_dim=None))
    assert none["head_dim"] == 16


def test_state_space_consistency():
    d = shrink_config_dict(dict(hidden_size=4096, expand=2, num_heads=128, head_dim=64))
    assert d["num_heads"] * d["head_dim"] == d["hidden_size"] * d["expand"]
    d = shrink_config_dict(dict(hidden_size=4096, mamba_expand=2, mamba_n_heads=128,
                                mamba_d_head=64, mamba_d_ssm=8192))
    assert d["mamba_n_heads"] * d["mamba_d_head"] == d["hidden_size"] * 2 == d["mamba_d_ssm"]


@pytest.mark.parametrize("model_type", ["gemma4_text", "jamba", "deepseek_v3", "mamba2",
                                        "detr", "swin", "gemma3n_text"])
def test_tiny_config_builds(model_type):
    config = tiny_config(model_type)
    assert config.get_text_config().hidden_size <= 64 or model_type in ("detr", "swin")
