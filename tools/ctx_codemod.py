"""Codemod: converters written with ``g.current`` / ``out_dtype(g, i)`` get their node
context as the keyword-only parameter ``ctx`` (see ``torch_interpreter/convert/node_context.py``).

For a branch whose converters were written before the change (merge helper):
every function of ``aten/`` reading ``g.current``, calling ``out_dtype(g, ...)`` or
using a free name ``ctx``, and every function calling one of those (same module or
imported from another ``aten`` module, to a fixed point), gets ``*, ctx: NodeContext``;
``g.current`` becomes ``ctx``, ``out_dtype(g, i)`` becomes ``ctx.dtype(i)``, calls get
``ctx=ctx``. Lambdas and functions passed as values are reported, not changed.
Imports (``NodeContext``, ``out_dtype``) and lines over 100 characters are left to the
reader (the report lists them).

.. code-block:: bash

    python tools/ctx_codemod.py experimental_experiment/torch_interpreter/convert/aten --apply
"""

from __future__ import annotations

import ast
import pathlib
import sys


def _parents(tree):
    return {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}


def _params(fn) -> set[str]:
    a = fn.args
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    return names | {x.arg for x in (a.vararg, a.kwarg) if x is not None}


def _assigned(fn) -> set[str]:
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _has_ctx(fn) -> bool:
    return any(x.arg == "ctx" for x in fn.args.kwonlyargs)


class Module:
    def __init__(self, path: pathlib.Path):
        self.path, self.src = path, path.read_bytes()
        self.tree = ast.parse(self.src)
        self.par = _parents(self.tree)
        self.imports = {
            a.asname or a.name: (n.module, a.name)
            for n in ast.walk(self.tree)
            if isinstance(n, ast.ImportFrom) and n.level == 1
            for a in n.names
        }

    def owner(self, node):
        n = self.par.get(node)
        while n is not None and not isinstance(n, (ast.FunctionDef, ast.Lambda)):
            n = self.par.get(n)
        return n

    def pos(self, line: int, col: int) -> int:
        return len(b"".join(self.src.splitlines(keepends=True)[: line - 1])) + col


