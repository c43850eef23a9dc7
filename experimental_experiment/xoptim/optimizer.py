"""The optimizer loop: passes, then rounds of non-overlapping pattern rewrites."""

from __future__ import annotations

import logging
import time
from typing import Any, Sequence, cast

from onnx import NodeProto, helper

from ..progress import Progress, sub_bar
from ..xbuilder import GraphBuilder
from ..xbuilder.graph_utils import rename_inputs, subgraph_users
from ..xbuilder.optimization_options import OptimizationOptions
from .functions import optimize_functions
from .graph_index import GraphIndex
from .match import Match, Refusal
from .matcher import IndexedGraph
from .node_set import NodeMap, NodeSet
from .passes import passes_of, run_passes
from .pattern import Pattern, RewriteOp
from .report import OptimizationReport, ReportEntry
from .subgraphs import ambiguous_names, optimize_subgraphs

logger = logging.getLogger(__name__)

#: reasons kept per pattern in the report
MAX_REASONS = 5


class RewriteLog(list):
    """The rewrites applied, in order: ``(pattern name, names of the removed nodes)``."""


def _record_refusal(entry: ReportEntry, reason: str, node: NodeProto, verbose: int) -> None:
    entry.refused += 1
    text = f"{node.op_type}({node.name}): {reason}"
    if len(entry.refusals) < MAX_REASONS and text not in entry.refusals:
        entry.refusals.append(text)
    if verbose >= 2:
        logger.info("[xoptim] %s refused at %s", entry.name, text)


def _engine_refusal(m: Match, index: GraphIndex) -> str | None:
    """Why the engine refuses a match: an intermediate result escapes it."""
    assert m.outputs is not None, "_find_matches sets the outputs of every match"
    inside = NodeSet(m.nodes)
    keep = set(m.outputs)
    for n in m.nodes:
        for o in n.output:
            if not o or o in keep:
                continue
            if o in index.outputs:
                return f"intermediate {o!r} is a graph output"
            if any(c not in inside for c in index.consumers.get(o, ())):
                return f"intermediate {o!r} is used outside the match"
    return None


def _find_matches(
    g: GraphBuilder,
    patterns: Sequence[Pattern],
    index: GraphIndex,
    report: OptimizationReport,
    verbose: int,
) -> list[Match]:
    """Non-overlapping matches, nodes in graph order, patterns in list order."""
    # (rank in the list, pattern): candidates sorted back into the list order
    by_anchor: dict[tuple[str, str], list[tuple[int, Pattern]]] = {}
    generic: list[tuple[int, Pattern]] = []
    for rank, p in enumerate(patterns):
        anchors = p.anchors()
        if anchors is None:
            generic.append((rank, p))
        for a in anchors or ():
            by_anchor.setdefault(a, []).append((rank, p))
    # what patterns see: the builder and the index (it delegates every attribute)
    view = cast(GraphBuilder, IndexedGraph(g, index))
    claimed = NodeSet()
    matches = []
    for node in g.nodes:
        cands = by_anchor.get((node.domain, node.op_type), []) + generic
        for _, p in sorted(cands, key=lambda c: c[0]) if generic else cands:
            if node in claimed:
                break
            entry = report.entry(p.name, "pattern")
            begin = time.perf_counter()
            res = p.match(view, node)
            reason = res.reason if isinstance(res, Refusal) else None
            m = res if isinstance(res, Match) else None
            if m is not None and m.outputs is None:
                m.outputs = [o for o in node.output]
            if m is not None:
                if any(n in claimed for n in m.nodes):
                    m = None
                else:
                    reason = _engine_refusal(m, index)
                    m = None if reason else m
            entry.time_s += time.perf_counter() - begin
            if m is None:
                if reason:
                    _record_refusal(entry, reason, node, verbose)
                continue
            entry.matched += 1
            claimed.update(m.nodes)
            matches.append(m)
            break
    return matches


