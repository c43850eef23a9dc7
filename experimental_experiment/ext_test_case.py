"""Test helpers: export a model, run it with onnxruntime, compare with eager torch.

The tests and the documentation use this module; the library never imports it
(``run_onnx`` and ``flatten_tensors`` live in :mod:`experimental_experiment.runtime`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
import torch

from .runtime import flatten_tensors, run_onnx, tensor_to_numpy  # noqa: F401  (re-exported)


def assert_close(expected: torch.Tensor, got: np.ndarray, atol: float, rtol: float,
                 msg: str = "") -> None:
    """Exact for integers and bool, within tolerance for floats."""
    exp = tensor_to_numpy(expected)
    got = np.asarray(got)
    assert exp.shape == got.shape, f"{msg} shape {got.shape} != expected {exp.shape}"
    if exp.dtype.kind in "iub":
        assert exp.dtype == got.dtype, f"{msg} dtype {got.dtype} != expected {exp.dtype}"
        np.testing.assert_array_equal(got, exp, err_msg=msg)
        return
    assert str(exp.dtype) == str(got.dtype), f"{msg} dtype {got.dtype} != {exp.dtype}"
    np.testing.assert_allclose(
        got.astype(np.float64), exp.astype(np.float64), atol=atol, rtol=rtol, err_msg=msg
    )


def check_export(model: torch.nn.Module, inputs: Sequence[tuple], *,
                 dynamic_shapes: Any = None, atol: float = 1e-4, rtol: float = 1e-3,
                 use_reference: bool = False, **kwargs) -> onnx.ModelProto:
    """Exports ``model`` with ``inputs[0]`` and checks every input set against eager.

    :param inputs: a list of argument tuples; the first one is used to export, all are
        run (give a second shape when dims are dynamic)
    :return: the exported model
    """
    from .torch_interpreter import to_onnx

    onx = to_onnx(model, inputs[0], dynamic_shapes=dynamic_shapes, **kwargs)
    onnx.checker.check_model(onx, full_check=True)
    for k, args in enumerate(inputs):
        with torch.no_grad():
            expected = flatten_tensors(model(*args))
        got = run_onnx(onx, flatten_tensors(args), use_reference=use_reference)
        assert len(expected) == len(got), f"{len(got)} outputs, expected {len(expected)}"
        for i, (e, r) in enumerate(zip(expected, got)):
            assert_close(e, r, atol, rtol, msg=f"input set {k}, output {i}:")
    return onx


class OpModule(torch.nn.Module):
    """Wraps a function of tensors as a module (arguments are graph inputs)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)
