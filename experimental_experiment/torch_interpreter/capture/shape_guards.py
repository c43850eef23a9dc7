"""Which line of the user's code specialized or constrained a dynamic dimension.

While :func:`record_shape_guards` is active, every location torch's ``ShapeEnv``
computes for a guard, a range or a replacement (``_get_stack_summary``) is mapped to
the innermost frame outside torch, the standard library and this package (wrappers
such as ``with_verbose_logging`` included), transformers' modeling files being the
model's code but not its utilities: the user's line. After
the capture (successful or not), :func:`dimension_records` reads the replacements
(specialized dimensions) and the ranges (constrained ones) of the shape environments
seen, with those lines.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import linecache
import os
import re
import sys
import threading
from typing import TYPE_CHECKING, Iterator

import torch

from ...report import DimensionRecord, SourceLocation
from .fresh_stack import caller_frame

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

_LOCK = threading.RLock()  # re-entrant: an export inside an export (same thread)


def _excluded_dirs() -> tuple[str, ...]:
    """The folders whose frames are never the user's line: torch, the standard library,
    this package (its wrappers, the zoo that calls the export), transformers outside
    its models (see :func:`_is_user`)."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    dirs = [os.path.dirname(torch.__file__), package, os.path.dirname(contextlib.__file__)]
    try:
        import transformers

        dirs.append(os.path.dirname(transformers.__file__))
    except ImportError:
        pass
    return tuple(d + os.sep for d in dirs)


def _model_dirs() -> tuple[str, ...]:
    """The folders of an excluded package holding models' code: a guard set in
    ``transformers/models/depth_anything/modeling_depth_anything.py`` is the model's
    line (transformers' utilities, masks and attention functions are not)."""
    transformers = sys.modules.get("transformers")  # no frame of it if not imported
    file = getattr(transformers, "__file__", None)
    return _models_folder(file) if file else ()


@functools.lru_cache(maxsize=4)
def _models_folder(init_file: str) -> tuple[str, ...]:
    return (os.path.join(os.path.dirname(os.path.abspath(init_file)), "models") + os.sep,)


def _is_user(filename: str, excluded: tuple[str, ...]) -> bool:
    """Whether a frame of ``filename`` is the model's code: outside ``excluded``, or
    in the models of an excluded package (transformers' modeling files)."""
    if not filename or filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    return not path.startswith(excluded) or path.startswith(_model_dirs())


def _location(filename: str, line: int, function: str) -> SourceLocation:
    code = linecache.getline(filename, line).strip()
    return SourceLocation(os.path.abspath(filename), int(line), function, code)


