"""Share of annotated parameters of the public functions (read with ast): xoptim and
xbuilder stay annotated."""

import textwrap

from experimental_experiment._tools import annotations


def test_xoptim_and_xbuilder_are_annotated():
    for part in ("xoptim", "xbuilder"):
        share = annotations.share(part)
        assert share.params > 100, share
        assert share.ratio >= 0.85, share


def test_counts_public_functions_only(tmp_path):
    part = tmp_path / "pkg"
    (part / "_private").mkdir(parents=True)
    (part / "__init__.py").write_text("")
    (part / "_private" / "hidden.py").write_text("def f(a, b): pass\n")
    (part / "_helpers.py").write_text("def f(a, b): pass\n")
    (part / "mod.py").write_text(
        textwrap.dedent("""
        def f(a: int, b, *args, c: str = "", **kwargs) -> None:
            pass

        def _g(a, b):
            pass

        class A:
            def __init__(self, x: int):
                pass

            def method(self, y):
                pass

            @staticmethod
            def static(self_like: int):
                pass

            @classmethod
            def build(cls, z: float) -> "A":
                pass

            def _private(self, w):
                pass

        class _Hidden:
            def method(self, v):
                pass
        """)
    )
    share = annotations.share("pkg", root=str(tmp_path))
    # f: a, b, args, c, kwargs; __init__: x; method: y; static: self_like; build: z
    assert (share.params, share.annotated_params) == (9, 5), share
    # f, method, static, build (__init__ has no return type to count)
    assert (share.returns, share.annotated_returns) == (4, 2), share
    assert abs(share.ratio - 5 / 9) < 1e-9


def test_main_prints_every_part(capsys):
    annotations.main(["xoptim"])
    out = capsys.readouterr().out
    assert out.startswith("xoptim") and "parameters" in out


def test_sub_folder_part_and_core(tmp_path):
    pkg = tmp_path / "pkg"
    for sub in ("capture", "convert/aten", "patches"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "mod.py").write_text("def f(a, b: int) -> None: pass\n")
    (pkg / "top.py").write_text("def g(a: int) -> int: pass\n")
    every = annotations.share("pkg", root=str(tmp_path))
    assert (every.params, every.annotated_params) == (7, 4), every
    sub = annotations.share("pkg/convert", root=str(tmp_path))
    assert (sub.params, sub.annotated_params) == (2, 1), sub
    core = annotations.share("pkg", root=str(tmp_path), exclude=("convert/aten", "patches"))
    # top.g and capture/mod.f only
    assert (core.params, core.annotated_params) == (3, 2), core
    assert (core.returns, core.annotated_returns) == (2, 2), core


def test_torch_interpreter_core_is_annotated():
    core = annotations.core_share("torch_interpreter")
    assert core.part == "torch_interpreter (core)"
    whole = annotations.share("torch_interpreter")
    assert 100 < core.params < whole.params, (core, whole)
    assert core.ratio >= 0.85, core
    assert core.return_ratio >= 0.70, core


def test_main_prints_the_core_line(capsys):
    annotations.main(["torch_interpreter"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" parameters")[0].strip() for line in lines] == [
        "torch_interpreter",
        "torch_interpreter (core)",
    ]
