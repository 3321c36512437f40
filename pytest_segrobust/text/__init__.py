"""Text perturbations of referring expressions (R2-Bench), replay files and the mixture protocol.

* :data:`TEXT_PERTURBATIONS` / :class:`TextPerturbationRegistry`: ``misspelling``,
  ``mispunctuation``, ``grammar_error``, ``character_missing``; each has ``family == "text"``
  and ``perturb(texts, sample_ids, severity, seed) -> list[str]``.
* :func:`load_replay` / :class:`ReplayFile`: frozen perturbed texts (e.g. LLM-made) per
  perturbation, level and sample id.
* :func:`r2bench_mixture`: R2-Bench's per-sample choice of visual only / text only / both.

Layer 2 (a perturbation family, like :mod:`pytest_segrobust.corruptions`): imports the layers below
and the other perturbation families.
"""

from __future__ import annotations

from pytest_segrobust.text.base import FAMILY, LEVELS, TextPerturbation, severity_of
from pytest_segrobust.text.mixture import MixtureDraw, Modality, r2bench_mixture
from pytest_segrobust.text.perturbations import (
    character_missing,
    grammar_error,
    mispunctuation,
    misspelling,
)
from pytest_segrobust.text.registry import TEXT_PERTURBATIONS, TextPerturbationRegistry
from pytest_segrobust.text.replay import (
    REPLAY_VERSION,
    MissingReplayError,
    ReplayFile,
    ReplayFileError,
    ReplayPerturbation,
    load_replay,
)

__all__ = [
    "FAMILY", "LEVELS", "REPLAY_VERSION", "TEXT_PERTURBATIONS",
    "MissingReplayError", "MixtureDraw", "Modality", "ReplayFile", "ReplayFileError", "ReplayPerturbation",
    "TextPerturbation", "TextPerturbationRegistry",
    "character_missing", "grammar_error", "load_replay", "mispunctuation", "misspelling", "r2bench_mixture",
    "severity_of",
]
