"""FX interpreter: walks the graph and calls one converter per node."""

from __future__ import annotations

import logging
import operator
from typing import Any, NoReturn, cast

import torch
import torch.fx.node

from ...progress import Progress, sub_bar
from ...xbuilder import GraphBuilder
from .._dims import DimNamer
from .._torch_helper import TorchTensorRef, torch_dtype_to_onnx
from ..errors import ConversionError, ExportError, UnsupportedOpError, user_source_line
from ..stages import InputPlan
from .node_context import NodeContext
from .node_metadata import tag_nodes
from .pairs import PAIR_DTYPE, PAIR_TYPE, complex_name, is_complex_value
from .registry import Registry, call_converter

logger = logging.getLogger(__name__)


class Interpreter:
    """Converts a torch.fx graph into nodes of a :class:`GraphBuilder`.

    :param builder: the builder receiving the nodes
    :param graph_module: the captured graph
    :param plan: what every placeholder becomes (input, initializer, skipped)
    :param registry: the converters, one lookup per node
        (``DEFAULT_REGISTRY.layered(dispatcher)``: the user's converters first)
    :param namer: renders symbolic dimensions
    """

    def __init__(
        self,
        builder: GraphBuilder,
        graph_module: torch.fx.GraphModule,
        plan: InputPlan,
        *,
        registry: Registry,
        namer: DimNamer | None = None,
    ):
        self.g = builder
        self.gm = graph_module
        self.plan = plan
        self.registry = registry
        self.namer = namer or DimNamer()
        self.env: dict[str, Any] = {}
        #: (op, converter) -> number of nodes it converted (the export report)
        self.converters_used: dict[tuple[str, str], int] = {}

    def run(self, output_names: list[str | None], progress: Progress | None = None) -> list[str]:
        """Converts every node; ``output_names[i]`` is None for an output to drop;
        ``progress`` counts the nodes converted and shows the one being converted."""
        nodes = self.gm.graph.nodes
        with sub_bar(progress, len(nodes) - 1, "convert", unit="node") as bar:  # not output
            for node in nodes:
                if node.op == "output":
                    return self.output(node, output_names)
                bar.set_postfix_str(node.name, refresh=False)
                self.env[node.name] = getattr(self, node.op)(node)
                bar.update(1)
        raise ExportError("the FX graph has no output node")

    # one method per node kind
    def placeholder(self, node: torch.fx.Node) -> str | None:
        name = node.name
        if name in self.plan.skipped:
            return None
        if name in self.plan.initializers:
            init_name, tensor = self.plan.initializers[name]
            return self._initializer(init_name, tensor)
        input_name = self.plan.inputs.get(name, name)
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.is_complex():
            # complex inputs are real pairs named <name>_real_imag (convert/pairs.py)
            return self.g.make_tensor_input(
                complex_name(input_name), PAIR_TYPE[val.dtype], (*self.namer.shape(val.shape), 2)
            )
        if isinstance(val, torch.Tensor):
            return self.g.make_tensor_input(
                input_name, torch_dtype_to_onnx(val.dtype), self.namer.shape(val.shape)
            )
        if isinstance(val, (torch.SymInt, int)):
            return self.g.make_tensor_input(input_name, torch_dtype_to_onnx(torch.int64), ())
        if isinstance(val, (torch.SymFloat, float)):
            return self.g.make_tensor_input(input_name, torch_dtype_to_onnx(torch.float32), ())
        if val is None and "example_value" not in node.meta:
            return None
        raise ConversionError(f"placeholder {name!r} has an unsupported value {type(val)}")

    def get_attr(self, node: torch.fx.Node) -> Any:
        value, target = self.gm, str(node.target)
        for part in target.split("."):
            value = getattr(value, part)
        if isinstance(value, torch.Tensor):
            return self._initializer(target, value)
        return value  # a submodule: a control-flow branch

    def _initializer(self, name: str, tensor: torch.Tensor) -> str:
        exact = not self.g.has_name(name)
        if tensor.is_complex():  # real pairs, as every complex value
            tensor = torch.view_as_real(tensor.resolve_conj())
        return self.g.make_initializer(name, TorchTensorRef(tensor, source=name), exact_name=exact)

    def call_function(self, node: torch.fx.Node) -> Any:
        if node.target is operator.getitem:
            seq = self.env[cast(torch.fx.Node, node.args[0]).name]
            result = seq[node.args[1]]
            self._stamp(node, result)
            return result
        fn = self._find_converter(node)
        key = (str(node.target), f"{fn.__module__}.{fn.__qualname__}")
        self.converters_used[key] = self.converters_used.get(key, 0) + 1
        args = torch.fx.node.map_arg(node.args, lambda n: self.env[n.name])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: self.env[n.name])
        start = len(self.g.nodes)
        ctx = NodeContext(node, self.namer, self)
        try:
            result = call_converter(fn, self.g, args, kwargs, ctx)
        except UnsupportedOpError as e:
            placed = e.at_node(node)  # the op, the node, the user's line
            if placed is e:
                raise
            raise placed from e
        except ExportError:
            raise
        except Exception as e:
            raise ConversionError(
                f"converter {fn.__name__} failed on node {node.name!r} "
                f"({node.format_node()}): {type(e).__name__}: {e}\n"
                f"from the user's code: {user_source_line(node)}"
            ) from e
        if isinstance(result, str):
            result = self._rename(result, node.name, start)
        self._stamp(node, result)
        tag_nodes(self.g.nodes[start:], node)  # FX node and user's line in metadata_props
        return result

    def call_module(self, node: torch.fx.Node) -> NoReturn:
        raise UnsupportedOpError(
            f"call_module node {node.name!r} ({node.target}): the graph must be "
            "captured by torch.export.export first"
        )

    def call_method(self, node: torch.fx.Node) -> NoReturn:
        raise UnsupportedOpError(
            f"call_method node {node.name!r} ({node.target}): the graph must be "
            "captured by torch.export.export first"
        )

    def output(self, node: torch.fx.Node, output_names: list[str | None]) -> list[str]:
        values = node.args[0]
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        names = []
        for value, out_name in zip(values, output_names):
            if out_name is None:
                continue
            if value is None:
                raise ConversionError(f"output {out_name!r} is None and cannot be exported")
            result = self.env[value.name] if isinstance(value, torch.fx.Node) else value
            if not isinstance(result, str):
                result = self.g.make_constant(_as_array(result))
            if isinstance(value, torch.fx.Node) and is_complex_value(value.meta.get("val")):
                out_name = complex_name(out_name)  # real pairs (convert/pairs.py)
            names.append(self.g.make_tensor_output(result, output_name=out_name))
        return names

    # helpers
    def _find_converter(self, node: torch.fx.Node):
        found = self.registry.lookup_node(node, self.g.main_opset)
        if found.converter is None:
            raise UnsupportedOpError(
                f"{found.reason} (node {node.name!r}: {node.format_node()})\n"
                f"from the user's code: {user_source_line(node)}\n"
                "What to try: register a converter for this op with "
                "Dispatcher({op: fn}) passed as to_onnx(..., dispatcher=...), or "
                "decompose it with ExportOptions(decomposition_table='default').",
                op=node.target,
            )
        return found.converter

    def _rename(self, result: str, fx_name: str, start: int) -> str:
        if result == fx_name:
            return result
        new_name = fx_name if not self.g.has_name(fx_name) else self.g.unique_name(fx_name)
        if self.g.rename_last_output(result, new_name, start):
            return new_name
        return result

    def _stamp(self, node: torch.fx.Node, result) -> None:
        """Stamps dtype and shape of the node's value on the result."""
        val = node.meta.get("val")
        if isinstance(val, (list, tuple)) and isinstance(result, (list, tuple)):
            for v, r in zip(val, result):
                self._stamp_one(node, v, r)
        else:
            self._stamp_one(node, val, result)

    def _stamp_one(self, node, val, name) -> None:
        if not isinstance(name, str) or not name:
            return
        if isinstance(val, torch.Tensor) and val.dtype in PAIR_DTYPE:
            # a complex tensor is a real one with a trailing dimension 2 (real, imag)
            expected = torch_dtype_to_onnx(PAIR_DTYPE[val.dtype])
            shape = (*self.namer.shape(val.shape), 2)
        elif isinstance(val, torch.Tensor):
            expected = torch_dtype_to_onnx(val.dtype)
            shape = self.namer.shape(val.shape)
        elif isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
            expected, shape = torch_dtype_to_onnx(torch.int64), ()
        else:
            return
        got = self.g.get_type(name)
        if got and got != expected:
            raise ConversionError(
                f"node {node.name!r} ({node.format_node()}): the converter produced "
                f"element type {got}, torch expects {expected} ({getattr(val, 'dtype', '')})"
            )
        self.g.set_type(name, expected)
        self.g.set_shape(name, shape)


def _as_array(value):
    import numpy as np

    if isinstance(value, torch.Tensor):
        from .._torch_helper import tensor_to_numpy

        return tensor_to_numpy(value)
    return np.asarray(value)
