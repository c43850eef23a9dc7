"""Runs an ONNX model built from an FX graph with torch tensors in and out."""

from __future__ import annotations

import logging
from typing import Callable, Sequence

import numpy as np
import onnx
import torch

from ..runtime import tensor_to_numpy
from ..xbuilder.dtypes import i64
from ._export import GraphLayout

logger = logging.getLogger(__name__)


def providers_for(args: Sequence) -> list:
    """onnxruntime providers matching the device of the tensor inputs."""
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type == "cuda":
            return [
                ("CUDAExecutionProvider", {"device_id": a.device.index or 0}),
                "CPUExecutionProvider",
            ]
    return ["CPUExecutionProvider"]


def to_numpy(value) -> np.ndarray:
    """Numpy view of a CPU tensor (no copy when contiguous), 0-D arrays for scalars
    (a SymInt becomes an int64 scalar, a SymFloat a float32 one)."""
    if isinstance(value, torch.Tensor):
        return tensor_to_numpy(value)
    if isinstance(value, (bool, np.bool_)):
        return np.asarray(value, dtype=np.bool_)
    if isinstance(value, (int, np.integer)):
        return i64(value)
    return np.asarray(value, dtype=np.float32)


class OrtRunner:
    """Calls an InferenceSession with the arguments of a graph module.

    On CPU, tensors go through numpy views (no copy in either direction). On other
    devices, they go through DLPack (:meth:`onnxruntime.OrtValue.from_dlpack`) and the
    outputs stay on the device onnxruntime put them.

    :param onx: the model
    :param layout: placeholders and output kinds of the graph
    :param providers: onnxruntime providers
    :param session_options: :class:`onnxruntime.SessionOptions` or None
    :param use_dlpack: forces the DLPack path (default: only for non-CPU devices)
    """

    def __init__(
        self,
        onx: onnx.ModelProto,
        layout: GraphLayout,
        *,
        providers: list | None = None,
        session_options=None,
        use_dlpack: bool = False,
    ):
        import onnxruntime

        self.session = onnxruntime.InferenceSession(
            onx.SerializeToString(),
            session_options,
            providers=providers or ["CPUExecutionProvider"],
        )
        self.layout = layout
        onnx_inputs = {i.name for i in onx.graph.input}
        # positions of the arguments the model takes (unused inputs may be removed)
        self.feeds = [(i, name) for i, name in enumerate(layout.input_names) if name in onnx_inputs]
        if len(self.feeds) != len(onnx_inputs):
            # the dynamo exporter names its inputs differently: follow the order
            self.feeds = list(enumerate(i.name for i in onx.graph.input))
        self.output_names = [o.name for o in onx.graph.output]
        first = (providers or ["CPUExecutionProvider"])[0]
        first = first[0] if isinstance(first, tuple) else first
        self.use_dlpack = use_dlpack or first != "CPUExecutionProvider"

    def __call__(self, *args) -> tuple:
        if self.use_dlpack:
            results = self._run_dlpack(args)
        else:
            feeds = {name: to_numpy(args[i]) for i, name in self.feeds}
            results = [
                torch.from_numpy(r) if isinstance(r, np.ndarray) else r
                for r in self.session.run(None, feeds)
            ]
        return assemble(self.layout, results)

    def _run_dlpack(self, args) -> list:
        from onnxruntime import OrtValue

        feeds = {}
        for i, name in self.feeds:
            a = args[i]
            if isinstance(a, torch.Tensor) and a.dtype != torch.bool:
                feeds[name] = OrtValue.from_dlpack(a.detach().contiguous())
            else:  # bool tensors are not accepted through DLPack by onnxruntime
                feeds[name] = OrtValue.ortvalue_from_numpy(to_numpy(a))
        outs = self.session.run_with_ort_values(self.output_names, feeds)
        return [_from_ortvalue(o) for o in outs]


def assemble(layout: GraphLayout, results: list) -> tuple:
    """Rebuilds the graph's outputs from the ONNX ones: None, python ints (SymInt
    outputs) and constants included."""
    it = iter(results)
    outputs = []
    for kind, const in zip(layout.outputs, layout.constants):
        if kind == "tensor":
            outputs.append(next(it))
        elif kind == "int":
            outputs.append(int(next(it)))
        else:
            outputs.append(const)
    return tuple(outputs)


def _from_ortvalue(ov) -> torch.Tensor:
    if ov.data_type() == "tensor(bool)":
        return torch.from_numpy(ov.numpy())
    return torch.from_dlpack(ov._ortvalue)


def compare_with_eager(
    gm: torch.fx.GraphModule,
    args: Sequence,
    outputs: Sequence,
    *,
    atol: float = 1e-4,
    rtol: float = 1e-3,
    name: str = "",
) -> None:
    """Runs ``gm`` eagerly and checks ``outputs`` are close to what it returns."""
    with torch.no_grad():
        expected = gm(*args)
    expected = expected if isinstance(expected, (list, tuple)) else [expected]
    if len(expected) != len(outputs):
        raise AssertionError(f"{name}: {len(outputs)} outputs, eager has {len(expected)}")
    for i, (e, o) in enumerate(zip(expected, outputs)):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(
                o.to(e.device),
                e.detach(),
                atol=atol,
                rtol=rtol,
                equal_nan=True,
                msg=lambda m, i=i: f"{name}: output {i} differs from eager: {m}",
            )
        elif e is not None and not isinstance(e, torch.Tensor) and e != o:
            raise AssertionError(f"{name}: output {i} is {o!r}, eager gives {e!r}")


def verified(
    run: Callable, gm: torch.fx.GraphModule, name: str, atol: float = 1e-4, rtol: float = 1e-3
) -> Callable:
    """Wraps ``run`` to compare every call with eager execution of ``gm``."""

    def call(*args):
        outputs = run(*args)
        compare_with_eager(gm, args, outputs, atol=atol, rtol=rtol, name=name)
        logger.info("%s: outputs match eager", name)
        return outputs

    return call


def boxed(fn: Callable) -> Callable:
    """What aot_autograd expects from a compiler: a function taking a list of inputs."""
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(fn)
