"""Constructs torch.export captures, through :func:`to_onnx` and
``torch.onnx.export(dynamo=True)`` in one run: star arguments, ``**kwargs``, complex
rotary embeddings, complex inputs and outputs, ``torch.vmap``, ``flex_attention`` with a
``score_mod``, custom operators without a converter (mutating or not).

.. code-block:: bash

    python -m experimental_experiment.bench.constructs --output _doc/bench/constructs.csv

Each model is exported with an example of size 3 on its dynamic dimension and run with
onnxruntime on sizes 3 and 5, compared with eager (atol 1e-4). Complex inputs are fed
as real pairs when the ONNX input is real (``torch.view_as_real``), complex outputs
compared as real pairs. ``status``: ``pass``, ``export-fail``, ``run-fail`` or
``mismatch``; ``detail`` gives the first line of the error.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import sys

import numpy as np
import torch

from .report_format import head_line

COLUMNS = ["construct", "exporter", "status", "detail"]
DYN = torch.export.Dim.DYNAMIC


@torch.library.custom_op("h16bench::gelu_like", mutates_args=())
def _gelu_like(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * torch.sigmoid(alpha * x)


@_gelu_like.register_fake
def _(x, alpha):
    return torch.empty_like(x)


@torch.library.custom_op("h16bench::add_scaled_", mutates_args=("x",))
def _add_scaled_(x: torch.Tensor, y: torch.Tensor, alpha: float) -> None:
    x.add_(y * alpha)


class StarArgs(torch.nn.Module):
    def forward(self, *xs):
        return xs[0] + xs[1] * xs[2]


class Kwargs(torch.nn.Module):
    def forward(self, x, **kwargs):
        return x * kwargs["scale"] + kwargs["bias"]


class ComplexRotary(torch.nn.Module):
    def forward(self, xq, freqs):
        freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        return torch.view_as_real(xq_ * freqs_cis).flatten(3)


class ComplexIO(torch.nn.Module):
    def forward(self, z, w):
        return z * w + torch.conj(z), torch.abs(z)


class VmapClosure(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4))

    def forward(self, x, y):
        return torch.vmap(lambda a, b: (a * self.w).sum() + b)(x, y)


class VmapNested(torch.nn.Module):
    def forward(self, x, y):
        inner = torch.vmap(lambda a, b: ((a - b) ** 2).sum(), in_dims=(None, 0))
        return torch.vmap(inner, in_dims=(0, None))(x, y)


class VmapInOutDims(torch.nn.Module):
    def forward(self, x, y):
        return torch.vmap(lambda a, b: a @ b, in_dims=(1, None), out_dims=1)(x, y)


class CustomOp(torch.nn.Module):
    def forward(self, x):
        return _gelu_like(x, 1.702) + 1


class MutatingCustomOp(torch.nn.Module):
    def forward(self, x, y):
        x = x.clone()
        _add_scaled_(x, y, 0.5)
        return x * 2


class FlexAttention(torch.nn.Module):
    "flex_attention with a causal, distance-biased score_mod (no block mask)."

    def forward(self, q, k, v):
        from torch.nn.attention.flex_attention import flex_attention

        def causal_bias(score, b, h, q_idx, kv_idx):
            return torch.where(q_idx >= kv_idx, score + (kv_idx - q_idx) * 0.1, -float("inf"))

        return flex_attention(q, k, v, score_mod=causal_bias)


def _c(*shape):
    return torch.randn(*shape, dtype=torch.complex64)


# name -> (model class, inputs (args, kwargs) for a size n, dynamic_shapes)
CASES = {
    "star args": (
        StarArgs,
        lambda n: (tuple(torch.randn(n, 4) for _ in range(3)), {}),
        {"xs": tuple({0: DYN} for _ in range(3))},
    ),
    "keyword args (kwargs)": (
        Kwargs,
        lambda n: ((torch.randn(n, 4),), {"scale": torch.randn(n, 4), "bias": torch.randn(4)}),
        {"x": {0: DYN}, "kwargs": {"scale": {0: DYN}, "bias": None}},
    ),
    "complex rotary": (
        ComplexRotary,
        lambda n: ((torch.randn(2, n, 4, 8), torch.randn(n, 1, 4)), {}),
        ({1: DYN}, {0: DYN}),
    ),
    "complex inputs/outputs": (
        ComplexIO,
        lambda n: ((_c(n, 3), _c(n, 3)), {}),
        ({0: DYN}, {0: DYN}),
    ),
    "vmap closure": (
        VmapClosure,
        lambda n: ((torch.randn(n, 4), torch.randn(n)), {}),
        ({0: DYN}, {0: DYN}),
    ),
    "vmap nested": (
        VmapNested,
        lambda n: ((torch.randn(n, 4), torch.randn(n + 1, 4)), {}),
        ({0: DYN}, {0: DYN}),
    ),
    "vmap in_dims/out_dims": (
        VmapInOutDims,
        lambda n: ((torch.randn(3, n, 4), torch.randn(4, 5)), {}),
        ({1: DYN}, None),
    ),
    "flex_attention (score_mod)": (
        FlexAttention,
        lambda n: (tuple(torch.randn(n, 2, 64, 16) for _ in range(3)), {}),
        tuple({0: DYN} for _ in range(3)),
    ),
    "custom op (traceable)": (CustomOp, lambda n: ((torch.randn(n, 4),), {}), ({0: DYN},)),
    "mutating custom op": (
        MutatingCustomOp,
        lambda n: ((torch.randn(n, 4), torch.randn(n, 4)), {}),
        ({0: DYN}, {0: DYN}),
    ),
}


def export(exporter: str, model, args, kwargs, ds):
    if exporter == "to_onnx":
        from ..torch_interpreter import to_onnx

        return to_onnx(model, args, kwargs, dynamic_shapes=ds)
    prog = torch.onnx.export(
        model, args, kwargs=kwargs, dynamic_shapes=ds, dynamo=True, verbose=False, report=False
    )
    return prog.model_proto


def _feeds(onx, args, kwargs) -> dict:
    leaves = [
        t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)
    ]
    feeds = {}
    for info, t in zip(onx.graph.input, leaves):
        if t.is_complex() and info.type.tensor_type.elem_type in (1, 11):
            t = torch.view_as_real(t)
        feeds[info.name] = t.detach().numpy()
    return feeds


def _compare(expected, got) -> float:
    """Largest absolute difference, complex values compared as real pairs."""
    worst = 0.0
    for e, g in zip(expected, got):
        e = torch.view_as_real(e) if e.is_complex() else e
        g = np.asarray(g)
        g = np.stack([g.real, g.imag], axis=-1) if np.iscomplexobj(g) else g
        if tuple(e.shape) != g.shape:
            return float("inf")
        worst = max(worst, float(np.abs(e.detach().numpy() - g).max(initial=0)))
    return worst


def run_case(name: str, exporter: str) -> dict:
    import onnxruntime

    cls, make, ds = CASES[name]
    row = {"construct": name, "exporter": exporter}
    model = cls().eval()
    try:
        onx = export(exporter, model, *make(3), ds)
    except Exception as e:
        return {**row, "status": "export-fail", "detail": _first_line(e)}
    try:
        sess = onnxruntime.InferenceSession(
            onx.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        for n in (3, 5):
            args, kwargs = make(n)
            feeds = _feeds(onx, args, kwargs)
            with torch.no_grad():
                expected = torch.utils._pytree.tree_leaves(model(*args, **kwargs))
            got = sess.run(None, feeds)
            err = _compare(expected, got[: len(expected)])
            if not err <= 1e-4:
                return {**row, "status": "mismatch", "detail": f"size {n}: max err {err:.3g}"}
    except Exception as e:
        return {**row, "status": "run-fail", "detail": _first_line(e)}
    return {**row, "status": "pass", "detail": ""}


def _first_line(e: Exception) -> str:
    """The exception's first line, then the first line of its innermost cause (each
    with the next line when the first announces it, never cut before 600 characters)."""

    def first(x):
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(x)).strip()
        return f"{type(x).__name__}: {head_line(text, 600)}"

    cause = e
    while cause.__cause__ is not None:
        cause = cause.__cause__
    return first(e) + ("" if cause is e else f" <- {first(cause)}")


def format_table(rows: list[dict]) -> str:
    names = list(dict.fromkeys(r["construct"] for r in rows))
    by = {(r["construct"], r["exporter"]): r for r in rows}
    lines = ["| construct | to_onnx | torch.onnx.export(dynamo=True) |", "| --- | --- | --- |"]
    for n in names:
        cells = []
        for exp in ("to_onnx", "torch.onnx"):
            r = by.get((n, exp))
            cells.append(
                "" if r is None else r["status"] + (f" ({r['detail']})" if r["detail"] else "")
            )
        lines.append(f"| {n} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def write_csv(rows: list[dict], filename: str, columns: list[str] = COLUMNS) -> None:
    """Written to a temporary file then renamed."""
    from ..xbuilder.model_container import AtomicFiles

    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    # the documentation renders the cells as reStructuredText: details are literals
    writer.writerows(
        {**r, "detail": f"``{r['detail'].replace('`', chr(39))}``" if r["detail"] else ""}
        for r in rows
    )
    filename = os.path.abspath(filename)
    with AtomicFiles(os.path.dirname(filename)) as files:
        files.open(filename).write(text.getvalue().encode("utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default="", help="csv file to write")
    parser.add_argument("--exporter", default="to_onnx,torch.onnx")
    ns = parser.parse_args(argv)
    rows = [run_case(name, exp) for name in CASES for exp in ns.exporter.split(",")]
    if ns.output:
        write_csv(rows, ns.output)
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
