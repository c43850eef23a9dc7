"""OpInfo samples beyond float32: float16, bfloat16, int64 and bool, to_onnx only.

Families: elementwise, activation, reduction, matmul, normalization (first sample of
each op). float16 and integer/bool models run with onnxruntime. bfloat16 models run
with onnx's reference evaluator: onnxruntime's CPU provider lacks bfloat16 kernels for
most of these operators, and casting the model to float32 to run it would test
another graph than the exported one. Tolerances: float16 1e-2, bfloat16 5e-2 (absolute
and relative), exact for integers and bool.
"""

import pytest
import torch

pytest.importorskip("expecttest")

from experimental_experiment.bench.op_coverage import load_op_db, run_op  # noqa: E402

FAMILIES = {
    "elementwise": [
        "add",
        "sub",
        "mul",
        "div.no_rounding_mode",
        "abs",
        "neg",
        "exp",
        "log",
        "sqrt",
        "sin",
        "tanh",
        "sigmoid",
        "pow",
        "maximum",
        "where",
        "clamp",
        "eq",
        "logical_and",
        "bitwise_xor",
        "remainder",
    ],
    "activation": [
        "nn.functional.relu",
        "nn.functional.gelu",
        "nn.functional.silu",
        "nn.functional.leaky_relu",
        "softmax",
        "log_softmax",
    ],
    "reduction": ["sum", "mean", "amax", "amin", "prod", "argmax", "cumsum", "any", "all"],
    "matmul": ["mm", "bmm", "matmul", "addmm", "nn.functional.linear"],
    "normalization": [
        "nn.functional.layer_norm",
        "nn.functional.group_norm",
        "nn.functional.batch_norm",
        "nn.functional.rms_norm",
    ],
}
DTYPES = [torch.float16, torch.bfloat16, torch.int64, torch.bool]

# (OpInfo name, dtype) -> why it fails
XFAIL: dict[tuple[str, torch.dtype], str] = {}

OPS = {
    op.name if not op.variant_test_name else f"{op.name}.{op.variant_test_name}": op
    for op in load_op_db(sorted({n for names in FAMILIES.values() for n in names}))
}


def _params():
    for family, names in FAMILIES.items():
        for name in names:
            supported = OPS[name].supported_dtypes("cpu")
            for dtype in DTYPES:
                if dtype not in supported:
                    continue
                key = (name, dtype)
                marks = ()
                if key in XFAIL:
                    marks = (pytest.mark.xfail(strict=True, reason=XFAIL[key]),)
                yield pytest.param(name, dtype, marks=marks, id=f"{family}-{name}-{str(dtype)[6:]}")


@pytest.mark.parametrize("name,dtype", list(_params()))
def test_opinfo_dtype(name, dtype):
    runtime = "reference" if dtype == torch.bfloat16 else "onnxruntime"
    (result,) = run_op(
        OPS[name], ["to_onnx"], dtype=dtype, n_samples=1, timeout=60, runtime=runtime
    )
    if result.status == "skipped":
        pytest.skip(result.detail)
    if result.status == "capture-fail":
        pytest.skip(f"torch.export.export fails: {result.detail}")
    assert result.status == "pass", f"{result.status}: {result.detail}"


def test_every_family_has_a_float16_test():
    families = {p.id.split("-")[0] for p in _params() if "float16" in p.id}
    assert families == set(FAMILIES)
