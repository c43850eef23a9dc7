"""What the optimizer did: one :class:`ReportEntry` per pass or pattern, and the
:class:`OptimizationResult` returned by :func:`experimental_experiment.xoptim.optimize`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from .._deprecation import deprecated as _deprecated


@dataclass
class ReportEntry:
    """What one pass or pattern did during an optimization.

    :param name: name of the pass or pattern
    :param kind: ``"pass"`` or ``"pattern"``
    :param matched: structural matches accepted (changes for a pass)
    :param applied: rewrites applied (changes for a pass)
    :param refused: matches refused (by the pattern or the engine)
    :param time_s: time spent
    :param refusals: a few reasons, ``"op_type(node name): reason"``

    .. code-block:: python

        import onnx
        from experimental_experiment.xoptim import optimize

        res = optimize(onnx.load("model.onnx"))
        for entry in res.report:  # one ReportEntry per pass or pattern
            if entry.applied or entry.refused:
                print(entry.name, entry.kind, entry.applied, entry.refusals)
    """

    name: str
    kind: str
    matched: int = 0
    applied: int = 0
    refused: int = 0
    time_s: float = 0.0
    refusals: list[str] = field(default_factory=list)

    # dict-like access, deprecated: entries were dicts in the first releases
    def __getitem__(self, key: str):
        _deprecated(f"entry[{key!r}]", f"entry.{key}")
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        _deprecated(f"entry[{key!r}] = ...", f"entry.{key} = ...")
        setattr(self, key, value)

    def __iter__(self):
        _deprecated("iterating over an entry", "dataclasses.fields(entry)")
        return iter(self.keys())

    def keys(self) -> list[str]:
        return [f.name for f in fields(self)]

    def get(self, key: str, default: Any = None) -> Any:
        _deprecated(f"entry.get({key!r})", f"entry.{key}")
        return getattr(self, key, default)


class OptimizationReport(list):
    """A list of :class:`ReportEntry`, one per pass or pattern, in the order they ran.

    ``report.applied("remove_unused")`` is the number of changes made by that pass or
    pattern (``report["remove_unused"]`` is deprecated).
    """

    def __getitem__(self, key):
        if isinstance(key, str):
            _deprecated(f"report[{key!r}]", f"report.applied({key!r})")
            return self.applied(key)
        return list.__getitem__(self, key)

    def applied(self, name: str) -> int:
        """Number of changes made by the pass or pattern ``name``."""
        return sum(e.applied for e in self if e.name == name)

    def entry(self, name: str, kind: str) -> ReportEntry:
        """The entry of ``name``, created when missing."""
        for e in self:
            if e.name == name:
                return e
        e = ReportEntry(name, kind)
        self.append(e)
        return e


@dataclass
class OptimizationResult:
    """What :func:`experimental_experiment.xoptim.optimize` returns.

    :param model: the optimized ``onnx.ModelProto``
    :param report: what every pass and pattern did
    :param rewrites: the rewrites applied, in order ``(pattern, removed node names)``

    .. code-block:: python

        import onnx
        from experimental_experiment.xoptim import optimize

        res = optimize(onnx.load("model.onnx"))
        onnx.save(res.model, "model.opt.onnx")
        print(res.report.applied("remove_unused"), len(res.rewrites))
    """

    model: Any
    report: OptimizationReport
    rewrites: list = field(default_factory=list)
