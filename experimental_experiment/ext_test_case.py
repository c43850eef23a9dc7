"""Test helpers: export a model, run it with onnxruntime, compare with eager torch.

The tests and the documentation use this module; the library never imports it
(``run_onnx`` and ``flatten_tensors`` live in :mod:`experimental_experiment.runtime`).
"""

from __future__ import annotations

import io
from typing import Any, Sequence

import numpy as np
import onnx
import torch

from .runtime import flatten_tensors, run_onnx, tensor_to_numpy  # noqa: F401  (re-exported)


def assert_close(
    expected: torch.Tensor, got: np.ndarray, atol: float, rtol: float, msg: str = ""
) -> None:
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


def check_export(
    model: torch.nn.Module,
    inputs: Sequence[tuple],
    *,
    dynamic_shapes: Any = None,
    atol: float = 1e-4,
    rtol: float = 1e-3,
    use_reference: bool = False,
    **kwargs,
) -> onnx.ModelProto:
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


def check_token_model(
    model: torch.nn.Module,
    vocab: int,
    *,
    patched=None,
    output=lambda out: out.logits,
    shapes=((2, 3), (3, 6)),
) -> onnx.ModelProto:
    """Exports a model taking token ids under ``bypass_export_some_errors`` with a dynamic
    batch and sequence, checks both stay dynamic, then compares onnxruntime with the
    unpatched model on every shape of ``shapes``. ``patched()`` runs inside the patches
    (an assertion that the expected patch is active)."""
    import onnxruntime

    from .torch_interpreter import to_onnx
    from .torch_interpreter.onnx_export_errors import bypass_export_some_errors

    ids = torch.randint(0, vocab, shapes[0])
    with bypass_export_some_errors(patch_transformers=True):
        if patched is not None:
            patched()
        onx = to_onnx(model, (ids,), dynamic_shapes=({0: "batch", 1: "seq"},))
    dims = [d.dim_param for d in onx.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "seq"], f"dimensions {dims}"
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in shapes:
        ids = torch.randint(0, vocab, shape)
        with torch.no_grad():
            expected = output(model(ids))
        got = sess.run(None, {sess.get_inputs()[0].name: ids.numpy()})[0]
        assert_close(expected, got, atol=1e-4, rtol=1e-4, msg=f"shape {shape}:")
    return onx


class OpModule(torch.nn.Module):
    """Wraps a function of tensors as a module (arguments are graph inputs)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


class FakeTerminal(io.StringIO):
    """A text stream which says it is a terminal: progress bars draw on it."""

    def isatty(self) -> bool:
        return True


def fake_terminal(monkeypatch) -> FakeTerminal:
    """Replaces stderr by a ``FakeTerminal`` for the rest of the test and makes
    the package's progress bars draw every update (tqdm redraws at most ten times a
    second otherwise). Call it in the test itself: pytest sets its own stderr again
    between a fixture and the test."""
    from . import progress

    tty = FakeTerminal()
    monkeypatch.setattr(progress.sys, "stderr", tty)
    make = progress._tqdm
    monkeypatch.setattr(
        progress, "_tqdm", lambda **kwargs: make(mininterval=0, miniters=1, **kwargs)
    )
    return tty
