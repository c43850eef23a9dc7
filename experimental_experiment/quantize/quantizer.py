"""Quantizes the weights of an exported model with onnxruntime's tools:
``int4`` with ``MatMulNBitsQuantizer``
(weight-only, blocks), ``int8`` with ``onnxruntime.quantization.quantize_dynamic``
(weights per output channel, activations per tensor at run time:
``DynamicQuantizeLinear`` + ``MatMulInteger``, which onnxruntime fuses), ``fp16`` with
onnxruntime's float16 converter (``onnxruntime.transformers.float16``).

The fused operators the onnxruntime pattern set produces (``GroupQueryAttention``,
``SimplifiedLayerNormalization``, ``RotaryEmbedding``...) are left as they are: only
``MatMul`` nodes with a constant weight (and embeddings when asked) change.

.. code-block:: python

    from experimental_experiment.quantize import quantize_model

    q4 = quantize_model(onx, "int4", block_size=32, accuracy_level=4)
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile

import onnx

from ..progress import Progress, progress_enabled, sub_bar
from .errors import (
    AlreadyQuantizedError,
    MissingWeightsError,
    NothingToQuantizeError,
    QuantizeOptionError,
    UnsupportedPrecisionError,
)
from .graph import (
    embedding_gathers,
    fold_weight_transposes,
    gemm_to_matmul,
    lm_head_indices,
    missing_weights,
    name_nodes,
    position_nodes,
    quantized_nodes,
    transposed_weights,
    weight_of,
)
from .kernels import gather_block_quantized_available

logger = logging.getLogger(__name__)

#: the precisions :func:`quantize_model` accepts
PRECISIONS = ("int4", "int8", "fp16")
# a protobuf message cannot exceed 2 GB: bigger models go through external data
_PROTO_LIMIT = 2**31 - 2**26


def _check_options(
    precision: str, block_size: int, accuracy_level: int | None, quantize_embeddings: bool
) -> None:
    if precision not in PRECISIONS:
        raise UnsupportedPrecisionError(
            f"precision {precision!r} is not supported, use one of {', '.join(PRECISIONS)}"
        )
    if precision != "int4":
        if quantize_embeddings:
            raise QuantizeOptionError(
                f"quantize_embeddings needs precision 'int4' (GatherBlockQuantized), "
                f"not {precision!r}"
            )
        return
    if not isinstance(block_size, int) or block_size < 16 or block_size & (block_size - 1):
        raise QuantizeOptionError(
            f"block_size={block_size!r} has no MatMulNBits kernel: use a power of two of "
            f"at least 16 (32, 64, 128)"
        )
    if accuracy_level is not None and accuracy_level not in (0, 1, 2, 3, 4):
        raise QuantizeOptionError(
            f"accuracy_level={accuracy_level!r} is not one of 0, 1, 2, 3, 4 (4: int8 "
            f"activations, the fastest on CPU; None: the kernel's default)"
        )
    if quantize_embeddings and not gather_block_quantized_available():
        import onnxruntime

        raise QuantizeOptionError(
            f"onnxruntime {onnxruntime.__version__} has no CPU kernel GatherBlockQuantized "
            f"to quantize embeddings: upgrade onnxruntime or leave quantize_embeddings off"
        )


def _check_model(model: onnx.ModelProto, precision: str, quantize_lm_head: bool) -> list[int]:
    """Raises before any work; returns the positions of the heads kept in float."""
    if not isinstance(model, onnx.ModelProto):
        proto = getattr(model, "model_proto", None)  # a ModelContainer
        if isinstance(proto, onnx.ModelProto):
            raise MissingWeightsError(
                f"{type(model).__name__} keeps its weights outside the ModelProto: save it "
                f"(save_model) and load the file with onnx.load before quantizing"
            )
        raise TypeError(f"model must be an onnx.ModelProto, not {type(model).__name__}")
    missing = missing_weights(model)
    if missing:
        raise MissingWeightsError(
            f"{len(missing)} initializer(s) have no data (external data not loaded, or "
            f"weights of a weight-free export not filled), first {missing[:3]}: load the "
            f"model with its data (onnx.load(path)), fill a weight-free export first "
            f"(python -m experimental_experiment fill-weights)"
        )
    if precision == "fp16":
        return []
    done = quantized_nodes(model)
    if done:
        raise AlreadyQuantizedError(
            f"the model is quantized already (it has {', '.join(done)}); quantize the float "
            f"model to {precision}"
        )
    heads = [] if quantize_lm_head else lm_head_indices(model)
    inits = {i.name: i for i in model.graph.initializer}
    transposed = transposed_weights(model)  # folded before quantizing
    targets = [
        i
        for i, n in enumerate(model.graph.node)
        if weight_of(n, inits, transposed) is not None and i not in heads
    ]  # Gemm: rewritten as MatMul
    if not targets:
        names = [model.graph.node[i].name or model.graph.node[i].output[0] for i in heads]
        reason = (
            f" besides the head {names} kept in float (quantize_lm_head=True quantizes it)"
            if heads
            else ""
        )
        raise NothingToQuantizeError(
            f"no MatMul or Gemm multiplies by a constant weight{reason}: nothing to quantize "
            f"to {precision}"
        )
    return heads


def quantize_model(
    model: onnx.ModelProto,
    precision: str,
    *,
    block_size: int = 32,
    accuracy_level: int | None = None,
    quantize_lm_head: bool = False,
    quantize_embeddings: bool = False,
    symmetric: bool = True,
    keep_io_types: bool = False,
    progress: bool = False,
) -> onnx.ModelProto:
    """Quantizes the weights of a float model with onnxruntime's quantization tools,
    returns a new model (``model`` is left unchanged).

    :param model: a float ModelProto with its weights (external data loaded)
    :param precision: ``"int4"`` (``MatMulNBits``, weight-only, per block),
        ``"int8"`` (dynamic quantization, ``MatMulInteger``, int8 weights per output
        channel and uint8 activations, the weights on 7 bits with ``symmetric``: see
        ``_int8``) or ``"fp16"``
    :param block_size: int4: number of weights sharing one scale (a power of two >= 16)
    :param accuracy_level: int4: ``MatMulNBits``'s ``accuracy_level`` (4: activations
        quantized to int8 in the kernel, the fastest on CPU; None: the default, float)
    :param quantize_lm_head: quantizes the last ``MatMul`` producing the logits too
        (kept in float by default, it is the most sensitive one)
    :param quantize_embeddings: int4: the embedding ``Gather`` becomes
        ``GatherBlockQuantized`` (its weight is quantized along the hidden axis)
    :param symmetric: symmetric quantization (no zero point); False adds zero points
        (int4) or quantizes weights to uint8 (int8)
    :param keep_io_types: fp16: inputs and outputs stay float32, casts are inserted;
        the nodes computing from positions and constants only stay in float32
        (``position_nodes``)
        (on CPU, onnxruntime runs the operators without a float16 kernel in float32,
        see ``cpu_float16_fallbacks``)
    :param progress: a progress bar on stderr when it is a terminal: the stage in
        progress (check, prepare, quantize) and, for int4, the nodes quantized (the
        one being quantized); the command line ``quantize`` shows it by default
    :return: the quantized model
    :raises UnsupportedPrecisionError: precision not supported
    :raises QuantizeOptionError: a block size or accuracy level without kernel
    :raises MissingWeightsError: initializers without data in the proto
    :raises AlreadyQuantizedError: int4 or int8 asked for a quantized model
    :raises NothingToQuantizeError: no MatMul with a constant weight

    .. code-block:: python

        import onnxruntime
        from experimental_experiment.quantize import quantize_model

        q4 = quantize_model(onx, "int4", block_size=32, accuracy_level=4)
        sess = onnxruntime.InferenceSession(q4.SerializeToString(),
                                            providers=["CPUExecutionProvider"])
    """
    _check_options(precision, block_size, accuracy_level, quantize_embeddings)
    steps = ["check", "prepare", "quantize"]
    with Progress(steps, f"quantize {precision}", progress_enabled(progress)) as bar:
        shown = bar if bar.enabled else None  # the inner bar of int4, None: nothing drawn
        with bar.step("check"):
            head_indices = _check_model(model, precision, quantize_lm_head)
        with bar.step("prepare"):
            copy = onnx.ModelProto()
            copy.CopyFrom(model)
            name_nodes(copy)  # onnxruntime's quantizers exclude nodes by name
            heads = [copy.graph.node[i].name for i in head_indices]
            if precision != "fp16":
                fold_weight_transposes(copy)  # Transpose(weight) left for large weights
                gemm_to_matmul(copy)
        with bar.step("quantize"), _quiet_onnxruntime():
            if precision == "int4":
                result = _int4(
                    copy, heads, block_size, accuracy_level, symmetric, quantize_embeddings, shown
                )
            elif precision == "int8":
                result = _int8(copy, heads, symmetric)
            else:
                result = _fp16(copy, keep_io_types)
    logger.info(
        "[quantize_model] %s: %d -> %d nodes, heads kept in float %s",
        precision,
        len(model.graph.node),
        len(result.graph.node),
        heads,
    )
    return result


@contextlib.contextmanager
def _quiet_onnxruntime():
    """onnxruntime's quantizers log one line per node at level INFO (and a hint to
    preprocess on the root logger): shown only when this module logs at DEBUG."""
    if logger.isEnabledFor(logging.DEBUG):
        yield
        return
    names = ["onnxruntime.quantization.matmul_nbits_quantizer", "onnxruntime", ""]
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _int4(
    model: onnx.ModelProto,
    heads: list[str],
    block_size: int,
    accuracy_level: int | None,
    symmetric: bool,
    embeddings: bool,
    progress: Progress | None = None,
) -> onnx.ModelProto:
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    op_types = ["MatMul"]
    exclude = list(heads)
    if embeddings:
        op_types.append("Gather")
        keep = set(embedding_gathers(model))
        exclude.extend(
            n.name for n in model.graph.node if n.op_type == "Gather" and n.name not in keep
        )
    quantizer = MatMulNBitsQuantizer(
        model,
        bits=4,
        block_size=block_size,
        is_symmetric=symmetric,
        accuracy_level=accuracy_level,
        nodes_to_exclude=exclude,
        quant_format=QuantFormat.QOperator,
        op_types_to_quantize=tuple(op_types),
    )
    skipped = set(exclude)
    total = sum(n.op_type in op_types and n.name not in skipped for n in model.graph.node)
    with sub_bar(progress, total, "MatMulNBits", unit="node") as bar:
        if progress is not None:
            _count_nodes(quantizer, bar)
        quantizer.process()
    return quantizer.model.model


def _count_nodes(quantizer, bar) -> None:
    """Ticks ``bar`` for every node onnxruntime's quantizer quantizes (its
    ``node_quantizer.quantize``, called once per candidate node); nothing when this
    version of onnxruntime has no such method (the stage is still shown)."""
    node_quantizer = getattr(quantizer, "node_quantizer", None)
    quantize = getattr(node_quantizer, "quantize", None)
    if quantize is None:
        return

    def counted(node, *args, **kwargs):
        bar.set_postfix_str(node.name, refresh=False)
        try:
            return quantize(node, *args, **kwargs)
        finally:
            bar.update(1)

    node_quantizer.quantize = counted


def _int8(model: onnx.ModelProto, heads: list[str], symmetric: bool) -> onnx.ModelProto:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    large = model.ByteSize() >= _PROTO_LIMIT
    with tempfile.TemporaryDirectory() as folder:
        output = os.path.join(folder, "model.int8.onnx")
        quantize_dynamic(
            model,
            output,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=heads,
            weight_type=QuantType.QInt8 if symmetric else QuantType.QUInt8,
            # int8 weights on 7 bits: onnxruntime's uint8 x int8 kernels add pairs of
            # products in int16 with saturation on x86 CPUs without VNNI (AVX2 only);
            # the MLP of the tests: 0.072 off with 8 bits on an AMD EPYC, 0.017 with 7
            # (uint8 weights do not saturate)
            reduce_range=symmetric,
            # per channel: as fast as per tensor on CPU, more accurate (the small Llama
            # of bench.llm_exporters: relative error of the logits 0.042 against 0.051)
            per_channel=True,
            use_external_data_format=large,
            extra_options={
                "MatMulConstBOnly": True,
                # the outputs of contrib ops (GroupQueryAttention) have no type
                # after onnx's shape inference
                "DefaultTensorType": onnx.TensorProto.FLOAT,
            },
        )
        return onnx.load(output)


def _fp16(model: onnx.ModelProto, keep_io_types: bool) -> onnx.ModelProto:
    """onnxruntime's converter on the model without its position nodes, which come back
    in float32 in front of it: the converter casts the output of every node it leaves
    in float32 to float16, a region in float32 needs to be out of its sight."""
    from onnxruntime.transformers.float16 import convert_float_to_float16

    graph = model.graph
    io = [i.name for i in graph.input] + [o.name for o in graph.output]
    keep = io if keep_io_types else []
    fixed = set(position_nodes(model))
    front = [_copy_node(n) for n in graph.node if n.name in fixed]
    rest = [_copy_node(n) for n in graph.node if n.name not in fixed]
    made = {o for n in front for o in n.output}
    needed = {i for n in rest for i in n.input} | {o.name for o in graph.output}
    boundary = sorted(made & needed)
    types = _float_types(model, boundary) if boundary else {}
    if boundary and types is None:
        logger.warning(
            "[quantize_model] no types for %s (shape inference failed): the "
            "positions are converted to float16 too",
            boundary[:3],
        )
        boundary, front, rest = [], [], list(graph.node)
    front_inputs = {i for n in front for i in n.input}
    rest_inputs = {i for n in rest for i in n.input} | {o.name for o in graph.output}
    saved_inits = [
        i for i in graph.initializer if i.name in front_inputs and i.name not in rest_inputs
    ]
    shared = [
        i
        for i in graph.initializer
        if i.name in front_inputs
        and i.name in rest_inputs
        and i.data_type == onnx.TensorProto.FLOAT
    ]
    for init in shared:  # the front keeps a float32 copy, the converter takes the other
        dup = onnx.TensorProto()
        dup.CopyFrom(init)
        dup.name = f"{init.name}_fp32"
        saved_inits.append(dup)
        for node in front:
            node.input[:] = [dup.name if i == init.name else i for i in node.input]
    if front:
        del graph.node[:]
        graph.node.extend(rest)
        moved = {i.name for i in saved_inits}
        kept = [i for i in graph.initializer if i.name not in moved]
        del graph.initializer[:]
        graph.initializer.extend(kept)
        for name in boundary:  # produced by the front, inputs of what is converted
            graph.input.append(onnx.helper.make_tensor_value_info(name, types[name], None))
    converted = convert_float_to_float16(
        model, keep_io_types=keep + boundary, disable_shape_infer=model.ByteSize() >= _PROTO_LIMIT
    )
    if front:
        cgraph = converted.graph
        inputs = [i for i in cgraph.input if i.name not in boundary]
        del cgraph.input[:]
        cgraph.input.extend(inputs)
        nodes = list(front) + list(cgraph.node)
        del cgraph.node[:]
        cgraph.node.extend(nodes)
        cgraph.initializer.extend(saved_inits)
    return converted


def _copy_node(node: onnx.NodeProto) -> onnx.NodeProto:
    copied = onnx.NodeProto()
    copied.CopyFrom(node)
    return copied


def _float_types(model: onnx.ModelProto, names: list[str]) -> dict[str, int] | None:
    """Element types of ``names`` from onnx's shape inference, None if it fails."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # a model over 2 GB, an operator onnx does not know
        return None
    types = {v.name: v.type.tensor_type.elem_type for v in inferred.graph.value_info}
    types.update({v.name: v.type.tensor_type.elem_type for v in inferred.graph.output})
    if any(not types.get(n) for n in names):
        return None
    return {n: types[n] for n in names}
