"""The records of an export report, as plain dataclasses (no torch import).

``ReportData`` holds what one export recorded and reads or writes it as JSON;
``ExportReport`` adds the
writers of ``experimental_experiment.report.render``, which reads these records only.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar


@dataclass
class SourceLocation:
    """A line of the user's code.

    :param file: the file name
    :param line: the line number
    :param function: the function the line is in
    :param code: the text of the line

    .. code-block:: python

        from experimental_experiment.report import SourceLocation

        loc = SourceLocation("model.py", 12, "forward", "return x[:, :4]")
        print(loc)  # model.py:12 in forward: return x[:, :4]
    """

    file: str
    line: int
    function: str = ""
    code: str = ""

    def __str__(self) -> str:
        text = f"{self.file}:{self.line}" + (f" in {self.function}" if self.function else "")
        return text + (f": {self.code}" if self.code else "")


@dataclass
class CaptureAttempt:
    """One call to torch.export.export (and its decompositions)."""

    description: str
    success: bool
    error_type: str = ""
    error: str = ""
    time_s: float = 0.0


@dataclass
class Decomposition:
    """An operator decomposed by torch before conversion, and why."""

    op: str
    reason: str


@dataclass
class ConverterUse:
    """How many FX nodes calling ``op`` the converter ``converter`` translated."""

    op: str
    converter: str
    count: int


@dataclass
class Rewrite:
    """One optimization pass or pattern that changed the graph."""

    name: str
    kind: str
    applied: int
    time_s: float = 0.0


@dataclass
class DimensionRecord:
    """A dynamic dimension the capture specialized (a constant) or constrained (a range).

    ``dimension`` is torch's name of the input size (``L['x'].size()[0]``) rewritten with
    the input names when they are known (``x.shape[0]``).

    :param dimension: the input size, ``x.shape[0]``
    :param kind: ``"specialized"`` (a constant) or ``"constrained"`` (a range)
    :param symbol: torch's symbol for the dimension (``s0``)
    :param value: the constant of a specialized dimension
    :param min: the lower bound of a constrained dimension (None: none)
    :param max: the upper bound of a constrained dimension (None: none)
    :param guard: the guard(s) which specialized or bounded the dimension
    :param location: the user's line which set it
    :param branch: True when a branch of the model's code (a guard on a derived size),
        not the dimension's plain range, sets the bounds: the model is wrong outside them
    :param step: valid sizes are ``min``, ``min + step``, ... (None: every size)

    .. code-block:: python

        import torch
        from experimental_experiment.report import ExportReport
        from experimental_experiment.torch_interpreter import to_onnx

        report = ExportReport()
        onx = to_onnx(torch.nn.Linear(4, 2), (torch.randn(3, 4),),
                      dynamic_shapes=({0: "batch"},), report=report)
        for d in report.dimensions:
            print(d.dimension, d.kind, d.value, d.min, d.max, d.location)
    """

    dimension: str
    kind: str  # "specialized" or "constrained"
    symbol: str = ""
    value: int | None = None
    min: int | None = None
    max: int | None = None
    guard: str = ""
    location: SourceLocation | None = None
    # True when a branch of the model's code (a guard on a derived size), not the
    # dimension's plain range, sets the bounds: the model is wrong outside them
    branch: bool = False
    step: int | None = None  # valid sizes are min, min + step, ... (size % step fixed)


@dataclass
class Diagnostic:
    """A message for the user: ``level`` is ``error``, ``warning`` or ``note``."""

    level: str
    rule: str
    message: str
    location: SourceLocation | None = None


_R = TypeVar("_R", bound="ReportData")


@dataclass
class ReportData:
    """The fields of an export report and their JSON form (``ExportReport`` documents
    them)."""

    model: str = ""
    status: str = "not started"  # "running", "success", "failed"
    error_type: str = ""
    error: str = ""
    error_location: SourceLocation | None = None
    capture_attempts: list[CaptureAttempt] = field(default_factory=list)
    patches: list[str] = field(default_factory=list)
    decompositions: list[Decomposition] = field(default_factory=list)
    converters: list[ConverterUse] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    nodes_before_optimization: int | None = None
    nodes_after_optimization: int | None = None
    rewrites: list[Rewrite] = field(default_factory=list)
    dimensions: list[DimensionRecord] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def add(
        self, level: str, rule: str, message: str, location: SourceLocation | None = None
    ) -> None:
        """Adds a diagnostic."""
        self.diagnostics.append(Diagnostic(level, rule, message, location))

    def to_dict(self) -> dict[str, Any]:
        """A dict of JSON types."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """The report as indented JSON."""
        return json.dumps(self.to_dict(), indent=1, sort_keys=False)

    @classmethod
    def from_dict(cls: type[_R], data: dict[str, Any]) -> _R:
        """Builds a report from ``to_dict``'s output; raises ValueError on a bad one."""
        if not isinstance(data, dict):
            raise ValueError(f"an export report is a JSON object, not {type(data).__name__}")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown fields in an export report: {sorted(unknown)}")
        try:
            kw = dict(data)
            for key, item_cls in _LISTS.items():
                kw[key] = [_item(item_cls, d) for d in data.get(key, [])]
            if data.get("error_location"):
                kw["error_location"] = SourceLocation(**data["error_location"])
            return cls(**kw)
        except TypeError as e:
            raise ValueError(f"malformed export report: {e}") from e

    @classmethod
    def load(cls: type[_R], path: str) -> _R:
        """Reads a report saved as JSON; raises ValueError if the file is not one."""
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path!r} is not valid JSON ({e})") from e
        return cls.from_dict(data)


def _item(item_cls, data):
    if not isinstance(data, dict):
        raise TypeError(f"{item_cls.__name__} expects an object, not {type(data).__name__}")
    data = dict(data)
    if data.get("location"):
        data["location"] = SourceLocation(**data["location"])
    return item_cls(**data)


_LISTS = MappingProxyType(
    {
        "capture_attempts": CaptureAttempt,
        "decompositions": Decomposition,
        "converters": ConverterUse,
        "rewrites": Rewrite,
        "dimensions": DimensionRecord,
        "diagnostics": Diagnostic,
    }
)
