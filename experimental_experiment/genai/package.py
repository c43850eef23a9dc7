"""Builds an onnxruntime-genai package (a folder ``onnxruntime_genai.Model`` loads) from a
transformers causal language model: the ONNX decoder with its weights in one external
data file, ``genai_config.json`` and the tokenizer files.

.. code-block:: python

    from experimental_experiment.genai import package_model

    package_model(model, "out/llama-genai", precision="fp32", tokenizer=tok)

    import onnxruntime_genai as og
    m = og.Model("out/llama-genai")
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field

from .cache_geometry import common_geometry, pack_indexer_keys, pad_cache_geometry
from .config import (
    GENAI_DECODER_TYPES,
    GENAI_OTHER_LAYOUT,
    genai_config,
    write_genai_config,
)
from .errors import PackageModelTypeError, PackagePrecisionError
from .export import check_decoder, export_decoder, load_decoder, probe_cache
from .io_names import rename_to_genai
from .output import check_out_dir, staged_folder
from .progress import StepBar, progress_enabled
from .share_buffer import share_past_buffer
from .tokenizer import resolve_tokenizer, write_tokenizer

logger = logging.getLogger("experimental_experiment.genai")

#: precisions :func:`package_model` writes
PRECISIONS = ("fp32", "int4")
MODEL_FILE, DATA_FILE = "model.onnx", "model.onnx.data"


@dataclass
class PackageReport:
    """What :func:`package_model` wrote.

    :param out_dir: the package folder
    :param model_type: genai's ``model.type`` written in genai_config.json
    :param precision: ``fp32`` or ``int4``
    :param files: the files of the package
    :param op_types: number of nodes per operator type (``com.microsoft.<op>`` for the
        contrib operators such as GroupQueryAttention or MatMulNBits)
    :param durations: seconds spent in every step

    .. code-block:: python

        report = package_model(model, "pkg")
        print(report.op_types.get("com.microsoft.GroupQueryAttention"))
    """

    out_dir: str
    model_type: str
    precision: str
    files: list[str] = field(default_factory=list)
    op_types: dict[str, int] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        fused = {k: v for k, v in self.op_types.items() if k.startswith("com.microsoft.")}
        return (
            f"{self.out_dir}: {self.model_type} {self.precision}, files "
            f"{', '.join(self.files)}; contrib ops {fused or 'none'}; "
            + ", ".join(f"{k} {v:.1f}s" for k, v in self.durations.items())
        )


def _check_model_type(config, model_type: str | None) -> str:
    """genai's ``model.type``: ``model_type`` when given (it must be one genai knows),
    else the configuration's type when genai runs it with one cache input per layer,
    else ``llama`` (the ONNX model holds the architecture, genai's type only selects the
    decoding loop, the same for every decoder with per-layer keys and values)."""
    if model_type is not None:
        if model_type not in GENAI_DECODER_TYPES:
            raise PackageModelTypeError(
                f"onnxruntime-genai does not run model type {model_type!r} (it knows "
                f"{sorted(GENAI_DECODER_TYPES)}); pass one of them, 'llama' runs every "
                "decoder with one key and one value input per layer"
            )
        return model_type
    own = config.get_text_config(decoder=True).model_type
    if own in GENAI_DECODER_TYPES and own not in GENAI_OTHER_LAYOUT:
        return own
    logger.info(
        "model type %r: genai_config.json says 'llama' (%s)",
        own,
        GENAI_OTHER_LAYOUT.get(own, "a type genai does not list"),
    )
    return "llama"


def _check_precision(precision: str, block_size: int, accuracy_level) -> None:
    """The precision, and for int4 the quantizer's own checks of its options
    (:class:`QuantizeOptionError <experimental_experiment.quantize.QuantizeOptionError>`),
    before any work."""
    if precision not in PRECISIONS:
        raise PackagePrecisionError(
            f"precision {precision!r} is not supported, expected one of {list(PRECISIONS)}"
        )
    if precision != "fp32":
        from ..quantize.quantizer import _check_options

        _check_options(precision, block_size, accuracy_level, False)


def _quantize(
    onx,
    precision: str,
    block_size: int,
    accuracy_level,
    quantize_lm_head: bool,
    progress: bool = False,
):
    """int4 weights through :mod:`experimental_experiment.quantize` (MatMulNBits), the
    head included unless ``quantize_lm_head`` is False: left in float32, the head
    (vocabulary x hidden) is the largest weight a decoding step reads, which made the
    int4 decoding step slower than onnxruntime-genai's builder (it quantizes every
    MatMul)."""
    from ..quantize import quantize_model

    return quantize_model(
        onx,
        precision,
        block_size=block_size,
        accuracy_level=accuracy_level,
        quantize_lm_head=quantize_lm_head,
        progress=progress,
    )


def package_model(
    model,
    out_dir: str,
    precision: str = "fp32",
    tokenizer=None,
    *,
    model_type: str | None = None,
    require_tokenizer: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    patterns: str = "default+onnxruntime",
    block_size: int = 32,
    accuracy_level: int | None = None,
    search: dict | None = None,
    quantize_lm_head: bool = True,
) -> PackageReport:
    """Writes an onnxruntime-genai package of ``model`` into ``out_dir``.

    Every argument is checked before any work; the folder is written beside
    ``out_dir`` and renamed at the end, so ``out_dir`` is whole or untouched.

    :param model: a transformers causal LM, or the folder ``save_pretrained`` wrote
    :param out_dir: the package folder (missing or empty unless ``overwrite``)
    :param precision: ``"fp32"`` or ``"int4"`` (MatMulNBits weights, see
        :mod:`experimental_experiment.quantize`)
    :param tokenizer: a tokenizer object or its folder; None takes the files of the
        model's folder when it has some
    :param model_type: genai's ``model.type`` (default: the configuration's
        ``model_type``)
    :param require_tokenizer: raises :class:`MissingTokenizerError` when no tokenizer
        is found
    :param overwrite: replaces a non-empty ``out_dir``
    :param progress: a progress bar over the steps, on a terminal only, with the bars
        of the export and of the quantization below it while they run
    :param patterns: the optimization patterns (the onnxruntime set fuses the attention
        into GroupQueryAttention where it can)
    :param block_size: int4 block size
    :param accuracy_level: int4 accuracy level of MatMulNBits (None: the default)
    :param search: search options replacing genai_config.json's defaults
        (``past_present_share_buffer`` is true when every attention is a
        GroupQueryAttention node, the cache length then read from ``attention_mask``)
    :param quantize_lm_head: int4: quantizes the head producing the logits too (as
        onnxruntime-genai's builder does); False keeps it in float32 (more accurate
        logits, a slower decoding step)
    :return: a :class:`PackageReport`

    .. code-block:: python

        import numpy as np
        import onnxruntime_genai as og
        from experimental_experiment.genai import package_model

        package_model(model, "pkg", precision="int4")
        m = og.Model("pkg")
        params = og.GeneratorParams(m)
        params.set_search_options(max_length=32)
        generator = og.Generator(m, params)
        generator.append_tokens(np.array([1, 2, 3], dtype=np.int32))
        while not generator.is_done():
            generator.generate_next_token()
        print(generator.get_sequence(0))
    """
    _check_precision(precision, block_size, accuracy_level)
    full = check_out_dir(out_dir, overwrite)
    tok = resolve_tokenizer(tokenizer, model, required=require_tokenizer)
    decoder = load_decoder(model)
    check_decoder(decoder)
    model_type = _check_model_type(decoder.config, model_type)
    shapes = probe_cache(decoder)
    heads, head_size = common_geometry(shapes)
    geometry = dict(num_hidden_layers=len(shapes), num_key_value_heads=heads, head_size=head_size)
    steps = (
        ["export and optimize", "rename"]
        + (["quantize"] if precision != "fp32" else [])
        + ["save", "config", "tokenizer"]
    )
    report = PackageReport(full, model_type, precision)
    with StepBar(steps, progress_enabled(progress)) as bar, staged_folder(full) as tmp:
        with bar.step("export and optimize"):
            onx = export_decoder(decoder, shapes, patterns=patterns, progress=bar.enabled)
        with bar.step("rename"):
            # sparse attention: the keys of the token indexer travel with the values
            pack_indexer_keys(onx, shapes)
            rename_to_genai(onx, len(shapes))
            # one geometry for every cache tensor (latent attention, mixed layers)
            pad_cache_geometry(onx, shapes, (heads, head_size))
            shared = share_past_buffer(onx, len(shapes))
        if precision != "fp32":
            with bar.step("quantize"):
                onx = _quantize(
                    onx, precision, block_size, accuracy_level, quantize_lm_head, bar.enabled
                )
        with bar.step("save"):
            from ..xbuilder.model_container import save_model

            save_model(onx, os.path.join(tmp, MODEL_FILE), external_data=True, location=DATA_FILE)
        with bar.step("config"):
            content = genai_config(
                decoder.config,
                [i.name for i in onx.graph.input],
                model_type=model_type,
                filename=MODEL_FILE,
                search=search,
                geometry=geometry,
                share_buffer=shared,
            )
            write_genai_config(content, tmp)
        with bar.step("tokenizer"):
            write_tokenizer(tok, tmp)
        report.files = sorted(os.listdir(tmp))
    report.op_types = dict(
        Counter(f"{n.domain}.{n.op_type}" if n.domain else n.op_type for n in onx.graph.node)
    )
    report.durations = bar.durations
    logger.info("%s", report)
    return report


__all__ = ["PRECISIONS", "PackageReport", "package_model"]
