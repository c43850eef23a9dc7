"""Heads of the model zoo: the auto mapping of transformers every head comes from,
the cases a model zoo lists (one head per model type, or every pair), and the cases
known not to work with random weights or tiny configurations (a ``skip`` row with its
reason). A leaf module: the cases (``zoo_cases``) and the inputs (``zoo_inputs``) both
import it, neither imports the other's listing.

.. code-block:: python

    from experimental_experiment.bench.zoo_heads import head_pairs

    pairs = head_pairs("all")   # [('albert', 'masked-lm'), ('albert', 'question-answering'), ...]
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ZooCase:
    """One model type with the head it is exported with."""

    model_type: str
    head: str


class ZooCaseSkipped(Exception):
    """A zoo case that cannot be exported and checked meaningfully with random weights
    or a tiny configuration; the zoo writes a row with status ``skip`` and the reason.

    Cause: the head needs something a tiny random model does not have (trained
    weights, an external library, a pair of real images, a generation loop).

    Fix: nothing to fix in the exporter; the reason in ``SKIPS`` says what the case
    would need. Remove the entry once the input builder provides it."""


#: heads in order of preference (a model type gets the first head it has with
#: ``--heads first``) and the auto mapping each one comes from
HEADS: dict[str, str] = {
    "seq2seq-lm": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "masked-lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "causal-lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "image-classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "speech-seq2seq": "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "ctc": "MODEL_FOR_CTC_MAPPING_NAMES",
    "audio-classification": "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
    "sequence-classification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "vision-encoder": "MODEL_FOR_IMAGE_MAPPING_NAMES",
}

#: the other heads used for inference (``--heads all``), by the inputs they take
NEW_HEADS: dict[str, str] = {
    # tokens
    "token-classification": "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES",
    "question-answering": "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES",
    "multiple-choice": "MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES",
    "next-sentence-prediction": "MODEL_FOR_NEXT_SENTENCE_PREDICTION_MAPPING_NAMES",
    "text-encoding": "MODEL_FOR_TEXT_ENCODING_MAPPING_NAMES",
    "table-question-answering": "MODEL_FOR_TABLE_QUESTION_ANSWERING_MAPPING_NAMES",
    "document-question-answering": "MODEL_FOR_DOCUMENT_QUESTION_ANSWERING_MAPPING_NAMES",
    "decision": "MODEL_FOR_DECISION_MAPPING_NAMES",
    # images and a prompt, one prefill call
    "image-text-to-text": "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "multimodal-lm": "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
    "visual-question-answering": "MODEL_FOR_VISUAL_QUESTION_ANSWERING_MAPPING_NAMES",
    "retrieval": "MODEL_FOR_RETRIEVAL_MAPPING_NAMES",
    # images and tokens, no image token
    "zero-shot-image-classification": "MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "zero-shot-object-detection": "MODEL_FOR_ZERO_SHOT_OBJECT_DETECTION_MAPPING_NAMES",
    # images
    "object-detection": "MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES",
    "image-segmentation": "MODEL_FOR_IMAGE_SEGMENTATION_MAPPING_NAMES",
    "semantic-segmentation": "MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES",
    "instance-segmentation": "MODEL_FOR_INSTANCE_SEGMENTATION_MAPPING_NAMES",
    "universal-segmentation": "MODEL_FOR_UNIVERSAL_SEGMENTATION_MAPPING_NAMES",
    "depth-estimation": "MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES",
    "normal-estimation": "MODEL_FOR_NORMAL_ESTIMATION_MAPPING_NAMES",
    "pointmap-estimation": "MODEL_FOR_POINTMAP_ESTIMATION_MAPPING_NAMES",
    "pose-estimation": "MODEL_FOR_POSE_ESTIMATION_MAPPING_NAMES",
    "keypoint-detection": "MODEL_FOR_KEYPOINT_DETECTION_MAPPING_NAMES",
    "keypoint-matching": "MODEL_FOR_KEYPOINT_MATCHING_MAPPING_NAMES",
    "mask-generation": "MODEL_FOR_MASK_GENERATION_MAPPING_NAMES",
    "image-matting": "MODEL_FOR_IMAGE_MATTING_MAPPING_NAMES",
    "image-to-image": "MODEL_FOR_IMAGE_TO_IMAGE_MAPPING_NAMES",
    "masked-image-modeling": "MODEL_FOR_MASKED_IMAGE_MODELING_MAPPING_NAMES",
    "causal-image-modeling": "MODEL_FOR_CAUSAL_IMAGE_MODELING_MAPPING_NAMES",
    "backbone": "MODEL_FOR_BACKBONE_MAPPING_NAMES",
    "video-classification": "MODEL_FOR_VIDEO_CLASSIFICATION_MAPPING_NAMES",
    "table-recognition": "MODEL_FOR_TABLE_RECOGNITION_MAPPING_NAMES",
    "text-recognition": "MODEL_FOR_TEXT_RECOGNITION_MAPPING_NAMES",
    # audio
    "audio-frame-classification": "MODEL_FOR_AUDIO_FRAME_CLASSIFICATION_MAPPING_NAMES",
    "audio-xvector": "MODEL_FOR_AUDIO_XVECTOR_MAPPING_NAMES",
    "rnnt": "MODEL_FOR_RNNT_MAPPING_NAMES",
    "tdt": "MODEL_FOR_TDT_MAPPING_NAMES",
    "text-to-waveform": "MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES",
    "text-to-spectrogram": "MODEL_FOR_TEXT_TO_SPECTROGRAM_MAPPING_NAMES",
    # time series
    "time-series-classification": "MODEL_FOR_TIME_SERIES_CLASSIFICATION_MAPPING_NAMES",
    "time-series-regression": "MODEL_FOR_TIME_SERIES_REGRESSION_MAPPING_NAMES",
    "time-series-prediction": "MODEL_FOR_TIME_SERIES_PREDICTION_MAPPING_NAMES",
}

#: every head of ``--heads all``
ALL_HEADS: dict[str, str] = {**HEADS, **NEW_HEADS}

#: auto mappings of transformers the zoo does not enumerate, and why
EXCLUDED_MAPPINGS: dict[str, str] = {
    "MODEL_MAPPING_NAMES": "base models without a head (their encoders are the "
    "vision-encoder and text-encoding heads)",
    "MODEL_FOR_PRETRAINING_MAPPING_NAMES": "training objectives (masks and losses drawn "
    "inside the forward)",
    "CONFIG_MAPPING_NAMES": "configurations, not models",
}

#: cases that cannot work with random weights or tiny configurations, with the reason
#: (``(model_type, head)``, ``model_type`` ``*`` for every type of the head)
SKIPS: dict[tuple[str, str], str] = {
    ("*", "keypoint-matching"): "matches keypoints between two images: the number of "
    "keypoints random weights detect varies with the input (data-dependent shapes, "
    "nothing left to match on noise)",
    ("*", "decision"): "JevForDecision scores the questions of one prompt (batch 1, "
    "marks indexed by value) and returns a boolean-masked selection whose size depends "
    "on num_options' values: neither a dynamic batch nor a fixed output shape",
    ("speecht5", "text-to-spectrogram"): "SpeechT5's speech decoder prenet draws a "
    "dropout mask (torch.bernoulli) in eval mode too: two runs of the same model "
    "differ, no exporter can match one",
}


def skip_reason(case: ZooCase) -> str | None:
    """The reason ``case`` is skipped (``SKIPS``), None when it runs."""
    return SKIPS.get((case.model_type, case.head)) or SKIPS.get(("*", case.head))


def heads_of(heads: str) -> dict[str, str]:
    """The heads selected by ``--heads``: ``first`` (:data:`HEADS`), ``all``
    (:data:`ALL_HEADS`) or a comma separated list of head names."""
    if heads == "first":
        return HEADS
    if heads == "all":
        return ALL_HEADS
    names = [h for h in heads.split(",") if h]
    unknown = [h for h in names if h not in ALL_HEADS]
    if unknown:
        raise ValueError(
            f"unknown heads {unknown}, expected 'first', 'all' or some of {list(ALL_HEADS)}"
        )
    return {h: ALL_HEADS[h] for h in names}


def head_pairs(heads: str = "all") -> list[tuple[str, str]]:
    """Every ``(model type, head)`` pair of the selected heads (:func:`heads_of`),
    sorted by model type then by the order of the heads."""
    from transformers.models.auto import modeling_auto

    selected = heads_of(heads)
    order = {h: i for i, h in enumerate(selected)}
    pairs = {(t, h) for h, mapping in selected.items() for t in getattr(modeling_auto, mapping, {})}
    return sorted(pairs, key=lambda p: (p[0], order[p[1]]))


def model_class_name(case: ZooCase) -> str:
    """The class name the auto mapping of ``case.head`` gives ``case.model_type``;
    raises ``ValueError`` for an unknown head or type."""
    from transformers.models.auto import modeling_auto

    if case.head not in ALL_HEADS:
        raise ValueError(f"model type {case.model_type!r} has no head in {list(HEADS)}")
    names = getattr(modeling_auto, ALL_HEADS[case.head], {})
    if case.model_type not in names:
        raise ValueError(
            f"model type {case.model_type!r} has no head in "
            f"[{case.head!r}] (Unrecognized model identifier)"
        )
    name = names[case.model_type]
    return name[0] if isinstance(name, (list, tuple)) else name
