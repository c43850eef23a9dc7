"""Tiny transformers models and a Llama quantized by torchao's PT2E flows, exported by
to_onnx with dynamic shapes, run by onnxruntime on two sizes and compared with eager.

Tolerance: a quantized activation computed in another order may round to the next
level; the output then moves by at most ``one_step`` (the input scale of the last linear
layer times the largest row sum of its ``|weight|``), see
:func:`experimental_experiment.bench.quantized_models.one_step`. Dynamic quantization has
no such fixed scale: float rounding only (1e-5).
"""

import math

import onnx
import pytest

pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
pytest.importorskip("transformers")

from experimental_experiment.bench import quantized_models as qm  # noqa: E402

# (model, flow, node types onnxruntime must fuse into); dynamic quantization is tested
# in test_aten_quantized.py, the benchmark runs every flow on every model
CASES = [
    ("resnet", "x86_static", {"QLinearConv"}),
    ("resnet", "qat", set()),  # fake quantization kept: Conv + BatchNormalization stay
    ("vit", "xnnpack", {"QGemm"}),
    ("bert", "qat", {"MatMulIntegerToFloat"}),
    ("llama", "x86_static", {"MatMulIntegerToFloat", "QLinearMatMul"}),
]
_CACHE = {}


def _is_x86() -> bool:
    import platform

    return platform.machine().lower() in ("x86_64", "amd64", "i686")


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return {w for line in f if line.startswith("flags") for w in line.split()}
    except OSError:  # not Linux: assume a recent CPU
        return {"avx512_vnni"}


def _case(name):
    if name not in _CACHE:
        _CACHE[name] = qm.make_case(name, "tiny")
    return _CACHE[name]


#: x86 CPUs with VNNI instructions, where onnxruntime's uint8 x int8 kernels do not
#: saturate (other architectures: nothing to fear)
_HAS_VNNI = not _is_x86() or _cpu_flags() & {"avx512_vnni", "avx_vnni", "amx_int8"}


@pytest.mark.parametrize(("name", "flow", "fused"), CASES, ids=[f"{m}-{f}" for m, f, _ in CASES])
def test_pt2e_model(name, flow, fused, tmp_path):
    case = _case(name)
    qmodel = qm.quantize(case, flow)
    onx, _ = qm.export(qmodel, case, "to_onnx")
    onnx.checker.check_model(onx)
    # the dynamic dimensions stay dynamic
    dims = [d.dim_param for d in onx.graph.input[0].type.tensor_type.shape.dim]
    assert all(dims[axis] for axis in case.dynamic), dims
    types = {n.op_type for n in onx.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= types, types
    step = qm.one_step(qmodel)
    atol = 1e-5 if math.isnan(step) else step
    assert qm.max_diff(qm.session(onx, "none"), qmodel, case) <= atol
    if _HAS_VNNI:
        assert qm.max_diff(qm.session(onx, "all"), qmodel, case) <= atol
    # else: onnxruntime's fused uint8 x int8 kernels (QLinearConv, QLinearMatMul,
    # MatMulInteger) add pairs of products in int16 with saturation on x86 CPUs without
    # VNNI (AVX2 only, AMD EPYC: ViT 0.021, Llama 0.16 off): a runtime limitation its
    # documentation answers with reduce_range; the graph is checked unfused above and
    # its fusions below
    counts = qm.fused_counts(onx, str(tmp_path / "optimized.onnx"))
    assert fused <= set(counts), counts
