"""Tests of :func:`experimental_experiment.quantize.quantize_model` on a tiny Llama
exported with the onnxruntime pattern set and on a plain MLP exported by ``to_onnx``.

Tolerances (relative L2 error of the logits against the float ONNX model):

* int4, symmetric blocks of 32: a block's scale is ``max|w| / 8`` with ``max|w|`` about
  2.5 standard deviations for 32 normal weights, so the rounding error (uniform, standard
  deviation ``scale / sqrt(12)``) is about 9% of a weight's standard deviation and each
  quantized MatMul output is off by about 9% (relative L2). The tiny Llama has two
  layers and a residual stream which carries the unquantized embeddings: 0.2, about
  twice the error of one layer, still fails a wrong weight or a wrong block layout
  (errors of order 1) and 2-bit weights (about 0.37); the lm_head and the embeddings
  quantized too add two more such layers: 0.3. (Deeper models with random weights
  compound more: the benchmark's 4-layer model reaches about 0.3 with the head in float.)
* int8, weights per output channel and activations per tensor, quantized at run time:
  scales of ``max / 127`` (a column, the whole activation), about 0.5 to 1% each: 0.05.
* fp16: 11 bits of mantissa, about 5e-4 per operator: 1e-2.
"""

import os

import numpy as np
import onnx
import onnxruntime
import pytest
import torch

from experimental_experiment._command_lines import main
from experimental_experiment.quantize import (
    AlreadyQuantizedError,
    MissingWeightsError,
    NothingToQuantizeError,
    QuantizeError,
    QuantizeOptionError,
    UnsupportedPrecisionError,
    cpu_float16_fallbacks,
    find_lm_head,
    node_type_counts,
    quantize_model,
)
from experimental_experiment.quantize.graph import name_nodes
from experimental_experiment.xbuilder.model_container import load_model, save_model

FUSIONS = (
    "com.microsoft.GroupQueryAttention",
    "SimplifiedLayerNormalization",
    "com.microsoft.SkipSimplifiedLayerNormalization",
    "com.microsoft.RotaryEmbedding",
    "com.microsoft.MultiHeadAttention",
)
SIZES = [(1, 1, 64), (2, 7, 5)]  # batch, new tokens, cached tokens


def _relative(got, expected) -> float:
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    return float(np.linalg.norm(got - expected) / np.linalg.norm(expected))


def _run(model, feeds):
    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return sess.run(None, {i.name: feeds[i.name] for i in sess.get_inputs()})


def _weighted_matmuls(model) -> int:
    inits = {i.name for i in model.graph.initializer}
    return sum(n.op_type == "MatMul" and n.input[1] in inits for n in model.graph.node)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    from experimental_experiment.bench.llm_exporters import export_to_onnx, make_llama

    config, model = make_llama("tiny")
    path = str(tmp_path_factory.mktemp("llama") / "llama.onnx")
    export_to_onnx(model, config, "default+onnxruntime", path)
    return config, onnx.load(path), path


def _llama_feeds(config, model, batch, seq, past):
    from experimental_experiment.bench.llm_exporters import make_feeds, session_feeds

    names = [i.name for i in model.graph.input]
    return session_feeds(names, make_feeds(config, batch, seq, past), config.num_hidden_layers)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(64, 128),
            torch.nn.ReLU(),
            torch.nn.Linear(128, 128),
            torch.nn.ReLU(),
            torch.nn.Linear(128, 10),
        )

    def forward(self, x):
        return self.layers(x)


@pytest.fixture(scope="module")
def mlp():
    from experimental_experiment.torch_interpreter import to_onnx

    torch.manual_seed(0)
    x = torch.randn(3, 64)
    return to_onnx(MLP().eval(), (x,), dynamic_shapes=({0: "batch"},))


# the tiny Llama