def _apply(g: GraphBuilder, m: Match) -> list[NodeProto] | str:
    """Builds the replacement of a match; returns the new nodes or a refusal reason."""
    outputs = m.outputs
    assert outputs is not None, "_find_matches sets the outputs of every match"
    n0 = len(g.nodes)
    try:
        res = m.pattern.apply(RewriteOp(g), m)
    except Exception as e:  # a pattern bug must not break the export
        del g.nodes[n0:]
        logger.warning("[xoptim] %s failed: %s", m.pattern.name, e)
        return f"rewrite failed: {type(e).__name__}: {e}"
    new = list(g.nodes[n0:])
    del g.nodes[n0:]
    res = list(res) if isinstance(res, (tuple, list)) else [cast(str, res)]
    if len(res) != len(outputs):
        return f"rewrite returned {len(res)} results for {len(outputs)} outputs"
    for name, target in zip(res, outputs):
        t_new, t_old = g.get_type(name), g.get_type(target)
        if t_new and t_old and t_new != t_old:
            return f"rewrite changes the type of {target!r} ({t_old} -> {t_new})"
    gone = {o for n in m.nodes for o in n.output if o} - set(outputs)
    for node in new:
        if any(i in gone for i in node.input):
            return "the rewrite uses a result of a removed node"
    if any(name in gone or name in outputs for name in res):
        return "the rewrite returns a result of a removed node"
    produced = {o: (node, i) for node in new for i, o in enumerate(node.output) if o}
    renamed: dict[str, str] = {}
    for name, target in zip(res, outputs):
        if name in produced and name not in renamed:
            node, i = produced[name]
            node.output[i] = target
            renamed[name] = target
            if g.get_shape(target) is None and (shape := g.get_shape(name)) is not None:
                g.set_shape(target, shape)
            elif g.get_rank(target) is None and (rank := g.get_rank(name)) is not None:
                g.set_rank(target, rank)
            if not g.get_type(target) and g.get_type(name):
                g.set_type(target, g.get_type(name))
        else:
            src = renamed.get(name, name)
            new.append(
                helper.make_node("Identity", [src], [target], name=g.unique_name("n_Identity"))
            )
    if renamed:
        for node in new:
            rename_inputs(node, renamed)
    return new


def apply_patterns_once(
    g: GraphBuilder,
    patterns: Sequence[Pattern],
    report: OptimizationReport,
    *,
    verbose: int = 0,
    log: RewriteLog | None = None,
    max_rewrites: int | None = None,
    index: GraphIndex | None = None,
) -> int:
    """One round: finds non-overlapping matches, applies them; returns how many.

    ``index`` is the graph's index kept by the caller across rounds, updated here for
    every rewrite applied (a new one is built when None)."""
    if index is None:
        index = GraphIndex(g)
    else:
        index.reset_positions()  # node positions are recomputed once per round
    matches = _find_matches(g, patterns, index, report, verbose)
    if max_rewrites is not None:
        matches = matches[: max(max_rewrites, 0)]
    replace: NodeMap[list[NodeProto]] = NodeMap()  # root -> its replacement
    removed = NodeSet()
    for m in matches:
        entry = report.entry(m.pattern.name, "pattern")
        begin = time.perf_counter()
        new = _apply(g, m)
        entry.time_s += time.perf_counter() - begin
        root = max(m.nodes, key=index.position)
        if isinstance(new, str):
            _record_refusal(entry, new, root, verbose)
            continue
        entry.applied += 1
        replace[root] = new
        removed.update(m.nodes)
        if log is not None:
            log.append((m.pattern.name, [n.name for n in m.nodes]))
        if verbose:
            logger.info(
                "[xoptim] %s applied on %s",
                m.pattern.name,
                [f"{n.op_type}({n.name})" for n in m.nodes],
            )
    if not replace:
        return 0
    nodes = []
    for n in g.nodes:
        if n in replace:
            nodes.extend(replace[n])
        elif n not in removed:
            nodes.append(n)
    g.nodes[:] = nodes
    # the index follows the rewrites: removed nodes out, replacements in
    index.replace(removed, (n for new in replace.values() for n in new))
    return len(replace)


class _Run:
    """What every graph of one optimization shares: options, patterns, the report, the
    log and the number of rewrites left (``max_rewrites``)."""

    def __init__(self, options, patterns, verbose, log, max_rewrites):
        self.options, self.patterns, self.verbose = options, patterns, verbose
        self.log, self.left = log, max_rewrites
        self.report = OptimizationReport()
        self.bar: Any = None  # counts the rounds (a progress bar or the silent one)