class Codemod:
    def __init__(self, root: pathlib.Path):
        self.mods = {p.stem: Module(p) for p in sorted(root.glob("*.py"))}
        self.needs: set[int] = set()
        self.calls = []  # (module, call node, target function)

    def resolve(self, m: str, name: str, at):
        mod = self.mods[m]
        n = mod.par.get(at)
        while n is not None:
            if isinstance(n, ast.FunctionDef) and name in _params(n) | _assigned(n):
                return None
            if isinstance(n, (ast.FunctionDef, ast.Module)):
                for c in n.body:
                    if isinstance(c, ast.FunctionDef) and c.name == name:
                        return c
            n = mod.par.get(n)
        if name in mod.imports and mod.imports[name][0] in self.mods:
            sm, sn = mod.imports[name]
            return (
                self.resolve(sm, sn, self.mods[sm].tree.body[0])
                if self.mods[sm].tree.body
                else None
            )
        return None

    def seed(self) -> None:
        for m, mod in self.mods.items():
            for n in ast.walk(mod.tree):
                f = None
                if (
                    isinstance(n, ast.Attribute)
                    and n.attr == "current"
                    and getattr(n.value, "id", "") == "g"
                ):
                    f = mod.owner(n)
                elif isinstance(n, ast.Call) and getattr(n.func, "id", "") == "out_dtype":
                    f = mod.owner(n)
                elif isinstance(n, ast.Name) and n.id == "ctx" and isinstance(n.ctx, ast.Load):
                    f = mod.owner(n)
                    if isinstance(f, ast.FunctionDef) and (
                        "ctx" in _assigned(f) or ("ctx" in _params(f) and not _has_ctx(f))
                    ):
                        f = None
                if isinstance(f, ast.FunctionDef) and f.name != "out_dtype":
                    self.needs.add(id(f))
                if (
                    isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Name)
                    and n.func.id != "out_dtype"
                ):  # replaced by ctx.dtype
                    target = self.resolve(m, n.func.id, n)
                    if target is not None:
                        self.calls.append((m, n, target))

    def propagate(self) -> None:
        changed = True
        while changed:
            changed = False
            for m, call, target in self.calls:
                f = self.mods[m].owner(call)
                if (
                    id(target) in self.needs
                    and isinstance(f, ast.FunctionDef)
                    and id(f) not in self.needs
                ):
                    self.needs.add(id(f))
                    changed = True
        for m, call, target in self.calls:
            if id(target) in self.needs and isinstance(self.mods[m].owner(call), ast.Lambda):
                print(f"{m}:{call.lineno}: a lambda calls {target.name}, add ctx by hand")

    def edits(self, m: str) -> list[tuple[int, int, str]]:
        mod, out = self.mods[m], []
        for fn in ast.walk(mod.tree):
            if isinstance(fn, ast.FunctionDef) and id(fn) in self.needs and not _has_ctx(fn):
                out.append(self._signature(mod, fn))
        for n in ast.walk(mod.tree):
            if (
                isinstance(n, ast.Attribute)
                and n.attr == "current"
                and getattr(n.value, "id", "") == "g"
            ):
                out.append(
                    (
                        mod.pos(n.lineno, n.col_offset),
                        mod.pos(n.end_lineno, n.end_col_offset),
                        "ctx",
                    )
                )
            elif isinstance(n, ast.Call) and getattr(n.func, "id", "") == "out_dtype":
                rest = ", ".join(ast.get_source_segment(mod.src.decode(), x) for x in n.args[1:])
                out.append(
                    (
                        mod.pos(n.lineno, n.col_offset),
                        mod.pos(n.end_lineno, n.end_col_offset),
                        f"ctx.dtype({rest})",
                    )
                )
        for mm, call, target in self.calls:
            if (
                mm == m
                and id(target) in self.needs
                and isinstance(mod.owner(call), ast.FunctionDef)
                and not any(k.arg == "ctx" for k in call.keywords)
            ):
                end = mod.pos(call.end_lineno, call.end_col_offset) - 1
                before = mod.src[:end].rstrip()
                sep = (
                    ""
                    if not (call.args or call.keywords)
                    else (" " if before.endswith(b",") else ", ")
                )
                out.append((end, end, f"{sep}ctx=ctx"))
        return sorted(out, reverse=True)

    @staticmethod
    def _signature(mod: Module, fn) -> tuple[int, int, str]:
        a = fn.args
        star = "" if (a.vararg or a.kwonlyargs) else "*, "
        if a.kwarg is not None:
            at = mod.src.rindex(b"**", 0, mod.pos(a.kwarg.lineno, a.kwarg.col_offset))
            return at, at, f"{star}ctx: NodeContext, "
        nodes = (
            a.posonlyargs
            + a.args
            + a.defaults
            + a.kwonlyargs
            + [d for d in a.kw_defaults if d is not None]
            + ([a.vararg] if a.vararg else [])
        )
        last = max(nodes, key=lambda x: (x.end_lineno, x.end_col_offset))
        at = mod.pos(last.end_lineno, last.end_col_offset)
        return at, at, f", {star}ctx: NodeContext"

    def run(self, apply: bool) -> int:
        self.seed()
        self.propagate()
        total = 0
        for m, mod in self.mods.items():
            src = mod.src
            edits = self.edits(m)
            for s, e, text in edits:
                src = src[:s] + text.encode() + src[e:]
            total += len(edits)
            if apply and edits:
                mod.path.write_bytes(src)
            for i, line in enumerate(src.decode().splitlines(), 1):
                if len(line) > 100 and "ctx" in line:
                    print(f"{mod.path}:{i}: longer than 100 characters")
        print(f"{len(self.needs)} functions take ctx, {total} edits")
        return 0


if __name__ == "__main__":
    sys.exit(Codemod(pathlib.Path(sys.argv[1])).run("--apply" in sys.argv))
