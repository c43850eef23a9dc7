"""bypass_export_some_errors entered and left by several threads in any order, nested,
or failing on entry: every patched attribute comes back, active_patches() tells the
truth at every step."""

import importlib
import random
import threading

import pytest
import torch
from torch.utils import _pytree

from experimental_experiment.torch_interpreter.onnx_export_errors import (
    bypass_export_some_errors,
)
from experimental_experiment.torch_interpreter.patches import Patch, active_patches
from experimental_experiment.torch_interpreter.patches import patch_transformers as pt
from experimental_experiment.torch_interpreter.patches.patch_torch import get_torch_patches

pytestmark = pytest.mark.usefixtures("quiet_transformers")

_MISSING = object()


@pytest.fixture(scope="module", autouse=True)
def _imported():
    """Imports what the patches import (transformers' models register their outputs
    with pytree for good on import, that is not a patch)."""
    from transformers.models.llama import modeling_llama  # noqa: F401

    with bypass_export_some_errors(patch_transformers=True):
        pass


def _targets() -> list[tuple]:
    """(owner, attribute) of every patch the context manager may apply: ours and the
    ones transformers registers for the 'dynamo' backend."""
    out = [(p.owner, p.attribute) for p in get_torch_patches() + pt.get_transformers_patches()]
    utils = importlib.import_module("transformers.exporters.utils")
    for path, attribute, *_ in utils._PATCHES.get("dynamo", []):
        owner = utils.import_dotted_path(path, missing_ok=True)
        if owner is not None:
            out.append((owner, attribute))
    assert len(out) > 10
    return out


def _snapshot(targets) -> list:
    return [vars(owner).get(attr, _MISSING) for owner, attr in targets] + [
        set(_pytree.SUPPORTED_NODES)
    ]


def _diff(before, after, targets) -> list[str]:
    names = [f"{getattr(o, '__name__', o)}.{a}" for o, a in targets] + ["pytree"]
    return [n for n, b, a in zip(names, before, after) if b is not a and b != a]


def _user(
    entered: threading.Event, leave: threading.Event, errors: list, **kwargs
) -> threading.Thread:
    def run():
        try:
            with bypass_export_some_errors(**kwargs):
                entered.set()
                assert leave.wait(30)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    return threading.Thread(target=run)


def test_interleaved_threads_restore_everything():
    """A enters, B enters, A leaves, B leaves: the order that leaked 46 attributes."""
    targets = _targets()
    before = _snapshot(targets)
    assert active_patches() == []
    errors: list = []
    ea, la, eb, lb = (threading.Event() for _ in range(4))
    a = _user(ea, la, errors, patch_transformers=True)
    b = _user(eb, lb, errors, patch_transformers=True)
    a.start()
    assert ea.wait(30)
    during = _snapshot(targets)
    names = active_patches()
    assert "Module.to" in names and any(n.startswith("transformers:") for n in names)
    b.start()
    assert eb.wait(30)
    la.set()
    a.join(30)
    # B is still inside: the patches stay, and active_patches says so
    assert _diff(during, _snapshot(targets), targets) == []
    assert active_patches() == names
    lb.set()
    b.join(30)
    assert errors == []
    assert _diff(before, _snapshot(targets), targets) == []
    assert active_patches() == []


def test_torch_only_user_leaving_first_keeps_order():
    """A (torch patches only) enters, B (torch + transformers) enters, A leaves: B keeps
    everything; when B leaves, nothing stays."""
    targets = _targets()
    before = _snapshot(targets)
    errors: list = []
    ea, la, eb, lb = (threading.Event() for _ in range(4))
    a = _user(ea, la, errors, patch_transformers=False)
    b = _user(eb, lb, errors, patch_transformers=True)
    a.start()
    assert ea.wait(30)
    assert active_patches() == ["Module.to"]
    b.start()
    assert eb.wait(30)
    la.set()
    a.join(30)
    assert "Module.to" in active_patches()
    assert vars(torch.nn.Module)["to"] is not before[0]
    lb.set()
    b.join(30)
    assert errors == []
    assert _diff(before, _snapshot(targets), targets) == []
    assert active_patches() == []


