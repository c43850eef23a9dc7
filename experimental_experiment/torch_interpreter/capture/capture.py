"""Capture: torch.export.export with the strategy of ExportOptions."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import torch

from ..errors import CaptureError
from ..export_options import ExportOptions
from ..stages import DynamicShapes
from .capture_dims import size_oblivious_capture
from .fake_quantize_capture import freeze_disabled_observers
from .fresh_stack import run_on_fresh_stack
from .inplace_ops import functionalize_in_place
from .signature import ArgumentLayout, explicit_keywords

logger = logging.getLogger(__name__)


def capture(
    model: torch.nn.Module,
    args: tuple,
    kwargs: dict,
    dynamic_shapes: DynamicShapes,
    options: ExportOptions,
    record: list | None = None,
    layout: ArgumentLayout | None = None,
) -> torch.export.ExportedProgram:
    """Runs torch.export.export, then the decompositions the options ask for.

    With ``options.fallback``, a failure is followed by the other ``strict`` value
    (non-strict then strict by default), then, when the capture worked but the
    decomposition (or functionalization) failed, by torch's default decomposition
    table. Every attempt and its error are logged; the final :class:`CaptureError`
    lists them (its attribute ``attempts`` holds ``[(description, exception)]``).
    ``record``, if given, receives ``(description, exception or None, seconds)`` for
    every attempt (the export report). ``layout``: how the inputs bind to ``forward``
    when already known.
    """
    record = [] if record is None else record
    attempts = _attempts(options)
    errors, captured = [], {}  # [(description, error)], {strict: program or error}
    for strict, table in attempts:
        what = _describe(strict, table)
        if isinstance(captured.get(strict), Exception):
            continue  # the capture itself failed, decompositions cannot help
        begin = time.perf_counter()
        try:
            ep = _capture_once(
                model,
                args,
                kwargs,
                dynamic_shapes,
                strict,
                table,
                captured,
                options.size_oblivious,
                record,
                layout,
            )
        except Exception as e:
            if strict not in captured:
                captured[strict] = e
            logger.info("capture (%s) failed: %s: %s", what, type(e).__name__, e)
            errors.append((what, e))
            if not strict and _STRICT_ONLY in str(e) and (True, table) not in attempts:
                # torch.vmap with in_dims/out_dims != 0: only the strict capture works
                attempts.append((True, table))
            record.append((what, e, time.perf_counter() - begin))
            continue
        record.append((what, None, time.perf_counter() - begin))
        if errors:
            logger.info(
                "capture succeeded with %s after %s",
                what,
                "; ".join(f"{w}: {type(e).__name__}" for w, e in errors),
            )
        return ep
    raise _capture_error(model, errors) from errors[-1][1]


def _capture_once(
    model,
    args,
    kwargs,
    dynamic_shapes,
    strict: bool,
    table,
    captured: dict,
    oblivious: bool,
    record: list,
    layout=None,
) -> torch.export.ExportedProgram:
    """torch.export.export (once per value of ``strict``, kept in ``captured``), then
    the decompositions of ``table``."""

    def capture_and_decompose():
        with uncached_fake_dispatch():
            if strict not in captured:
                captured[strict] = _export(
                    model, args, kwargs, dynamic_shapes, strict, oblivious, record, layout
                )
            return decompose(captured[strict], table, owned=True)

    return run_on_fresh_stack(capture_and_decompose)


def uncached_fake_dispatch():
    """Context in which torch's fake tensors do not cache their dispatches
    (``torch._dynamo.config.fake_tensor_cache_enabled``). With dynamic dimensions most
    outputs have symbolic sizes, whose cache entries are built (sympy relations checked)
    and then not kept: capturing the 4-layer Llama of the export-time benchmark misses
    809 times, hits 231 times and keeps 13 entries. Without the cache its capture takes
    about half the time, the captured graph is the same (node names aside), see the
    export-time page."""
    import torch._dynamo.config

    return torch._dynamo.config.patch(fake_tensor_cache_enabled=False)


def _attempts(options: ExportOptions) -> list[tuple[bool, object]]:
    """(strict, decomposition table) of every capture to try, in order."""
    attempts = [(options.strict, options.decomposition_table)]
    if options.fallback:
        attempts.append((not options.strict, options.decomposition_table))
        if options.decomposition_table != "default":
            attempts += [(options.strict, "default"), (not options.strict, "default")]
    return attempts


def _describe(strict: bool, table) -> str:
    return f"strict={strict}" + (
        ""
        if table is None
        else f", decomposition_table={table if isinstance(table, str) else 'custom'}"
    )


def _capture_error(model, errors: list[tuple[str, Exception]]) -> CaptureError:
    """The error listing every attempt and what to try."""
    text = "\n".join(f"- {w}: {type(e).__name__}: {_first_lines(str(e))}" for w, e in errors)
    error = CaptureError(
        f"torch.export.export could not capture {type(model).__name__}:\n{text}\n"
        "What to try: ExportOptions(strict=...) with the other value or "
        "fallback=True; check dynamic_shapes (a dimension marked dynamic that "
        "the code specializes fails here); for transformers models use "
        "bypass_export_some_errors(patch_transformers=True)."
    )
    error.attempts = errors
    return error


def _export(
    model, args, kwargs, dynamic_shapes, strict: bool, oblivious: bool, record: list, layout=None
) -> torch.export.ExportedProgram:
    """torch.export.export, size-oblivious first when asked (then as torch does)."""
    # keywords received by **kwargs become named arguments (signature.py)
    with explicit_keywords(model, args, kwargs, layout):
        if oblivious and not torch.fx.experimental._config.backed_size_oblivious:
            begin = time.perf_counter()
            try:
                with size_oblivious_capture(True):
                    return torch.export.export(
                        model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=strict
                    )
            except Exception as e:
                if "Constraints violated" in str(e):
                    raise  # a dimension specialized: it is not better without
                logger.info(
                    "size-oblivious capture failed, capturing again without: %s: %s",
                    type(e).__name__,
                    _first_lines(str(e), 3),
                )
                record.append((f"strict={strict}, size-oblivious", e, time.perf_counter() - begin))
        return torch.export.export(
            model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=strict
        )


#: a non-strict capture error the strict capture does not have (torch.vmap with
#: in_dims or out_dims other than 0 in torch 2.13)
_STRICT_ONLY = "We found a fake tensor in the exported program constant's list"


def has_mutations(ep: torch.export.ExportedProgram) -> bool:
    """Tells if the graph calls in-place operators (``copy_``, ``add_``, ``index_put_``...)."""
    for node in ep.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None or not schema.is_mutable:
            continue
        # detach_ on lifted constants changes no value
        if node.target is not torch.ops.aten.detach_.default:
            return True
    return False


def has_batching(ep: torch.export.ExportedProgram) -> bool:
    """Tells if the graph keeps the calls torch.vmap records before decompositions
    (``_add_batch_dim``, ``_vmap_increment_nesting``, ``lazy_load_decompositions``)."""
    return any(
        node.op == "call_function"
        and getattr(node.target, "__module__", "") == "torch._functorch.predispatch"
        for node in ep.graph.nodes
    )


def decompose(
    ep: torch.export.ExportedProgram,
    table: dict[Any, Callable[..., Any]] | str | None,
    owned: bool = False,
) -> torch.export.ExportedProgram:
    """Applies a decomposition table (None: nothing, 'default': torch's).

    With no table, a graph with in-place operators is still functionalized:
    ``x[..., i] = y`` becomes ``select_scatter``, and buffer updates become outputs, while
    every other operator is kept as is. When the program is ours to change (``owned``,
    the capture made it), the in-place operators on tensors the program creates are
    rewritten in the graph (:func:`functionalize_in_place`), which is much faster than
    retracing with ``run_decompositions({})``, kept for the other cases.
    A graph calling ``torch.vmap`` goes through the same retracing: the batching rules
    then rewrite the batched operators into plain aten operators on the batched tensors.
    """
    if owned:  # QAT observers turned off update nothing: plain fake quantization
        freeze_disabled_observers(ep)
    if table is None:
        if has_mutations(ep):
            if owned:
                rewrite = functionalize_in_place(ep.graph_module)
                if rewrite.reason is None:
                    logger.info(
                        "in-place operators made functional in the graph: %d "
                        "(%d written back through views)",
                        rewrite.rewritten,
                        rewrite.write_backs,
                    )
                    return ep
                logger.info("functionalizing the whole program: %s", rewrite.reason)
            else:
                logger.info("the graph has in-place operators: functionalizing it")
            return ep.run_decompositions({})
        if has_batching(ep):
            logger.info("the graph calls torch.vmap: applying the batching rules")
            return ep.run_decompositions({})
        return ep
    if isinstance(table, str):
        if table != "default":
            raise ValueError(f"unknown decomposition table {table!r}")
        return ep.run_decompositions()
    return ep.run_decompositions(table)


def _first_lines(text: str, n: int = 12) -> str:
    lines = text.strip().splitlines()
    return "\n  ".join(lines[:n]) + ("\n  ..." if len(lines) > n else "")
