"""Builds the table of page summary_exported_program.rst (run at build time)."""

import contextlib
import io
import logging
import re
import warnings

import numpy as np
import onnxruntime
import torch

from experimental_experiment.torch_interpreter import to_onnx

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)  # torch logs the failing graphs, the table is enough
DYN = torch.export.Dim.DYNAMIC


class AddOne(torch.nn.Module):
    def forward(self, x):
        return x + 1


class WithInt(torch.nn.Module):
    def forward(self, x, n: int):
        return x * n


class WithFloat(torch.nn.Module):
    def forward(self, x, alpha: float):
        return x * alpha


class WithList(torch.nn.Module):
    def forward(self, xs: list):
        return xs[0] + xs[1]


class WithDict(torch.nn.Module):
    def forward(self, d: dict):
        return d["a"] * d["b"]


class WithNone(torch.nn.Module):
    def forward(self, x, y=None):
        return x if y is None else x + y


class InplaceSetItem(torch.nn.Module):
    def forward(self, x, update, index):
        x = x.clone()
        x[..., index] = update
        return x


class InplaceAdd(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        y.add_(1)
        return y


class ShapeTest(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 1:
            return x * 2
        return x


class ValueTest(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


class Cond(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: x / 2, [x])


class PythonLoop(torch.nn.Module):
    def forward(self, x):
        y = x
        for _ in range(3):
            y = y * x
        return y


class LoopOnShape(torch.nn.Module):
    def forward(self, x):
        return torch.stack([x[i] * i for i in range(x.shape[0])])


class NonZero(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x > 0)


class Item(torch.nn.Module):
    def forward(self, x, n):
        return x[: n.item()]


class Int64(torch.nn.Module):
    def forward(self, x):
        return (x * 2).sum(dim=1)


class Float16(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


class BoolMask(torch.nn.Module):
    def forward(self, x, mask):
        return torch.where(mask, x, torch.zeros_like(x))


class MaskedFill(torch.nn.Module):
    def forward(self, x):
        x = x.clone()
        x[x < 0] = 0
        return x


class WithListOfInts(torch.nn.Module):
    def forward(self, x, shape: list):
        return x.reshape(shape)


def _scan_add(carry, y):
    next_carry = carry + y
    return [next_carry, next_carry]


class Scan(torch.nn.Module):
    def forward(self, x):
        init = torch.zeros_like(x[0])
        carry, _ = torch.ops.higher_order.scan(_scan_add, [init], [x], additional_inputs=[])
        return carry


class DimZero(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y], dim=0)


t = lambda *shape: torch.randn(*shape)
CASES = [
    # name, model, inputs, second inputs, dynamic shapes (None for static)
    ("tensor", AddOne(), (t(2, 3),), (t(5, 3),), ({0: DYN},)),
    ("int", WithInt(), (t(2, 3), 3), (t(5, 3), 3), ({0: DYN}, None)),
    ("float", WithFloat(), (t(2, 3), 0.5), (t(5, 3), 0.5), ({0: DYN}, None)),
    ("list", WithList(), ([t(2, 3), t(2, 3)],), ([t(5, 3), t(5, 3)],), ([{0: DYN}, {0: DYN}],)),
    (
        "dict",
        WithDict(),
        ({"a": t(2, 3), "b": t(2, 3)},),
        ({"a": t(5, 3), "b": t(5, 3)},),
        ({"a": {0: DYN}, "b": {0: DYN}},),
    ),
    ("list of ints", WithListOfInts(), (t(2, 3), [3, 2]), (t(2, 3), [3, 2]), None),
    ("None", WithNone(), (t(2, 3), None), (t(5, 3), None), ({0: DYN}, None)),
    (
        "x[..., i] = y",
        InplaceSetItem(),
        (t(4, 4, 10), t(1, 1, 2), torch.tensor([1, 2])),
        (t(5, 4, 10), t(1, 1, 2), torch.tensor([3, 4])),
        ({0: DYN}, None, None),
    ),
    ("x[x < 0] = 0", MaskedFill(), (t(2, 3),), (t(5, 3),), ({0: DYN},)),
    ("add_", InplaceAdd(), (t(2, 3),), (t(5, 3),), ({0: DYN},)),
    ("test on a shape", ShapeTest(), (t(2, 3),), (t(5, 3),), ({0: DYN},)),
    ("test on a value", ValueTest(), (t(2, 3),), (t(2, 3),), None),
    ("torch.cond", Cond(), (t(2, 3),), (-t(5, 3).abs(),), ({0: DYN},)),
    ("scan", Scan(), (t(3, 4),), (t(5, 4),), ({0: DYN},)),
    ("python loop", PythonLoop(), (t(2, 3),), (t(5, 3),), ({0: DYN},)),
    ("loop on a shape", LoopOnShape(), (t(3, 4),), (t(3, 4),), None),
    ("nonzero", NonZero(), (t(2, 3),), (t(5, 3),), ({0: DYN},)),
    ("item", Item(), (t(6, 3), torch.tensor(4)), (t(6, 3), torch.tensor(2)), None),
    ("int64", Int64(), (torch.randint(0, 9, (2, 3)),), (torch.randint(0, 9, (5, 3)),), ({0: DYN},)),
    ("float16", Float16(), (t(2, 3).half(),), (t(5, 3).half(),), ({0: DYN},)),
    ("bool", BoolMask(), (t(2, 3), t(2, 3) > 0), (t(5, 3), t(5, 3) > 0), ({0: DYN}, {0: DYN})),
    (
        "dynamic dim of size 0",
        DimZero(),
        (t(2, 3), t(0, 3)),
        (t(5, 3), t(4, 3)),
        ({0: DYN}, {0: DYN}),
    ),
    ("dynamic dim of size 1", AddOne(), (t(1, 3),), (t(5, 3),), ({0: DYN},)),
    ("size 0 at run time", AddOne(), (t(2, 3),), (t(0, 3),), ({0: DYN},)),
    ("size 1 at run time", AddOne(), (t(2, 3),), (t(1, 3),), ({0: DYN},)),
]


def first_line(e, limit=300):
    "The type and the first line of an error, the cause of torch.onnx's own errors."
    while e.__cause__ is not None and type(e).__module__.startswith("torch.onnx"):
        e = e.__cause__
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    text = " ".join(lines[:2]) if lines and lines[0].endswith(":") else (lines or [""])[0]
    text = f"{type(e).__name__}: {text}".replace("`", "'")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def same(got, expected):
    got = got if isinstance(got, (list, tuple)) else [got]
    expected = expected if isinstance(expected, (list, tuple)) else [expected]
    return len(got) == len(expected) and all(
        np.allclose(np.asarray(g), np.asarray(e), atol=1e-3) for g, e in zip(got, expected)
    )


def check_export(model, inputs, inputs2, ds, strict):
    try:
        ep = torch.export.export(model, inputs, dynamic_shapes=ds, strict=strict)
    except Exception as e:
        return first_line(e)
    for feeds in [inputs, inputs2]:
        try:
            if not same(ep.module()(*feeds), model(*feeds)):
                return "discrepancies"
        except Exception as e:
            return "runs but " + first_line(e)
    return "OK"


def tensors(inputs):
    flat = torch.utils._pytree.tree_flatten(inputs)[0]
    return [v for v in flat if isinstance(v, torch.Tensor)]


def export_to_onnx(model, inputs, ds, exporter):
    if exporter == "to_onnx":
        return to_onnx(model, inputs, dynamic_shapes=ds)
    return torch.onnx.export(model, inputs, dynamic_shapes=ds, dynamo=True).model_proto


def check_onnx(model, inputs, inputs2, ds, exporter):
    try:
        onx = export_to_onnx(model, inputs, ds, exporter)
        sess = onnxruntime.InferenceSession(
            onx.SerializeToString(), providers=["CPUExecutionProvider"]
        )
    except Exception as e:
        return first_line(e)
    names = [i.name for i in sess.get_inputs()]
    for feeds in [inputs, inputs2]:
        values = [v.numpy() for v in tensors(feeds)]
        try:
            got = sess.run(None, dict(zip(names, values)))
        except Exception as e:
            return "onnxruntime fails: " + first_line(e)
        if not same(got, model(*feeds)):
            return "discrepancies"
    return "OK"


rows = []
for name, model, inputs, inputs2, ds in CASES:
    # torch prints the graphs it fails to trace, the table is enough
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rows.append(
            [
                name,
                check_export(model, inputs, inputs2, ds, True),
                check_export(model, inputs, inputs2, ds, False),
                check_onnx(model, inputs, inputs2, ds, "to_onnx"),
                check_onnx(model, inputs, inputs2, ds, "torch.onnx.export"),
            ]
        )

# a failing cell shows a short label and a footnote with the first line of the error,
# the same footnote for the same error
notes = {}


def cell(result):
    if result == "OK":
        return "OK"
    label = notes.setdefault(result, f"e{len(notes) + 1}")
    return f"``{result.split(':')[0]}`` [#{label}]_"


print(".. list-table::")
print("    :header-rows: 1")
print("    :widths: auto")
print()
print(
    "    * - "
    + "\n      - ".join(["case", "strict=True", "strict=False", "to_onnx", "torch.onnx.export"])
)
for name, *results in rows:
    print(f"    * - ``{name}``")
    for result in results:
        print(f"      - {cell(result)}")
print()
n_ok = [sum(r[i] == "OK" for r in rows) for i in range(1, 5)]
print(
    f"Cases captured: {n_ok[0]}/{len(rows)} with strict=True, "
    f"{n_ok[1]}/{len(rows)} with strict=False; "
    f"converted and checked: {n_ok[2]}/{len(rows)} with to_onnx, "
    f"{n_ok[3]}/{len(rows)} with torch.onnx.export(dynamo=True)."
)
print()
print(".. rubric:: Errors")
print()
for text, label in notes.items():
    print(f".. [#{label}] ``{text}``")
