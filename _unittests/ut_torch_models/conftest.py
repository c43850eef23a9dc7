"""Fixtures of the multimodal tests: the tiny model of a type exported part by part
once per test process, and the check of its 8 greedy tokens against eager
``generate``."""

import pytest

from experimental_experiment.torch_models.multimodal.cases import build_model, build_multimodal
from experimental_experiment.torch_models.multimodal.export import export_parts
from experimental_experiment.torch_models.multimodal.run import check_generation

_EXPORTED: dict = {}


def exported_parts(model_type: str):
    """``(model, parts)`` of ``model_type``, built and exported once per process."""
    if model_type not in _EXPORTED:
        model = build_model(model_type)
        _EXPORTED[model_type] = model, export_parts(build_multimodal(model_type, model=model))
    return _EXPORTED[model_type]


@pytest.fixture
def eager_tokens_check():
    """``check(model_type, prompt, atol=1e-3)``: the ONNX parts chained in onnxruntime
    generate the 8 tokens of eager ``generate`` on that prompt, logits within ``atol``;
    returns ``(model, parts)``."""

    def check(model_type: str, prompt, atol: float = 1e-3):
        model, parts = exported_parts(model_type)
        case = build_multimodal(model_type, prompt=prompt, model=model, seed=0)
        report = check_generation(case, parts, steps=8)
        assert report["max_abs_diff"] < atol, report["max_abs_diff"]
        assert report["equal_tokens"] == 8, (report["eager_tokens"], report["onnx_tokens"])
        return model, parts

    return check