def test_llama_has_fusions_and_a_head(llama):
    _, model, _ = llama
    counts = node_type_counts(model)
    assert counts["com.microsoft.GroupQueryAttention"] == 2
    assert counts["SimplifiedLayerNormalization"] > 0
    heads = find_lm_head(model)
    assert len(heads) == 1
    head = next(n for n in model.graph.node if n.name == heads[0])
    assert head.op_type == "MatMul"
    assert head.output[0] == model.graph.output[0].name  # the logits


@pytest.mark.parametrize("accuracy_level", [None, 4])
@pytest.mark.parametrize("size", SIZES)
def test_llama_int4(llama, size, accuracy_level):
    config, model, _ = llama
    before = node_type_counts(model)
    q = quantize_model(model, "int4", block_size=32, accuracy_level=accuracy_level)
    after = node_type_counts(q)
    assert after["com.microsoft.MatMulNBits"] == _weighted_matmuls(model) - 1
    assert _weighted_matmuls(q) == 1  # the head
    assert find_lm_head(q) == find_lm_head(model)
    for fusion in FUSIONS:
        assert after[fusion] == before[fusion], fusion
    nbits = [n for n in q.graph.node if n.op_type == "MatMulNBits"]
    attrs = {a.name: a.i for a in nbits[0].attribute}
    assert attrs["block_size"] == 32 and attrs["bits"] == 4
    assert attrs.get("accuracy_level") == accuracy_level
    assert len(nbits[0].input) == 3  # symmetric: no zero point
    feeds = _llama_feeds(config, model, *size)
    expected, got = _run(model, feeds)[0], _run(q, feeds)[0]
    assert got.shape == expected.shape
    assert _relative(got, expected) < 0.2


@pytest.mark.parametrize("size", SIZES)
def test_llama_int4_head_and_embeddings(llama, size):
    config, model, _ = llama
    q = quantize_model(
        model, "int4", quantize_lm_head=True, quantize_embeddings=True, symmetric=False
    )
    counts = node_type_counts(q)
    assert counts["com.microsoft.MatMulNBits"] == _weighted_matmuls(model)
    assert counts["com.microsoft.GatherBlockQuantized"] == 1
    assert _weighted_matmuls(q) == 0
    nbits = next(n for n in q.graph.node if n.op_type == "MatMulNBits")
    assert len(nbits.input) == 4  # asymmetric: zero points
    feeds = _llama_feeds(config, model, *size)
    assert _relative(_run(q, feeds)[0], _run(model, feeds)[0]) < 0.3


@pytest.mark.parametrize("size", SIZES)
def test_llama_int8(llama, size):
    config, model, _ = llama
    before = node_type_counts(model)
    q = quantize_model(model, "int8")
    after = node_type_counts(q)
    assert after["MatMulInteger"] == _weighted_matmuls(model) - 1
    assert after["DynamicQuantizeLinear"] > 0
    assert _weighted_matmuls(q) == 1
    for fusion in FUSIONS:
        assert after[fusion] == before[fusion], fusion
    feeds = _llama_feeds(config, model, *size)
    expected, got = _run(model, feeds)[0], _run(q, feeds)[0]
    assert _relative(got, expected) < 0.05


@pytest.mark.parametrize("keep_io_types", [True, False])
def test_llama_fp16(llama, keep_io_types):
    config, model, _ = llama
    before = node_type_counts(model)
    q = quantize_model(model, "fp16", keep_io_types=keep_io_types)
    after = node_type_counts(q)
    for fusion in FUSIONS:
        assert after[fusion] == before[fusion], fusion
    floats = [i for i in q.graph.initializer if i.data_type == onnx.TensorProto.FLOAT]
    halves = [i for i in q.graph.initializer if i.data_type == onnx.TensorProto.FLOAT16]
    assert len(halves) > len(floats)
    out_type = q.graph.output[0].type.tensor_type.elem_type
    assert out_type == (onnx.TensorProto.FLOAT if keep_io_types else onnx.TensorProto.FLOAT16)
    # onnxruntime has no float16 MatMul on CPU: it runs in float32 between casts,
    # the CPU run checks the conversion, not the float16 kernels of these operators
    assert "MatMul" in cpu_float16_fallbacks(q)
    feeds = _llama_feeds(config, model, 2, 7, 5)
    q_feeds = (
        feeds
        if keep_io_types
        else {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in feeds.items()}
    )
    got = _run(q, q_feeds)[0]
    assert got.dtype == (np.float32 if keep_io_types else np.float16)
    assert _relative(got, _run(model, feeds)[0]) < 1e-2


