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

try:
    torch.export.export(model, (x, n))
except Exception as e:
    print(type(e).__name__)
    print("\n".join(str(e).splitlines()[:10]))

# %%
# torch.export.draft_export returns a program and a report
# ++++++++++++++++++++++++++++++++++++++++++++++++++++++++

ep = torch.export.draft_export(model, (x, n))
# the report is colored for a terminal, the colors are removed for this page
print(re.sub(r"\x1b\[[0-9;]*m", "", str(ep._report)))

# %%
# The draft program runs on the example inputs; it is a starting point to
# investigate, not a model to deploy.

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
