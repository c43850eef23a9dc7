"""Fills an :class:`ExportReport <experimental_experiment.report.ExportReport>` while
:func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` runs."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import sys
import time
import traceback
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar, cast

from ..report import (
    CaptureAttempt,
    ConverterUse,
    Decomposition,
    ExportReport,
    Rewrite,
    SourceLocation,
)
from ..report.render import format_of
from ..xbuilder.safe_paths import check_output_path
from .capture.guard_ranges import guard_ranges, merge_into_records
from .capture.shape_guards import (
    GuardRecorder,
    _excluded_dirs,
    _is_user,
    _location,
    dimension_records,
)
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    import torch

    from ..xoptim.report import ReportEntry

_F = TypeVar("_F", bound=Callable[..., Any])

logger = logging.getLogger(__name__)


def make_report(
    report: ExportReport | str | os.PathLike | None, model: object
) -> tuple[ExportReport, str | None]:
    """``report`` is None, an ExportReport (filled in place) or a path (.json, .md,
    .sarif); returns the report to fill and the path to write."""
    path = None
    if report is None or isinstance(report, (str, os.PathLike)):
        if report is not None:
            path = os.fspath(report)
            try:
                format_of(path)
            except ValueError as e:
                raise InvalidArgumentError(f"report={path!r}: {e}") from None
            # a folder, a read-only folder: OutputPathError now, not after the export
            check_output_path(path, what="report")
        report = ExportReport()
    elif not isinstance(report, ExportReport):
        raise InvalidArgumentError(
            f"report must be an ExportReport or a path (.json, .md, .sarif), "
            f"not {type(report).__name__}"
        )
    report.model = type(model).__name__
    report.status = "running"
    return report, path


@contextlib.contextmanager
def phase(report: ExportReport, name: str) -> Iterator[None]:
    """Adds the time spent in the block to ``report.timings[name]``."""
    begin = time.perf_counter()
    try:
        yield
    finally:
        report.timings[name] = report.timings.get(name, 0.0) + time.perf_counter() - begin


class _Collect(logging.Handler):
    """Records the package's warnings in the report; a record no other handler would
    show goes to logging's last resort (stderr), as it would without this handler."""

    def __init__(self, report: ExportReport):
        super().__init__(logging.WARNING)
        self.report = report

    def emit(self, record):
        self.report.add("warning", "warning", record.getMessage())
        if (
            not self._others_handle(record)
            and logging.lastResort is not None
            and (record.levelno >= logging.lastResort.level)
        ):
            logging.lastResort.handle(record)

    def _others_handle(self, record) -> bool:
        logger_ = logging.getLogger(record.name)
        while logger_ is not None:
            if any(h is not self and record.levelno >= h.level for h in logger_.handlers):
                return True
            logger_ = logger_.parent if logger_.propagate else None
        return False


@contextlib.contextmanager
def reporting(report: ExportReport, path: str | None) -> Iterator[ExportReport]:
    """Records warnings (python and logging) in the report; on an exception, records it
    and attaches the report to it (``err.report``); writes ``path`` in both cases."""
    handler = _Collect(report)
    package = logging.getLogger("experimental_experiment")
    package.addHandler(handler)
    try:
        caught: list = []
        failed = True
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("default")
                yield report
            failed = False
        finally:
            # outside catch_warnings: emitted again for the user's filters
            _add_warnings(report, caught, failed)
        report.status = "success"
    except BaseException as e:
        report.status = "failed"
        report.error_type = type(e).__name__
        report.error = str(e)
        report.error_location = (
            report.error_location
            or _specialized_location(report, e)
            or _message_location(str(e))
            or error_location(e)
        )
        with contextlib.suppress(AttributeError):
            e.report = report
        note = _specialized_note(report, e)
        if note and note not in getattr(e, "__notes__", ()):
            e.add_note(note)
        raise
    finally:
        package.removeHandler(handler)
        if path:
            report.save(path)


def _add_warnings(report: ExportReport, caught, failed: bool) -> None:
    """Records the warnings caught during the export and warns them again
    (``warnings.warn_explicit``, through the user's filters: the report does not swallow
    them); while an export error propagates, a filter turning them into errors does not
    hide that error."""
    excluded = _excluded_dirs()
    modules = _modules_by_file() if caught else {}
    for w in caught:
        loc = _location(w.filename, w.lineno, "") if _is_user(w.filename, excluded) else None
        report.add("warning", "warning", f"{w.category.__name__}: {w.message}", loc)
        try:
            warnings.warn_explicit(
                w.message, w.category, w.filename, w.lineno, module=modules.get(w.filename)
            )
        except Warning:
            if not failed:
                raise


def _modules_by_file() -> dict[str, str]:
    """``{file: module name}`` of the imported modules (a filter on a module name
    applies to a warning emitted again)."""
    return {
        f: name
        for name, m in list(sys.modules.items())
        if isinstance(f := getattr(m, "__file__", None), str)
    }