def _with_cos_output(model):
    "The model with the output of its first Cos as an extra output (its own type)."
    model = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in model.graph.value_info}
    cos = next(n for n in model.graph.node if n.op_type == "Cos").output[0]
    model.graph.output.append(
        onnx.helper.make_tensor_value_info(cos, types.get(cos, onnx.TensorProto.FLOAT), None)
    )
    return model


def test_llama_fp16_positions_stay_float32(llama):
    """A position above 2048 is rounded in float16 (5001 -> 5000): the rotary angles
    (position times frequency, up to 1 radian per position) would be off by radians.
    The positions, the angles and their cosine stay float32 (then cast)."""
    from onnxruntime.transformers.float16 import convert_float_to_float16

    config, model, _ = llama
    feeds = _llama_feeds(config, model, 1, 1, 5000)
    expected = _run(_with_cos_output(model), feeds)[-1]
    q = quantize_model(model, "fp16", keep_io_types=True)
    assert _relative(_run(_with_cos_output(q), feeds)[-1], expected) < 1e-6
    # the converter alone computes the angles in float16
    plain = convert_float_to_float16(onnx.load(llama[2]), keep_io_types=True)
    assert _relative(_run(_with_cos_output(plain), feeds)[-1], expected) > 1e-2


def test_model_left_unchanged(llama):
    _, model, _ = llama
    serialized = model.SerializeToString()
    quantize_model(model, "int4")
    quantize_model(model, "int8")
    quantize_model(model, "fp16")
    assert model.SerializeToString() == serialized


@pytest.mark.parametrize("precision,low,high", [("int4", 0.06, 0.12), ("int8", 0.002, 0.02)])
def test_one_matmul_error_matches_theory(precision, low, high):
    """One MatMul with normal weights, error of its output (relative L2): int4 in
    blocks of 32, scale ``max|w| / 8`` with ``max|w|`` about 2.4 standard deviations,
    uniform rounding error ``scale / sqrt(12)``: about 0.087; int8 per column of 512,
    ``max|w|`` about 3.3 deviations, ``/ 127``, plus the activations quantized to uint8:
    about 0.01. The bounds fail a precision which is not the one asked."""
    from onnx import TensorProto
    from onnx import helper as oh
    from onnx import numpy_helper as onh

    rng = np.random.default_rng(3)
    k, n = 512, 384
    w = (rng.standard_normal((k, n)) * 0.02).astype(np.float32)
    graph = oh.make_graph(
        [oh.make_node("MatMul", ["x", "w"], ["h"], name="mm")],
        "one",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["m", k])],
        [oh.make_tensor_value_info("h", TensorProto.FLOAT, ["m", n])],
        [onh.from_array(w, "w")],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=9)
    assert find_lm_head(model) == ["mm"]  # it computes the output
    q = quantize_model(model, precision, quantize_lm_head=True)
    onnx.checker.check_model(q)
    x = rng.standard_normal((8, k)).astype(np.float32)
    error = _relative(_run(q, {"x": x})[0], x @ w)
    assert low < error < high, error


# the MLP


