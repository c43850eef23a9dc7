"""Measures the package's structure from its source (``ast`` only, nothing is imported).

It computes the import graph between the package's modules, its cycles, the imports
going from a lower layer to a higher one, the imports reaching into another
subpackage's private modules, long functions and a few repeated pieces of plumbing.
The layer test (``_unittests/test_layers.py``) and the design page use it.

::

    python -m experimental_experiment._tools.architecture
"""

from __future__ import annotations

import ast
import os
from collections import Counter
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

PACKAGE = "experimental_experiment"

#: layer of every top-level part of the package, an import may only go to a layer
#: lower or equal to its own; ``ext_test_case`` serves tests only
LAYERS: Mapping[str, int] = MappingProxyType(
    {
        "": 0,  # the package's __init__ (version only)
        "errors": 0,
        "verbosity": 0,
        "progress": 0,  # progress bars (tqdm)
        "helpers": 0,
        "_tools": 0,
        "_deprecation": 0,  # the deprecation warning of every shim
        "xbuilder": 0,
        "xoptim": 1,
        "runtime": 2,
        "report": 2,  # the export report's data model, filled by to_onnx
        "large": 2,  # external data, weights fill
        "torch_interpreter": 2,
        "torch_dynamo": 3,
        "torch_models": 4,
        "bench": 4,
        "investigate": 4,
        "_command_lines": 4,
        "__main__": 4,
    }
)
TEST_ONLY = frozenset({"ext_test_case"})
#: parts which never import torch
TORCH_FREE = frozenset(
    {
        "",
        "errors",
        "verbosity",
        "progress",
        "helpers",
        "_tools",
        "_deprecation",
        "xbuilder",
        "xoptim",
    }
)


@dataclass(frozen=True)
class Import:
    """One import statement from a module of the package to another one."""

    source: str
    target: str
    lineno: int
    names: tuple[str, ...] = ()
    lazy: bool = False  # inside a function: runs when the function is called
    type_only: bool = False  # under ``if TYPE_CHECKING:``: read by type checkers only


@dataclass
class ImportGraph:
    """Modules of the package and the imports between them."""

    modules: dict[str, str] = field(default_factory=dict)  # module -> file
    imports: list[Import] = field(default_factory=list)
    external: dict[str, set[str]] = field(default_factory=dict)  # module -> top names


def part(module: str) -> str:
    """Top-level part of a module: ``xbuilder`` for ``experimental_experiment.xbuilder.x``."""
    names = module.split(".")
    return names[1] if len(names) > 1 else ""


def layer(module: str) -> int | None:
    """Layer of a module, None for a test-only module."""
    p = part(module)
    if p in TEST_ONLY:
        return None
    return LAYERS.get(p, 4)


