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
