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
QUANTIZED_OPS = frozenset(
    {
        "MatMulNBits",
        "QuantizeLinear",
        "DequantizeLinear",
        "MatMulInteger",
        "DynamicQuantizeLinear",
        "DynamicQuantizeMatMul",
        "MatMulIntegerToFloat",
        "QLinearMatMul",
        "QLinearConv",
        "ConvInteger",
        "GatherBlockQuantized",
        "QGemm",
        "MatMulBnb4",
        "QAttention",
    }
)

# operators between the head's MatMul and the logits: reshapes, casts, a bias, a soft cap
_PASS_THROUGH = frozenset(
    {
        "Reshape",
        "Identity",
        "Cast",
        "Squeeze",
        "Unsqueeze",
        "Flatten",
        "Transpose",
        "Add",
        "Mul",
        "Div",
        "Tanh",
        "Softcap",
    }
)
_FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)


def node_type_counts(model: onnx.ModelProto) -> collections.Counter:
    """Number of nodes of the main graph per operator, keyed ``op_type`` for the
    default domain and ``domain.op_type`` otherwise.

    :param model: an ONNX model
    :return: a ``collections.Counter``

    .. code-block:: python

        counts = node_type_counts(onx)
        print(counts["MatMul"], counts["com.microsoft.MatMulNBits"])
    """
    return collections.Counter(
        f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
        for n in model.graph.node
    )


def quantized_nodes(model: onnx.ModelProto) -> list[str]:
    """Operator types of the main graph which are quantization operators
    (:data:`QUANTIZED_OPS`), sorted, each once.

    :param model: an ONNX model

    .. code-block:: python

        assert not quantized_nodes(onx), "quantized already"
    """
    return sorted({n.op_type for n in model.graph.node if n.op_type in QUANTIZED_OPS})


def missing_weights(model: onnx.ModelProto) -> list[str]:
    """Initializers of the main graph whose data is not in the proto: external data not
    loaded, or weights a weight-free export declared and no checkpoint filled yet (the
    ``unfilled`` list of the model's metadata, whose data file holds zeros).

    :param model: an ONNX model

    .. code-block:: python

        onx = onnx.load("model.onnx", load_external_data=False)
        print(missing_weights(onx))  # every external initializer
    """
    from ..xbuilder.model_container import get_weights_metadata

    unfilled = set(get_weights_metadata(model).get("unfilled", []))
    return [
        i.name
        for i in model.graph.initializer
        if i.data_location == onnx.TensorProto.EXTERNAL or i.name in unfilled
    ]


def weight_of(
    node: onnx.NodeProto,
    inits: dict[str, onnx.TensorProto],
    transposed: dict[str, onnx.TensorProto] | None = None,
) -> onnx.TensorProto | None:
    """The float initializer a ``MatMul`` (or a ``Gemm``) multiplies by on the right,
    of rank 2 or of rank above 2 with leading ones (the weights onnxruntime's
    quantizers rewrite), directly or through a ``Transpose`` (``transposed``), None
    otherwise.

    :param node: a node
    :param inits: initializers by name
    :param transposed: outputs of ``Transpose(initializer)``, see
        :func:`transposed_weights`

    .. code-block:: python

        inits = {i.name: i for i in onx.graph.initializer}
        weights = [weight_of(n, inits, transposed_weights(onx)) for n in onx.graph.node]
    """
    if node.op_type not in ("MatMul", "Gemm") or len(node.input) < 2:
        return None
    init = inits.get(node.input[1])
    if init is None and transposed:
        init = transposed.get(node.input[1])
    if init is None or init.data_type not in _FLOATS or len(init.dims) < 2:
        return None
    if any(d != 1 for d in init.dims[:-2]):
        return None
    return init


def transposed_weights(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """Outputs of the ``Transpose`` nodes of the main graph swapping the two
    dimensions of a float initializer, with that initializer: the exporter leaves
    ``Transpose(weight)`` unfolded for large weights (onnxruntime folds it when the
    session loads), the quantizers need the weight itself.

    :param model: an ONNX model

    .. code-block:: python

        print(transposed_weights(onx))  # {'_transpose_48': <lm_head.weight>}
    """
    inits = {i.name: i for i in model.graph.initializer}
    out = {}
    for node in model.graph.node:
        if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx"):
            continue
        init = inits.get(node.input[0])
        perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), [1, 0])
        if (
            init is not None
            and init.data_type in _FLOATS
            and len(init.dims) == 2
            and perm == [1, 0]
        ):
            out[node.output[0]] = init
    return out


def fold_weight_transposes(model: onnx.ModelProto) -> list[str]:
    """Replaces, in place, every ``Transpose(weight)`` of :func:`transposed_weights`
    feeding a ``MatMul`` or a ``Gemm`` by the transposed initializer (the original one
    is removed when nothing else uses it); returns the names of the new initializers.

    :param model: an ONNX model, modified

    .. code-block:: python

        fold_weight_transposes(onx)  # the head's weight becomes an initializer
    """
    from onnx import numpy_helper

    graph = model.graph
    candidates = transposed_weights(model)
    consumers = collections.defaultdict(list)
    for node in graph.node:
        for i in node.input:
            consumers[i].append(node)
    outputs = {o.name for o in graph.output}
    folded = [
        name
        for name in candidates
        if name not in outputs
        and all(
            n.op_type in ("MatMul", "Gemm") and list(n.input).index(name) == 1
            for n in consumers[name]
        )
    ]
    if not folded:
        return []
    for name in folded:
        value = numpy_helper.to_array(candidates[name]).T.copy()
        graph.initializer.append(numpy_helper.from_array(value, name))
    keep = [n for n in graph.node if not (n.op_type == "Transpose" and n.output[0] in folded)]
    del graph.node[:]
    graph.node.extend(keep)
    used = {i for n in graph.node for i in n.input} | outputs
    unused = [i for i in graph.initializer if i.name not in used]
    for init in unused:
        graph.initializer.remove(init)
    return folded


