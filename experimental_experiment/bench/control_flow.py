"""Nodes inside control-flow bodies and local functions, before and after optimization,
with :func:`to_onnx` and ``torch.onnx.export(dynamo=True)``.

.. code-block:: bash

    python -m experimental_experiment.bench.control_flow --output _doc/bench/control_flow.csv

Every body holds something the optimizer removes (``x * 1.0``, two transposes
cancelling, ``Squeeze(Unsqueeze(x))``) or folds (``torch.arange(k) * 2``).
``body_nodes_raw`` counts the nodes inside If/Loop/Scan bodies (nested ones included)
and local functions without optimization (``to_onnx`` with
``OptimizationOptions(subgraphs=False, functions=False)``, ``torch.onnx.export`` with
``optimize=False``), ``body_nodes`` with the default optimization; ``main_nodes`` is
the number of nodes of the main graph of the optimized model. Each model is exported
with an example of size 3 on its dynamic dimension and run with onnxruntime on sizes
3 and 5, compared with eager (atol 1e-4).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import onnx
import torch
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

from ..xbuilder.graph_utils import subgraphs
from ..xoptim.subgraphs import count_nodes
from . import constructs
from .constructs import _first_line

COLUMNS = [
    "construct",
    "exporter",
    "status",
    "main_nodes",
    "body_nodes_raw",
    "body_nodes",
    "detail",
]
DYN = torch.export.Dim.DYNAMIC


class CondNested(torch.nn.Module):
    def forward(self, x):
        def inner_true(x):
            return x.transpose(0, 1).transpose(0, 1) * 1.0 + torch.arange(3) * 2

        def inner_false(x):
            return x.unsqueeze(0).squeeze(0) - 1

        def true_fn(x):
            return torch.cond(x.mean() > 0.5, inner_true, inner_false, (x,)) * 3

        return torch.cond(x.sum() > 0, true_fn, lambda x: x.abs(), (x,))


class ScanBody(torch.nn.Module):
    def forward(self, x):
        def body(carry, xi):
            carry = carry + xi.unsqueeze(0).squeeze(0) * 1.0 + torch.arange(3) * 2
            return carry, carry * 2

        return scan(body, torch.zeros_like(x[0]), x)


class WhileBody(torch.nn.Module):
    def forward(self, x):
        def cond_fn(i, acc):
            return i < x.shape[0]

        def body_fn(i, acc):
            row = x.index_select(0, i.reshape(1)).squeeze(0)
            return i + 1, acc.transpose(0, 0) * 1.0 * 0.5 + row

        return while_loop(cond_fn, body_fn, (torch.tensor(0), torch.zeros_like(x[0])))


class MapBody(torch.nn.Module):
    def forward(self, x, y):
        return torch._higher_order_ops.map(
            lambda xi, y: (xi * 1.0).unsqueeze(0).squeeze(0) * y + xi.sum(), x, y
        )


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.linear(x) * 1.0
        return y.transpose(0, 1).transpose(0, 1) + torch.arange(3, dtype=torch.float32) * 2


class Functions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Block(), Block()

    def forward(self, x):
        return self.b(self.a(x))


# name -> (model class, inputs for a size n, dynamic_shapes, to_onnx keywords)
CASES = {
    "torch.cond nested": (CondNested, lambda n: (torch.rand(n, 3) + 0.6,), ({0: DYN},), {}),
    "scan": (ScanBody, lambda n: (torch.randn(n, 3),), ({0: DYN},), {}),
    "while_loop (outer names)": (WhileBody, lambda n: (torch.randn(n, 3),), ({0: DYN},), {}),
    "map": (MapBody, lambda n: (torch.randn(n, 3), torch.randn(3)), ({0: DYN}, None), {}),
    "local functions": (
        Functions,
        lambda n: (torch.randn(n, 3),),
        ({0: DYN},),
        {"export_modules_as_functions": {Block}},
    ),
}


def body_nodes(onx: onnx.ModelProto) -> int:
    """Nodes inside subgraphs (nested ones included) and local functions."""
    inner = sum(count_nodes(sub) for n in onx.graph.node for sub in subgraphs(n))
    return inner + sum(count_nodes(f) for f in onx.functions)


def export(exporter: str, model, args, ds, kwargs: dict, *, optimize: bool):
    if exporter == "to_onnx":
        from ..torch_interpreter import to_onnx
        from ..xbuilder import OptimizationOptions

        options = None if optimize else OptimizationOptions(subgraphs=False, functions=False)
        return to_onnx(model, args, dynamic_shapes=ds, options=options, **kwargs)
    prog = torch.onnx.export(
        model, args, dynamic_shapes=ds, dynamo=True, verbose=False, report=False, optimize=optimize
    )
    return prog.model_proto


def _check(onx, model, make) -> str:
    import onnxruntime

    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (3, 5):
        args = make(n)
        with torch.no_grad():
            expected = torch.utils._pytree.tree_leaves(model(*args))
        feeds = {i.name: a.numpy() for i, a in zip(onx.graph.input, args)}
        got = sess.run(None, feeds)
        err = max(float(np.abs(e.numpy() - g).max(initial=0)) for e, g in zip(expected, got))
        if not err <= 1e-4:
            return f"size {n}: max err {err:.3g}"
    return ""


def run_case(name: str, exporter: str) -> dict:
    cls, make, ds, kwargs = CASES[name]
    row = {
        "construct": name,
        "exporter": exporter,
        "main_nodes": "",
        "body_nodes_raw": "",
        "body_nodes": "",
    }
    model = cls().eval()
    if kwargs and exporter != "to_onnx":
        return {
            **row,
            "status": "n/a",
            "detail": "torch.onnx.export(dynamo=True) exports no module as a function",
        }
    try:
        raw = export(exporter, model, make(3), ds, kwargs, optimize=False)
        onx = export(exporter, model, make(3), ds, kwargs, optimize=True)
    except Exception as e:
        return {**row, "status": "export-fail", "detail": _first_line(e)}
    row.update(
        main_nodes=len(onx.graph.node), body_nodes_raw=body_nodes(raw), body_nodes=body_nodes(onx)
    )
    try:
        detail = _check(onx, model, make)
    except Exception as e:
        return {**row, "status": "run-fail", "detail": _first_line(e)}
    return {**row, "status": "mismatch" if detail else "pass", "detail": detail}


def write_csv(rows: list[dict], filename: str) -> None:
    """Written atomically, as the construct table (:func:`constructs.write_csv`)."""
    constructs.write_csv(rows, filename, COLUMNS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default="", help="csv file to write")
    parser.add_argument("--exporter", default="to_onnx,torch.onnx")
    ns = parser.parse_args(argv)
    rows = [run_case(name, exp) for name in CASES for exp in ns.exporter.split(",")]
    if ns.output:
        write_csv(rows, ns.output)
    for r in rows:
        print(" | ".join(str(r[c]) for c in COLUMNS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
