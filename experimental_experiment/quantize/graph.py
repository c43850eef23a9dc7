"""What :func:`quantize_model <experimental_experiment.quantize.quantize_model>` looks
for in a graph before it quantizes: the language model head, the weights of the
``MatMul`` nodes, the operators already quantized, the initializers without data.
Nothing here reads external data.

.. code-block:: python

    from experimental_experiment.quantize.graph import find_lm_head, node_type_counts

    print(find_lm_head(onx))  # ['n_MatMul_18']
    print(node_type_counts(onx)["com.microsoft.GroupQueryAttention"])
"""

from __future__ import annotations

import collections

import onnx

#: operators which mean the model is quantized already
QUANTIZED_OPS = frozenset({
    "MatMulNBits", "QuantizeLinear", "DequantizeLinear", "MatMulInteger",
    "DynamicQuantizeLinear", "DynamicQuantizeMatMul", "MatMulIntegerToFloat",
    "QLinearMatMul", "QLinearConv", "ConvInteger", "GatherBlockQuantized", "QGemm",
    "MatMulBnb4", "QAttention",
})

# operators between the head's MatMul and the logits: reshapes, casts, a bias, a soft cap
_PASS_THROUGH = frozenset({
    "Reshape", "Identity", "Cast", "Squeeze", "Unsqueeze", "Flatten", "Transpose",
    "Add", "Mul", "Div", "Tanh", "Softcap",
})
_FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)


def node_type_counts(model: onnx.ModelProto) -> collections.Counter:
    """Number of nodes of the main graph per operator, keyed ``op_type`` for the
    default domain and ``domain.op_type`` otherwise.

    :param model: an ONNX model
    :return: a :class:`collections.Counter`

    .. code-block:: python

        counts = node_type_counts(onx)
        print(counts["MatMul"], counts["com.microsoft.MatMulNBits"])
    """
    return collections.Counter(
        f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
        for n in model.graph.node)


def quantized_nodes(model: onnx.ModelProto) -> list[str]:
    """Operator types of the main graph which are quantization operators
    (:data:`QUANTIZED_OPS`), sorted, each once.

    :param model: an ONNX model

    .. code-block:: python

        assert not quantized_nodes(onx), "quantized already"
    """
    return sorted({n.op_type for n in model.graph.node if n.op_type in QUANTIZED_OPS})


def missing_weights(model: onnx.ModelProto) -> list[str]:
    """Initializers of the main graph whose data is not in the proto (external data
    not loaded, or declared but never written by a weight-free export).

    :param model: an ONNX model

    .. code-block:: python

        onx = onnx.load("model.onnx", load_external_data=False)
        print(missing_weights(onx))  # every external initializer
    """
    return [i.name for i in model.graph.initializer
            if i.data_location == onnx.TensorProto.EXTERNAL]


def _producers(graph: onnx.GraphProto) -> dict[str, onnx.NodeProto]:
    return {o: n for n in graph.node for o in n.output if o}


def weight_of(node: onnx.NodeProto, inits: dict[str, onnx.TensorProto]
              ) -> onnx.TensorProto | None:
    """The float initializer a ``MatMul`` (or a ``Gemm``) multiplies by on the right, of rank 2 or of rank above 2 with leading ones (the
    weights onnxruntime's quantizers rewrite), None otherwise.

    :param node: a node
    :param inits: initializers by name

    .. code-block:: python

        inits = {i.name: i for i in onx.graph.initializer}
        weights = [weight_of(n, inits) for n in onx.graph.node]
    """
    if node.op_type not in ("MatMul", "Gemm") or len(node.input) < 2:
        return None
    init = inits.get(node.input[1])
    if init is None or init.data_type not in _FLOATS or len(init.dims) < 2:
        return None
    if any(d != 1 for d in init.dims[:-2]):
        return None
    return init


def find_lm_head(model: onnx.ModelProto) -> list[str]:
    """Names of the ``MatMul`` / ``Gemm`` nodes with a constant weight which compute
    a graph output (the logits of a language model, the last layer of a classifier),
    following backwards the reshapes, casts, bias and soft cap between them.

    :param model: an ONNX model

    .. code-block:: python

        heads = find_lm_head(onx)  # kept in float unless quantize_lm_head=True
    """
    graph = model.graph
    producers = _producers(graph)
    inits = {i.name: i for i in graph.initializer}
    heads = []
    for out in graph.output:
        name, seen = out.name, 0
        while name in producers and seen < 16:
            node, seen = producers[name], seen + 1
            if node.op_type in ("MatMul", "Gemm"):
                if weight_of(node, inits) is not None and node.name not in heads:
                    heads.append(node.name)
                break
            if node.op_type not in _PASS_THROUGH:
                break
            data = [i for i in node.input if i and i not in inits]
            if len(data) != 1:
                break
            name = data[0]
    return heads


def embedding_gathers(model: onnx.ModelProto) -> list[str]:
    """Names of the ``Gather`` nodes of axis 0 looking up rows of a float initializer
    of rank 2 (the token embeddings).

    :param model: an ONNX model

    .. code-block:: python

        print(embedding_gathers(onx))  # ['n_Gather_3']
    """
    inits = {i.name: i for i in model.graph.initializer}
    names = []
    for node in model.graph.node:
        if node.op_type != "Gather" or node.input[0] not in inits:
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        init = inits[node.input[0]]
        if axis == 0 and init.data_type in _FLOATS and len(init.dims) == 2:
            names.append(node.name)
    return names


def name_nodes(model: onnx.ModelProto) -> None:
    """Gives a unique name to every unnamed node of the main graph (onnxruntime's
    quantizers select nodes by name), in place.

    :param model: an ONNX model, modified

    .. code-block:: python

        name_nodes(onx)
        assert all(n.name for n in onx.graph.node)
    """
    used = {n.name for n in model.graph.node if n.name}
    for i, node in enumerate(model.graph.node):
        if node.name:
            continue
        name, k = f"q_{node.op_type}_{i}", 0
        while name in used:
            k += 1
            name = f"q_{node.op_type}_{i}_{k}"
        node.name = name
        used.add(name)
