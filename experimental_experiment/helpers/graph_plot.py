"""Draws an ONNX graph, a torch.fx graph or operator counts with matplotlib.

Never imports torch (a torch.fx graph is read through its nodes' attributes).
matplotlib is a documentation dependency: it is imported when a function is called,
not when the module is imported.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import onnx

# An item to draw: (kind, label, indices of the items it consumes),
# kind is "input", "node" or "output".
Item = tuple[str, str, list[int]]

_COLORS = {"node": "#dce9f5", "input": "#e3f2d9", "output": "#fbe3cf"}


def _graph(model: onnx.ModelProto | onnx.GraphProto) -> onnx.GraphProto:
    return model.graph if isinstance(model, onnx.ModelProto) else model


def onnx_items(model: onnx.ModelProto | onnx.GraphProto) -> list[Item]:
    """The inputs, nodes and outputs of the main graph of an ONNX model
    (initializers and subgraphs left out)."""
    graph = _graph(model)
    items: list[Item] = []
    producer: dict[str, int] = {}
    for i in graph.input:
        producer[i.name] = len(items)
        items.append(("input", i.name, []))
    for node in graph.node:
        parents = [producer[name] for name in node.input if name in producer]
        for name in node.output:
            producer[name] = len(items)
        items.append(("node", node.op_type, parents))
    for o in graph.output:
        items.append(("output", o.name, [producer[o.name]] if o.name in producer else []))
    return items


def _fx_label(node: Any) -> str:
    target = getattr(node.target, "__name__", None) or str(node.target)
    for prefix in ("aten.", "torch.ops.aten."):
        target = target.removeprefix(prefix)
    return target.removesuffix(".default")


def _fx_shape(node: Any) -> str:
    shape = getattr(node.meta.get("val", None), "shape", None)
    return "" if shape is None else f"\n({', '.join(str(d) for d in shape)})"


def fx_items(graph: Any, *, shapes: bool = False, weights: bool = False) -> list[Item]:
    """The placeholders, operations and outputs of a :class:`torch.fx.Graph`
    (or an object with a ``graph`` attribute such as an ExportedProgram);
    ``get_attr`` nodes are left out. With ``shapes=True``, the label of an input
    has a second line with its shape (from ``node.meta["val"]``). The parameters,
    buffers and constants of an ExportedProgram are left out unless ``weights=True``."""
    signature = getattr(graph, "graph_signature", None)
    keep = None if signature is None or weights else set(signature.user_inputs)
    graph = getattr(graph, "graph", graph)
    items: list[Item] = []
    index: dict[Any, int] = {}
    for node in graph.nodes:
        if node.op == "get_attr" or (
            node.op == "placeholder" and keep is not None and node.name not in keep
        ):
            continue
        parents = [index[n] for n in node.all_input_nodes if n in index]
        if node.op == "output":
            for k, parent in enumerate(parents):
                items.append(("output", f"output_{k}" if len(parents) > 1 else "output", [parent]))
            continue
        index[node] = len(items)
        kind = "input" if node.op == "placeholder" else "node"
        if kind == "input":
            label = node.name + (_fx_shape(node) if shapes else "")
        else:
            label = _fx_label(node)
        items.append((kind, label, parents))
    return items


def _short(label: str) -> str:
    return "\n".join(line if len(line) <= 20 else line[:18] + ".." for line in label.split("\n"))


def _label_width(label: str) -> float:
    return max(1.0, 0.1 * max(len(line) for line in _short(label).split("\n")) + 0.3)


def graph_layout(items: list[Item]) -> tuple[list[tuple[float, float]], list[tuple[int, int]]]:
    """Places items on layers, top to bottom: inputs on layer 0, an operation on the
    layer after the deepest of its inputs, outputs on the last layer; the items of a
    layer are centered around ``x = 0``.

    :return: ``(positions, edges)``: ``positions[i] = (x, -layer)`` for item ``i``,
        ``edges`` the pairs ``(producer, consumer)``
    """
    depth = []
    for kind, _, parents in items:
        depth.append(0 if kind == "input" else 1 + max((depth[p] for p in parents), default=0))
    last = 1 + max((d for (kind, _, _), d in zip(items, depth) if kind == "node"), default=0)
    depth = [last if kind == "output" else d for (kind, _, _), d in zip(items, depth)]
    rows: dict[int, list[int]] = {}
    for i, d in enumerate(depth):
        rows.setdefault(d, []).append(i)
    positions = [(0.0, 0.0)] * len(items)
    for d, members in rows.items():
        # an item is as wide as its label (about 0.1 unit per character), gaps of 0.3
        widths = [_label_width(items[i][1]) for i in members]
        x = -(sum(widths) + 0.3 * (len(widths) - 1)) / 2
        for i, w in zip(members, widths):
            positions[i] = (x + w / 2, -float(d))
            x += w + 0.3
    edges = [(p, i) for i, (_, _, parents) in enumerate(items) for p in parents]
    return positions, edges


def plot_items(items: list[Item], ax=None, *, title: str | None = None, max_nodes: int = 80):
    """Draws items (see :func:`onnx_items`, :func:`fx_items`): one box per
    operation, inputs in green, outputs in orange, an arrow per edge.

    :param items: what to draw
    :param ax: the axes to draw on, a new figure sized to the graph when None
    :param title: the title, by default the number of operations
    :param max_nodes: above this number of operations the drawing is unreadable:
        a ValueError suggests :func:`plot_op_types` instead
    :return: the axes
    """
    import matplotlib.pyplot as plt

    n_nodes = sum(1 for kind, _, _ in items if kind == "node")
    if n_nodes > max_nodes:
        raise ValueError(
            f"the graph has {n_nodes} nodes, more than max_nodes={max_nodes}: "
            f"draw its operator counts with plot_op_types or raise max_nodes"
        )
    positions, edges = graph_layout(items)
    xs = [x for x, _ in positions]
    margin = max(_label_width(label) for _, label, _ in items) / 2 + 0.2
    height = 1 - min(y for _, y in positions)
    if ax is None:
        width = max(xs) - min(xs) + 2 * margin
        _, ax = plt.subplots(figsize=(max(4.0, 0.8 * width), max(3.0, 0.8 * height)))
    for src, dst in edges:
        ax.annotate(
            "",
            xy=positions[dst],
            xytext=positions[src],
            arrowprops={"arrowstyle": "->", "color": "#777777", "shrinkA": 10, "shrinkB": 10},
        )
    for (kind, label, _), (x, y) in zip(items, positions):
        ax.text(
            x,
            y,
            _short(label),
            ha="center",
            va="center",
            fontsize=9,
            bbox={
                "boxstyle": "round,pad=0.3" if kind == "node" else "round4,pad=0.3",
                "fc": _COLORS[kind],
            },
        )
    ax.set_xlim(min(xs) - margin, max(xs) + margin)
    ax.set_ylim(-height + 0.5, 0.5)
    ax.set_axis_off()
    ax.set_title(title or f"{n_nodes} nodes")
    return ax


def plot_onnx_graph(model: onnx.ModelProto | onnx.GraphProto, ax=None, **kwargs):
    """Draws the main graph of an ONNX model, top to bottom, one box per node
    labelled with its operator type (initializers and subgraphs are not drawn).

    :param model: a model or a graph (the body of a ``Loop`` or an ``If`` branch)
    :param ax: the matplotlib axes to draw on, a new figure when None
    :param kwargs: layout options of ``plot_items`` (same module)
    :return: the axes

    .. code-block:: python

        import matplotlib.pyplot as plt
        import torch
        from experimental_experiment.helpers.graph_plot import plot_onnx_graph
        from experimental_experiment.torch_interpreter import to_onnx

        onx = to_onnx(torch.nn.Linear(4, 2), (torch.randn(3, 4),))
        plot_onnx_graph(onx)
        plt.show()
    """
    return plot_items(onnx_items(model), ax, **kwargs)


def plot_fx_graph(graph: Any, ax=None, *, shapes: bool = False, weights: bool = False, **kwargs):
    """Draws a :class:`torch.fx.Graph` (or an ExportedProgram, a GraphModule),
    top to bottom, one box per operation.

    :param graph: a :class:`torch.fx.Graph`, a GraphModule or an ExportedProgram
    :param ax: the matplotlib axes to draw on, a new figure when None
    :param shapes: writes the shapes of the inputs
    :param weights: draws the weights of an ExportedProgram (hidden by default)
    :param kwargs: layout options of ``plot_items`` (same module)
    :return: the axes

    .. code-block:: python

        import torch
        from experimental_experiment.helpers.graph_plot import plot_fx_graph

        ep = torch.export.export(torch.nn.Linear(4, 2), (torch.randn(3, 4),))
        plot_fx_graph(ep, shapes=True)
    """
    return plot_items(fx_items(graph, shapes=shapes, weights=weights), ax, **kwargs)


def op_type_counts(model: onnx.ModelProto | onnx.GraphProto) -> Counter:
    """Number of nodes per operator type in the main graph (``domain.op_type``
    for a domain other than the default one)."""
    return Counter(
        f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
        for n in _graph(model).node
    )


def plot_op_types(
    models: dict[str, onnx.ModelProto | onnx.GraphProto],
    ax=None,
    *,
    title: str | None = None,
    top: int = 20,
):
    """Horizontal bars: the number of nodes per operator type for each model,
    for instance a model before and after optimization, or two exporters.

    :param models: ``{label: model}``, one bar color per label
    :param ax: the axes to draw on, a new figure when None
    :param title: the title, by default the total number of nodes per model
    :param top: only the most frequent operator types (over all models) are drawn
    :return: the axes

    .. code-block:: python

        from experimental_experiment.helpers.graph_plot import plot_op_types
        from experimental_experiment.xoptim import optimize_model

        plot_op_types({"before": onx, "after": optimize_model(onx)})
    """
    import matplotlib.pyplot as plt

    counts = {label: op_type_counts(m) for label, m in models.items()}
    total: Counter = Counter()
    for c in counts.values():
        total.update(c)
    ops = [op for op, _ in total.most_common(top)][::-1]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, max(2.5, 0.25 * len(ops) * max(1, len(models)))))
    height = 0.8 / max(1, len(counts))
    for k, (label, c) in enumerate(counts.items()):
        ys = [i + k * height - 0.4 + height / 2 for i in range(len(ops))]
        ax.barh(ys, [c.get(op, 0) for op in ops], height=height, label=label)
    ax.set_yticks(range(len(ops)))
    ax.set_yticklabels(ops)
    ax.set_xlabel("number of nodes")
    if len(counts) > 1:
        ax.legend()
    ax.set_title(
        title or ", ".join(f"{label}: {sum(c.values())} nodes" for label, c in counts.items())
    )
    return ax
