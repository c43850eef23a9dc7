"""Submodules as ONNX local functions (``to_onnx(..., export_modules_as_functions=...)``).

torch.export inlines every submodule, but each FX node keeps the stack of modules it
comes from (``node.meta["nn_module_stack"]``). The interpreter below records which
module instance produced each ONNX node; afterwards the consecutive nodes of the same
instance become one call to a local function (domain ``local_functions``). Weights are
function inputs, so instances with the same structure (two ``Block`` layers with
different weights) share one function; small constants (at most 16 elements, made by
the converters, not weights) are Constant nodes of the body, so the optimizer folds
them and its patterns see them inside the function. :func:`inline_functions` flattens
the model again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterable

import onnx
from onnx import NodeProto, helper

from .interpreter import Interpreter

if TYPE_CHECKING:
    import torch

    from ...xbuilder import GraphBuilder

logger = logging.getLogger(__name__)

DOMAIN = "local_functions"


class ModuleTaggingInterpreter(Interpreter):
    """An Interpreter remembering the module instance of every ONNX node it adds.

    :param selected: True (every child of the model) or a set of module types
    """

    def __init__(
        self, *args: Any, selected: bool | Iterable[str | type] = True, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.selected = selected
        #: ONNX node name -> (qualified module name, module type name)
        self.owner: dict[str, tuple[str, str]] = {}

    def call_function(self, node: torch.fx.Node) -> Any:
        start = len(self.g.nodes)
        result = super().call_function(node)
        owner = self._owner(node.meta.get("nn_module_stack") or {})
        if owner is not None:
            for onnx_node in self.g.nodes[start:]:
                self.owner[onnx_node.name] = owner
        return result

    def _owner(self, stack: dict) -> tuple[str, str] | None:
        """The outermost selected module of the stack."""
        for path, typ in stack.values():
            if not path:
                continue  # the model itself
            type_name = typ if isinstance(typ, str) else f"{typ.__module__}.{typ.__qualname__}"
            if self.selected is True or _matches(type_name, self.selected):
                return path, type_name
        return None


def _matches(type_name: str, selected: Iterable) -> bool:
    for cls in selected:
        if isinstance(cls, str):
            if type_name == cls or type_name.rsplit(".", 1)[-1] == cls:
                return True
        elif type_name in (
            f"{cls.__module__}.{cls.__qualname__}",
            f"{cls.__module__}.{cls.__name__}",
        ):
            return True
    return False


def _has_subgraph(node: NodeProto) -> bool:
    return any(
        a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute
    )


def make_local_functions(g: GraphBuilder, owner: dict[str, tuple[str, str]]) -> int:
    """Replaces runs of nodes of the same module instance by function calls.

    Returns the number of calls made.
    """
    groups: list[tuple[tuple[str, str] | None, list[NodeProto]]] = []
    for node in g.nodes:
        key = owner.get(node.name)
        if groups and groups[-1][0] == key and key is not None:
            groups[-1][1].append(node)
        else:
            groups.append((key, [node]))
    users = _users(groups)
    small = g.small_constants()
    bodies: dict[tuple, str] = {}  # canonical body -> function name
    new_nodes, calls = [], 0
    for position, (key, nodes) in enumerate(groups):
        if key is None or any(_has_subgraph(n) for n in nodes):
            new_nodes.extend(nodes)
            continue
        produced = {o for n in nodes for o in n.output if o}
        inputs = _ordered_unique(i for n in nodes for i in n.input if i and i not in produced)
        constants = {i: g.get_constant(i) for i in inputs if i in small}
        inputs = [i for i in inputs if i not in constants]
        outputs = [
            o
            for n in nodes
            for o in n.output
            if o and (o in g.outputs or users.get(o, set()) - {position})
        ]
        if not outputs:
            new_nodes.extend(nodes)
            continue
        fct = _function(nodes, inputs, outputs, key[1], g.opsets, bodies, constants)
        if (fct.domain, fct.name) not in g.functions:
            g.add_function(fct)
        new_nodes.append(
            helper.make_node(
                fct.name, inputs, outputs, domain=DOMAIN, name=g.unique_name(f"call_{key[0]}")
            )
        )
        calls += 1
    g.nodes[:] = new_nodes
    g.opsets.setdefault(DOMAIN, 1)
    return calls


def _users(groups) -> dict[str, set[int]]:
    """Name -> positions of the groups reading it (subgraphs included)."""
    from ...xbuilder.graph_utils import used_names

    users: dict[str, set[int]] = {}
    for position, (_, nodes) in enumerate(groups):
        for node in nodes:
            for name in used_names(node):
                users.setdefault(name, set()).add(position)
    return users


def _ordered_unique(names: Iterable[str]) -> list[str]:
    seen, out = set(), []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def _function(nodes, inputs, outputs, type_name, opsets, bodies, constants) -> onnx.FunctionProto:
    """A function with canonical names; identical bodies share the same function;
    ``constants`` become Constant nodes of the body."""
    from onnx import numpy_helper

    rename = {n: f"i{k}" for k, n in enumerate(inputs)}
    body = []
    for k, (name, value) in enumerate(constants.items()):
        rename[name] = f"c{k}"
        body.append(
            helper.make_node("Constant", [], [rename[name]], value=numpy_helper.from_array(value))
        )
    for node in nodes:
        new = NodeProto()
        new.CopyFrom(node)
        new.ClearField("name")
        # the origin (FX node, user's line) differs between instances sharing the body
        new.ClearField("metadata_props")
        for k, i in enumerate(new.input):
            if i:
                new.input[k] = rename[i]
        for k, o in enumerate(new.output):
            if o:
                rename[o] = rename.get(o) or f"t{len(rename)}"
                new.output[k] = rename[o]
        body.append(new)
    out_names = [rename[o] for o in outputs]
    signature = (type_name, tuple(n.SerializeToString() for n in body), tuple(out_names))
    if signature in bodies:
        name = bodies[signature]
    else:
        base = type_name.rsplit(".", 1)[-1].replace("<", "").replace(">", "")
        used = set(bodies.values())
        name = (
            base
            if base not in used
            else next(f"{base}_{k}" for k in range(2, 1000) if f"{base}_{k}" not in used)
        )
        bodies[signature] = name
    opset_imports = [helper.make_opsetid(d, v) for d, v in sorted(opsets.items()) if d != DOMAIN]
    return helper.make_function(
        DOMAIN, name, list(rename[i] for i in inputs), out_names, body, opset_imports
    )


def inline_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """Inlines every local function of ``model`` (the exported model without functions).

    :param model: a model exported with ``export_modules_as_functions``
    :return: the same model, every call to a local function replaced by its nodes

    .. code-block:: python

        onx = to_onnx(model, (x,), export_modules_as_functions={Block})
        flat = inline_functions(onx)
    """
    import onnx.inliner

    return onnx.inliner.inline_local_functions(model)
