"""Both transformers generations: the cache argument is ``past_key_values`` before
transformers 5.24 and ``cache`` since. Whatever the installed release, two wrappers give
the same tiny Llama under both names: inputs and dynamic shapes follow the signature,
the ONNX input names do not change, onnxruntime matches eager on other sizes."""

import copy

import pytest
import torch

from experimental_experiment.torch_models.llm_helper import (
    cache_argument_name,
    get_tiny_llm,
    make_llm_inputs,
    output_cache,
)
from experimental_experiment.torch_models.llm_models import check_onnx, export_model

pytestmark = pytest.mark.usefixtures("quiet_transformers")


class _Wrapper(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.inner = cache_argument_name(model)

    def run(self, input_ids, attention_mask, position_ids, cache):
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            **{self.inner: cache},
        )
        return out.logits, output_cache(out)


class NewGeneration(_Wrapper):
    """The transformers >= 5.24 signature."""

    def forward(self, input_ids, attention_mask, position_ids, cache):
        return self.run(input_ids, attention_mask, position_ids, cache)


class OldGeneration(_Wrapper):
    """The transformers < 5.24 signature."""

    def forward(self, input_ids, attention_mask, position_ids, past_key_values):
        return self.run(input_ids, attention_mask, position_ids, past_key_values)


def test_cache_argument_name():
    model = get_tiny_llm("llama", with_cache=False)["model"]
    assert cache_argument_name(NewGeneration(model)) == "cache"
    assert cache_argument_name(OldGeneration(model)) == "past_key_values"
    assert cache_argument_name(type(model)) == cache_argument_name(model)

    class NoCache(torch.nn.Module):
        def forward(self, x):
            return x

    with pytest.raises(ValueError, match=r"NoCache.forward takes no cache argument"):
        cache_argument_name(NoCache())


def test_output_cache_reads_both_fields():
    class Old:
        past_key_values = "old"

    class New:
        cache = "new"

    assert output_cache(Old()) == "old" and output_cache(New()) == "new"
    assert output_cache(object()) is None


def test_make_llm_inputs_without_model_follows_the_installed_release():
    data = get_tiny_llm("llama", with_cache=False)
    inputs, ds = make_llm_inputs(data["config"], 2, 3, 5)
    name = cache_argument_name(data["model"])
    assert name in inputs and name in ds and len(ds[name]) == 4


def test_both_generations_give_the_same_onnx_inputs():
    data = get_tiny_llm("llama", with_cache=False)
    names = {}
    for cls, arg in [(NewGeneration, "cache"), (OldGeneration, "past_key_values")]:
        model = cls(data["model"]).eval()
        inputs, ds = make_llm_inputs(data["config"], 2, 3, 5, model=model)
        assert arg in inputs and arg in ds
        onx = export_model(model, copy.deepcopy(inputs), ds, "to_onnx")
        names[arg] = [i.name for i in onx.graph.input]
        other, _ = make_llm_inputs(
            data["config"], 3, 4, 7, model=model, generator=torch.Generator().manual_seed(1)
        )
        assert check_onnx(model, onx, other, atol=1e-4) < 1e-4
    assert names["cache"] == names["past_key_values"]
    assert names["cache"][3:] == [
        "past_key_values_key_0",
        "past_key_values_key_1",
        "past_key_values_value_0",
        "past_key_values_value_1",
    ]
