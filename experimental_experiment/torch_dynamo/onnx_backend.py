"""torch.compile backends running each FX graph converted to ONNX in onnxruntime.

Both are *compilers* for :func:`torch._dynamo.backends.common.aot_autograd`: it calls
them once for the forward graph and once for the backward graph (see
:func:`experimental_experiment.torch_models.training_helper.make_aot_ort`).

* :class:`OnnxBackend` runs the models with onnxruntime; an instance owns its cache of
  sessions (per graph and input signature: dtype, shape or symbolic shape, device)
  and its :class:`BackendStats`. :func:`onnx_custom_backend` is the same compiler as a
  function: it uses one default instance (:func:`default_backend`).
* :func:`onnx_debug_backend` runs them with onnx's reference evaluator and can save
  every intermediate result (:class:`OnnxDebugBackend
  <experimental_experiment.torch_dynamo.OnnxDebugBackend>`).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import onnx
import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..xbuilder import OptimizationOptions
from . import dump
from ._export import default_exporter, export_graph_module, graph_signature
from ._runner import OrtRunner, boxed, providers_for, verified
from .debug_backend import OnnxDebugBackend, onnx_debug_backend

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackendOptions:
    """Options of :class:`OnnxBackend`, the keywords of :func:`onnx_custom_backend`.

    :param exporter: ``"custom"`` (our :func:`to_onnx`) or ``"dynamo"``
        (:func:`torch.onnx.export`), None: the default exporter
    :param target_opset: opset of the ONNX models
    :param options: optimization options of the exporter
    :param providers: onnxruntime providers (default: from the inputs' device)
    :param session_options: :class:`onnxruntime.SessionOptions`
    :param dynamic: True exports one model with dynamic dims when the graph has
        symbolic dims, False one model with static shapes per input signature
    :param verify: compares every call with eager execution of the graph
    :param use_cache: reuses the session of an identical graph and signature
    :param use_dlpack: exchanges tensors through DLPack even on CPU
    :param verbose: verbosity

    .. code-block:: python

        from experimental_experiment.torch_dynamo import BackendOptions, OnnxBackend

        options = BackendOptions(dynamic=False, providers=("CPUExecutionProvider",))
        compiler = OnnxBackend(options)
    """

    exporter: str | None = None
    target_opset: int | None = None
    options: OptimizationOptions | None = None
    providers: tuple | None = None
    session_options: Any = None
    dynamic: bool = True
    verify: bool = False
    use_cache: bool = True
    use_dlpack: bool = False
    verbose: int = 0


@dataclass
class BackendStats:
    """What a backend did: models exported, sessions found in its cache.

    :param exported: number of graphs converted to ONNX
    :param cache_hits: number of graphs whose session was found in the cache

    .. code-block:: python

        from experimental_experiment.torch_dynamo import default_backend

        stats = default_backend().stats  # the BackendStats of onnx_custom_backend
        print(stats.exported, stats.cache_hits)
    """

    exported: int = 0
    cache_hits: int = 0


@dataclass(frozen=True)
class _Settings:
    """What decides the ONNX model and its session, resolved for one graph."""

    exporter: str
    target_opset: int | None
    options: OptimizationOptions | None
    providers: tuple
    session_options: Any
    use_dlpack: bool
    verbose: int

    def key(self) -> tuple:
        so = id(self.session_options) if self.session_options is not None else None
        return (
            self.exporter,
            self.target_opset,
            repr(self.options),
            repr(self.providers),
            so,
            self.use_dlpack,
        )


def _resolve(opts: BackendOptions, args) -> _Settings:
    return _Settings(
        opts.exporter or default_exporter(),
        opts.target_opset,
        opts.options,
        tuple(opts.providers or providers_for(args)),
        opts.session_options,
        opts.use_dlpack,
        opts.verbose,
    )


class OnnxBackend:
    """A torch.compile compiler: converts every graph to ONNX, runs onnxruntime.

    The instance owns its session cache and its ``stats`` (a :class:`BackendStats`):
    two instances share nothing. Give it to ``aot_autograd`` as forward and backward compiler.

    :param options: :class:`BackendOptions` (default: all defaults)
    :param cache_size: sessions kept (least recently used ones are dropped)

    .. code-block:: python

        from torch._dynamo.backends.common import aot_autograd

        compiler = OnnxBackend(BackendOptions(dynamic=False))
        backend = aot_autograd(fw_compiler=compiler, bw_compiler=compiler)
        compiled = torch.compile(model, backend=backend)
        compiled(x).sum().backward()
        print(compiler.stats)  # BackendStats(exported=2, cache_hits=0)
    """

    def __init__(self, options: BackendOptions | None = None, *, cache_size: int = 64):
        self.options = options or BackendOptions()
        self.cache_size = cache_size
        self.cache: OrderedDict[str, tuple[onnx.ModelProto, OrtRunner]] = OrderedDict()
        self.stats = BackendStats()

    def __call__(self, graph_module: torch.fx.GraphModule, args: list) -> Callable:
        return self.compile(graph_module, args)

    def clear(self) -> None:
        """Forgets every cached session and resets ``stats``."""
        self.cache.clear()
        self.stats = BackendStats()

    def compile(
        self, graph_module: torch.fx.GraphModule, args: list, options: BackendOptions | None = None
    ) -> Callable:
        """Returns the boxed function running ``graph_module`` (options: the instance's
        unless given)."""
        opts = options or self.options
        settings = _resolve(opts, args)
        if not opts.dynamic and _is_symbolic(graph_module):
            run = _Specializer(self, graph_module, settings, opts.use_cache)
        else:
            _, run = self.session(graph_module, args, settings, opts.use_cache)
        if opts.verify:
            run = verified(run, graph_module, "onnx_custom_backend")
        return boxed(run)

    def session(
        self, gm: torch.fx.GraphModule, args, settings: _Settings, use_cache: bool
    ) -> tuple[onnx.ModelProto, OrtRunner]:
        """Exports ``gm`` and creates its session, or finds them in the cache."""
        # aot_autograd compiles under a fake mode: the graph's constants are real tensors
        with unset_fake_temporarily():
            key = graph_signature(gm, args, settings.key()) if use_cache else None
            if key is not None and key in self.cache:
                self.stats.cache_hits += 1
                self.cache.move_to_end(key)
                onx, runner = self.cache[key]
                logger.info("onnx_custom_backend: cached session for graph %s", key[:12])
            else:
                onx, runner = self._export(gm, args, settings)
                if key is not None:
                    self.cache[key] = (onx, runner)
                    while len(self.cache) > self.cache_size:
                        self.cache.popitem(last=False)
            dump.save(onx, gm)
        return onx, runner

    def _export(self, gm, args, settings: _Settings) -> tuple[onnx.ModelProto, OrtRunner]:
        onx, layout = export_graph_module(
            gm,
            args,
            exporter=settings.exporter,
            target_opset=settings.target_opset,
            options=settings.options,
            verbose=settings.verbose,
        )
        self.stats.exported += 1
        runner = OrtRunner(
            onx,
            layout,
            providers=list(settings.providers),
            session_options=settings.session_options,
            use_dlpack=settings.use_dlpack,
        )
        logger.info(
            "onnx_custom_backend: exported a graph (%d nodes) with %r",
            len(onx.graph.node),
            settings.exporter,
        )
        return onx, runner


def _is_symbolic(gm: torch.fx.GraphModule) -> bool:
    """True if a placeholder is a SymInt or a tensor with a symbolic dimension."""
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat)):
            return True
        if isinstance(val, torch.Tensor) and any(not isinstance(d, int) for d in val.shape):
            return True
    return False


class _Specializer:
    """Runs a graph with symbolic dims through ONNX models with static shapes: the
    graph is traced again (make_fx) and exported for every new input signature."""

    def __init__(
        self, backend: OnnxBackend, gm: torch.fx.GraphModule, settings: _Settings, use_cache: bool
    ):
        self.backend, self.gm, self.settings, self.use_cache = backend, gm, settings, use_cache
        self.runners: dict[tuple, OrtRunner] = {}

    def __call__(self, *args):
        key = tuple(
            (a.dtype, tuple(a.shape), a.device)
            if isinstance(a, torch.Tensor)
            else (type(a).__name__, a)
            for a in args
        )
        runner = self.runners.get(key)
        if runner is None:
            from torch.fx.experimental.proxy_tensor import make_fx

            static = make_fx(self.gm, tracing_mode="fake")(*args)
            static.graph.eliminate_dead_code()
            placeholders = [n for n in static.graph.nodes if n.op == "placeholder"]
            for node, a in zip(placeholders, args):
                if node.meta.get("val") is None:
                    node.meta["val"] = a  # a python int the graph was specialized on
            for node in static.graph.nodes:
                if node.op == "call_function":
                    node.meta.setdefault("val", None)  # getitem of a None gradient
            static.recompile()
            _, runner = self.backend.session(static, args, self.settings, self.use_cache)
            self.runners[key] = runner
        return runner(*args)


_DEFAULT = OnnxBackend()


def default_backend() -> OnnxBackend:
    """The instance :func:`onnx_custom_backend` uses (its cache and stats).

    .. code-block:: python

        from experimental_experiment.torch_dynamo import default_backend

        print(default_backend().stats)
    """
    return _DEFAULT


def clear_cache() -> None:
    """Forgets every session cached by :func:`onnx_custom_backend` and resets its stats."""
    _DEFAULT.clear()


def onnx_custom_backend(
    graph_module: torch.fx.GraphModule,
    args: list,
    *,
    exporter: str | None = None,
    target_opset: int | None = None,
    options: OptimizationOptions | None = None,
    providers: list | None = None,
    session_options=None,
    dynamic: bool = True,
    verify: bool = False,
    use_cache: bool = True,
    use_dlpack: bool = False,
    verbose: int = 0,
) -> Callable:
    """A torch.compile compiler: converts ``graph_module`` to ONNX, runs onnxruntime.

    It delegates to :func:`default_backend`, whose cache every call shares; an
    :class:`OnnxBackend` has a cache and statistics of its own.

    :param graph_module: forward or backward graph given by aot_autograd
    :param args: its example inputs (fake tensors, SymInts)
    :param exporter: ``"custom"`` (our :func:`to_onnx`) or ``"dynamo"``
        (:func:`torch.onnx.export`); None: ``"custom"`` unless the environment variable
        ``ONNXRT_CHANGE_REWRITER`` is ``"0"``
    :param target_opset: opset of the ONNX models
    :param options: optimization options of the exporter
    :param providers: onnxruntime providers (default: from the inputs' device)
    :param session_options: :class:`onnxruntime.SessionOptions`
    :param dynamic: when the graph has symbolic dims (``torch.compile(dynamic=True)`` or
        a recompilation after a shape change), True exports one model with dynamic
        dims for every shape; False exports a model with static shapes for every new
        input signature met at run time
    :param verify: compares every call with eager execution of the graph
    :param use_cache: reuses the session of an identical graph and signature
    :param use_dlpack: exchanges tensors through DLPack even on CPU
        (default: numpy views on CPU, DLPack on other devices)
    :param verbose: verbosity
    :return: a boxed function (list of inputs -> tuple of outputs)

    .. code-block:: python

        compiler = functools.partial(onnx_custom_backend, dynamic=False)
        backend = aot_autograd(fw_compiler=compiler, bw_compiler=compiler)
    """
    opts = BackendOptions(
        exporter,
        target_opset,
        options,
        tuple(providers) if providers else None,
        session_options,
        dynamic,
        verify,
        use_cache,
        use_dlpack,
        verbose,
    )
    return _DEFAULT.compile(graph_module, args, opts)


__all__ = [
    "BackendOptions",
    "BackendStats",
    "OnnxBackend",
    "OnnxDebugBackend",
    "clear_cache",
    "default_backend",
    "default_exporter",
    "onnx_custom_backend",
    "onnx_debug_backend",
]
