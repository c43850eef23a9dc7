"""xbuilder and xoptim never import torch (checked in a fresh interpreter)."""

import subprocess
import sys

CODE = """
import sys
import experimental_experiment.xbuilder
import experimental_experiment.xoptim
from experimental_experiment.xbuilder import GraphBuilder
from onnx import TensorProto
g = GraphBuilder()
x = g.make_tensor_input("x", TensorProto.FLOAT, ("n", 2))
g.make_tensor_output(g.op.Relu(g.op.Add(x, 1.0)), output_name="y")
model = g.to_onnx()
from experimental_experiment.xoptim import get_pattern_list, optimize_model
import experimental_experiment.xoptim.patterns_ort
get_pattern_list("default+onnxruntime")
optimize_model(model, patterns="default+onnxruntime")
torch_modules = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
assert not torch_modules, torch_modules[:5]
print("OK")
"""


def test_no_torch_import():
    res = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "OK"
