"""Tests of tools/make_inventories.py: the inventories intersphinx reads offline."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "make_inventories", os.path.join(ROOT, "tools", "make_inventories.py")
)
make_inventories = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_inventories)


def load(path):
    from sphinx.util.inventory import InventoryFile

    with open(path, "rb") as f:
        return InventoryFile.load(f, "https://site/", lambda base, uri: base + uri)


def test_inventory_format(tmp_path):
    names = tmp_path / "names.txt"
    names.write_text(
        "# comment\ntorch torch.export.export func export/api_reference.html\n"
        "torch torch.cond func\n"
        "onnx onnx.ModelProto class api/classes.html#modelproto\n"
    )
    assert make_inventories.main(["--output", str(tmp_path), "--names", str(names)]) == 0
    torch_inv = load(tmp_path / "torch.inv")
    assert torch_inv["py:function"]["torch.export.export"].uri == (
        "https://site/export/api_reference.html#torch.export.export"
    )
    assert torch_inv["py:function"]["torch.cond"].uri == (
        "https://site/generated/torch.cond.html#torch.cond"
    )
    assert load(tmp_path / "onnx.inv")["py:class"]["onnx.ModelProto"].uri == (
        "https://site/api/classes.html#modelproto"
    )


def test_bad_line(tmp_path):
    names = tmp_path / "names.txt"
    names.write_text("torch torch.cond function\n")
    with pytest.raises(ValueError, match="names.txt:1"):
        make_inventories.read_names(str(names))


def test_committed_inventories_are_up_to_date(tmp_path):
    "_doc/_static/inventories holds what tools/inventories.txt lists (run the script)."
    make_inventories.main(["--output", str(tmp_path)])
    committed = os.path.join(ROOT, "_doc", "_static", "inventories")
    for name in sorted(os.listdir(tmp_path)):
        new, old = load(tmp_path / name), load(os.path.join(committed, name))
        assert new == old, f"{name} is stale: run python tools/make_inventories.py"