def find_lm_head(model: onnx.ModelProto) -> list[str]:
    """Names of the ``MatMul`` / ``Gemm`` nodes with a constant weight which compute
    a graph output (the logits of a language model, the last layer of a classifier),
    following backwards the reshapes, casts, bias and soft cap between them.

    :param model: an ONNX model

    .. code-block:: python

        heads = find_lm_head(onx)  # kept in float unless quantize_lm_head=True
    """
    return [model.graph.node[i].name for i in lm_head_indices(model)]


def lm_head_indices(model: onnx.ModelProto) -> list[int]:
    """Positions in ``model.graph.node`` of the nodes :func:`find_lm_head` names (nodes
    may have no name).

    :param model: an ONNX model

    .. code-block:: python

        heads = [onx.graph.node[i] for i in lm_head_indices(onx)]
    """
    graph = model.graph
    producers = {o: i for i, n in enumerate(graph.node) for o in n.output if o}
    inits = {i.name: i for i in graph.initializer}
    transposed = transposed_weights(model)
    heads: list[int] = []
    for out in graph.output:
        name, seen = out.name, 0
        while name in producers and seen < 16:
            index, seen = producers[name], seen + 1
            node = graph.node[index]
            if node.op_type in ("MatMul", "Gemm"):
                if weight_of(node, inits, transposed) is not None and index not in heads:
                    heads.append(index)
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


def gemm_to_matmul(model: onnx.ModelProto) -> list[str]:
    """Rewrites, in place, every ``Gemm`` of the main graph multiplying by a float
    initializer (``alpha=1``, ``beta=1``, ``transA=0``) as ``MatMul`` (+ ``Add`` of the
    bias): onnxruntime's quantizers only rewrite ``MatMul``. A weight used with
    ``transB=1`` is stored transposed. Returns the names of the rewritten nodes (the
    ``MatMul`` keeps the ``Gemm``'s name).

    :param model: an ONNX model, modified

    .. code-block:: python

        gemm_to_matmul(onx)  # to_onnx exports a Linear on a 2D input as Gemm
    """
    from onnx import numpy_helper

    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    used = collections.Counter(i for n in graph.node for i in n.input)
    names = (
        {o for n in graph.node for o in n.output}
        | set(inits)
        | {i.name for i in graph.input}
        | {n.name for n in graph.node}
    )

    def fresh(base: str) -> str:
        name, k = base, 0
        while name in names:
            k += 1
            name = f"{base}_{k}"
        names.add(name)
        return name

    def value(node, name, default):
        return next(
            (onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == name), default
        )

    new_nodes, done = [], []
    for node in graph.node:
        if (
            node.op_type != "Gemm"
            or node.domain not in ("", "ai.onnx")
            or weight_of(node, inits) is None
            or value(node, "alpha", 1.0) != 1.0
            or value(node, "beta", 1.0) != 1.0
            or value(node, "transA", 0)
        ):
            new_nodes.append(node)
            continue
        weight = node.input[1]
        if value(node, "transB", 0):
            transposed = numpy_helper.to_array(inits[weight]).T.copy()
            if used[weight] > 1:  # shared: the other users keep the original
                weight = fresh(weight + "_T")
                graph.initializer.append(numpy_helper.from_array(transposed, weight))
            else:
                inits[weight].CopyFrom(numpy_helper.from_array(transposed, weight))
        bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
        out = node.output[0] if bias is None else fresh(node.output[0] + "_mm")
        new_nodes.append(
            onnx.helper.make_node("MatMul", [node.input[0], weight], [out], name=node.name)
        )
        if bias is not None:
            new_nodes.append(
                onnx.helper.make_node(
                    "Add", [out, bias], [node.output[0]], name=fresh(f"{node.name}_bias")
                )
            )
        done.append(node.name)
    if done:
        del graph.node[:]
        graph.node.extend(new_nodes)
    return done


def position_nodes(model: onnx.ModelProto) -> list[str]:
    """Names of the nodes of the main graph which do not depend on the model's float
    activations: the ones computing from integer inputs and constants only (positions
    times the rotary frequencies, their cosine and sine, shapes). In float16 a position
    above 2048 is rounded (to a multiple of 2, 4...), the angles of the rotary
    embedding with it: :func:`quantize_model
    <experimental_experiment.quantize.quantize_model>` keeps these nodes in float32.

    :param model: an ONNX model with named nodes

    .. code-block:: python

        print(position_nodes(onx))  # ['n_Cast_1', 'n_Mul', ..., 'n_Cos_1', 'n_Sin_1']
    """
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    active = {i.name for i in graph.input if i.type.tensor_type.elem_type in _FLOATS}
    names = []
    for node in graph.node:  # topological order
        embedding = (
            node.op_type == "Gather"
            and node.input[0] in inits
            and inits[node.input[0]].data_type in _FLOATS
        )
        if embedding or any(i in active for i in node.input):
            active.update(node.output)
        elif node.name:
            names.append(node.name)
    return names
