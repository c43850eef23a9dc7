"""
.. _l-plot-exporter-exporter-draft_export:

torch.export.draft_export: list every issue at once
===================================================

:func:`torch.export.export` stops at the first problem it meets.
:func:`torch.export.draft_export` goes on: it traces the model with real
values where the symbolic tracing gets stuck, keeps going, and returns
an exported program together with a report of every issue found.
The program is specialized to the example inputs where an issue was
bypassed, the report tells where to change the code.

A model with a data-dependent branch
++++++++++++++++++++++++++++++++++++

The branch taken depends on the value of an input, not only on its shape:
``.item()`` turns a tensor into an unbacked symbol, an integer whose value
the exporter does not know, and the python test on it cannot be traced.
"""

import contextlib
import io
import os
import re

import torch


class Model(torch.nn.Module):
    def forward(self, x, n):
        if n.item() > 2:
            return x * 2
        return x / 2


model = Model()
x, n = torch.randn(6, 3), torch.tensor(4)
print(model(x, n).shape)

# %%
# torch.export.export fails
# +++++++++++++++++++++++++
#
# The exception names the expression it could not evaluate. torch also prints the
# graph traced so far on stderr (the exception keeps it as ``partial_fx_graph``):
# stderr is silenced here to show the message alone.

with contextlib.redirect_stderr(io.StringIO()):
    try:
        torch.export.export(model, (x, n))
    except Exception as e:
        error = e
print(f"{type(error).__name__}: {str(error).splitlines()[0]}")

# %%
# torch.export.draft_export returns a program and a report
# ++++++++++++++++++++++++++++++++++++++++++++++++++++++++

ep = torch.export.draft_export(model, (x, n))
# the report is colored for a terminal: the colors are removed,
# the paths made relative to this folder or to the installed packages
report_text = re.sub(r"\x1b\[[0-9;]*m", "", str(ep._report))
site_packages = os.path.dirname(os.path.dirname(torch.__file__))
for folder in [os.getcwd(), site_packages]:
    report_text = report_text.replace(folder + os.sep, "")
print(report_text)

# %%
# The draft program runs on the example inputs; it is a starting point to
# investigate, not a model to deploy.

draft = ep
print(ep.graph)
print((ep.module()(x, n) - model(x, n)).abs().max().item())

# %%
# The branch was specialized: the program checks ``n > 2`` at run time and
# fails on an input taking the other branch.

try:
    ep.module()(x, torch.tensor(1))
except Exception as e:
    print(type(e).__name__, ":", str(e).splitlines()[0])

# %%
# Fixing the model
# ++++++++++++++++
#
# Both branches are kept with :func:`torch.cond`: the exported graph holds the two
# subgraphs and chooses at run time.


class FixedModel(torch.nn.Module):
    def forward(self, x, n):
        return torch.cond(n > 2, lambda x: x * 2, lambda x: x / 2, [x])


fixed = FixedModel()
ep = torch.export.export(fixed, (x, n), dynamic_shapes=({0: torch.export.Dim.DYNAMIC}, None))
print(ep.graph)
for value in [1, 4]:
    got = ep.module()(x, torch.tensor(value))
    print(value, (got - model(x, torch.tensor(value))).abs().max().item())

# %%
# Another way, when only one branch matters, is :func:`torch._check`
# which states the assumption: ``torch._check(n.item() > 2)``.

# %%
# What the export report adds
# +++++++++++++++++++++++++++
#
# ``draft_export`` tells what stopped the tracing. The report of
# :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>`
# (:class:`ExportReport <experimental_experiment.report.ExportReport>`, passed with
# ``report=``) complements it on every export, failed or not: the capture attempts and
# why each failed, the converters used, the rewrites of the optimizer, and every dynamic
# dimension the code specialized or constrained with the user's line that did it.
# Here the model forces the first dimension of ``x`` to 6 while it is declared dynamic.

import pandas

from experimental_experiment.errors import ExportError
from experimental_experiment.report import ExportReport
from experimental_experiment.torch_interpreter import to_onnx


class Specializes(torch.nn.Module):
    def forward(self, x):
        # broadcasting with a (6, 1) tensor: the first dimension of x must be 6
        return x * torch.ones(6, 1)


report = ExportReport()
try:
    to_onnx(Specializes(), (x,), dynamic_shapes=({0: "batch"},), report=report)
except ExportError as e:
    # the first lines name the strategy, the dimension and the constraint
    print(type(e).__name__, ":", "\n".join(str(e).splitlines()[:3]))

# %%
# The dimensions the code specialized, from ``report.dimensions``, and the line of the
# user's code which did it:

pandas.DataFrame(
    [
        {
            "dimension": d.dimension,
            "what": d.kind,
            "value": d.value,
            "guard": d.guard,
            "file": os.path.basename(d.location.file),
            "line": d.location.line,
            "code": d.location.code,
        }
        for d in report.dimensions
    ]
)

# %%
# The same report is written as JSON, Markdown or SARIF 2.1.0
# (``report="export.sarif"``) so that an editor opens each diagnostic at the line.

for result in report.to_sarif()["runs"][0]["results"]:
    where = result["locations"][0]["physicalLocation"]
    print(
        f"{result['level']:8s} {result['ruleId']:20s} "
        f"{os.path.basename(where['artifactLocation']['uri'])}:{where['region']['startLine']}"
    )

# %%
# Both programs
# +++++++++++++
#
# The draft program and the fixed one, drawn with
# :func:`plot_fx_graph <experimental_experiment.helpers.graph_plot.plot_fx_graph>`:
# the first one checks its assumption with assertions, the second one keeps both branches.

import matplotlib.pyplot as plt

from experimental_experiment.helpers.graph_plot import plot_fx_graph

fig, axes = plt.subplots(1, 2, figsize=(11, 6))
plot_fx_graph(draft, axes[0], title="draft_export: specialized to n > 2")
plot_fx_graph(ep, axes[1], title="torch.cond: both branches")
fig.tight_layout()