def _optimize_graph(g: GraphBuilder, run: _Run, ambiguous: frozenset[str] | None = None) -> None:
    """Passes and patterns on one graph, then on its subgraphs; ``ambiguous`` is None
    for a main graph or a function body, the names defined twice in the model for a
    subgraph (see :mod:`experimental_experiment.xoptim.subgraphs`)."""
    options, subgraph = run.options, ambiguous is not None
    run_passes(g, options, run.report, subgraph=subgraph)
    index = None  # built once, updated by the rewrites, rebuilt after a pass changed g
    for it in range(options.max_iterations):
        if run.left is not None and run.left <= 0:
            break
        if index is None:
            index = GraphIndex(g)
        n = apply_patterns_once(
            g,
            run.patterns,
            run.report,
            verbose=run.verbose,
            log=run.log,
            max_rewrites=run.left,
            index=index,
        )
        if run.verbose:
            logger.info("[xoptim] iteration %d: %d rewrites", it, n)
        run.bar.set_postfix_str(f"{n} rewrites, {len(g.nodes)} nodes", refresh=False)
        run.bar.update(1)
        if n == 0:
            break
        if run.left is not None:
            run.left -= n
        before = _pass_changes(run.report)
        run_passes(g, options, run.report, subgraph=subgraph)
        if _pass_changes(run.report) != before:
            index = None
    if not options.subgraphs or not subgraph_users(g):
        return
    if ambiguous is None:
        ambiguous = ambiguous_names(g)
    removed = optimize_subgraphs(g, lambda child: _optimize_graph(child, run, ambiguous), ambiguous)
    if removed is not None:
        # the bodies may no longer use some outer results
        run_passes(g, options, run.report, subgraph=subgraph)
        if not subgraph:
            _count(run.report, "optimize_subgraphs", removed)


def _pass_changes(report: OptimizationReport) -> int:
    """The changes the passes made so far (the index is stale when it grows)."""
    return sum(e.applied for e in report if e.kind == "pass")


def _count(report: OptimizationReport, name: str, removed: int) -> None:
    entry = report.entry(name, "pass")
    entry.matched += removed
    entry.applied += removed


def optimize_builder(
    g: GraphBuilder,
    options: OptimizationOptions | None = None,
    *,
    patterns: Sequence[Pattern] | str | None = None,
    max_rewrites: int | None = None,
    log: RewriteLog | None = None,
    progress: Progress | None = None,
) -> OptimizationReport:
    """Runs the passes and the patterns on a GraphBuilder (modified in place), inside
    its subgraphs (If, Loop, Scan bodies, nested ones too) and its local functions
    (see :mod:`experimental_experiment.xoptim.subgraphs` and
    :mod:`experimental_experiment.xoptim.functions`).

    :param g: the builder
    :param options: passes, pattern sets (``options.patterns``), verbosity,
        ``options.subgraphs`` and ``options.functions``
    :param patterns: overrides ``options.patterns`` (a string or a list of patterns)
    :param max_rewrites: stops after this number of rewrites (used to bisect),
        rewrites inside subgraphs and functions included
    :param log: receives the applied rewrites in order
    :param progress: a ``experimental_experiment.progress.Progress``
        counting the rounds of patterns (the rewrites of the last one, the number of
        nodes), None for none
    :return: the report, one entry per pass and pattern (``optimize_subgraphs`` and
        ``optimize_functions``: nodes removed inside them)

    .. code-block:: python

        from experimental_experiment.xoptim import optimize_builder

        report = optimize_builder(g)  # g: a GraphBuilder
        print([(e.name, e.applied) for e in report if e.applied])
    """
    from .registry import get_pattern_list

    options = options or OptimizationOptions()
    if patterns is None:
        patterns = options.patterns
    if isinstance(patterns, str) or patterns is None:
        patterns = get_pattern_list(patterns or "none")
    patterns = [p for p in patterns if p.min_opset <= g.main_opset <= p.max_opset]
    verbose = max(options.verbose, getattr(g, "verbose", 0) or 0)
    run = _Run(options, patterns, verbose, log, max_rewrites)
    for p in passes_of(options):
        run.report.entry(p.name, "pass")
    for p in patterns:
        run.report.entry(p.name, "pattern")
    with sub_bar(progress, None, "optimize", unit="round") as run.bar:
        _optimize_graph(g, run)
        if options.functions and g.functions:
            removed = optimize_functions(g, lambda fb: _optimize_graph(fb, run))
            if removed is not None:
                _count(run.report, "optimize_functions", removed)
    return run.report
