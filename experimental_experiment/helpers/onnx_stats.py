"""Statistics of an ONNX model: nodes per operator type, initializer sizes
(never imports torch)."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import onnx


def _tensor_bytes(t: onnx.TensorProto) -> int:
    size = int(np.prod(t.dims)) if t.dims else 1
    if t.data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        return sum(len(s) for s in t.string_data)
    itemsize = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    if t.data_type in (onnx.TensorProto.INT4, onnx.TensorProto.UINT4):
        return (size + 1) // 2
    return size * itemsize


def _walk_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for att in node.attribute:
            subs = [att.g] if att.type == onnx.AttributeProto.GRAPH else list(att.graphs)
            for sub in subs:
                yield from _walk_nodes(sub)


def external_data_statistics(model: onnx.ModelProto, folder: str | None = None) -> dict:
    """Sizes of the external data: ``{location: {"tensors", "bytes", "on_disk",
    "unfilled"}}`` (``on_disk`` the file size when ``folder`` has it, else None).
    :class:`UnsafeLocationError <experimental_experiment.xbuilder.safe_paths.UnsafeLocationError>`
    when a location leaves ``folder``.

    :param model: the model (its external data is not loaded)
    :param folder: the folder of the model's file, where the data files are looked for
        (None: not looked for, ``on_disk`` stays None)
    :return: ``{location: {"tensors", "bytes", "on_disk", "unfilled"}}``, sorted by
        location

    .. code-block:: python

        import onnx
        from experimental_experiment.helpers.onnx_stats import external_data_statistics

        model = onnx.load("dump/model.onnx", load_external_data=False)
        for location, row in external_data_statistics(model, "dump").items():
            print(location, row["tensors"], row["bytes"], row["on_disk"], row["unfilled"])
    """
    from ..xbuilder.model_container import get_weights_metadata

    unfilled = set(get_weights_metadata(model).get("unfilled", []))
    files: dict[str, dict] = {}
    for t in model.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        row = files.setdefault(
            info.get("location", "?"), {"tensors": 0, "bytes": 0, "on_disk": None, "unfilled": 0}
        )
        row["tensors"] += 1
        row["bytes"] += int(info.get("length", _tensor_bytes(t)))
        row["unfilled"] += t.name in unfilled
    if folder:  # locations leaving the folder raise before any file is looked at
        from ..xbuilder.safe_paths import external_entries

        paths = {e.location: e.path for e in external_entries(model, folder)}
        for loc, row in files.items():
            if loc in paths and os.path.isfile(paths[loc]):
                row["on_disk"] = os.path.getsize(paths[loc])
    return dict(sorted(files.items()))


def model_statistics(model: onnx.ModelProto, folder: str | None = None) -> dict:
    """Counts the nodes of a model per operator type and measures its initializers.

    Nodes of subgraphs (``If``, ``Loop``, ``Scan``) are counted, nodes of local
    functions are counted apart (``function_nodes``).

    .. code-block:: python

        import onnx
        from experimental_experiment.helpers import model_statistics

        stats = model_statistics(onnx.load("model.onnx"))
        print(stats["n_nodes"], stats["op_types"], stats["initializer_bytes"])

    Args:
        model: the model (its external data is not loaded)
        folder: the folder of the model's file, where its external data files are
            looked for (None: not looked for)

    Returns:
        a dictionary with keys ``n_nodes``, ``op_types`` (``{op_type: count}``,
        the domain as a prefix when it is not the main one), ``n_functions``,
        ``function_nodes``, ``n_initializers``, ``initializer_bytes`` and
        ``initializers`` (a list of ``(name, type name, shape, bytes)``,
        largest first), ``external_data`` (see :func:`external_data_statistics`,
        files looked for in ``folder``)
    """
    ops = Counter()
    for node in _walk_nodes(model.graph):
        ops[f"{node.domain}.{node.op_type}" if node.domain else node.op_type] += 1
    fct_ops = Counter()
    for f in model.functions:
        for node in f.node:
            fct_ops[f"{node.domain}.{node.op_type}" if node.domain else node.op_type] += 1
    inits = [
        (t.name, onnx.TensorProto.DataType.Name(t.data_type), tuple(t.dims), _tensor_bytes(t))
        for t in model.graph.initializer
    ]
    inits.sort(key=lambda r: (-r[3], r[0]))
    return {
        "n_nodes": sum(ops.values()),
        "op_types": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        "n_functions": len(model.functions),
        "function_nodes": dict(sorted(fct_ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        "n_initializers": len(inits),
        "initializer_bytes": sum(r[3] for r in inits),
        "initializers": inits,
        "external_data": external_data_statistics(model, folder),
    }


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def format_statistics(stats: dict, top: int = 10) -> str:
    """Formats what :func:`model_statistics` returns as text, the ``top`` largest
    initializers included.

    :param stats: what :func:`model_statistics` returned
    :param top: number of initializers listed, the largest ones

    .. code-block:: python

        import onnx
        from experimental_experiment.helpers import format_statistics, model_statistics

        onx = onnx.load("model.onnx", load_external_data=False)
        print(format_statistics(model_statistics(onx, folder="."), top=5))
    """
    lines = [f"nodes: {stats['n_nodes']}"]
    width = max((len(k) for k in stats["op_types"]), default=0)
    lines += [f"  {k:<{width}} {v:>6}" for k, v in stats["op_types"].items()]
    if stats["n_functions"]:
        lines.append(
            f"local functions: {stats['n_functions']}, "
            f"nodes: {sum(stats['function_nodes'].values())}"
        )
        lines += [f"  {k} {v}" for k, v in stats["function_nodes"].items()]
    lines.append(f"initializers: {stats['n_initializers']}, {_human(stats['initializer_bytes'])}")
    for name, dtype, shape, size in stats["initializers"][:top]:
        lines.append(f"  {name} {dtype}[{','.join(map(str, shape))}] {_human(size)}")
    if len(stats["initializers"]) > top:
        lines.append(f"  ... {len(stats['initializers']) - top} more")
    for loc, row in stats.get("external_data", {}).items():
        disk = "missing" if row["on_disk"] is None else _human(row["on_disk"])
        lines.append(
            f"external data {loc}: {row['tensors']} tensors, "
            f"{_human(row['bytes'])} (file {disk}), {row['unfilled']} unfilled"
        )
    return "\n".join(lines)