@pytest.mark.parametrize("precision,tolerance", [("int4", 0.2), ("int8", 0.05)])
def test_mlp(mlp, precision, tolerance):
    q = quantize_model(mlp, precision)
    counts = node_type_counts(q)
    quantized = counts["com.microsoft.MatMulNBits"] + counts["MatMulInteger"]
    assert quantized == 2  # the last Linear computes the output: kept in float
    assert len(find_lm_head(mlp)) == 1
    for batch in (1, 17):
        x = np.random.default_rng(batch).standard_normal((batch, 64)).astype(np.float32)
        name = mlp.graph.input[0].name
        assert _relative(_run(q, {name: x})[0], _run(mlp, {name: x})[0]) < tolerance
    q = quantize_model(mlp, precision, quantize_lm_head=True)
    counts = node_type_counts(q)
    assert counts["com.microsoft.MatMulNBits"] + counts["MatMulInteger"] == 3


def _single_linear(names: bool = True) -> onnx.ModelProto:
    from onnx import TensorProto
    from onnx import helper as oh
    from onnx import numpy_helper as onh

    w = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    graph = oh.make_graph(
        [
            oh.make_node("Reshape", ["x", "shape"], ["x2"], name="r" if names else ""),
            oh.make_node("MatMul", ["x2", "w"], ["y0"], name="mm" if names else ""),
            oh.make_node("Add", ["y0", "b"], ["y"], name="add" if names else ""),
        ],
        "one",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 32])],
        [
            onh.from_array(w, "w"),
            onh.from_array(np.ones(32, dtype=np.float32), "b"),
            onh.from_array(np.array([-1, 64], dtype=np.int64), "shape"),
        ],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=9)


def test_find_lm_head_through_bias_and_reshape():
    assert find_lm_head(_single_linear()) == ["mm"]


def _two_linears() -> onnx.ModelProto:
    "MatMul, Relu, MatMul (the head): nodes without names."
    from onnx import TensorProto
    from onnx import helper as oh
    from onnx import numpy_helper as onh

    rng = np.random.default_rng(0)
    graph = oh.make_graph(
        [
            oh.make_node("MatMul", ["x", "w1"], ["h"]),
            oh.make_node("Relu", ["h"], ["r"]),
            oh.make_node("MatMul", ["r", "w2"], ["y"]),
        ],
        "two",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 16])],
        [
            onh.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w1"),
            onh.from_array(rng.standard_normal((64, 16)).astype(np.float32), "w2"),
        ],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=9)


def test_unnamed_nodes_are_named_and_head_excluded():
    model = _single_linear(names=False)
    name_nodes(model)
    assert len({n.name for n in model.graph.node}) == 3
    q = quantize_model(_single_linear(names=False), "int4", quantize_lm_head=True)
    assert node_type_counts(q)["com.microsoft.MatMulNBits"] == 1
    # the unnamed head is found by position, kept in float
    for precision, kind in (("int4", "com.microsoft.MatMulNBits"), ("int8", "MatMulInteger")):
        q = quantize_model(_two_linears(), precision)
        assert node_type_counts(q)[kind] == 1
        assert node_type_counts(q)["MatMul"] == 1
        assert q.graph.node[-1].op_type == "MatMul" and q.graph.node[-1].input[1] == "w2"


def _transposed_weights(tied: bool = False) -> onnx.ModelProto:
    """Gather (tied: on w2), MatMul(x, Transpose(w1)), Relu, MatMul(., Transpose(w2)):
    the exporter leaves such transposes of large weights unfolded."""
    from onnx import TensorProto
    from onnx import helper as oh
    from onnx import numpy_helper as onh

    rng = np.random.default_rng(1)
    nodes = [
        oh.make_node("Transpose", ["w1"], ["w1t"], perm=[1, 0], name="t1"),
        oh.make_node("Transpose", ["w2"], ["w2t"], perm=[1, 0], name="t2"),
        oh.make_node("MatMul", ["x", "w1t"], ["h"], name="mm1"),
        oh.make_node("Relu", ["h"], ["r"], name="relu"),
        oh.make_node("MatMul", ["r", "w2t"], ["y"], name="head"),
    ]
    outputs = [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 16])]
    if tied:
        nodes.append(oh.make_node("Gather", ["w2", "ids"], ["emb"], name="gather"))
        outputs.append(oh.make_tensor_value_info("emb", TensorProto.FLOAT, [2, 64]))
    graph = oh.make_graph(
        nodes,
        "tr",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
        outputs,
        [
            onh.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w1"),
            onh.from_array(rng.standard_normal((16, 64)).astype(np.float32), "w2"),
            onh.from_array(np.array([0, 3], dtype=np.int64), "ids"),
        ],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=9)


