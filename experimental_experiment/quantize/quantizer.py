"""Quantizes the weights of an exported model with onnxruntime's tools:
``int4`` with :class:`MatMulNBitsQuantizer
<onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer>`
(weight-only, blocks), ``int8`` with :func:`onnxruntime.quantization.quantize_dynamic`
(``DynamicQuantizeLinear`` + ``MatMulInteger``, which onnxruntime fuses), ``fp16`` with
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

from .errors import (
    AlreadyQuantizedError,
    MissingWeightsError,
    NothingToQuantizeError,
    QuantizeOptionError,
    UnsupportedPrecisionError,
)
from .graph import (
    embedding_gathers,
    find_lm_head,
    missing_weights,
    name_nodes,
    quantized_nodes,
    weight_of,
)

logger = logging.getLogger(__name__)

#: the precisions :func:`quantize_model` accepts
PRECISIONS = ("int4", "int8", "fp16")
# a protobuf message cannot exceed 2 GB: bigger models go through external data
_PROTO_LIMIT = 2**31 - 2**26


def _check_options(precision: str, block_size: int, accuracy_level: int | None,
                   quantize_embeddings: bool) -> None:
    if precision not in PRECISIONS:
        raise UnsupportedPrecisionError(
            f"precision {precision!r} is not supported, use one of {', '.join(PRECISIONS)}")
    if precision != "int4":
        if quantize_embeddings:
            raise QuantizeOptionError(
                f"quantize_embeddings needs precision 'int4' (GatherBlockQuantized), "
                f"not {precision!r}")
        return
    if not isinstance(block_size, int) or block_size < 16 or block_size & (block_size - 1):
        raise QuantizeOptionError(
            f"block_size={block_size!r} has no MatMulNBits kernel: use a power of two of "
            f"at least 16 (32, 64, 128)")
    if accuracy_level is not None and accuracy_level not in (0, 1, 2, 3, 4):
        raise QuantizeOptionError(
            f"accuracy_level={accuracy_level!r} is not one of 0, 1, 2, 3, 4 (4: int8 "
            f"activations, the fastest on CPU; None: the kernel's default)")
    if quantize_embeddings and not gather_block_quantized_available():
        import onnxruntime

        raise QuantizeOptionError(
            f"onnxruntime {onnxruntime.__version__} has no CPU kernel GatherBlockQuantized "
            f"to quantize embeddings: upgrade onnxruntime or leave quantize_embeddings off")


def gather_block_quantized_available() -> bool:
    """Whether the installed onnxruntime has a CPU kernel for ``GatherBlockQuantized``
    with int4 data (the quantized embeddings).

    .. code-block:: python

        if gather_block_quantized_available():
            q = quantize_model(onx, "int4", quantize_embeddings=True)
    """
    try:
        from onnxruntime.capi.onnxruntime_pybind11_state import get_all_opkernel_def
    except ImportError:  # pragma: no cover
        return False
    return any(d.op_name == "GatherBlockQuantized" and d.provider == "CPUExecutionProvider"
               and "tensor(int4)" in d.type_constraints.get("T1", [])
               for d in get_all_opkernel_def())


def _check_model(model: onnx.ModelProto, precision: str, quantize_lm_head: bool
                 ) -> list[str]:
    """Raises before any work; returns the heads kept in float."""
    if not isinstance(model, onnx.ModelProto):
        proto = getattr(model, "model_proto", None)  # a ModelContainer
        if isinstance(proto, onnx.ModelProto):
            raise MissingWeightsError(
                f"{type(model).__name__} keeps its weights outside the ModelProto: save it "
                f"(save_model) and load the file with onnx.load before quantizing")
        raise TypeError(f"model must be an onnx.ModelProto, not {type(model).__name__}")
    missing = missing_weights(model)
    if missing:
        raise MissingWeightsError(
            f"{len(missing)} initializer(s) have no data in the proto (external data not "
            f"loaded), first {missing[:3]}: load the model with its data "
            f"(onnx.load(path)) or fill a weight-free export first")
    if precision == "fp16":
        return []
    done = quantized_nodes(model)
    if done:
        raise AlreadyQuantizedError(
            f"the model is quantized already (it has {', '.join(done)}); quantize the float "
            f"model to {precision}")
    heads = [] if quantize_lm_head else find_lm_head(model)
    inits = {i.name: i for i in model.graph.initializer}
    targets = [n for n in model.graph.node if n.op_type == "MatMul"
               and weight_of(n, inits) is not None and n.name not in heads]
    if not targets:
        reason = (f" besides the head {heads} kept in float (quantize_lm_head=True "
                  f"quantizes it)" if heads else "")
        raise NothingToQuantizeError(
            f"no MatMul multiplies by a constant weight{reason}: nothing to quantize "
            f"to {precision}")
    return heads


def quantize_model(model: onnx.ModelProto, precision: str, *, block_size: int = 32,
                   accuracy_level: int | None = None, quantize_lm_head: bool = False,
                   quantize_embeddings: bool = False, symmetric: bool = True,
                   keep_io_types: bool = False,
                   fp16_op_block_list: list[str] | None = None) -> onnx.ModelProto:
    """Quantizes the weights of a float model with onnxruntime's quantization tools,
    returns a new model (``model`` is left unchanged).

    :param model: a float ModelProto with its weights (external data loaded)
    :param precision: ``"int4"`` (``MatMulNBits``, weight-only, per block),
        ``"int8"`` (dynamic quantization, ``MatMulInteger``) or ``"fp16"``
    :param block_size: int4: number of weights sharing one scale (a power of two >= 16)
    :param accuracy_level: int4: ``MatMulNBits``'s ``accuracy_level`` (4: activations
        quantized to int8 in the kernel, the fastest on CPU; None: the default, float)
    :param quantize_lm_head: quantizes the last ``MatMul`` producing the logits too
        (kept in float by default, it is the most sensitive one)
    :param quantize_embeddings: int4: the embedding ``Gather`` becomes
        ``GatherBlockQuantized`` (its weight is quantized along the hidden axis)
    :param symmetric: symmetric quantization (no zero point); False adds zero points
        (int4) or quantizes weights to uint8 (int8)
    :param keep_io_types: fp16: inputs and outputs stay float32, casts are inserted
    :param fp16_op_block_list: fp16: operator types left in float32 (casts around
        them), onnxruntime's converter's default list if None
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
    heads = _check_model(model, precision, quantize_lm_head)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    name_nodes(copy)
    with _quiet_onnxruntime():
        if precision == "int4":
            result = _int4(copy, heads, block_size, accuracy_level, symmetric,
                           quantize_embeddings)
        elif precision == "int8":
            result = _int8(copy, heads, symmetric)
        else:
            result = _fp16(copy, keep_io_types, fp16_op_block_list)
    logger.info("[quantize_model] %s: %d -> %d nodes, heads kept in float %s", precision,
                len(model.graph.node), len(result.graph.node), heads)
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


