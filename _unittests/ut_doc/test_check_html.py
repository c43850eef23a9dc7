"""Tests of _doc/check_html.py on a tiny fake site."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "check_html", os.path.join(ROOT, "_doc", "check_html.py")
)
check_html = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_html)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def test_good_site(tmp_path):
    write(
        tmp_path / "index.html",
        '<a href="sub/page.html#sec">x</a><a href="https://example.org/none.html">y</a>'
        '<a href="#top" id="top">z</a><a href="sub/">w</a>',
    )
    write(tmp_path / "sub" / "page.html", '<section id="sec"></section><a href="../index.html">')
    write(tmp_path / "sub" / "index.html", "")
    assert check_html.find_broken_links(str(tmp_path)) == []
    assert check_html.main(["", str(tmp_path)]) == 0


def test_broken_links_and_runpython_errors(tmp_path):
    write(
        tmp_path / "index.html",
        '<a href="missing.html">x</a><a href="page.html#nowhere">y</a>'
        '<img src="_images/none.png"><a href="page.html#here">ok</a>',
    )
    write(tmp_path / "page.html", '<p id="here" class="runpythonerror"></p>')
    broken = check_html.find_broken_links(str(tmp_path))
    assert broken == [
        "index.html: _images/none.png (no such file)",
        "index.html: missing.html (no such file)",
        "index.html: page.html#nowhere (no such anchor)",
    ]
    assert check_html.find_errors(str(tmp_path)) == [str(tmp_path / "page.html")]
    assert check_html.main(["", str(tmp_path)]) == 1


def check(name, html, rel="page.html"):
    return check_html.PAGE_CHECKS[name](rel, check_html.parse_page(html))


def test_dead_xrefs():
    good = (
        '<p><a class="reference external" href="https://x.org/a.html#torch.cond">'
        '<code class="xref py py-func docutils literal"><span class="pre">torch.cond()'
        '</span></code></a> <code class="docutils literal">plain</code></p>'
    )
    bad = (
        '<p>see <code class="xref py py-func docutils literal notranslate">'
        '<span class="pre">torch.export.export()</span></code></p>'
    )
    assert check("dead-xref", good) == []
    assert check("dead-xref", bad) == ["dead cross-reference 'torch.export.export()'"]


def test_machine_paths():
    good = (
        "<p>saved in <code>model.onnx</code>, see https://example.org/home/x and "
        '<a href="/tmp/x">link</a> ./tmp/x</p><script>var a = "/tmp/a";</script>'
    )
    assert check("machine-path", good) == []
    bad = (
        '<pre>wrote /tmp/tmpab12/model.onnx</pre><p>File "/work/main/.venv/lib/'
        'python3.11/site-packages/torch/x.py", line 3</p>'
    )
    assert check("machine-path", bad) == [
        "machine path '/tmp/tmpab12/model.onnx'",
        "machine path '/work/main/.venv/lib/python3.11/site-packages/torch/x.py'",
    ]
    assert check("machine-path", "<p>/home/user/a.py and /root/b</p>") == [
        "machine path '/home/user/a.py'",
        "machine path '/root/b'",
    ]


def test_long_floats():
    assert check_html.significant_digits("0.00123400") == 6
    assert check_html.significant_digits("-1.5e-05") == 2
    good = (
        "<table><tr><td>0.000123</td><td>1.23e-05</td><td>2.13.0</td>"
        "<td>123456789</td></tr></table><p>0.123456789 outside a table</p>"
    )
    assert check("long-float", good) == []
    bad = "<table><tr><th>x</th><td>0.12345678</td><td>1.2345678x</td></tr></table>"
    assert check("long-float", bad) == [
        "'0.12345678' has more than 6 significant digits in a table",
        "'1.2345678' has more than 6 significant digits in a table",
    ]


def test_runpython_markers():
    good = '<pre><span class="gp">&gt;&gt;&gt; </span>print(1)</pre><p>a &gt; b and a &lt; b</p>'
    assert check("runpython", good) == []
    assert check("runpython", "<p>&lt;&lt;&lt;</p><pre>x = 1</pre><p>&gt;&gt;&gt;</p>") == [
        "runpython marker '<<<' shown as text",
        "runpython marker '>>>' shown as text",
    ]
    assert check("runpython", '<div class="runpythonerror">boom</div>') == [
        "'runpythonerror': a runpython block raised"
    ]


def test_tier_headings():
    cards = (
        '<div class="sphx-glr-thumbcontainer"><a href="plot_a_101.html">a</a></div>'
        '<div class="sphx-glr-thumbcontainer"><a href="plot_b_201.html">b</a></div>'
    )
    good = f"<h1>Examples</h1><h2>101: first steps</h2>{cards}<h2>Deeper (201)</h2>"
    assert check("tier-headings", good, "auto_examples/index.html") == []
    # another page with the same cards is not a gallery index
    assert check("tier-headings", cards, "index.html") == []
    assert check("tier-headings", f"<h1>Examples</h1>{cards}", "auto_examples/index.html") == [
        "gallery index without tier headings (101, 102, 201, 301)"
    ]
    assert check("tier-headings", f"<h2>101</h2>{cards}", "auto_recipes/index.html") == [
        "gallery index has cards of tier 201 but no heading for it"
    ]
    # a gallery whose scripts have no tier (the recipes) needs no tier heading
    # the navigation links to the examples are not cards of the recipes' index
    recipes = (
        '<nav><a href="../auto_examples/101/plot_a_101.html">a</a></nav><h1>Recipes'
        '</h1><div class="sphx-glr-thumbcontainer"><a href="plot_c_cond.html">c</a>'
        "</div>"
    )
    assert check("tier-headings", recipes, "auto_recipes/index.html") == []


def _thumbnail(path, placeholder):
    import sphinx_gallery
    from PIL import Image, ImageDraw
    from sphinx_gallery.gen_rst import scale_image

    if placeholder:
        static = os.path.join(os.path.dirname(sphinx_gallery.__file__), "_static")
        scale_image(os.path.join(static, "no_image.png"), str(path), 400, 280)
    else:
        img = Image.new("RGB", (400, 280), "white")
        ImageDraw.Draw(img).line([(10, 270), (200, 20), (390, 200)], fill="blue", width=5)
        img.save(path)


def test_placeholder_thumbnails(tmp_path):
    write(
        tmp_path / "auto_examples" / "index.html",
        '<img src="../_images/sphx_glr_plot_a_101_thumb.png">'
        '<img src="../_images/sphx_glr_plot_b_101_thumb.png"><img src="../_images/c.png">',
    )
    os.makedirs(tmp_path / "_images")
    _thumbnail(tmp_path / "_images" / "sphx_glr_plot_a_101_thumb.png", False)
    _thumbnail(tmp_path / "_images" / "c.png", True)  # not a thumbnail: not checked
    _thumbnail(tmp_path / "_images" / "sphx_glr_plot_b_101_thumb.png", False)
    assert check_html.find_placeholder_thumbnails(str(tmp_path)) == []
    _thumbnail(tmp_path / "_images" / "sphx_glr_plot_b_101_thumb.png", True)
    assert check_html.find_placeholder_thumbnails(str(tmp_path)) == [
        "auto_examples/index.html: ../_images/sphx_glr_plot_b_101_thumb.png"
    ]


def test_main_allow(tmp_path, capsys):
    write(tmp_path / "index.html", '<p><code class="xref py py-func">f()</code></p>')
    assert check_html.main(["", str(tmp_path)]) == 1
    assert check_html.main(["", str(tmp_path), "--allow", "dead-xref"]) == 0
    out = capsys.readouterr().out
    assert "check_html: dead-xref: 1 problem(s) (allowed)" in out
