"""Which kernels the installed onnxruntime has on CPU, read from its registry
(``get_all_opkernel_def``): whether embeddings can be quantized, and which operators
of a float16 model have no float16 CPU kernel (onnxruntime runs them in float32
between casts it inserts, so a CPU run does not check them in float16).

.. code-block:: python

    from experimental_experiment.quantize.kernels import cpu_float16_fallbacks

    print(cpu_float16_fallbacks(q16))  # ['MatMul', ...]
"""

from __future__ import annotations

import functools

import onnx


@functools.lru_cache(maxsize=1)
def _cpu_kernels() -> tuple[tuple[str, str, int, int, tuple], ...]:
    try:
        from onnxruntime.capi.onnxruntime_pybind11_state import get_all_opkernel_def
    except ImportError:  # pragma: no cover
        return ()
    return tuple(
        (
            d.domain or "",
            d.op_name,
            d.version_range[0],
            d.version_range[1],
            tuple(sorted({t for ts in d.type_constraints.values() for t in ts})),
        )
        for d in get_all_opkernel_def()
        if d.provider == "CPUExecutionProvider"
    )


def gather_block_quantized_available() -> bool:
    """Whether the installed onnxruntime has a CPU kernel ``GatherBlockQuantized``
    taking int4 data (the quantized embeddings).

    .. code-block:: python

        if gather_block_quantized_available():
            q = quantize_model(onx, "int4", quantize_embeddings=True)
    """
    return any(
        op == "GatherBlockQuantized" and "tensor(int4)" in types
        for _, op, _, _, types in _cpu_kernels()
    )


def cpu_float16_fallbacks(model: onnx.ModelProto) -> list[str]:
    """Operator types of the main graph having a float16 input or output but no CPU
    kernel accepting float16 for the model's opset: onnxruntime runs them in float32
    between casts, they are not checked in float16 on CPU (a GPU provider runs them
    in float16).

    :param model: a model converted to float16
    :return: sorted operator types, ``domain.op_type`` outside the default domain

    .. code-block:: python

        q16 = quantize_model(onx, "fp16")
        print("unchecked in float16 on CPU:", cpu_float16_fallbacks(q16))
    """
    opsets = {(o.domain if o.domain != "ai.onnx" else ""): o.version for o in model.opset_import}
    f16 = {
        vi.name
        for vi in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output)
        if vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    }
    f16 |= {i.name for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT16}
    f16 |= {
        n.output[0]
        for n in model.graph.node
        if n.op_type == "Cast"
        and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT16 for a in n.attribute)
    }
    missing = set()
    for node in model.graph.node:
        if node.op_type == "Cast" or not any(
            x in f16 for x in list(node.input) + list(node.output)
        ):
            continue
        domain = node.domain if node.domain != "ai.onnx" else ""
        version = opsets.get(domain, 1)
        ok = any(
            d == domain
            and op == node.op_type
            and lo <= version <= hi
            and "tensor(float16)" in types
            for d, op, lo, hi, types in _cpu_kernels()
        )
        if not ok:
            missing.add(f"{domain}.{node.op_type}" if domain else node.op_type)
    return sorted(missing)