@pytest.mark.parametrize("tied", [False, True])
def test_transposed_weights(tied):
    model = _transposed_weights(tied)
    assert find_lm_head(model) == ["head"]
    x = np.random.default_rng(2).standard_normal((5, 64)).astype(np.float32)
    expected = _run(model, {"x": x})
    q = quantize_model(model, "int4")
    counts = node_type_counts(q)
    assert counts["com.microsoft.MatMulNBits"] == 1 and counts["Transpose"] == 0
    assert ({i.name for i in q.graph.initializer} & {"w1", "w2"}) == ({"w2"} if tied else set())
    got = _run(q, {"x": x})
    assert _relative(got[0], expected[0]) < 0.2
    if tied:
        np.testing.assert_array_equal(got[1], expected[1])  # the embeddings untouched
    q = quantize_model(model, "int4", quantize_lm_head=True)
    assert node_type_counts(q)["com.microsoft.MatMulNBits"] == 2


# errors, raised before any work


def test_unsupported_precision(mlp):
    with pytest.raises(UnsupportedPrecisionError, match="int4, int8, fp16"):
        quantize_model(mlp, "int2")


@pytest.mark.parametrize(
    "kwargs", [dict(block_size=24), dict(block_size=8), dict(accuracy_level=7)]
)
def test_bad_options(mlp, kwargs):
    with pytest.raises(QuantizeOptionError):
        quantize_model(mlp, "int4", **kwargs)


def test_embeddings_need_int4(mlp):
    with pytest.raises(QuantizeOptionError, match="int4"):
        quantize_model(mlp, "int8", quantize_embeddings=True)


@pytest.mark.parametrize("first", ["int4", "int8"])
@pytest.mark.parametrize("second", ["int4", "int8"])
def test_already_quantized(mlp, first, second):
    q = quantize_model(mlp, first)
    with pytest.raises(AlreadyQuantizedError, match="quantized already"):
        quantize_model(q, second)


def test_nothing_to_quantize():
    with pytest.raises(NothingToQuantizeError, match="quantize_lm_head"):
        quantize_model(_single_linear(), "int4")
    with pytest.raises(NothingToQuantizeError):
        quantize_model(_single_linear(), "int8")


def test_missing_weights(mlp, tmp_path):
    path = str(tmp_path / "mlp.onnx")
    save_model(mlp, path, external_data=True, threshold=0)  # mlp left unchanged
    light = onnx.load(path, load_external_data=False)
    for precision in ("int4", "int8", "fp16"):
        with pytest.raises(MissingWeightsError, match="external data"):
            quantize_model(light, precision)
    # the same model with its data loaded quantizes
    q = quantize_model(onnx.load(path), "int4")
    assert node_type_counts(q)["com.microsoft.MatMulNBits"] == 2


