"""Tests of experimental_experiment.helpers.graph_plot."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import onnx
import onnx.helper as oh
import pytest

from experimental_experiment.helpers.graph_plot import (
    fx_items,
    graph_layout,
    onnx_items,
    op_type_counts,
    plot_fx_graph,
    plot_onnx_graph,
    plot_op_types,
)

FLOAT = onnx.TensorProto.FLOAT


def _model() -> onnx.ModelProto:
    """x -> Relu -> Add(., y) -> Neg -> z ; Add(x, y) -> w (a diamond and two outputs)."""
    return oh.make_model(
        oh.make_graph(
            [
                oh.make_node("Relu", ["x"], ["r"]),
                oh.make_node("Add", ["r", "y"], ["a"]),
                oh.make_node("Neg", ["a"], ["z"]),
                oh.make_node("Add", ["x", "y"], ["w"]),
            ],
            "g",
            [oh.make_tensor_value_info(n, FLOAT, [2]) for n in "xy"],
            [oh.make_tensor_value_info(n, FLOAT, [2]) for n in "zw"],
        )
    )


def test_graph_layout_layers_and_edges():
    items = onnx_items(_model())
    assert [label for _, label, _ in items] == ["x", "y", "Relu", "Add", "Neg", "Add", "z", "w"]
    pos, edges = graph_layout(items)
    layer = [-y for _, y in pos]
    assert layer == [0, 0, 1, 2, 3, 1, 4, 4]
    assert (1, 3) in edges  # y -> Add(Relu, y)
    assert (4, 6) in edges  # Neg -> z
    assert (5, 7) in edges  # Add(x, y) -> w
    assert len(edges) == 8
    # two items on a layer do not overlap: centers at least one unit apart
    assert abs(pos[2][0] - pos[5][0]) >= 1


def test_fx_items_reads_a_torch_fx_graph():
    torch = pytest.importorskip("torch")

    class Model(torch.nn.Module):
        def forward(self, x, y):
            return torch.relu(x) + y

    ep = torch.export.export(Model(), (torch.randn(2), torch.randn(2)))
    items = fx_items(ep)
    assert [(kind, label) for kind, label, _ in items] == [
        ("input", "x"),
        ("input", "y"),
        ("node", "relu"),
        ("node", "add.Tensor"),
        ("output", "output"),
    ]
    assert fx_items(ep, shapes=True)[0][1] == "x\n(2)"

    class WithWeights(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 2)

        def forward(self, x):
            return self.linear(x)

    ep_w = torch.export.export(WithWeights(), (torch.randn(3, 2),))
    assert [label for kind, label, _ in fx_items(ep_w) if kind == "input"] == ["x"]
    assert [label for kind, label, _ in fx_items(ep_w, weights=True) if kind == "input"] == [
        "p_linear_weight",
        "p_linear_bias",
        "x",
    ]
    ax = plot_fx_graph(ep)
    assert ax.get_title() == "2 nodes"
    plt.close("all")


def test_plot_onnx_graph_draws_one_label_per_item():
    ax = plot_onnx_graph(_model())
    texts = sorted(t.get_text() for t in ax.texts if t.get_text())
    assert texts == sorted(["x", "y", "Relu", "Add", "Neg", "Add", "z", "w"])
    assert ax.get_title() == "4 nodes"
    plt.close("all")


def test_plot_onnx_graph_refuses_a_large_graph():
    with pytest.raises(ValueError, match="plot_op_types"):
        plot_onnx_graph(_model(), max_nodes=3)


def test_plot_op_types_compares_models():
    model = _model()
    smaller = onnx.ModelProto()
    smaller.CopyFrom(model)
    del smaller.graph.node[2]
    assert op_type_counts(model) == {"Add": 2, "Relu": 1, "Neg": 1}
    ax = plot_op_types({"before": model, "after": smaller})
    assert [t.get_text() for t in ax.get_yticklabels()][-1] == "Add"
    assert ax.get_title() == "before: 4 nodes, after: 3 nodes"
    assert len(ax.patches) == 2 * 3
    plt.close("all")
