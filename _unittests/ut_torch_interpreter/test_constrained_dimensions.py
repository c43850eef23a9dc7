"""A dimension declared dynamic that the model's code bounds during the capture: the
export warns, names the input, the range and the user's line; the ONNX model is right
inside the range and wrong outside, which is what the warning says."""

import os
import pathlib
import warnings

import numpy as np
import onnxruntime
import pytest
import torch

import experimental_experiment
from experimental_experiment.errors import ConstrainedDimensionWarning
from experimental_experiment.torch_interpreter import to_onnx


class BranchOnLength(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] < 4:  # the capture takes this branch and bounds the length
            return x * 2
        return x + 1


#: the line of ``if x.shape[1] < 4`` in this file
_BRANCH_LINE = next(
    i + 1
    for i, line in enumerate(pathlib.Path(__file__).read_text(encoding="utf-8").splitlines())
    if "x.shape[1] < 4:" in line
)


class NoBranch(torch.nn.Module):
    def forward(self, x):
        return x * 2


def _export(model, x):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch", 1: "seq"},))
    return onx, [w for w in caught if issubclass(w.category, ConstrainedDimensionWarning)]


def test_bounded_dimension_warns_with_range_and_line():
    model = BranchOnLength()
    onx, bounded = _export(model, torch.randn(2, 3))
    assert len(bounded) == 1
    text = str(bounded[0].message)
    assert "x.shape[1]" in text and "[0, 3]" in text
    assert f"{__file__}:{_BRANCH_LINE}" in text  # the line of the branch
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    inside, outside = torch.randn(3, 2), torch.randn(3, 6)
    np.testing.assert_allclose(sess.run(None, {"x": inside.numpy()})[0], model(inside).numpy())
    # outside the range the ONNX model keeps the branch taken at capture time
    assert not np.allclose(sess.run(None, {"x": outside.numpy()})[0], model(outside).numpy())


def test_unbounded_dimension_does_not_warn():
    onx, bounded = _export(NoBranch(), torch.randn(2, 3))
    assert bounded == []
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in [(2, 3), (5, 9)]:
        x = torch.randn(*shape)
        np.testing.assert_allclose(sess.run(None, {"x": x.numpy()})[0], (x * 2).numpy())


def test_torch_guard_locations_point_at_the_user_line():
    """While the recorder wraps torch's location function, torch's own guard locations
    (its logs) still name the user's line, not the wrapper."""
    from experimental_experiment.torch_interpreter.capture.shape_guards import record_shape_guards

    dyn = torch.export.Dim.DYNAMIC
    with record_shape_guards() as recorder:
        torch.export.export(
            BranchOnLength(), (torch.randn(2, 3),), dynamic_shapes=({0: dyn, 1: dyn},), strict=False
        )
    texts = [str(g.sloc) for env in recorder.envs for g in env.guards]
    assert any(f"{__file__.split('/')[-1]}:{_BRANCH_LINE}" in t for t in texts), texts
    assert not any("shape_guards.py" in t for t in texts), texts


class BlockBranch(torch.nn.Module):
    """Branches on whether a full block of 4 exists: torch keeps the range of the size
    open, only a guard ``Min(s, 4 * (s // 4)) <= 0`` says the branch."""

    def forward(self, x):
        n = x.shape[1]
        blocks = min(n, 4 * (n // 4))
        if blocks <= 0:
            return x * 2
        return x[:, :blocks].sum(dim=1, keepdim=True) + x


def test_guard_only_bound_is_found_by_probing():
    onx, bounded = _export(BlockBranch(), torch.randn(2, 3))
    assert len(bounded) == 1, [str(w.message) for w in bounded]
    text = str(bounded[0].message)
    assert "x.shape[1]" in text and "[0, 3]" in text, text


class AtLeastFour(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] >= 4:
            return x * 2
        return x + 1


def test_lower_bound_alone_is_warned():
    """Below 4 the model takes the other branch: the ONNX model is wrong there, which
    the warning must say (it was only in the report before)."""
    from experimental_experiment.torch_interpreter.export_report import ExportReport

    report = ExportReport()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        to_onnx(
            AtLeastFour(), (torch.randn(2, 6),), dynamic_shapes=({0: "b", 1: "n"},), report=report
        )
    texts = [str(w.message) for w in caught if issubclass(w.category, ConstrainedDimensionWarning)]
    assert len(texts) == 1 and "x.shape[1]" in texts[0] and "[4, inf]" in texts[0], texts
    assert [(r.dimension, r.min, r.max) for r in report.dimensions if r.kind == "constrained"] == [
        ("x.shape[1]", 4, None)
    ]


@pytest.mark.usefixtures("quiet_transformers")
def test_guard_in_a_transformers_model_names_the_modeling_line():
    """A size specialized by transformers' code (``int(patch_height * patch_size)`` in
    Depth Anything's head, exported without the patches) is reported at that line of
    the modeling file, not at a frame of this package (the wrapper of ``to_onnx``,
    ``verbosity.py``) nor of torch."""
    from transformers import DepthAnythingConfig, DepthAnythingForDepthEstimation
    from transformers.models.depth_anything import modeling_depth_anything

    from experimental_experiment.report import ExportReport

    torch.manual_seed(0)
    backbone = dict(
        model_type="dinov2",
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        image_size=32,
        patch_size=8,
        out_indices=[1, 2, 3, 4],
        reshape_hidden_states=False,
    )
    config = DepthAnythingConfig(
        backbone_config=backbone,
        patch_size=8,
        reassemble_hidden_size=32,
        neck_hidden_sizes=[16, 32, 48, 64],
        fusion_hidden_size=32,
        head_hidden_size=16,
    )
    model = DepthAnythingForDepthEstimation(config).eval()
    report = ExportReport()
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        to_onnx(
            model,
            (torch.randn(2, 3, 32, 48),),
            dynamic_shapes=({0: "batch", 2: "height", 3: "width"},),
            report=report,
        )
    texts = [str(w.message) for w in caught if issubclass(w.category, ConstrainedDimensionWarning)]
    model_file = os.path.abspath(modeling_depth_anything.__file__)
    assert any(f"{model_file}:" in t and "int(patch_height" in t for t in texts), texts
    package = os.path.dirname(os.path.abspath(experimental_experiment.__file__))
    located = [d.location for d in report.dimensions if d.location is not None]
    assert located, report.dimensions
    for loc in located:
        assert not loc.file.startswith((package + os.sep, os.path.dirname(torch.__file__))), loc
    assert any(loc.file == model_file and "int(patch_height" in loc.code for loc in located)


def test_frames_of_this_package_torch_and_transformers_utilities_are_not_the_user_line():
    import transformers

    from experimental_experiment import verbosity
    from experimental_experiment.torch_interpreter.capture.shape_guards import (
        _excluded_dirs,
        _is_user,
    )

    excluded = _excluded_dirs()
    root = os.path.dirname(transformers.__file__)
    assert not _is_user(verbosity.__file__, excluded)
    assert not _is_user(torch.nn.functional.__file__, excluded)
    assert not _is_user(os.path.join(root, "masking_utils.py"), excluded)
    assert _is_user(os.path.join(root, "models", "bert", "modeling_bert.py"), excluded)
    assert _is_user(__file__, excluded)
