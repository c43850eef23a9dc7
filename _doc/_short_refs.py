"""Sphinx extension: a Python reference by short name (``:func:`to_onnx```,
``:meth:`ExportReport.save```) that Sphinx cannot resolve links to the one documented
object whose full name ends with it (and whose type the role accepts). An ambiguous or
unknown name stays unresolved (``_doc/check_html.py`` reports it)."""

from __future__ import annotations

from sphinx.util.nodes import make_refnode


def resolve_short_name(app, env, node, contnode):
    "Handler of ``missing-reference``: the reference node or None."
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if not target or target.startswith("."):
        return None
    domain = env.get_domain("py")
    types = set(domain.objtypes_for_role(node.get("reftype", "obj")) or ())
    suffix = "." + target
    matches = [
        (name, entry)
        for name, entry in domain.objects.items()
        if name.endswith(suffix) and (not types or entry.objtype in types) and not entry.aliased
    ]
    if len(matches) != 1:
        return None
    name, entry = matches[0]
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, name)


def setup(app):
    app.connect("missing-reference", resolve_short_name)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
