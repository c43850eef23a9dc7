"""matcher, pattern, pattern_graph and match import each other without a cycle, counting
every import statement (type-only ones under ``TYPE_CHECKING`` and lazy ones inside a
function included)."""

import ast
import os

import experimental_experiment.xoptim as xoptim

MODULES = ("match", "matcher", "pattern", "pattern_graph")


def _imports(name: str) -> set[str]:
    path = os.path.join(os.path.dirname(xoptim.__file__), name + ".py")
    with open(path) as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            found.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("experimental_experiment.xoptim.")
        ):
            found.add(node.module.split(".")[2])
    return found & set(MODULES)


def _has_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(n, path):
        state[n] = 1
        for m in graph[n]:
            if state.get(m) == 1:
                return [*path, n, m]
            if m not in state:
                res = visit(m, [*path, n])
                if res:
                    return res
        state[n] = 2
        return None

    for n in graph:
        if n not in state:
            res = visit(n, [])
            if res:
                return res
    return None


def test_no_cycle_even_type_only():
    graph = {m: _imports(m) for m in MODULES}
    assert _has_cycle(graph) is None, graph


def test_cycle_detection_can_fail():
    assert _has_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]


def test_reexports_are_the_same_objects():
    from experimental_experiment.xoptim import Match
    from experimental_experiment.xoptim.match import Refusal
    from experimental_experiment.xoptim.pattern_graph import Refusal as R2

    assert Refusal is R2
    assert Match.__module__ == "experimental_experiment.xoptim.match"