def _int4(model: onnx.ModelProto, heads: list[str], block_size: int,
          accuracy_level: int | None, symmetric: bool, embeddings: bool) -> onnx.ModelProto:
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    op_types = ["MatMul"]
    exclude = list(heads)
    if embeddings:
        op_types.append("Gather")
        keep = set(embedding_gathers(model))
        exclude.extend(n.name for n in model.graph.node
                       if n.op_type == "Gather" and n.name not in keep)
    quantizer = MatMulNBitsQuantizer(
        model, bits=4, block_size=block_size, is_symmetric=symmetric,
        accuracy_level=accuracy_level, nodes_to_exclude=exclude,
        quant_format=QuantFormat.QOperator, op_types_to_quantize=tuple(op_types))
    quantizer.process()
    return quantizer.model.model


def _int8(model: onnx.ModelProto, heads: list[str], symmetric: bool) -> onnx.ModelProto:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    large = model.ByteSize() >= _PROTO_LIMIT
    with tempfile.TemporaryDirectory() as folder:
        output = os.path.join(folder, "model.int8.onnx")
        quantize_dynamic(
            model, output, op_types_to_quantize=["MatMul"], nodes_to_exclude=heads,
            weight_type=QuantType.QInt8 if symmetric else QuantType.QUInt8,
            per_channel=False, use_external_data_format=large,
            extra_options={"MatMulConstBOnly": True,
                           # the outputs of contrib ops (GroupQueryAttention) have no type
                           # after onnx's shape inference
                           "DefaultTensorType": onnx.TensorProto.FLOAT})
        return onnx.load(output)


def _fp16(model: onnx.ModelProto, keep_io_types: bool,
          op_block_list: list[str] | None) -> onnx.ModelProto:
    from onnxruntime.transformers.float16 import convert_float_to_float16

    return convert_float_to_float16(
        model, keep_io_types=keep_io_types, op_block_list=op_block_list,
        disable_shape_infer=model.ByteSize() >= _PROTO_LIMIT)
