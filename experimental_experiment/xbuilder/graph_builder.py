"""GraphBuilder: builds an ONNX graph node by node, tracking dtypes and shapes."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from onnx import FunctionProto, GraphProto, ModelProto, NodeProto, TensorProto, helper

from ._op_proxy import OpProxy
from ._serialize import MAX_IR_VERSION
from ._shape_rules import infer_node
from .dtypes import np_dtype_to_onnx
from .errors import GraphBuilderError
from .function_opsets import align_function_opset
from .optimization_options import OptimizationOptions

if TYPE_CHECKING:
    from ..progress import Progress

logger = logging.getLogger(__name__)

#: Default opset of the whole package, see :ref:`the design page <l-design>`.
DEFAULT_OPSET = 20


class GraphBuilder:
    """Builds an ONNX graph with dtype, shape and rank tracking.

    :param target_opset: opset of the default domain, or a dict ``{domain: version}``
    :param verbose: verbosity, raises the logging level when > 0

    Shapes are tuples of ints (static dims), strings (symbolic dims, written as
    ``dim_param``) or None (unknown dim).

    .. code-block:: python

        import numpy as np
        from onnx import TensorProto
        from experimental_experiment.xbuilder import GraphBuilder

        g = GraphBuilder(18)
        x = g.make_tensor_input("x", TensorProto.FLOAT, ("batch", 4))
        y = g.op.Relu(g.op.Add(x, np.ones((4,), dtype=np.float32)))
        g.make_tensor_output(y, name="y")
        model = g.to_onnx()

    The builder imports neither :mod:`experimental_experiment.xoptim` nor torch:
    ``xoptim.optimize_builder(g)`` optimizes it, ``g.to_onnx()`` writes it.
    """

    def __init__(self, target_opset: int | dict[str, int] | None = None, *, verbose: int = 0):
        if target_opset is None:
            target_opset = DEFAULT_OPSET
        if isinstance(target_opset, int):
            target_opset = {"": target_opset}
        self.opsets: dict[str, int] = dict(target_opset)
        self.opsets.setdefault("", DEFAULT_OPSET)
        self.main_opset: int = self.opsets[""]
        self.verbose = verbose
        self.op = OpProxy(self)
        self.nodes: list[NodeProto] = []
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.initializers: dict[str, Any] = {}
        self.functions: dict[tuple[str, str], FunctionProto] = {}
        # written into the model's metadata_props (sorted by key)
        self.metadata_props: dict[str, str] = {}
        self._types: dict[str, int] = {}
        self._shapes: dict[str, tuple] = {}
        self._ranks: dict[str, int] = {}
        self._names: set[str] = set()
        self._counters: dict[str, int] = {}
        self._constant_cache: dict[tuple, str] = {}
        self._constant_arrays: dict[str, np.ndarray] = {}

    # names
    def unique_name(self, prefix: str) -> str:
        """Returns a name starting with ``prefix`` never returned before."""
        prefix = prefix or "_"
        if prefix not in self._names:
            self._names.add(prefix)
            return prefix
        n = self._counters.get(prefix, 0)
        while True:
            n += 1
            name = f"{prefix}_{n}"
            if name not in self._names:
                self._counters[prefix] = n
                self._names.add(name)
                return name

    def has_name(self, name: str) -> bool:
        """Tells if ``name`` is already used by a result."""
        return name in self._names

    # dtype / shape table
    def has_type(self, name: str) -> bool:
        return self._types.get(name, 0) != 0

    def get_type(self, name: str) -> int:
        """ONNX element type of ``name``, 0 if unknown."""
        return self._types.get(name, 0)

    def set_type(self, name: str, elem_type: int) -> None:
        self._types[name] = int(elem_type)

    def has_shape(self, name: str) -> bool:
        return name in self._shapes

    def get_shape(self, name: str) -> tuple | None:
        """Shape of ``name`` (ints, strings, None) or None if unknown."""
        return self._shapes.get(name)

    def set_shape(self, name: str, shape: Sequence) -> None:
        shape = tuple(shape)
        self._shapes[name] = shape
        self._ranks[name] = len(shape)

    def get_rank(self, name: str) -> int | None:
        return self._ranks.get(name)

    def set_rank(self, name: str, rank: int) -> None:
        self._ranks[name] = rank

    def is_static_shape(self, name: str) -> bool:
        shape = self._shapes.get(name)
        return shape is not None and all(isinstance(d, int) for d in shape)

    # inputs, outputs, constants
    def make_tensor_input(self, name: str, elem_type: int, shape: Sequence | None) -> str:
        """Adds a graph input and returns its name (unchanged, must be new)."""
        if name in self._names:
            raise GraphBuilderError(f"input name {name!r} is already used")
        self._names.add(name)
        self.inputs.append(name)
        self.set_type(name, elem_type)
        if shape is not None:
            self.set_shape(name, shape)
        return name

    def make_tensor_output(
        self,
        name: str,
        *,
        elem_type: int | None = None,
        shape: Sequence | None = None,
        output_name: str | None = None,
    ) -> str:
        """Declares ``name`` as a graph output, renamed ``output_name`` when given.

        An Identity node is inserted when the result is an input, an initializer,
        already an output or when a new name is requested.
        """
        target = name
        if (
            (output_name and output_name != name)
            or name in self.inputs
            or (name in self.initializers or name in self.outputs)
        ):
            target = self.make_node("Identity", [name], [output_name or name])
        if elem_type:
            self.set_type(target, elem_type)
        if shape is not None:
            self.set_shape(target, shape)
        self.outputs.append(target)
        return target

    def make_initializer(self, name: str, value: Any, *, exact_name: bool = False) -> str:
        """Adds an initializer: a numpy array or an object with ``to_tensor_proto``."""
        if exact_name and name in self._names:
            raise GraphBuilderError(f"initializer name {name!r} is already used")
        name = name if exact_name else self.unique_name(name)
        self._names.add(name)
        self.initializers[name] = value
        if isinstance(value, np.ndarray):
            self.set_type(name, np_dtype_to_onnx(value.dtype))
            self._constant_arrays[name] = value
        else:
            self.set_type(name, value.elem_type)
        self.set_shape(name, tuple(value.shape))
        return name

    def make_constant(self, value: np.ndarray) -> str:
        """Adds a small constant, shared with every identical constant."""
        value = np.asarray(value)
        key = (value.dtype.str, value.shape, value.tobytes())
        if key in self._constant_cache and self._constant_cache[key] in self.initializers:
            return self._constant_cache[key]
        name = self.make_initializer("c_" + _const_suffix(value), value)
        self._constant_cache[key] = name
        return name

    def small_constants(self, max_size: int = 16) -> set[str]:
        """Names of the constants made by :meth:`make_constant` (not model weights)
        with at most ``max_size`` elements."""
        names = set()
        for n in self._constant_cache.values():
            shape = self.get_shape(n)
            if (
                n in self.initializers
                and self.is_constant(n)
                and shape is not None
                and (int(np.prod(shape)) <= max_size)
            ):
                names.add(n)
        return names

    def is_constant(self, name: str) -> bool:
        """True for an initializer whose value may be read and folded (a model weight
        without data, or pinned to external data, is not)."""
        return name in self.initializers and getattr(self.initializers[name], "foldable", True)

    def get_constant(self, name: str) -> np.ndarray:
        """Value of an initializer as a numpy array."""
        if name in self._constant_arrays:
            return self._constant_arrays[name]
        value = self.initializers[name]
        arr = value if isinstance(value, np.ndarray) else value.to_numpy()
        self._constant_arrays[name] = arr
        return arr

    def set_constant_value(self, name: str, value: np.ndarray) -> None:
        """Makes the result ``name`` an initializer holding ``value`` (constant folding
        replaces the node computing it)."""
        self._names.add(name)
        self.initializers[name] = value
        self._constant_arrays[name] = value
        self.set_type(name, np_dtype_to_onnx(value.dtype))
        self.set_shape(name, tuple(value.shape))

    def remove_initializer(self, name: str, replaced_by: str | None = None) -> None:
        """Removes an initializer; shared constants which pointed to it point to
        ``replaced_by`` (or are forgotten)."""
        del self.initializers[name]
        self._constant_arrays.pop(name, None)
        for key, cached in list(self._constant_cache.items()):
            if cached == name:
                if replaced_by is None:
                    del self._constant_cache[key]
                else:
                    self._constant_cache[key] = replaced_by

    # nodes
    def make_node(
        self,
        op_type: str,
        inputs: Sequence[str],
        outputs: int | Sequence[str] = 1,
        *,
        domain: str = "",
        name: str | None = None,
        **attributes: Any,
    ):
        """Adds a node; returns its output name, or a tuple when there are several."""
        for i in inputs:
            if i and i not in self._names:
                raise GraphBuilderError(f"{op_type}: unknown input {i!r}")
        if isinstance(outputs, int):
            prefix = name or op_type.lower()
            outputs = [self.unique_name(f"_{prefix}") for _ in range(outputs)]
        else:
            outputs = [o if not o or o not in self._names else self.unique_name(o) for o in outputs]
            self._names.update(o for o in outputs if o)
        if domain and domain not in self.opsets:
            self.opsets[domain] = 1
        attributes = {k: v for k, v in attributes.items() if v is not None}
        node = helper.make_node(
            op_type,
            list(inputs),
            outputs,
            domain=domain or None,
            name=self.unique_name(f"n_{name or op_type}"),
            **attributes,
        )
        self.nodes.append(node)
        infer_node(self, node)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def add_function(self, function: FunctionProto) -> None:
        """Registers a local function callable with ``g.op.<name>(..., domain=...)``;
        a function written for another version of the main domain is moved to the
        model's when its operators mean the same there
        (:func:`~experimental_experiment.xbuilder.function_opsets.align_function_opset`)."""
        function = align_function_opset(function, self.main_opset)
        key = (function.domain, function.name)
        self.functions[key] = function
        if function.domain not in self.opsets:
            self.opsets[function.domain] = 1
        for oi in function.opset_import:
            if oi.domain not in self.opsets:
                self.opsets[oi.domain] = oi.version

    def rename_last_output(self, old: str, new: str, since: int) -> bool:
        """Renames result ``old`` produced by a node added at index ``since`` or later.

        Returns False (nothing done) when no such node produces ``old``.
        """
        found = False
        for node in self.nodes[since:]:
            for i, o in enumerate(node.output):
                if o == old:
                    node.output[i] = new
                    found = True
            for i, name in enumerate(node.input):
                if name == old:
                    node.input[i] = new
        if not found:
            return False
        self._names.add(new)
        for table in (self._types, self._shapes, self._ranks):
            if old in table:
                table[new] = table.pop(old)
        return True

    # subgraphs: branches of If, bodies of Loop and Scan
    def make_subgraph_builder(self) -> GraphBuilder:
        """A builder for a subgraph (If branch, Loop or Scan body) of this graph.

        It shares names, dtypes, shapes, opsets, functions and initializers with this
        builder: names stay unique in the whole model (ONNX forbids a subgraph to
        shadow an outer name), outer results are visible inside with their types, and
        the constants a body creates become initializers of the main graph, which a
        subgraph sees as outer-scope names. Only nodes, inputs and outputs are its own;
        :meth:`to_graph_proto` turns it into the attribute of the control-flow node.
        """
        child = GraphBuilder(self.opsets, verbose=self.verbose)
        for attr in (
            "opsets",
            "functions",
            "initializers",
            "_types",
            "_shapes",
            "_ranks",
            "_names",
            "_counters",
            "_constant_cache",
            "_constant_arrays",
        ):
            setattr(child, attr, getattr(self, attr))
        return child

    def to_graph_proto(self, name: str) -> GraphProto:
        """The nodes, inputs and outputs of this (sub)graph builder as a GraphProto,
        inputs and outputs typed; initializers are not included (see
        :meth:`make_subgraph_builder`). Unused nodes are removed first."""
        from ._serialize import _shape_or_rank, make_value_info
        from .graph_utils import remove_unused

        remove_unused(self, keep_initializers=True)
        inputs = [
            make_value_info(n, self.get_type(n), _shape_or_rank(self, n)) for n in self.inputs
        ]
        outputs = [
            make_value_info(n, self.get_type(n), _shape_or_rank(self, n)) for n in self.outputs
        ]
        return helper.make_graph(self.nodes, name, inputs, outputs)

    # output
    def to_onnx(
        self, *, optimize: bool | OptimizationOptions = False, progress: Progress | None = None
    ) -> ModelProto:
        """Returns the ModelProto of the graph as it is; ``progress`` (a
        ``experimental_experiment.progress.Progress``) counts the bytes
        of the initializers copied into it.

        The builder does not optimize (the optimizer sits above it): call
        :func:`experimental_experiment.xoptim.optimize_builder` first,
        ``optimize=True`` raises an error saying so.
        """
        from ._serialize import builder_to_model

        if optimize:
            raise GraphBuilderError(
                "GraphBuilder.to_onnx does not optimize: call "
                "experimental_experiment.xoptim.optimize_builder(g, options) before "
                "g.to_onnx() (torch_interpreter.to_onnx does both)"
            )
        return builder_to_model(self, progress=progress)


def _const_suffix(value: np.ndarray) -> str:
    """A short readable suffix for a constant's name."""
    if value.size == 1:
        v = value.reshape(-1)[0]
        text = str(v.item() if hasattr(v, "item") else v)
        text = text.replace("-", "m").replace(".", "p").replace("+", "")
        if len(text) <= 12 and text.replace("_", "").isalnum():
            return f"{value.dtype.name}_{text}" + ("" if value.ndim == 0 else "_1d")
    return f"{value.dtype.name}_{'x'.join(map(str, value.shape)) or 's'}"


def elem_type_of(value: np.ndarray) -> int:
    """ONNX element type of a numpy array."""
    return np_dtype_to_onnx(value.dtype)


__all__ = ["GraphBuilder", "DEFAULT_OPSET", "MAX_IR_VERSION", "TensorProto"]