def user_location(excluded: tuple[str, ...] | None = None) -> SourceLocation | None:
    """The innermost frame of the model's code (:func:`_is_user`: outside torch, the
    standard library, this package and transformers' utilities): dynamo's traced stack
    in strict mode, the python stack otherwise."""
    excluded = excluded or _excluded_dirs()
    from torch._guards import TracingContext

    try:
        stack = TracingContext.extract_stack()
    except Exception:  # no tracing context
        stack = []
    for fr in reversed(list(stack or [])):
        if _is_user(fr.filename, excluded):
            return _location(fr.filename, fr.lineno, fr.name)
    # the capture runs on a thread of its own (fresh_stack.py): its caller's stack next
    for frame in (sys._getframe(1), caller_frame()):
        while frame is not None:
            if _is_user(frame.f_code.co_filename, excluded):
                return _location(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
            frame = frame.f_back
    return None


class GuardRecorder:
    """The shape environments seen and the user's location of each of their SLocs."""

    def __init__(self):
        self.envs: list = []
        self.locations: dict[int, SourceLocation | None] = {}
        self._keep: list = []  # keeps the SLoc objects alive so their ids stay unique
        self._guard_symbols: dict[int, list] = {}  # id(env) (kept in envs) -> guards

    def location(self, sloc: object) -> SourceLocation | None:
        return self.locations.get(id(sloc)) if sloc is not None else None

    def guard_symbols(self, env: ShapeEnv) -> list:
        """``[(guard, its free symbols)]`` of a shape environment, computed once (read
        after the capture, when the guards no longer change)."""
        if id(env) not in self._guard_symbols:
            self._guard_symbols[id(env)] = [(g, g.expr.free_symbols) for g in env.guards]
        return self._guard_symbols[id(env)]


@contextlib.contextmanager
def record_shape_guards() -> Iterator[GuardRecorder]:
    """Records, during the capture, where each guard of torch's ShapeEnv comes from.

    .. code-block:: python

        with record_shape_guards() as recorder:
            ep = torch.export.export(model, args, dynamic_shapes=ds)
        print(dimension_records(recorder))
    """
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    recorder = GuardRecorder()
    excluded = _excluded_dirs()
    original = ShapeEnv._get_stack_summary

    def _get_stack_summary(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if not any(env is self for env in recorder.envs):
            recorder.envs.append(self)
        recorder._keep.append(result[0])
        recorder.locations[id(result[0])] = user_location(excluded)
        return result

    from torch.fx.experimental import symbolic_shapes

    files = symbolic_shapes.uninteresting_files
    union: list[set] = []  # computed at the first call, as torch's (lru_cache)

    def uninteresting_files():  # torch's logs skip this wrapper to find the user's line
        if not union:  # torch calls it for every frame of every stack walk (Swin: 23,000)
            union.append(files() | {__file__})
        return union[0]

    with _LOCK:
        ShapeEnv._get_stack_summary = _get_stack_summary
        symbolic_shapes.uninteresting_files = uninteresting_files
        try:
            yield recorder
        finally:
            ShapeEnv._get_stack_summary = original
            symbolic_shapes.uninteresting_files = files


_SOURCE = re.compile(r"L\['flat_args'\]\[(\d+)\]|L\['([^']+)'\]")


def _pretty(source: str, input_names: list[str] | None) -> str:
    """``L['x'].size()[0]`` -> ``x.shape[0]``; ``L['flat_args'][1]`` -> its input name."""

    def repl(m):
        if m.group(1) is not None:
            i = int(m.group(1))
            return input_names[i] if input_names and i < len(input_names) else f"input {i}"
        return m.group(2)

    text = _SOURCE.sub(repl, source)
    return re.sub(r"\.size\(\)\[(\d+)\]", r".shape[\1]", text)


def _int(value) -> int | None:
    if not getattr(value, "is_integer", True) and not isinstance(value, int):
        return None
    try:
        v = int(value)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None
    return v if abs(v) < 2**62 else None


def dimension_records(
    recorder: GuardRecorder, input_names: list[str] | None = None
) -> list[DimensionRecord]:
    """Specialized dimensions (replaced by a constant) and constrained ones (a range
    narrower than ``[0, inf]`` or ``[2, inf]``) of the input sizes, with the user's line."""
    records: list[DimensionRecord] = []
    seen = set()
    for env in recorder.envs:
        for symbol, sources in env.var_to_sources.items():
            if not sources:
                continue
            name = _pretty(sources[0].name, input_names)
            record = _record(env, recorder, symbol, name)
            if record is not None and (record.dimension, record.kind) not in seen:
                seen.add((record.dimension, record.kind))
                records.append(record)
    return records


def _record(env, recorder: GuardRecorder, symbol, name: str) -> DimensionRecord | None:
    replacement = env.replacements.get(symbol)
    if replacement is not None and replacement.is_number:
        return DimensionRecord(
            name,
            "specialized",
            str(symbol),
            value=_int(replacement),
            guard=f"Eq({symbol}, {replacement})",
            location=recorder.location(env.replacements_slocs.get(symbol)),
        )
    vr = env.var_to_range.get(symbol)
    sloc = env.var_to_range_sloc.get(symbol)
    if vr is None or sloc is None:
        return None
    low, high = _int(vr.lower), _int(vr.upper)
    if low is not None and high is not None and low == high:
        return DimensionRecord(
            name,
            "specialized",
            str(symbol),
            value=low,
            guard=f"Eq({symbol}, {low})",
            location=recorder.location(sloc.lower),
        )
    if (low or 0) <= 2 and high is None:
        return _probed_record(env, recorder, symbol, name)
    # the bound the user's code set: the upper one if finite, else the lower one
    where = recorder.location(sloc.upper if high is not None else sloc.lower)
    # the first three guards on the symbol (free_symbols once per guard: Swin has
    # thousands of guards, 0.5 s when walked again for every symbol)
    # and str() only on those three
    guards = [
        str(g.expr)
        for g in itertools.islice(
            (g for g, free in recorder.guard_symbols(env) if symbol in free), 3
        )
    ]
    return DimensionRecord(
        name, "constrained", str(symbol), min=low, max=high, guard="; ".join(guards), location=where
    )


#: sizes at which the guards on one dimension are evaluated (around powers of 2, where
#: block and window sizes make models branch)
_PROBES = (
    2,
    3,
    4,
    5,
    7,
    8,
    9,
    15,
    16,
    17,
    31,
    32,
    33,
    63,
    64,
    65,
    127,
    128,
    129,
    255,
    256,
    257,
    511,
    512,
    513,
    1023,
    1024,
    1025,
    2048,
    4096,
    8192,
)


def _probed_record(env, recorder: GuardRecorder, symbol, name: str) -> DimensionRecord | None:
    """A dimension whose range torch left open but whose guards fail at some sizes
    (``Min(s, 4 * (s // 4)) <= 0`` holds only below 4): the sizes are probed."""
    import sympy

    failing, first = set(), None
    for guard in env.guards[:1000]:
        expr = env.replace(guard.expr)
        if expr.free_symbols != {symbol}:
            continue
        for v in _PROBES:
            try:
                holds = bool(expr.xreplace({symbol: sympy.Integer(v)}))
            except TypeError:  # not decidable at this size
                continue
            if not holds:
                failing.add(v)
                if first is None or v < first[2]:  # the guard failing at the smallest size
                    first = (guard, expr, v)
    if not failing or first is None:
        return None
    valid = [v for v in _PROBES if v not in failing]
    low = high = None
    if valid and max(valid) < min(failing):
        high = max(valid)
    elif valid and min(valid) > max(failing):
        low = min(valid)
    return DimensionRecord(
        name,
        "constrained",
        str(symbol),
        min=low,
        max=high,
        guard=str(first[1]),
        location=recorder.location(first[0].sloc),
    )


def constrained_message(r: DimensionRecord) -> str:
    """The dimension, the sizes it is valid for, the user's line that bounded it, what
    to do; the guard itself last (it can be long)."""
    span = (
        f"sizes in [{r.min if r.min is not None else 0}, {r.max if r.max is not None else 'inf'}]"
        if r.min is not None or r.max is not None
        else "the sizes where its guard holds"
    )
    if getattr(r, "step", None):
        span += f" with size % {r.step} == {(r.min or 0) % r.step}"
    if r.value is not None:
        span += f" (example size {r.value})"
    where = (
        f"{r.location.file}:{r.location.line}"
        + (f" ({r.location.code!r})" if r.location.code else "")
        if r.location
        else "the model's code"
    )
    guard = r.guard if len(r.guard) <= 160 else r.guard[:157] + "..."
    return (
        f"dynamic dimension {r.dimension} is valid only for {span}: outside, a condition "
        f"the capture assumed at {where} no longer holds (a branch taken at the example "
        "size, or an operator's requirement), and the ONNX model, which cannot check it, "
        "computes the branch of the example size at every size. Export with example sizes in the "
        "range the model must serve, write the branch with torch.cond, or treat this "
        "warning as an error (warnings.simplefilter('error', ConstrainedDimensionWarning)); "
        "the ranges are in the model's metadata_props['dynamic_dimension_ranges']. "
        f"Guard: {guard or '?'}"
    )


def warn_constrained(records: list[DimensionRecord]) -> list[DimensionRecord]:
    """Warns (:class:`~experimental_experiment.errors.ConstrainedDimensionWarning`) about
    the dynamic dimensions the capture bounded from above or to a set of sizes; returns
    them."""
    import warnings

    from ...errors import ConstrainedDimensionWarning

    # a plain lower bound alone (a convolution needs at least its kernel size) stays in
    # the report; one set by a branch of the model's code is warned about
    bounded = [
        r
        for r in records
        if r.kind == "constrained" and (r.max is not None or r.min is None or r.branch)
    ]
    for r in bounded:
        warnings.warn(constrained_message(r), ConstrainedDimensionWarning, stacklevel=3)
    return bounded