def test_many_threads_random_order():
    targets = _targets()
    before = _snapshot(targets)
    rng = random.Random(0)
    for _ in range(3):
        errors: list = []
        users = [(threading.Event(), threading.Event()) for _ in range(6)]
        threads = [
            _user(e, leave, errors, patch_transformers=bool(i % 2))
            for i, (e, leave) in enumerate(users)
        ]
        for t in threads:
            t.start()
        for e, _ in users:
            assert e.wait(30)
        order = list(range(len(users)))
        rng.shuffle(order)
        for i in order:
            users[i][1].set()
            threads[i].join(30)
            if i != order[-1]:
                assert active_patches()  # someone is still inside
        assert errors == []
        assert _diff(before, _snapshot(targets), targets) == []
        assert active_patches() == []


def test_nested_in_one_thread():
    targets = _targets()
    before = _snapshot(targets)
    with bypass_export_some_errors(patch_transformers=True):
        outer = active_patches()
        with bypass_export_some_errors(patch_transformers=True):
            assert active_patches() == outer
        assert active_patches() == outer
        assert _diff(before, _snapshot(targets), targets) != []
    assert _diff(before, _snapshot(targets), targets) == []
    assert active_patches() == []


def _failing_patches(original):
    """Our transformers patches, then one whose factory raises."""

    def get():
        patches = original()

        def boom(_):
            raise RuntimeError("patch failed on entry")

        return patches + [Patch(torch.nn.functional, "gelu", boom, "fails")]

    return get


def test_failure_on_entry_undone_before_the_except_block(monkeypatch):
    targets = _targets()
    before = _snapshot(targets)
    monkeypatch.setattr(
        pt, "get_transformers_patches", _failing_patches(pt.get_transformers_patches)
    )
    gelu = torch.nn.functional.gelu
    try:
        with bypass_export_some_errors(patch_transformers=True):
            raise AssertionError("not reached")
    except RuntimeError as e:
        # the exception (and its traceback) is alive: nothing may stay patched
        assert "patch failed on entry" in str(e)
        assert _diff(before, _snapshot(targets), targets) == []
        assert active_patches() == []
        assert torch.nn.functional.gelu is gelu


def test_failure_on_entry_while_another_thread_is_inside(monkeypatch):
    """B fails on entry while A is inside: A keeps its patches, B leaves no reference."""
    targets = _targets()
    before = _snapshot(targets)
    errors: list = []
    ea, la = threading.Event(), threading.Event()
    a = _user(ea, la, errors, patch_transformers=False)
    a.start()
    assert ea.wait(30)
    monkeypatch.setattr(
        pt, "get_transformers_patches", _failing_patches(pt.get_transformers_patches)
    )
    with pytest.raises(RuntimeError, match="patch failed on entry"):
        with bypass_export_some_errors(patch_transformers=True):
            pass
    assert active_patches() == ["Module.to"]
    la.set()
    a.join(30)
    assert errors == []
    assert _diff(before, _snapshot(targets), targets) == []
    assert active_patches() == []


def test_unused_layer_below_a_used_one_stays_until_it_leaves():
    """A (transformers only) enters, B (torch only) enters, A leaves: A's patches were
    applied before B's, so they stay (and are listed) until B leaves; then nothing."""
    targets = _targets()
    before = _snapshot(targets)
    errors: list = []
    ea, la, eb, lb = (threading.Event() for _ in range(4))
    a = _user(ea, la, errors, patch_transformers=True, patch_torch=False)
    b = _user(eb, lb, errors, patch_transformers=False, patch_torch=True)
    a.start()
    assert ea.wait(30)
    names_a = active_patches()
    assert "Module.to" not in names_a
    b.start()
    assert eb.wait(30)
    assert active_patches() == names_a + ["Module.to"]
    la.set()
    a.join(30)
    assert active_patches() == names_a + ["Module.to"]
    lb.set()
    b.join(30)
    assert errors == []
    assert _diff(before, _snapshot(targets), targets) == []
    assert active_patches() == []
