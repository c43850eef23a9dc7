"""Sphinx configuration of the documentation of experimental_experiment."""

import logging

# furo's dependency accessible-pygments sets the root logger to INFO on import.
logging.basicConfig(level=logging.WARNING)

import warnings  # noqa: E402

# torch 2.13's run_decompositions deep-copies pytree LeafSpec objects, which warns
# with the path of Python's own copyreg.py: nothing a reader of the examples can act on
warnings.filterwarnings(
    "ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning
)

import os
import sys

# The package is installed in the environment (pip install -e .); the path is
# added for a build run from a source tree where it is not.
sys.path.insert(0, os.path.abspath(".."))
# _gallery_sort.py, the order of the gallery scripts
sys.path.insert(0, os.path.abspath(os.path.dirname(__file__)))

import experimental_experiment

project = "experimental_experiment"
author = "experimental_experiment developers"
copyright = "2025, experimental_experiment developers"
version = experimental_experiment.__version__
release = version

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx_gallery.gen_gallery",
    "sphinx_runpython.runpython.sphinx_runpython_extension",
    "sphinx_runpython.epkg.sphinx_epkg_extension",
    "matplotlib.sphinxext.plot_directive",
    "sphinx.ext.intersphinx",
    "sphinx_copybutton",
    # local extensions (this folder): short Python references, examples under API entries,
    # one paragraph per module on the Modules page
    "_short_refs",
    "_api_examples",
    "_module_summaries",
]

# Links to the documentation of other projects, resolved offline: intersphinx reads
# small inventories written by tools/make_inventories.py from tools/inventories.txt
# (add a name there when a page references a new object) and downloads nothing.
_INVENTORIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_static", "inventories")
intersphinx_mapping = {
    name: (url, os.path.join(_INVENTORIES, f"{name}.inv"))
    for name, url in [
        ("python", "https://docs.python.org/3/"),
        ("torch", "https://docs.pytorch.org/docs/stable/"),
        ("onnx", "https://onnx.ai/onnx/"),
        ("onnxruntime", "https://onnxruntime.ai/docs/api/python/"),
        ("numpy", "https://numpy.org/doc/stable/"),
    ]
}

# copy buttons on code blocks: the prompts and outputs of console sessions are not copied
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

# plots drawn from the benchmark results (_doc/bench/*.csv), no source link
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 100)]

templates_path = []
exclude_patterns = [
    "_build",
    "Thumbs.db",
    ".DS_Store",
    # galleries: only their generated pages are part of the site
    "examples/*",
    "recipes/*",
]
source_suffix = {".rst": "restructuredtext"}
master_doc = "index"
language = "en"

html_theme = "furo"
html_title = f"experimental_experiment {version}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"undoc-members": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# External pages referenced with :epkg:`name`.
epkg_dictionary = {
    "ONNX": "https://onnx.ai/",
    "onnx": "https://onnx.ai/onnx/",
    "onnxruntime": "https://onnxruntime.ai/",
    "onnxscript": "https://microsoft.github.io/onnxscript/",
    "onnxscript Tutorial": "https://microsoft.github.io/onnxscript/tutorial/index.html",
    "Pattern-based Rewrite Using Rules With onnxscript": (
        "https://microsoft.github.io/onnxscript/tutorial/rewriter/rewrite_patterns.html"
    ),
    "ExecuTorch": "https://pytorch.org/executorch/",
    "transformers": "https://huggingface.co/docs/transformers/",
    "pytorch": "https://pytorch.org/",
    "torch": "https://pytorch.org/docs/stable/",
    "sphinx-gallery": "https://sphinx-gallery.github.io/",
}

sphinx_gallery_conf = {
    "examples_dirs": ["examples", "recipes"],
    "gallery_dirs": ["auto_examples", "auto_recipes"],
    # every script named plot_*.py is executed
    "filename_pattern": r"/plot_",
    "image_scrapers": ("matplotlib",),
    # library changes do not touch the scripts: always run them again
    "run_stale_examples": True,
    "download_all_examples": False,
    # examples: one subsection per tier, a subfolder with a README.txt (101, 102, 201,
    # 301, sorted by name); within a subsection by tier then name, recipes by topic
    "within_subsection_order": "_gallery_sort.TierSortKey",
    "show_memory": False,
    # "Examples using X" under the API entries (_api_examples.py)
    "backreferences_dir": "_backrefs",
    "doc_module": ("experimental_experiment",),
}

# sphinx-runpython writes its default titles "<<<" before the code of a runpython
# block and ">>>" before its output: they read as stray text, the site shows none
from sphinx_runpython.language import TITLES  # noqa: E402

TITLES["en"].update({"In": "", "Out": ""})
