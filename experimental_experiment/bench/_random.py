"""Random operators in a captured program: samples calling them cannot be compared
with eager torch (:mod:`experimental_experiment.bench.op_coverage`)."""

from __future__ import annotations

from typing import Any

import torch

# values of schema arguments that make a seeded random operator
# (torch.Tag.nondeterministic_seeded) deterministic: no dropout, evaluation mode, and
# a single recurrent layer (dropout only applies between layers)
NOT_RANDOM_IF = {
    "p": 0,
    "dropout_p": 0,
    "dropout": 0,
    "train": False,
    "training": False,
    "num_layers": 1,
}


def _schema_values(node) -> dict[str, Any]:
    """Argument name -> value of an FX node calling an OpOverload (defaults included)."""
    values = {}
    for i, arg in enumerate(node.target._schema.arguments):
        if i < len(node.args) and not arg.kwarg_only:
            values[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            values[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            values[arg.name] = arg.default_value
    return values


def random_nodes(ep: torch.export.ExportedProgram) -> list[str]:
    """The operators of a captured program that draw random numbers (such as dropout
    in training mode): OpInfos seed them before calling eager (``wrapper_set_seed``),
    an exported model cannot reproduce torch's generator."""
    found = []
    for gm in ep.graph_module.modules():
        if not isinstance(gm, torch.fx.GraphModule):
            continue
        for node in gm.graph.nodes:
            target = node.target
            if (
                node.op != "call_function"
                or not isinstance(target, torch._ops.OpOverload)
                or torch.Tag.nondeterministic_seeded not in target.tags
            ):
                continue
            values = _schema_values(node)
            if not any(
                k in values and isinstance(values[k], (bool, int, float)) and values[k] == v
                for k, v in NOT_RANDOM_IF.items()
            ):
                found.append(str(target))
    return found