def _specialized_location(report: ExportReport, exc: BaseException) -> SourceLocation | None:
    """The line specializing a dimension, when the error is about one."""
    text = str(exc)
    if "specialized" not in text and "Constraints violated" not in text:
        return None
    for d in report.dimensions:
        if d.kind == "specialized" and d.location is not None:
            return d.location
    return None


def _specialized_note(report: ExportReport, exc: BaseException) -> str:
    """What torch's "Constraints violated" leaves out: which line of the model made
    each dynamic dimension a constant (a note added to the exception, shown with it)."""
    text = str(exc)
    if "specialized" not in text and "Constraints violated" not in text:
        return ""
    lines = [
        f"- {d.dimension} became {d.value} at {d.location}"
        for d in report.dimensions
        if d.kind == "specialized" and d.location is not None
    ]
    if not lines:
        return ""
    return "\n".join(
        [
            "The model's code made these dynamic dimensions constants:",
            *lines,
            "Fix: keep these sizes symbolic at those lines (tensor operations or "
            "torch.sym_int instead of int(), len() or a Python loop over the dimension), "
            "or declare the dimensions static.",
        ]
    )


_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)(?:, in (\w+))?')


def _message_location(text: str) -> SourceLocation | None:
    """The line quoted after "from the user's code:" in our errors."""
    where = text.find("from the user's code:")
    m = _FILE_LINE.search(text, where) if where >= 0 else None
    if m is None:
        return None
    return _location(m.group(1), int(m.group(2)), m.group(3) or "")


def error_location(exc: BaseException) -> SourceLocation | None:
    """The innermost frame of the user's code in the exception's chain."""
    excluded = _excluded_dirs()
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        frames = [
            f for f in traceback.extract_tb(exc.__traceback__) if _is_user(f.filename, excluded)
        ]
        if frames:
            f = frames[-1]
            return _location(f.filename, f.lineno, f.name)
        exc = exc.__cause__ or exc.__context__
    return None


def reported(fn: _F) -> _F:
    """Decorates :func:`to_onnx`: turns its ``report=`` argument into an ExportReport
    filled while it runs, written to a path if one was given, attached to its errors."""

    @functools.wraps(fn)
    def wrapper(*args, report=None, **kwargs):
        model = args[0] if args else kwargs.get("model")
        rep, path = make_report(report, model)
        with reporting(rep, path):
            record_patches(rep)
            return fn(*args, report=rep, **kwargs)

    return cast(_F, wrapper)


class PhaseClock:
    """``clock("phase")`` adds the time since the previous call to that phase."""

    def __init__(self, report: ExportReport):
        self.report = report
        self.last = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.report.timings[name] = self.report.timings.get(name, 0.0) + now - self.last
        self.last = now


def record_capture(
    report: ExportReport,
    attempts: list,
    recorder: GuardRecorder | None,
    input_names: list[str] | None,
) -> None:
    """Capture attempts ``(description, exception or None, seconds)`` and dimensions
    (``input_names``: the name of every leaf of the inputs)."""
    for what, err, seconds in attempts:
        report.capture_attempts.append(
            CaptureAttempt(
                what,
                err is None,
                type(err).__name__ if err else "",
                str(err) if err else "",
                seconds,
            )
        )
    if recorder is not None:
        report.dimensions.extend(dimension_records(recorder, input_names))


def record_guard_ranges(
    report: ExportReport,
    ep: torch.export.ExportedProgram,
    recorder: GuardRecorder | None,
    input_names: list[str] | None,
) -> None:
    """Replaces the constrained dimensions by the exact ranges every guard of the
    capture accepts (:mod:`guard_ranges`): a branch on a derived size is one of them."""
    ranges = guard_ranges(ep, recorder, input_names)
    report.dimensions[:] = merge_into_records(report.dimensions, ranges)


def record_decompositions(report: ExportReport, decomposed: list) -> None:
    report.decompositions.extend(Decomposition(op, why) for op, why in decomposed)


def record_conversion(report: ExportReport, used: dict) -> None:
    """``used``: ``{(op, converter): count}`` from the interpreter."""
    report.converters = [ConverterUse(op, conv, n) for (op, conv), n in sorted(used.items())]


def record_optimization(
    report: ExportReport, before: int, after: int, steps: Sequence[ReportEntry] | None
) -> None:
    report.nodes_before_optimization = before
    report.nodes_after_optimization = after
    report.rewrites = [
        Rewrite(s.name, s.kind, s.applied, s.time_s) for s in (steps or []) if s.applied
    ]  # xoptim's ReportEntry


def record_patches(report: ExportReport) -> None:
    from .patches import active_patches

    report.patches = active_patches()
