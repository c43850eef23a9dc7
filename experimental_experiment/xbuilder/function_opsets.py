"""Local functions written for another version of the main ONNX domain than the model.

ONNX requires a function to import the same version of a domain as the model. A
function written for opset 18 still means the same thing in an opset-20 model when
every standard operator it calls is defined compatibly in both versions: the same
inputs and outputs (new ones optional), the same attributes with the same defaults
(new ones optional), and type constraints that only grew (Cast, Constant, If... took
new types at opset 19). The function's import is then moved to the model's version.
Otherwise the export stops with the operators whose definition changed (DFT's axis
became an input at opset 20, GridSample renamed its modes).
"""

from __future__ import annotations

from onnx import FunctionProto, NodeProto, defs, helper

from .errors import GraphBuilderError
from .graph_utils import subgraphs


def _schema(op_type: str, version: int):
    try:
        return defs.get_schema(op_type, version, "")
    except defs.SchemaError:
        return None


def _compatible(op_type: str, old: int, new: int) -> bool:
    a, b = _schema(op_type, old), _schema(op_type, new)
    if a is None or b is None:
        return False
    if a.since_version == b.since_version:
        return True
    ins_a, ins_b = [i.name for i in a.inputs], [i.name for i in b.inputs]
    optional = defs.OpSchema.FormalParameterOption.Optional
    if ins_b[: len(ins_a)] != ins_a or any(i.option != optional for i in b.inputs[len(ins_a) :]):
        return False
    if [o.name for o in a.outputs] != [o.name for o in b.outputs]:
        return False
    for name, att in a.attributes.items():
        if name not in b.attributes or (
            att.default_value.SerializeToString()
            != b.attributes[name].default_value.SerializeToString()
        ):
            return False
    if any(att.required for name, att in b.attributes.items() if name not in a.attributes):
        return False
    types_b = {t.type_param_str: set(t.allowed_type_strs) for t in b.type_constraints}
    return all(
        set(t.allowed_type_strs) <= types_b.get(t.type_param_str, set()) for t in a.type_constraints
    )


def _standard_ops(nodes) -> set[str]:
    ops = set()
    for node in nodes:
        node: NodeProto
        if node.domain in ("", "ai.onnx"):
            ops.add(node.op_type)
        for sub in subgraphs(node):
            ops |= _standard_ops(sub.node)
    return ops


def changed_operators(function: FunctionProto, old: int, new: int) -> list[str]:
    """The standard operators of ``function`` defined incompatibly at opset ``old`` and
    ``new`` (or missing in one of them)."""
    return sorted(op for op in _standard_ops(function.node) if not _compatible(op, old, new))


def align_function_opset(function: FunctionProto, version: int) -> FunctionProto:
    """``function`` importing ``version`` of the main domain (a copy when it changes).

    :param function: the local function
    :param version: the opset of the main domain the model imports
    :return: ``function`` itself when it already imports ``version``, else a copy
        importing it; ``GraphBuilderError`` when one of its operators differs
        between both versions

    .. code-block:: python

        f = helper.make_function("custom", "F", ["x"], ["y"],
                                 [helper.make_node("Tanh", ["x"], ["y"])],
                                 [helper.make_opsetid("", 18)])
        align_function_opset(f, 20)  # imports opset 20: Tanh is the same in both
    """
    imported = {o.domain: o.version for o in function.opset_import}
    old = imported.get("", imported.get("ai.onnx"))
    if old is None or old == version:
        return function
    changed = changed_operators(function, old, version)
    if changed:
        raise GraphBuilderError(
            f"local function {function.domain}.{function.name} is written for opset {old} "
            f"and the model uses opset {version}; these operators differ between the two "
            f"versions: {', '.join(changed)}. Export with target_opset={old} or write the "
            f"function for opset {version}."
        )
    aligned = FunctionProto()
    aligned.CopyFrom(function)
    del aligned.opset_import[:]
    aligned.opset_import.extend(
        helper.make_opsetid(d, version if d in ("", "ai.onnx") else v) for d, v in imported.items()
    )
    return aligned
