"""Runs an ONNX model node by node in onnxruntime to find the first node that differs.

Every node becomes a model of one node (its inputs typed from the values computed so
far, the initializers it reads, the names its subgraphs take from the outer scope, the
model's opsets and local functions) run by onnxruntime in the order of the graph;
every intermediate result is kept. Given expected values (onnx's reference evaluator,
eager torch through the debug backend, or any dict), each node's outputs are compared
and the first node over the tolerance, or the first node onnxruntime cannot run, is
reported.

.. code-block:: python

    from experimental_experiment.torch_dynamo.node_by_node import NodeByNodeRunner

    runner = NodeByNodeRunner(onx)
    report = runner.run({"x": x}, expected="reference")
    print(report.first)  # None when every node agrees
    y = report.results[onx.graph.output[0].name]
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ..xbuilder.graph_utils import subgraphs

logger = logging.getLogger(__name__)


@dataclass
class NodeRun:
    """One node run alone: its outputs compared with the expected values.

    :param index: position in the graph
    :param name: node name (or its first output)
    :param op_type: operator
    :param outputs: names of its outputs
    :param origin: the FX node it comes from (``fx_node`` metadata), if any
    :param max_diff: largest absolute difference with the expected outputs
        (None when nothing was expected for them)
    :param ok: within the tolerance (and run without error)
    :param error: onnxruntime's error when the node could not run

    .. code-block:: python

        import numpy as np
        import onnx
        from experimental_experiment.torch_dynamo.node_by_node import NodeByNodeRunner

        runner = NodeByNodeRunner(onnx.load("model.onnx"))
        report = runner.run({"x": np.random.rand(2, 3).astype(np.float32)},
                            expected="reference")
        print(report)  # the number of nodes run, the first discrepancy
        for run in report.nodes:
            print(run.index, run.op_type, run.max_diff, run.ok)
    """

    index: int
    name: str
    op_type: str
    outputs: list[str]
    origin: str = ""
    max_diff: float | None = None
    ok: bool = True
    error: str = ""

    def __str__(self) -> str:
        where = f" (from FX node {self.origin!r})" if self.origin else ""
        what = self.error or f"max abs diff {self.max_diff}"
        return f"node {self.index} {self.op_type}({self.name}){where} -> {self.outputs}: {what}"


@dataclass
class NodeByNodeReport:
    """What :meth:`NodeByNodeRunner.run` returns: every node's run, every result
    (inputs included) and the first node which failed or differs.

    :param nodes: one :class:`NodeRun` per node run, in order
    :param results: every value computed, by ONNX name (the inputs included)
    :param first: the first node which failed or differs, None if there is none

    .. code-block:: python

        import numpy as np
        import onnx
        from experimental_experiment.torch_dynamo.node_by_node import NodeByNodeRunner

        runner = NodeByNodeRunner(onnx.load("model.onnx"))
        report = runner.run({"x": np.random.rand(2, 3).astype(np.float32)},
                            expected="reference")
        print(report)  # the number of nodes run, the first discrepancy
        if report.first is not None:
            print(report.first)  # its op_type, FX origin, max_diff or error
    """

    nodes: list[NodeRun] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    first: NodeRun | None = None

    def __str__(self) -> str:
        compared = sum(n.max_diff is not None for n in self.nodes)
        head = f"{len(self.nodes)} nodes run, {compared} compared"
        return (
            f"{head}, first discrepancy: {self.first}"
            if self.first
            else (f"{head}, no discrepancy")
        )


def outer_names(node: onnx.NodeProto) -> list[str]:
    """Names the subgraphs of ``node`` read from the enclosing scope, in order."""
    found: list[str] = []
    for sub in subgraphs(node):
        defined = {i.name for i in sub.input} | {i.name for i in sub.initializer}
        for n in sub.node:
            for name in [*n.input, *outer_names(n)]:
                if name and name not in defined and name not in found:
                    found.append(name)
            defined.update(o for o in n.output if o)
        for o in sub.output:
            if o.name not in defined and o.name not in found:
                found.append(o.name)
    return found


def _value_info(name: str, value) -> onnx.ValueInfoProto:
    if isinstance(value, list):  # a sequence of tensors
        dtype = value[0].dtype if value else np.float32
        return helper.make_tensor_sequence_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), None
        )
    arr = np.asarray(value)
    return helper.make_tensor_value_info(
        name, helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape)
    )


def max_difference(expected, got, atol: float, rtol: float) -> tuple[float, bool]:
    """(largest absolute difference, within ``atol + rtol * |expected|``); NaN at the
    same place is no difference, a shape mismatch is an infinite one."""
    e, g = np.asarray(expected), np.asarray(got)
    if e.shape != g.shape:
        if e.size != g.size:
            return float("inf"), False
        g = g.reshape(e.shape)
    if e.size == 0:
        return 0.0, True
    if e.dtype.kind not in "biufc" or g.dtype.kind not in "biufc":
        same = bool((e == g).all())
        return (0.0 if same else float("inf")), same
    e64, g64 = e.astype(np.float64), g.astype(np.float64)
    diff = np.abs(e64 - g64)
    diff = np.where(np.isnan(e64) & np.isnan(g64), 0.0, np.nan_to_num(diff, nan=np.inf))
    ok = bool((diff <= atol + rtol * np.abs(np.nan_to_num(e64))).all())
    return float(diff.max()), ok


class NodeByNodeRunner:
    """Runs ``model`` one node at a time in onnxruntime (see the module's docstring).

    :param model: the model
    :param providers: onnxruntime providers, CPU by default

    Sessions are cached by node and input signature: a second call with the same
    shapes creates none.

    .. code-block:: python

        import numpy as np
        import onnx
        from experimental_experiment.torch_dynamo.node_by_node import NodeByNodeRunner

        runner = NodeByNodeRunner(onnx.load("model.onnx"))
        report = runner.run({"x": np.random.rand(2, 3).astype(np.float32)},
                            expected="reference")
        print(report)  # the number of nodes run, the first discrepancy
    """

    def __init__(self, model: onnx.ModelProto, providers: list | None = None):
        self.model = model
        self.providers = providers or ["CPUExecutionProvider"]
        self.initializers = {i.name: i for i in model.graph.initializer}
        self._sessions: dict[tuple, Any] = {}

    def one_node_model(self, index: int, values: dict[str, Any]) -> onnx.ModelProto:
        """The model running node ``index`` alone on ``values``."""
        node = self.model.graph.node[index]
        inputs, inits = [], []
        for name in dict.fromkeys([*(i for i in node.input if i), *outer_names(node)]):
            if name in self.initializers:
                inits.append(self.initializers[name])
            else:
                inputs.append(_value_info(name, values[name]))
        outputs = [onnx.ValueInfoProto(name=o) for o in node.output if o]
        graph = helper.make_graph([node], f"node_{index}", inputs, outputs, inits)
        model = helper.make_model(
            graph, opset_imports=list(self.model.opset_import), functions=list(self.model.functions)
        )
        model.ir_version = self.model.ir_version
        return model

    def _session(self, index: int, values: dict[str, Any]):
        import onnxruntime

        node = self.model.graph.node[index]
        names = [
            n
            for n in dict.fromkeys([*node.input, *outer_names(node)])
            if n and n not in self.initializers
        ]
        key = (
            index,
            *(
                (np.asarray(values[n]).dtype.str, np.shape(values[n]))
                if not isinstance(values[n], list)
                else ("seq", len(values[n]))
                for n in names
            ),
        )
        if key not in self._sessions:
            model = self.one_node_model(index, values)
            self._sessions[key] = (
                onnxruntime.InferenceSession(model.SerializeToString(), providers=self.providers),
                names,
            )
        return self._sessions[key]

    def run(
        self,
        feeds: dict[str, Any],
        expected: dict[str, Any] | str | None = None,
        *,
        atol: float = 1e-4,
        rtol: float = 1e-3,
        stop_at_first: bool = False,
    ) -> NodeByNodeReport:
        """Runs every node in order.

        :param feeds: the model's inputs
        :param expected: values to compare with, by ONNX name, or ``"reference"`` to
            compute them with :class:`onnx.reference.ReferenceEvaluator`
        :param atol: absolute tolerance
        :param rtol: relative tolerance
        :param stop_at_first: stops after the first node which fails or differs
        :return: a :class:`NodeByNodeReport`
        """
        if isinstance(expected, str):
            expected = self._reference(feeds) if expected == "reference" else None
        report = NodeByNodeReport(results=dict(feeds))
        for index, node in enumerate(self.model.graph.node):
            run = self._run_node(index, node, report.results, expected or {}, atol, rtol)
            report.nodes.append(run)
            if not run.ok and report.first is None:
                report.first = run
                logger.info("[node_by_node] %s", run)
                if stop_at_first or run.error:
                    break
        return report

    def _run_node(self, index, node, values, expected, atol, rtol) -> NodeRun:
        origin = next((p.value for p in node.metadata_props if p.key == "fx_node"), "")
        run = NodeRun(
            index, node.name or node.output[0], node.op_type, [o for o in node.output if o], origin
        )
        try:
            sess, names = self._session(index, values)
            got = sess.run(None, {n: values[n] for n in names})
        except Exception as e:  # the runtime's error is the answer
            run.ok, run.error = False, f"{type(e).__name__}: {e}"
            return run
        for name, value in zip(run.outputs, got):
            values[name] = value
            if name in expected and expected[name] is not None:
                diff, ok = max_difference(expected[name], value, atol, rtol)
                run.max_diff = diff if run.max_diff is None else max(run.max_diff, diff)
                run.ok = run.ok and ok
        return run

    def _reference(self, feeds: dict[str, Any]) -> dict[str, Any]:
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(self.model).run(None, feeds, intermediate=True)
