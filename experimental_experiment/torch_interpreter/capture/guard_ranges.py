"""The sizes an exported program is valid for, read from every guard of its capture.

torch.export keeps, in the shape environment of the captured program, every condition
its capture assumed on the input sizes (``ShapeEnv.guards``). Only the simple ones
become ranges (``var_to_range``); a branch on a padded or divided size
(Swin's ``if window_size >= pad_H: shift = 0``, with ``pad_H`` a multiple of 7 of
``H // 4 // 2``) stays a guard that no range shows, and the ONNX model, which has no
such check, silently computes the branch of the example size at every other size.

:func:`guard_ranges` evaluates all the guards on each dynamic dimension at every size
from 2 up (the other dimensions at their example sizes), and returns, per dimension,
the interval of sizes around the example where they all hold, the guard that fails
just outside it and the user's line that added it. Guards are printed once as Python
code and evaluated as plain integer arithmetic: a few milliseconds for Swin.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ...report import DimensionRecord, SourceLocation
from .shape_guards import GuardRecorder

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

logger = logging.getLogger(__name__)

#: sizes are scanned up to max(SCAN_LIMIT, 2 * example size); beyond, no bound is claimed
SCAN_LIMIT = 4096


@dataclass(frozen=True)
class _Guard:
    code: str  # Python expression over the symbols' names
    function: object  # lambda of all the symbols, in the order of the scan
    symbols: frozenset  # names of its free symbols
    location: SourceLocation | None
    pins: bool = False  # an equality on several sizes no larger sizes satisfy


@dataclass(frozen=True)
class DimensionRange:
    """Sizes of one dynamic dimension for which every guard of the capture holds."""

    dimension: str  # x.shape[3]
    symbol: str
    example: int
    min: int  # smallest valid size of the interval containing the example
    max: int | None  # largest; None: valid up to the scan limit
    step: int = 1  # valid sizes are min, min + step, ... (a divisibility guard)
    guard: str = ""  # the guard failing just outside the interval
    location: SourceLocation | None = None

    @property
    def bounded(self) -> bool:
        """True when the guards exclude sizes >= 2: a branch taken at the example size
        (or an operator's requirement, a kernel larger than the input) fails outside."""
        return self.max is not None or self.min > 2 or self.step > 1


def shape_env_of(ep: torch.export.ExportedProgram) -> ShapeEnv | None:
    """The ShapeEnv of the program's symbolic input sizes (None when all are static)."""
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        for d in getattr(val, "shape", ()):
            if isinstance(d, torch.SymInt):
                return d.node.shape_env
    return None


def _hint(env, symbol) -> int | None:
    table = getattr(env, "backed_var_to_val", None) or env.var_to_val
    value = table.get(symbol)
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _compile_guards(env, names: list[str], recorder, values: list | None = None) -> list[_Guard]:
    """The guards on the independent symbols ``names`` as Python functions. Symbols
    replaced by others are substituted first; an equality between several symbols
    (``mask length == past + sequence``) is a relation the inputs must satisfy together,
    not a range: it is left out, unless no sizes larger than the example's (``values``)
    satisfy it (``frames * height * width == 64``, from ``range(frames * height * width)``
    unrolled at the example's sizes): such an equality pins the sizes to the example's
    (:func:`_pins`). So is an inequality the example meets exactly between one size and
    a sum of others (``past + sequence <= mask length``, :func:`_covers`), and a
    disjunction one of whose terms is such a relation: ``expand`` of a slice of a
    position table to the sequence, ``pos[past:past + seq].expand(batch, seq)``,
    records ``seq == len or len == 1`` with ``len = min(512, past + seq) - min(512,
    past)``, which the inputs keep as long as ``past + seq <= 512``; scanned one size at
    a time and then narrowed jointly it read as ``past`` valid only up to its example."""
    import sympy
    from torch.utils._sympy.printers import PythonPrinter

    printer, guards, seen = PythonPrinter(), [], set()
    header = f"lambda {', '.join(names)}: " if names else "lambda: "
    exprs = [(g, env.replace(g.expr)) for g in env.guards]
    relations = _equalities(e for _, e in exprs)
    hints = dict(zip(names, values)) if values is not None else None
    for g, expr in exprs:
        if expr in (sympy.true, sympy.false) or isinstance(expr, bool):
            continue
        symbols = frozenset(str(s) for s in expr.free_symbols)
        if not symbols or not symbols <= set(names):
            continue  # a guard on values or unbacked symbols: not a size
        relation = _is_relation(expr, relations, hints) or (
            isinstance(expr, sympy.Or) and any(_is_relation(a, relations, hints) for a in expr.args)
        )
        code = printer.doprint(expr)
        if code in seen:
            continue
        seen.add(code)
        try:
            # sizes scaled by a float print as math.trunc(0.4*torch.sym_float(s0))
            function = eval(header + code, dict(_NAMESPACE))  # noqa: S307
        except SyntaxError:
            logger.info("guard not evaluated (not plain Python): %s", code[:200])
            continue
        pins = relation and values is not None and _pins(function, symbols, names, values)
        if relation and not pins:
            continue
        where = recorder.location(g.sloc) if recorder is not None else None
        guards.append(_Guard(code, function, symbols, where, pins))
    return guards


def _is_relation(expr, relations: set, hints: dict[str, int] | None) -> bool:
    """Whether ``expr`` relates several sizes: an equality between them, half of one
    (:func:`_equalities`), or an inequality the example meets exactly (:func:`_covers`)."""
    import sympy

    return len(expr.free_symbols) > 1 and (
        isinstance(expr, sympy.Eq)
        or _difference(expr) in relations
        or (hints is not None and _covers(expr, hints))
    )


def _pins(function, symbols: frozenset, names: list[str], values: list) -> bool:
    """Whether an equality on several sizes (``function`` of all ``names``) holds at the
    example (``values``) and at no much larger sizes: each of its sizes in turn is
    scanned up to 8 times its example (and near ``k ** d`` times it, a product of up to
    6 sizes), the others at ``k`` (2 to 4) times theirs. A
    relation the inputs keep as they grow (``mask length == past + sequence``,
    ``h * w == tokens``) holds somewhere there, an equality of a product with a constant
    (``frames * (height // 32) * (width // 32) == 2``) nowhere (a few sizes above the
    example may still satisfy it, the floor divisions hiding them)."""
    index = [names.index(n) for n in sorted(symbols)]

    def holds(trial: list[int]) -> bool:
        try:
            return bool(function(*trial))
        except Exception:  # noqa: BLE001 - not computable at these sizes
            return False

    if not holds(values):
        return False  # not decidable at the example: left out as before
    for free in index:
        for k in (2, 3, 4):
            trial = list(values)
            for i in index:
                trial[i] = values[i] * k
            example = values[free]
            # a size a few steps larger, or scaled like a product of up to 6 sizes
            sizes = set(range(example + 1, 8 * example + 65)) | {
                example * k**d + o for d in range(2, 7) for o in range(-2, 3)
            }
            for size in sorted(sizes):
                trial[free] = size
                if holds(trial):
                    return False
    return True


#: what the printed guards call (torch.sym_float, math.floor, ...)
_NAMESPACE = {"max": max, "min": min, "abs": abs, "torch": torch, "math": math}


def _difference(expr):
    """``a - b`` for a guard ``a <= b`` (or ``b >= a``), else None."""
    import sympy

    if isinstance(expr, (sympy.LessThan, sympy.StrictLessThan)):
        return sympy.expand(expr.lhs - expr.rhs)
    if isinstance(expr, (sympy.GreaterThan, sympy.StrictGreaterThan)):
        return sympy.expand(expr.rhs - expr.lhs)
    return None


def _covers(expr, hints: dict[str, int]) -> bool:
    """Whether ``expr`` is an inequality between one size and a sum of others that the
    example meets with equality (``past + sequence <= mask length`` with a mask of
    ``past + sequence`` positions: transformers pads a shorter mask): a homogeneous
    linear form of three sizes or more, zero at the example's sizes (``hints``). The
    inputs were built with that relation and keep it at every size, as an equality
    between sizes; scanned one size at a time, the others at their example, it would
    read as a bound on each (the sequence "valid only up to 3"). Two sizes equal at the
    example (a square image, ``height <= width`` from ``if height > width``) are a
    coincidence the inputs need not keep: that guard stays a range."""
    import sympy

    diff = _difference(expr)
    if diff is None or isinstance(expr, (sympy.StrictLessThan, sympy.StrictGreaterThan)):
        return False
    symbols = diff.free_symbols
    if len(symbols) < 3 or any(str(s) not in hints for s in symbols):
        return False
    try:
        poly = sympy.Poly(diff, *sorted(symbols, key=str))
    except sympy.PolynomialError:  # Min, floor division, ...: not a linear form
        return False
    if poly.total_degree() != 1 or poly.coeff_monomial(1) != 0:
        return False  # a product of sizes, or a bound by a constant
    return diff.xreplace({s: sympy.Integer(hints[str(s)]) for s in symbols}) == 0


def _equalities(exprs) -> set:
    """Differences ``d`` for which both ``d <= 0`` and ``-d <= 0`` are guards: together an
    equality between sizes (``mask length == past + sequence``)."""
    diffs = {d for d in (_difference(e) for e in exprs) if d is not None}
    return {d for d in diffs if -d in diffs}


def _holds(guard: _Guard, values: list[int]) -> bool:
    try:
        return bool(guard.function(*values))
    except Exception:  # noqa: BLE001 - a guard not computable at a size fails there
        return False


def _scan(
    guards: list[_Guard], values: list[int], index: int, start: int, stop: int, step: int
) -> tuple[int, _Guard | None]:
    """The last size from ``start`` (towards ``stop``) where all guards hold, and the
    guard failing at the next size (None when none fails before ``stop``)."""
    values = list(values)
    last = start
    for size in range(start + step, stop + step, step):
        if size < 2:
            break
        values[index] = size
        failing = next((g for g in guards if not _holds(g, values)), None)
        if failing is not None:
            return last, failing
        last = size
    return last, None


def guard_ranges(
    ep: torch.export.ExportedProgram,
    recorder: GuardRecorder | None = None,
    input_names: list[str] | None = None,
) -> list[DimensionRange]:
    """One :class:`DimensionRange` per dynamic input dimension of ``ep``.

    ``recorder`` (a :class:`GuardRecorder` active during the capture) gives the user's
    line of each guard; ``input_names`` the names of the flattened inputs.
    """
    from .shape_guards import _pretty

    env = shape_env_of(ep)
    if env is None:
        return []
    dims = {}  # symbol name -> (symbol, source)
    for symbol, sources in env.var_to_sources.items():
        replaced = env.replacements.get(symbol)
        if replaced is not None and replaced != symbol:
            continue  # equal to another size (or a function of others): not scanned
        if sources and _hint(env, symbol) is not None:
            dims.setdefault(str(symbol), (symbol, sources[0].name))
    names = sorted(dims)
    values = [_hint(env, dims[n][0]) for n in names]
    guards = _compile_guards(env, names, recorder, values)
    bounds, failing = {}, {}
    for i, name in enumerate(names):
        mine = [g for g in guards if name in g.symbols]
        dropped = [g for g in mine if not _holds(g, values)]
        if dropped:  # not computable here (it holds at the example by construction)
            logger.info(
                "guards on %s not evaluated: %s", name, "; ".join(g.code[:100] for g in dropped)
            )
            mine = [g for g in mine if g not in dropped]
        example = values[i]
        limit = max(SCAN_LIMIT, 2 * example)
        low, below = _scan(mine, values, i, example, 2, -1) if example > 2 else (example, None)
        high, above = _scan(mine, values, i, example, limit, 1)
        # guards failing on both sides next to the example may be a divisibility; failing
        # on one side only, they are a bound at the example (``size >= 8`` at 8), and a
        # step would claim the valid sizes just above or below it invalid
        stuck = (high == example and above is not None) and (
            (low == example and below is not None) or example in (0, 1, 2)
        )
        step = _period(mine, values, i) if stuck else None
        if step is not None:  # sizes of one residue modulo step: scanned by steps
            low, below = _scan(mine, values, i, example, 2, -step)
            high, above = _scan(mine, values, i, example, limit, step)
        bounds[name] = [low, high, limit, step or 1]
        failing[name] = above or below
    _shrink_for_joint_guards(guards, names, values, bounds, failing)
    for name in names:  # an equality with the example's sizes is the cause to name
        pin = next((g for g in guards if g.pins and name in g.symbols), None)
        if pin is not None:
            failing[name] = pin
    ranges = []
    for name, (low, high, limit, step) in bounds.items():
        source = dims[name][1]
        guard = failing[name]
        ranges.append(
            DimensionRange(
                dimension=_pretty(source, input_names),
                symbol=name,
                example=values[names.index(name)],
                min=low,
                max=None if high + step > limit else high,
                step=step,
                guard=_readable(guard.code, dims, input_names) if guard else "",
                location=guard.location if guard else None,
            )
        )
    return ranges


def _period(guards, values: list[int], index: int) -> int | None:
    """The smallest step (2 to 512) at which the guards hold again around the example,
    when they fail next to it (``size % 4 == 0``); None if there is none."""
    example = values[index]
    for step in range(2, 513):
        points = [example + step, example + 2 * step] + (
            [example - step] if example - step >= 2 else []
        )
        trial = list(values)
        ok = True
        for p in points:
            trial[index] = p
            if not all(_holds(g, trial) for g in guards):
                ok = False
                break
        if ok:
            return step
    return None


def _samples(low: int, high: int, example: int, step: int = 1) -> list[int]:
    """Sizes of ``[low, high]`` (of the example's residue modulo ``step``) where a guard
    on several dimensions is checked: the bounds, their neighbours, the example and its
    neighbours, eight evenly spaced."""
    points = {low, low + step, example - step, example, example + step, high - step, high}
    points |= {low + (high - low) * k // 9 for k in range(1, 9)}
    points = {example + (p - example) // step * step for p in points}
    return sorted(p for p in points if low <= p <= high)


def _shrink_for_joint_guards(guards, names, values, bounds, failing) -> None:
    """Narrows the intervals (``bounds``, in place) until every guard on several
    dimensions holds on samples of their product: scanned one at a time, ``h > w``
    accepts ``h = w = 7`` from the example ``h = 8, w = 6``."""
    import itertools

    joint = [g for g in guards if len(g.symbols) > 1 and g.symbols <= set(bounds)]
    for _ in range(64):
        bad = None
        for g in joint:
            axes = sorted(g.symbols)
            grids = [
                _samples(bounds[a][0], bounds[a][1], values[names.index(a)], bounds[a][3])
                for a in axes
            ]
            for point in itertools.product(*grids):
                trial = list(values)
                for a, v in zip(axes, point):
                    trial[names.index(a)] = v
                if not _holds(g, trial):
                    bad = (g, dict(zip(axes, point)))
                    break
            if bad:
                break
        if bad is None:
            return
        g, point = bad
        for axis, v in point.items():
            example = values[names.index(axis)]
            if v < example:  # below the example on this axis: the sizes up to v go
                bounds[axis][0] = v + 1
                failing[axis] = g
            elif v > example:
                bounds[axis][1] = v - 1
                failing[axis] = g
    logger.warning(
        "the ranges of %s still fail a joint guard after 64 narrowings", ", ".join(bounds)
    )


def _readable(code: str, dims: dict, input_names: list[str] | None) -> str:
    """The guard with symbols replaced by the inputs' names, cut at 300 characters."""
    import re

    from .shape_guards import _pretty

    text = re.sub(
        r"\b(s\d+)\b",
        lambda m: _pretty(dims[m.group(1)][1], input_names) if m.group(1) in dims else m.group(1),
        code,
    )
    return text if len(text) <= 300 else text[:297] + "..."


def merge_into_records(
    records: list[DimensionRecord], ranges: list[DimensionRange]
) -> list[DimensionRecord]:
    """The dimension records with the scanned ranges bounded by a branch: such a range
    replaces the constrained record of the same dimension (it is the exact one)."""
    bounded = {r.dimension: r for r in ranges if r.bounded}
    kept = [r for r in records if not (r.kind == "constrained" and r.dimension in bounded)]
    for r in bounded.values():
        kept.append(
            DimensionRecord(
                r.dimension,
                "constrained",
                r.symbol,
                value=r.example,
                min=r.min if r.min > 2 or r.step > 1 else None,
                max=r.max,
                step=r.step if r.step > 1 else None,
                guard=r.guard,
                location=r.location,
                branch=True,
            )
        )
    return kept


#: key of the model's metadata_props holding the valid sizes of the dynamic dimensions
METADATA_KEY = "dynamic_dimension_ranges"


def ranges_metadata(records: list[DimensionRecord]) -> dict[str, str]:
    """``{METADATA_KEY: json}`` for the constrained dimensions (empty when none).

    Only file names (not folders) are written: the same model gives the same bytes on
    any machine."""
    entries = {}
    for r in records:
        if r.kind != "constrained":
            continue
        entry = {"min": r.min, "max": r.max}
        if getattr(r, "step", None):
            entry["step"] = r.step
        if r.location is not None:
            entry["where"] = f"{os.path.basename(r.location.file)}:{r.location.line}"
            if r.location.code:
                entry["code"] = r.location.code
        entries[r.dimension] = entry
    return {METADATA_KEY: json.dumps(entries, sort_keys=True)} if entries else {}


__all__ = [
    "METADATA_KEY",
    "DimensionRange",
    "guard_ranges",
    "merge_into_records",
    "ranges_metadata",
    "shape_env_of",
]
