"""The package's imports (read with ast, nothing imported): no cycle, layers one way
(xbuilder < xoptim < torch_interpreter < torch_dynamo < torch_models/bench/CLI), no
torch in xbuilder/xoptim, the library never imports ext_test_case."""

import textwrap

from experimental_experiment._tools import architecture as arch


def test_no_import_cycle():
    """No cycle, imports inside functions (lazy) and under TYPE_CHECKING included."""
    assert arch.cycles(arch.import_graph()) == []


def test_type_only_imports_count(tmp_path):
    root = tmp_path / arch.PACKAGE
    (root / "report").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "report" / "__init__.py").write_text("")
    (root / "report" / "a.py").write_text("def f():\n    from .b import g\n")
    (root / "report" / "b.py").write_text(
        textwrap.dedent("""
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from .a import f
        """)
    )
    graph = arch.import_graph(str(root))
    kinds = {(i.source.rsplit(".", 1)[-1], i.lazy, i.type_only) for i in graph.imports}
    assert kinds == {("a", True, False), ("b", False, True)}, kinds
    assert arch.cycles(graph) == [[f"{arch.PACKAGE}.report.a", f"{arch.PACKAGE}.report.b"]]


def test_no_upward_import():
    assert arch.upward_imports(arch.import_graph()) == []


def test_exporter_stages_import_one_way():
    """capture -> convert -> result: capture only asks the registry whether an operator
    has a converter, convert imports neither capture nor result."""
    assert arch.stage_imports(arch.import_graph()) == []


def test_stage_check_can_fail(tmp_path):
    root = tmp_path / arch.PACKAGE / "torch_interpreter"
    for folder in ("capture", "convert", "result"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root.parent / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "convert" / "interpreter.py").write_text("from ..capture import prepare\n")
    (root / "capture" / "prepare.py").write_text("from ..convert import registry\n")
    (root / "convert" / "registry.py").write_text("")
    bad = arch.stage_imports(arch.import_graph(str(tmp_path / arch.PACKAGE)))
    assert len(bad) == 1 and "(convert -> capture)" in bad[0], bad


def test_the_checks_can_fail(tmp_path):
    """A small fake package with a cycle, an upward import and a test-helper import."""
    root = tmp_path / arch.PACKAGE
    for folder in ("xbuilder", "xoptim", "torch_interpreter"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "ext_test_case.py").write_text("")
    (root / "xbuilder" / "a.py").write_text("from ..xoptim import b\nimport torch\n")
    (root / "xoptim" / "b.py").write_text("from ..xbuilder import a\n")
    (root / "torch_interpreter" / "c.py").write_text(
        textwrap.dedent("""
        def f():
            from ..ext_test_case import run_onnx
        """)
    )
    graph = arch.import_graph(str(root))
    assert arch.cycles(graph) == [[f"{arch.PACKAGE}.xbuilder.a", f"{arch.PACKAGE}.xoptim.b"]]
    bad = arch.upward_imports(graph)
    assert any("xbuilder.a:1 imports" in b and "(layer 0 -> 1)" in b for b in bad), bad
    assert any("test helper" in b for b in bad), bad
    assert f"{arch.PACKAGE}.xbuilder.a imports torch" in bad


def test_layer_table_lists_every_part():
    table = arch.layer_table()
    for name in ("xbuilder", "xoptim", "torch_interpreter", "torch_dynamo"):
        assert name in table
