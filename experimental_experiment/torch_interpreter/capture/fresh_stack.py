"""Runs the capture on a thread of its own, whose Python stack starts empty.

torch.export records, for every FX node and every shape guard it creates, the whole
Python stack of the calling thread (``CapturedTraceback.extract``), then keeps the
frames after the first ``forward``. The frames below ``torch.export.export`` (the
user's script, :func:`to_onnx` and its stages) are extracted and symbolized for every
node although none is kept: measured on ResNet-50, the same capture costs 3.3 times
as many page faults and about 25% more CPU time called from inside :func:`to_onnx`
than called from a script, for exactly the same Python calls. On a fresh thread these
frames are not there.

What torch keeps per thread is carried over: grad mode and inference mode. When the
caller has other thread-local state a thread would lose (a TorchFunctionMode or a
TorchDispatchMode entered, autocast, a torch.compile region), the function runs on
the caller's thread as before.
"""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Callable, TypeVar

import torch

T = TypeVar("T")

#: thread id -> the frame that started it (user_location continues from there)
_CALLERS: dict[int, FrameType] = {}


def caller_frame() -> FrameType | None:
    """The frame that called :func:`run_on_fresh_stack` for the current thread."""
    return _CALLERS.get(threading.get_ident())


def _thread_local_state() -> str | None:
    """What a new thread would lose, or None."""
    if torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack():
        return "a torch function or dispatch mode is active"
    if torch.is_autocast_enabled() or torch.is_autocast_enabled("cpu"):
        return "autocast is enabled"
    if torch.compiler.is_compiling():
        return "inside torch.compile"
    return None


def run_on_fresh_stack(fn: Callable[[], T]) -> T:
    """``fn()`` on a new thread (same grad and inference modes); its exception, if
    any, is raised here with the thread's traceback."""
    if _thread_local_state() is not None:
        return fn()
    grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()
    caller = sys._getframe(1)
    box: dict = {}

    def target():
        ident = threading.get_ident()
        _CALLERS[ident] = caller
        try:
            with torch.inference_mode(inference), torch.set_grad_enabled(grad):
                box["result"] = fn()
        except BaseException as e:  # given to the caller's thread
            box["error"] = e
        finally:
            del _CALLERS[ident]

    thread = threading.Thread(target=target, name="experimental_experiment-capture", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        error = box.pop("error")
        try:
            raise error
        finally:
            del error  # no reference cycle through this frame
    return box["result"]
