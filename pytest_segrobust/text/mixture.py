"""R2-Bench's mixture protocol for referring segmentation: per sample, visual only, text only, or both.

R2-Bench's generators apply at most two perturbations to a sample, at most one per modality:
visual only with probability 0.4, text only 0.4, both 0.2, each type drawn uniformly from its
list. For image-level tasks (referring image segmentation) the level is static, set by the
benchmark cell (low / medium / high); their video mode draws the level per frame, uniformly.
:func:`r2bench_mixture` covers both: give one severity for a cell's level, several to draw one
uniformly per sample. The chosen pair is applied in the order source -> environment ->
sensor -> transmission by whoever applies it; a visual and a text perturbation touch
different inputs, so their order does not change the result.

The draw is the cross-modal mixture's (:mod:`pytest_segrobust.corruptions.mixture`) with the
expression as the other input: a pure function of (seed, sample id, the two lists, the severities).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_segrobust.core.modality import Modality
from pytest_segrobust.corruptions.mixture import MixtureDraw, MixtureProtocol

__all__ = ["MIXTURE_STREAM", "R2BENCH_PROPORTIONS", "REFERRING_MIXTURE", "MixtureDraw", "Modality", "r2bench_mixture"]

MIXTURE_STREAM = "mixture:r2bench"
"""The name slot of :func:`~pytest_segrobust.randomness.seeding.sample_seed` for the mixture's draws (no perturbation has it)."""

REFERRING_MIXTURE = MixtureProtocol(Modality.TEXT, MIXTURE_STREAM)
"""R2-Bench's mixture of a visual perturbation and a text perturbation."""

R2BENCH_PROPORTIONS = REFERRING_MIXTURE.proportions
"""R2-Bench's probabilities of visual only, text only, both."""


def r2bench_mixture(
    seed: int, sample_id: str, visual: Sequence[str], text: Sequence[str], severity: int | Sequence[int]
) -> MixtureDraw:
    """Draw one sample's modality, perturbation types and severity, R2-Bench's way
    (:meth:`MixtureProtocol.draw <pytest_segrobust.corruptions.mixture.MixtureProtocol.draw>`).

    Args:
        seed: The suite's global seed.
        sample_id: The sample's stable id.
        visual: Image corruption names to draw from (uniformly), non-empty.
        text: Text perturbation names to draw from (uniformly), non-empty.
        severity: The cell's level 1..5, or several levels to draw from uniformly.

    Raises:
        ValueError: for an empty list, a repeated name, or a severity outside 1..5.
    """
    return REFERRING_MIXTURE.draw(seed, sample_id, visual, text, severity)
