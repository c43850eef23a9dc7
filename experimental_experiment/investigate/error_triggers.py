"""Small cases raising the package's errors and torch.export's frequent ones, for the
troubleshooting page (:mod:`experimental_experiment.investigate.troubleshooting`):
the page shows the message a user actually gets with the installed versions.

A trigger is registered for a class by its import path; a class without a trigger
(its case is too large to build on every documentation build) shows its docstring only.

.. code-block:: python

    from experimental_experiment.investigate.error_triggers import raise_and_capture
    from experimental_experiment.torch_interpreter import CaptureError

    print(raise_and_capture(CaptureError))  # the message of a real failure
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import textwrap
import warnings
from dataclasses import dataclass
from typing import Callable

logger = logging.getLogger(__name__)

#: lines of a message kept for the page, and their width
MAX_LINES = 12
WIDTH = 88

TRIGGERS: dict[str, Callable[[], None]] = {}


def trigger(path: str):
    """Registers the decorated function as the trigger of the class ``path``."""

    def register(fn):
        TRIGGERS[path] = fn
        return fn

    return register


@contextlib.contextmanager
def _quiet():
    """Silences stderr, file descriptor included (torch prints graphs there)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            with contextlib.redirect_stderr(null):
                yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def _clean(text: str) -> str:
    """The message without the local folders, its first lines and its last two
    (where the package says what to try) when longer than :data:`MAX_LINES`,
    wrapped at :data:`WIDTH` characters."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    text = text.replace(root + os.sep, "")
    tmp = re.escape(tempfile.gettempdir() + os.sep)
    text = re.sub(tmp + r"[^/\\'\"\s]+[/\\]", "", text)  # a file in a temporary folder
    text = re.sub(tmp + r"[^/\\'\"\s]+", "<folder>", text)  # the folder itself
    lines = [line.rstrip() for line in text.strip().splitlines()]
    if len(lines) > MAX_LINES:
        lines = lines[: MAX_LINES - 3] + ["[...]"] + lines[-2:]
    wrapped = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        wrapped += textwrap.wrap(
            line, WIDTH, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False
        ) or [""]
    return "\n".join(wrapped)


def capture_message(fn: Callable[[], None], expected: type = BaseException) -> str | None:
    """Runs ``fn`` and returns the message of the exception (or the warning) of type
    ``expected`` it raises, None when it raises nothing of that type."""
    with warnings.catch_warnings(record=True) as caught, _quiet():
        warnings.simplefilter("always")
        try:
            fn()
        except Exception as e:  # the point is to catch what fn raises
            error = e
        else:
            error = None
    if isinstance(error, expected):
        return _clean(f"{type(error).__name__}: {error}")
    if error is not None:
        logger.warning(
            "trigger %s raised %s, not %s: %s",
            fn.__name__,
            type(error).__name__,
            expected.__name__,
            error,
        )
        return None
    for w in caught:
        if issubclass(w.category, expected) and issubclass(expected, Warning):
            return _clean(f"{w.category.__name__}: {w.message}")
    return None


def raise_and_capture(cls: type) -> str | None:
    """The message of ``cls`` raised by its trigger, None without a trigger."""
    fn = TRIGGERS.get(f"{cls.__module__}.{cls.__qualname__}")
    return None if fn is None else capture_message(fn, cls)


# the package's errors ------------------------------------------------------------------


@trigger("experimental_experiment.torch_interpreter.errors.InvalidArgumentError")
def _invalid_argument():
    import torch

    from ..torch_interpreter import to_onnx

    to_onnx(torch.nn.Linear(4, 2), (torch.randn(3, 4),), dynamic_shapes=({2: "batch"},))


@trigger("experimental_experiment.torch_interpreter.errors.CaptureError")
def _capture():
    import torch

    from ..torch_interpreter import to_onnx

    class DataDependent(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + 1
            return x - 1

    to_onnx(DataDependent(), (torch.randn(2, 3),))


_CUSTOM_OPS: dict = {}


def _numpy_double():
    """A custom operator computed with numpy (no converter, not traceable), created
    once per process."""
    import torch

    if "numpy_double" not in _CUSTOM_OPS:

        def numpy_double(x):
            return torch.from_numpy(x.numpy() * 2)

        op = torch.library.custom_op(
            "troubleshooting::numpy_double",
            numpy_double,
            mutates_args=(),
            schema="(Tensor x) -> Tensor",
        )
        op.register_fake(lambda x: torch.empty_like(x))
        _CUSTOM_OPS["numpy_double"] = op
    return _CUSTOM_OPS["numpy_double"]


@trigger("experimental_experiment.torch_interpreter.errors.UnsupportedOpError")
def _unsupported_op():
    import torch

    from ..torch_interpreter import to_onnx

    numpy_double = _numpy_double()

    class CustomOp(torch.nn.Module):
        def forward(self, x):
            return numpy_double(x)

    to_onnx(CustomOp(), (torch.randn(2, 3),))


@trigger("experimental_experiment.torch_interpreter.errors.ConversionError")
def _conversion():
    import torch

    from ..torch_interpreter import Dispatcher, to_onnx

    def relu_as_int64(g, x):  # a user converter returning the wrong element type
        return g.op.Cast(x, to=7)

    dispatcher = Dispatcher({torch.ops.aten.relu.default: relu_as_int64})
    to_onnx(torch.nn.ReLU(), (torch.randn(2, 3),), dispatcher=dispatcher)


@trigger("experimental_experiment.xbuilder.errors.GraphBuilderError")
def _graph_builder():
    import torch

    from ..torch_interpreter import Dispatcher, to_onnx

    def relu_of_unknown(g, x):  # a user converter naming a value that does not exist
        return g.op.Relu("not_a_name")

    dispatcher = Dispatcher({torch.ops.aten.relu.default: relu_of_unknown})
    to_onnx(torch.nn.ReLU(), (torch.randn(2, 3),), dispatcher=dispatcher)


@trigger("experimental_experiment.xbuilder.safe_paths.ExternalDataError")
def _external_data():
    import onnx
    import torch

    from ..torch_interpreter import to_onnx
    from ..xbuilder.model_container import check_external_data

    container = to_onnx(
        torch.nn.Linear(64, 32), (torch.randn(3, 64),), large_model=True, external_threshold=16
    )
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        container.save(path)
        data = [f for f in os.listdir(folder) if f.endswith(".data")]
        with open(os.path.join(folder, data[0]), "r+b") as f:
            f.truncate(100)  # a copy cut short
        check_external_data(onnx.load(path, load_external_data=False), folder)


@trigger("experimental_experiment.large.fill.WeightsMismatchError")
def _weights_mismatch():
    import torch

    from ..large import fill_weights
    from ..torch_interpreter import to_onnx

    with tempfile.TemporaryDirectory() as folder:
        model = os.path.join(folder, "linear.onnx")
        to_onnx(torch.nn.Linear(40, 20), (torch.randn(2, 40),), large_model=True).save(model)
        checkpoint = os.path.join(folder, "other.pt")
        torch.save({"weight": torch.zeros(20, 30), "bias": torch.zeros(20)}, checkpoint)
        fill_weights(model, [checkpoint])


@trigger("experimental_experiment._command_lines_common.CommandLineError")
def _command_line():
    from .._command_lines_common import load_model

    load_model("missing.onnx")


@trigger("experimental_experiment.errors.ConstrainedDimensionWarning")
def _constrained_dimension():
    import torch

    from ..torch_interpreter import to_onnx

    class ShortSequence(torch.nn.Module):
        def forward(self, x):
            if x.shape[1] <= 3:  # a branch decided at the example size
                return x * 2
            return x

    to_onnx(ShortSequence(), (torch.randn(2, 3),), dynamic_shapes=({0: "batch", 1: "seq"},))


# torch.export's frequent errors ----------------------------------------------------------


@dataclass(frozen=True)
class TorchExportCase:
    """One frequent failure of torch.export.export, raised on a small model."""

    title: str
    when: str
    trigger: Callable[[], None]
    fix: str
    starts: str  # the first words of the message, for the index

    @property
    def anchor(self) -> str:
        return "l-torch-export-" + self.trigger.__name__.strip("_").replace("_", "-")


def _data_dependent():
    import torch

    class CountPositive(torch.nn.Module):
        def forward(self, x):
            if (x > 0).sum() > 2:  # depends on the values, not the shapes
                return x + 1
            return x - 1

    torch.export.export(CountPositive(), (torch.randn(2, 3),))


def _specialized():
    import torch

    class AddConstant(torch.nn.Module):
        def forward(self, x):
            return x + torch.ones(2, 4)  # broadcasting forces the batch to be 2

    torch.export.export(
        AddConstant(), (torch.randn(2, 4),), dynamic_shapes=({0: torch.export.Dim("batch")},)
    )


def _unsupported_construct():
    import inspect

    import torch

    class Introspect(torch.nn.Module):
        def forward(self, x):
            return x * len(inspect.stack())  # python introspection Dynamo cannot trace

    torch.export.export(Introspect(), (torch.randn(2, 4),), strict=True)


TORCH_EXPORT_CASES = [
    TorchExportCase(
        "Data-dependent guard (GuardOnDataDependentSymNode)",
        "A python ``if`` (or ``int()``, ``bool()``, ``.item()`` used in a test) reads "
        "the *values* of a tensor: the graph cannot hold both branches.",
        _data_dependent,
        "Write the branch with :func:`torch.cond` (see :ref:`l-plot-exporter-recipes-"
        "custom-cond`) or compute both sides and pick with ``torch.where``. "
        ":func:`torch.export.draft_export` lists every such guard in one run "
        "(:ref:`l-plot-exporter-exporter-draft_export`). to_onnx raises it as a "
        ":ref:`CaptureError <l-error-captureerror>`.",
        "GuardOnDataDependentSymNode: Could not guard on data-dependent expression",
    ),
    TorchExportCase(
        "Specialized dimension (Constraints violated)",
        "A dimension declared dynamic with ``torch.export.Dim`` is forced to its example "
        "value by the code (a constant shape, a reshape with fixed sizes, a branch on "
        "the size).",
        _specialized,
        "With to_onnx, the error carries a note naming the line that made each "
        "dimension a constant (``x.shape[0] became 2 at model.py:12 in forward: ...``, "
        "shown under the traceback, in ``err.__notes__``); the export report names it "
        'too. With torch.export alone, find it with ``TORCH_LOGS="+dynamic"`` '
        "(:ref:`l-plot-exporter-lost_dynamic_dimension`); make the code follow the size "
        "(``x.new_ones(x.shape)``, ``reshape(-1, ...)``), or declare the dimension "
        "``Dim.AUTO`` to let torch decide; to_onnx accepts names as strings "
        '(``{0: "batch"}``), checked after the capture.',
        "UserError: Constraints violated (batch)!",
    ),
    TorchExportCase(
        "Unsupported construct in strict mode (torch._dynamo.exc.Unsupported)",
        "``strict=True`` traces the python bytecode with Dynamo, which refuses what it "
        "cannot analyse (introspection, some builtins, C extensions).",
        _unsupported_construct,
        "Export with ``strict=False`` (to_onnx's default, "
        ":class:`ExportOptions <experimental_experiment.torch_interpreter.ExportOptions>`), "
        "move the construct out of ``forward``, or wrap it in a custom operator "
        "(:ref:`l-plot-exporter-recipes-custom-custom-ops-fct`). The tutorial's "
        ":ref:`l-frequent-exporter-errors` lists older messages of the same kind "
        "(``torch.no_grad()`` fixes two of them).",
        "Unsupported: Attempted to call function marked as skipped",
    ),
]


__all__ = [
    "MAX_LINES",
    "TORCH_EXPORT_CASES",
    "TRIGGERS",
    "TorchExportCase",
    "capture_message",
    "raise_and_capture",
    "trigger",
]