def test_weight_free_export(tmp_path, capsys):
    import warnings

    from experimental_experiment.torch_interpreter import to_onnx

    with torch.device("meta"):
        model = MLP()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the weights are not filled
        container = to_onnx(
            model, (torch.randn(3, 64),), dynamic_shapes=({0: "batch"},), large_model=True
        )
    with pytest.raises(MissingWeightsError, match="ModelContainer"):
        quantize_model(container, "int4")
    path, out = str(tmp_path / "light.onnx"), str(tmp_path / "q.onnx")
    container.save(path)
    # loaded with its data file (zeros where the weights go): still refused
    with pytest.raises(MissingWeightsError, match="fill-weights"):
        quantize_model(onnx.load(path), "int4")
    assert main(["quantize", path, out, "--precision", "int4"]) == 2
    assert "fill-weights" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_errors_share_a_base():
    for cls in (
        UnsupportedPrecisionError,
        QuantizeOptionError,
        AlreadyQuantizedError,
        NothingToQuantizeError,
        MissingWeightsError,
    ):
        assert issubclass(cls, QuantizeError)
        assert "Cause:" in cls.__doc__ and "Fix:" in cls.__doc__


# the command line


def test_cli_int4(llama, tmp_path, capsys):
    config, model, path = llama
    out = str(tmp_path / "q4.onnx")
    rc = main(
        [
            "quantize",
            path,
            out,
            "--precision",
            "int4",
            "--block-size",
            "32",
            "--accuracy-level",
            "4",
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "MatMulNBits: 10" in text and "MatMul: 1" in text
    q = onnx.load(out)
    assert node_type_counts(q)["com.microsoft.MatMulNBits"] == _weighted_matmuls(model) - 1
    assert os.path.getsize(out) < os.path.getsize(path)
    assert sorted(os.listdir(tmp_path)) == ["q4.onnx"]  # no temporary file left
    feeds = _llama_feeds(config, model, 1, 1, 64)
    assert _relative(_run(q, feeds)[0], _run(model, feeds)[0]) < 0.2


def test_cli_head_embeddings_and_external_input(mlp, tmp_path, capsys):
    path = str(tmp_path / "mlp.onnx")
    save_model(mlp, path, external_data=True, threshold=0)  # mlp left unchanged
    out = str(tmp_path / "out" / "q8.onnx")
    os.makedirs(os.path.dirname(out))
    assert main(["quantize", path, out, "--precision", "int8", "--lm-head"]) == 0
    assert node_type_counts(load_model(out))["MatMulInteger"] == 3  # checks the metadata
    assert os.listdir(os.path.dirname(out)) == ["q8.onnx"]  # small: one file


@pytest.mark.parametrize(
    "args,message",
    [
        (["--precision", "int3"], "int4, int8, fp16"),
        (["--precision", "int4", "--block-size", "20"], "power of two"),
        (["--precision", "int8", "--embeddings"], "int4"),
    ],
)
def test_cli_errors_one_line(mlp, tmp_path, capsys, args, message):
    path = str(tmp_path / "mlp.onnx")
    onnx.save(mlp, path)
    out = str(tmp_path / "q.onnx")
    assert main(["quantize", path, out, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("quantize: ") and message in err
    assert len(err.splitlines()) == 1
    assert not os.path.exists(out)


def test_cli_already_quantized_and_missing_file(mlp, tmp_path, capsys):
    path, out = str(tmp_path / "q.onnx"), str(tmp_path / "qq.onnx")
    onnx.save(quantize_model(mlp, "int4"), path)
    assert main(["quantize", path, out, "--precision", "int4"]) == 2
    assert "quantized already" in capsys.readouterr().err
    assert main(["quantize", str(tmp_path / "none.onnx"), out, "--precision", "int4"]) == 2
    assert "no file" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_cli_does_not_import_torch(mlp, tmp_path):
    import subprocess
    import sys

    path = str(tmp_path / "mlp.onnx")
    onnx.save(mlp, path)
    code = (
        "import sys; from experimental_experiment._command_lines import main; "
        f"rc = main(['quantize', {path!r}, {str(tmp_path / 'q.onnx')!r}, "
        "'--precision', 'int4']); assert rc == 0, rc; "
        "assert 'torch' not in sys.modules, 'torch'"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300
    )
    assert res.returncode == 0, res.stderr