def _module_name(root: str, path: str) -> str:
    rel = os.path.relpath(path, os.path.dirname(root))[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def _function_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.update(range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def package_root() -> str:
    """Folder of the package."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_files(root: str | None = None) -> list[str]:
    """Every python file of the package, sorted."""
    root = root or package_root()
    files = []
    for folder, _, names in os.walk(root):
        files.extend(os.path.join(folder, n) for n in names if n.endswith(".py"))
    return sorted(files)


def _targets(graph: ImportGraph, module: str, is_pkg: bool, node) -> list[tuple[str, tuple]]:
    if isinstance(node, ast.Import):
        return [(a.name, ()) for a in node.names]
    target = _resolve(module, is_pkg, node)
    names = tuple(a.name for a in node.names)
    subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in graph.modules]
    rest = tuple(n for n in names if f"{target}.{n}" not in graph.modules)
    found = [(s, ()) for s in subs]
    if rest or not subs:
        found.append((target, rest))
    return found


def import_graph(root: str | None = None) -> ImportGraph:
    """Parses every file of the package and returns its import graph."""
    root = root or package_root()
    graph = ImportGraph()
    trees = {}
    for path in python_files(root):
        name = _module_name(root, path)
        graph.modules[name] = path
        with open(path, encoding="utf-8") as f:
            trees[name] = ast.parse(f.read(), path)
    for module, tree in trees.items():
        is_pkg = graph.modules[module].endswith("__init__.py")
        type_only, lazy = _type_checking_lines(tree), _function_lines(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target, names in _targets(graph, module, is_pkg, node):
                top = target.split(".")[0]
                if top != PACKAGE:
                    graph.external.setdefault(module, set()).add(top)
                    continue
                while target not in graph.modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target != module:
                    graph.imports.append(
                        Import(
                            module,
                            target,
                            node.lineno,
                            names,
                            node.lineno in lazy,
                            node.lineno in type_only,
                        )
                    )
    return graph


def cycles(graph: ImportGraph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    edges: dict[str, set[str]] = {m: set() for m in graph.modules}
    for imp in graph.imports:
        edges[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def upward_imports(graph: ImportGraph) -> list[str]:
    """Imports from a lower layer to a higher one, to a test helper, or of torch
    from a part which must not import it."""
    bad = []
    for imp in graph.imports:
        ls, lt = layer(imp.source), layer(imp.target)
        if ls is None:
            continue
        if lt is None:
            bad.append(f"{imp.source}:{imp.lineno} imports test helper {imp.target}")
        elif lt > ls:
            bad.append(f"{imp.source}:{imp.lineno} imports {imp.target} (layer {ls} -> {lt})")
    for module, tops in sorted(graph.external.items()):
        if part(module) in TORCH_FREE and "torch" in tops:
            bad.append(f"{module} imports torch")
    return sorted(bad)


#: stages of the exporter (subpackages of ``torch_interpreter``) and the modules of the
#: other stages each one may import; the modules outside the three stages are shared
STAGE_IMPORTS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "capture": ("convert.registry", "convert.dispatcher"),  # is there a converter for it?
        "convert": (),
        "result": ("capture", "convert"),
    }
)


def _stage(module: str) -> str:
    """The stage of a module of ``torch_interpreter`` (``capture``...), else ``""``."""
    names = module.split(".")
    if len(names) > 2 and names[1] == "torch_interpreter" and names[2] in STAGE_IMPORTS:
        return names[2]
    return ""


def stage_imports(graph: ImportGraph) -> list[str]:
    """Imports between the stages of ``torch_interpreter`` that :data:`STAGE_IMPORTS` does
    not allow (capture, then convert, then result)."""
    bad = []
    prefix = f"{PACKAGE}.torch_interpreter."
    for imp in graph.imports:
        src, tgt = _stage(imp.source), _stage(imp.target)
        if not src or not tgt or src == tgt:
            continue
        rel = imp.target[len(prefix) :]
        if not any(rel == a or rel.startswith(a + ".") for a in STAGE_IMPORTS[src]):
            bad.append(f"{imp.source}:{imp.lineno} imports {imp.target} ({src} -> {tgt})")
    return sorted(bad)


def _private(module: str) -> bool:
    return any(n.startswith("_") and not n.startswith("__") for n in module.split(".")[2:])


def private_cross_imports(graph: ImportGraph) -> list[str]:
    """Imports of another part's private module or private name."""
    found = []
    for imp in graph.imports:
        if part(imp.source) == part(imp.target):
            continue
        names = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
        if _private(imp.target) or names:
            found.append(f"{imp.source}:{imp.lineno} -> {imp.target} {' '.join(names)}".strip())
    return sorted(found)


def part_edges(graph: ImportGraph) -> Counter:
    """Number of imports between top-level parts of the package."""
    return Counter(
        (part(i.source) or "__init__", part(i.target) or "__init__")
        for i in graph.imports
        if part(i.source) != part(i.target)
    )


def _trees(root: str | None = None):
    root = root or package_root()
    for path in python_files(root):
        with open(path, encoding="utf-8") as f:
            yield _module_name(root, path), ast.parse(f.read(), path)


def long_functions(max_lines: int = 40, root: str | None = None) -> list[str]:
    """Functions (methods and nested ones included) longer than ``max_lines``
    (from ``def`` to the last line, decorators excluded)."""
    found = []
    for module, tree in _trees(root):
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > max_lines:
                    found.append(f"{module}.{node.name}:{node.lineno} ({n} lines)")
    return sorted(found)


def _is_int64(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "int64"


def _is_int64_array(node: ast.AST) -> bool:
    """``np.array(..., dtype=np.int64)`` or ``np.array(..., np.int64)``."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("array", "asarray")
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in ("np", "numpy")
    ):
        return False
    if any(k.arg == "dtype" and _is_int64(k.value) for k in node.keywords):
        return True
    return len(node.args) > 1 and _is_int64(node.args[1])


def _calls(node: ast.AST) -> set[str]:
    """Dotted names of the functions called in ``node`` (``os.replace``, ``to_array``)."""
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            names.add(ast.unparse(sub.func))
    return names


def _last(calls: set[str]) -> set[str]:
    return {c.rsplit(".", 1)[-1] for c in calls}


def _functions(tree: ast.AST):
    """Module-level functions and methods (not nested functions)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from (n for n in node.body if isinstance(n, ast.FunctionDef))


def plumbing(root: str | None = None) -> dict[str, list[str]]:
    """Repeated plumbing: int64 arrays built inline, functions which build an int64
    array (shortcuts), read a constant, read an attribute, save a model, and the
    definitions of ``MAX_IR_VERSION``."""
    found: dict[str, list[str]] = {
        k: []
        for k in (
            "int64_arrays",
            "int64_shortcuts",
            "constant_readers",
            "attribute_readers",
            "model_savers",
            "MAX_IR_VERSION",
        )
    }
    for module, tree in _trees(root):
        for node in ast.walk(tree):
            if _is_int64_array(node):
                found["int64_arrays"].append(f"{module}:{node.lineno}")
            if isinstance(node, ast.Assign) and any(
                getattr(t, "id", "") == "MAX_IR_VERSION" for t in node.targets
            ):
                found["MAX_IR_VERSION"].append(f"{module}:{node.lineno}")
        if part(module) == "helpers":  # display functions, not plumbing
            continue
        for fn in _functions(tree):
            where, calls = f"{module}.{fn.name}", _calls(fn)
            short = fn.end_lineno - fn.lineno < 15
            stmts = [s for s in fn.body if not isinstance(s, ast.Expr)]
            if (
                len(stmts) == 1
                and isinstance(stmts[0], ast.Return)
                and _is_int64_array(stmts[0].value)
            ):
                found["int64_shortcuts"].append(where)
            if (
                short
                and {"get_constant", "to_array"} & _last(calls)
                and fn.name not in ("get_constant", "constant_value")
            ):
                found["constant_readers"].append(where)
            if "get_attribute_value" in _last(calls):
                found["attribute_readers"].append(where)
            if {"os.replace", "onnx.save", "onnx.save_model"} & calls:
                found["model_savers"].append(where)
    return {k: sorted(v) for k, v in found.items()}


def measure(root: str | None = None, max_lines: int = 40) -> dict[str, list]:
    """Every measure at once."""
    graph = import_graph(root)
    res: dict[str, list] = {
        "import_cycles": [" <-> ".join(c) for c in cycles(graph)],
        "upward_imports": upward_imports(graph),
        "private_cross_imports": private_cross_imports(graph),
        f"functions_over_{max_lines}_lines": long_functions(max_lines, root),
    }
    res.update(plumbing(root))
    return res


def layer_table(root: str | None = None) -> str:
    """A text table: for every part of the package, its layer and the parts it imports
    (with the number of import statements)."""
    graph = import_graph(root)
    edges = part_edges(graph)
    parts = sorted(
        {part(m) or "__init__" for m in graph.modules},
        key=lambda p: (LAYERS.get("" if p == "__init__" else p, 5), p),
    )
    rows = [("layer", "part", "imports"), ("-----", "----", "-------")]
    for p in parts:
        lay = layer(f"{PACKAGE}.{p}") if p != "__init__" else 0
        deps = sorted((t, n) for (s, t), n in edges.items() if s == p)
        rows.append(
            (
                "test" if lay is None else str(lay),
                p,
                ", ".join(f"{t} ({n})" for t, n in deps) or "-",
            )
        )
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    return "\n".join(f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]}" for r in rows)


def main(argv: list[str] | None = None) -> int:
    """Prints the counts (``-v`` prints every item)."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    for key, items in measure().items():
        print(f"{key}: {len(items)}")
        if "-v" in argv:
            for item in items:
                print(f"    {item}")
    if "--table" in argv:
        print(layer_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
