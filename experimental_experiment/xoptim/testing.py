"""Helpers to test patterns: small models, before/after comparison with onnxruntime."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .api import optimize
from .report import OptimizationReport


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[tuple],
    outputs: Sequence[tuple],
    initializers: dict[str, np.ndarray] | None = None,
    *,
    opset: int = 18,
    extra_opsets: dict[str, int] | None = None,
) -> onnx.ModelProto:
    """A model from nodes; inputs and outputs are ``(name, elem_type, shape)``."""
    graph = helper.make_graph(
        list(nodes),
        "test",
        [helper.make_tensor_value_info(*i) for i in inputs],
        [helper.make_tensor_value_info(*o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), name=k) for k, v in (initializers or {}).items()],
    )
    opsets = [helper.make_opsetid("", opset)] + [
        helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()
    ]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10 if opset < 23 else 11
    return model


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Runs a model with onnxruntime on CPU."""
    import onnxruntime

    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return sess.run(None, feeds)


def op_types(model: onnx.ModelProto) -> list[str]:
    """Op types of the main graph's nodes, in order."""
    return [n.op_type for n in model.graph.node]


#: contrib operators onnxruntime registers in the default domain (unknown to onnx)
ORT_DEFAULT_DOMAIN_OPS = frozenset({"SimplifiedLayerNormalization"})


def check_pattern(
    model: onnx.ModelProto,
    feeds: Sequence[dict[str, np.ndarray]],
    *,
    patterns: str = "default",
    atol: float = 1e-5,
    rtol: float = 1e-5,
    run: Callable[[onnx.ModelProto, dict[str, np.ndarray]], list[np.ndarray]] = run_ort,
    full_check: bool = True,
) -> tuple[onnx.ModelProto, OptimizationReport]:
    """Optimizes ``model``, checks it, compares its results with the original model's
    on every set of ``feeds``; returns ``(optimized model, report)``.
    The checker is skipped when the optimized model uses a contrib operator onnxruntime
    registers in the default domain.

    :param model: the model to optimize
    :param feeds: sets of inputs, ``[{name: array}]``, the results are compared on each
    :param patterns: pattern sets, see :func:`get_pattern_list
        <experimental_experiment.xoptim.get_pattern_list>`, or a list of patterns
    :param atol: absolute tolerance
    :param rtol: relative tolerance
    :param run: ``run(model, feeds) -> list of arrays``, onnxruntime on CPU by default
    :param full_check: given to ``onnx.checker.check_model``
    :return: ``(optimized model, report)``, an assertion fails if the results differ

    .. code-block:: python

        import numpy as np
        import onnx
        from experimental_experiment.xoptim.testing import applied, check_pattern

        model = onnx.load("model.onnx")
        x = np.random.rand(2, 3).astype(np.float32)
        opt, report = check_pattern(model, [{"x": x}], patterns="default")
        print(applied(report, "TransposeTransposeToTranspose"))
    """
    res = optimize(model, patterns=patterns)
    opt, report = res.model, res.report
    if not any(n.op_type in ORT_DEFAULT_DOMAIN_OPS and n.domain == "" for n in opt.graph.node):
        onnx.checker.check_model(opt, full_check=full_check)
    assert [o.name for o in opt.graph.output] == [o.name for o in model.graph.output]
    for feed in feeds:
        expected, got = run(model, feed), run(opt, feed)
        assert len(expected) == len(got)
        for e, r in zip(expected, got):
            assert e.dtype == r.dtype and e.shape == r.shape, (e.dtype, r.dtype, e.shape, r.shape)
            np.testing.assert_allclose(
                r.astype(np.float64), e.astype(np.float64), atol=atol, rtol=rtol
            )
    return opt, report


def applied(report: OptimizationReport, name: str) -> int:
    """Number of rewrites done by ``name``."""
    return report.applied(name)


def refused(report: OptimizationReport, name: str) -> list[str]:
    """Reasons ``name`` gave for its refusals."""
    return [r for e in report if e.name == name for r in e.refusals]
