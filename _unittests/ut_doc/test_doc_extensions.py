"""Tests of the local Sphinx extensions of _doc on tiny sites built in a temporary folder."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "_doc")


def build(tmp_path, extensions, index, **conf):
    "Builds a one-page site, returns its HTML and the warnings."
    from io import StringIO

    from sphinx.application import Sphinx

    src = tmp_path / "src"
    src.mkdir()
    lines = [f"extensions = {extensions!r}"] + [f"{k} = {v!r}" for k, v in conf.items()]
    (src / "conf.py").write_text("\n".join(lines) + "\n")
    (src / "index.rst").write_text(index)
    warnings = StringIO()
    sys.path.insert(0, DOC)
    try:
        app = Sphinx(
            str(src),
            str(src),
            str(tmp_path / "out"),
            str(tmp_path / "doctrees"),
            "html",
            status=None,
            warning=warnings,
            freshenv=True,
        )
        app.build()
    finally:
        sys.path.remove(DOC)
    return (tmp_path / "out" / "index.html").read_text(), warnings.getvalue()


PAGE = """Title
=====

.. py:function:: pkg.export.to_onnx(model)

    Exports.

.. py:class:: pkg.builder.GraphBuilder

    .. py:method:: to_onnx()

.. py:function:: pkg.a.run()

.. py:function:: pkg.b.run()

.. py:currentmodule:: pkg.other

Short: :func:`to_onnx`, :meth:`GraphBuilder.to_onnx`, ambiguous: :func:`run`,
unknown: :func:`nothing`.

.. py:function:: backend(exporter)

    :param exporter: ``"custom"`` (our :func:`to_onnx`)
"""


def test_short_refs(tmp_path):
    html, warnings = build(tmp_path, ["_short_refs"], PAGE)
    assert html.count('class="reference internal" href="#pkg.export.to_onnx"') == 2, html
    assert 'href="#pkg.builder.GraphBuilder.to_onnx"' in html
    # no link for an ambiguous or an unknown name
    code = '<code class="xref py py-func docutils literal notranslate">'
    assert code + '<span class="pre">run()' in html
    assert '<span class="pre">nothing()</span></code>' in html


def test_short_refs_off(tmp_path):
    html, _ = build(tmp_path, [], PAGE)
    assert 'class="reference internal" href="#pkg.export.to_onnx"' not in html


def _extension(name):
    sys.path.insert(0, DOC)
    try:
        return __import__(name)
    finally:
        sys.path.remove(DOC)


def test_module_summaries():
    from types import SimpleNamespace

    first_paragraph = _extension("_module_summaries").first_paragraph
    app = SimpleNamespace(env=SimpleNamespace(docname="api/modules"))
    lines = ["What it is for, see::", "", "    code", "", "Internals."]
    first_paragraph(app, "module", "pkg.mod", None, {}, lines)
    assert lines == ["What it is for, see:"]
    lines = ["Summary.", "", "Details."]
    first_paragraph(app, "function", "pkg.f", None, {}, lines)
    assert lines == ["Summary.", "", "Details."]
    app.env.docname = "api/index"
    first_paragraph(app, "module", "pkg.mod", None, {}, lines)
    assert lines == ["Summary.", "", "Details."]


def test_api_examples(tmp_path):
    import json
    from types import SimpleNamespace

    add_examples = _extension("_api_examples").add_examples
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "backreferences_all.json").write_text(
        json.dumps({"pkg.to_onnx": [["plot_a_101.py", "src", "gallery", "intro", "title"]]})
    )
    app = SimpleNamespace(
        srcdir=str(tmp_path),
        config=SimpleNamespace(sphinx_gallery_conf={"backreferences_dir": "refs"}),
    )
    lines = ["Doc."]
    add_examples(app, "function", "pkg.to_onnx", None, {}, lines)
    assert lines == [
        "Doc.",
        "",
        ".. rubric:: Examples using ``to_onnx``",
        "",
        ".. minigallery:: pkg.to_onnx",
        "",
    ]
    lines = ["Doc."]
    add_examples(app, "function", "pkg.unused", None, {}, lines)
    assert lines == ["Doc."]
