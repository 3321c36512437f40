"""R2-Bench's mixture protocol: per sample, visual only, text only, or both.

R2-Bench's generators apply at most two perturbations to a sample, at most one per modality:
visual only with probability 0.4, text only 0.4, both 0.2, each type drawn uniformly from its
list. For image-level tasks (referring image segmentation) the level is static, set by the
benchmark cell (low / medium / high); their video mode draws the level per frame, uniformly.
:func:`r2bench_mixture` covers both: give one severity for a cell's level, several to draw one
uniformly per sample. The chosen pair is applied in the order source -> environment ->
sensor -> transmission by whoever applies it; a visual and a text perturbation touch
different inputs, so their order does not change the result.

The draw is a pure function of (seed, sample id, the two lists, the severities).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

import numpy as np

from pytest_segrobust.corruptions.base import MAX_SEVERITY
from pytest_segrobust.corruptions.composition import SEPARATOR
from pytest_segrobust.randomness.seeding import sample_seed

Choice = TypeVar("Choice")

MIXTURE_STREAM = "mixture:r2bench"
"""The name slot of :func:`sample_seed` for the mixture's draws (no perturbation has it)."""


class Modality(str, Enum):
    """What the mixture perturbs in one sample."""

    VISUAL = "visual"
    TEXT = "text"
    BOTH = "both"


R2BENCH_PROPORTIONS: tuple[tuple[Modality, float], ...] = (
    (Modality.VISUAL, 0.4), (Modality.TEXT, 0.4), (Modality.BOTH, 0.2),
)
"""R2-Bench's probabilities of visual only, text only, both."""


@dataclass(frozen=True)
class MixtureDraw:
    """One sample's draw.

    Attributes:
        modality: Visual only, text only, or both.
        visual: The image corruption's name, or None for text only.
        text: The text perturbation's name, or None for visual only.
        severity: The level both are applied at, 1..5.
    """

    modality: Modality
    visual: str | None
    text: str | None
    severity: int

    @property
    def name(self) -> str:
        """The cell-style name: ``"gaussian_noise"``, ``"misspelling"`` or ``"gaussian_noise+misspelling"``."""
        return SEPARATOR.join(part for part in (self.visual, self.text) if part is not None)

    def to_json(self) -> dict[str, object]:
        """A JSON-safe record (what crosses a process or lands in a report)."""
        return {"modality": self.modality.value, "visual": self.visual, "text": self.text, "severity": self.severity}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> MixtureDraw:
        """The draw :meth:`to_json` wrote."""
        return cls(Modality(data["modality"]), data["visual"], data["text"], data["severity"])  # type: ignore[arg-type]


def r2bench_mixture(
    seed: int, sample_id: str, visual: Sequence[str], text: Sequence[str], severity: int | Sequence[int]
) -> MixtureDraw:
    """Draw one sample's modality, perturbation types and severity, R2-Bench's way.

    Four uniforms from the sample's own stream (keyed by ``seed`` and ``sample_id``) choose
    the modality (0.4 / 0.4 / 0.2), the visual type, the text type and the severity; a type
    is drawn whatever the modality, so the draws of one sample do not depend on each other.

    Args:
        seed: The suite's global seed.
        sample_id: The sample's stable id.
        visual: Image corruption names to draw from (uniformly), non-empty.
        text: Text perturbation names to draw from (uniformly), non-empty.
        severity: The cell's level 1..5, or several levels to draw from uniformly.

    Raises:
        ValueError: for an empty list, a repeated name, or a severity outside 1..5.
    """
    severities = (severity,) if isinstance(severity, int) else tuple(severity)
    for label, names in (("visual", visual), ("text", text)):
        if isinstance(names, str) or not names:
            raise ValueError(f"r2bench mixture: the {label} list must be a non-empty sequence of names, got {names!r}")
        repeated = [name for i, name in enumerate(names) if name in names[:i]]
        if repeated:
            raise ValueError(f"r2bench mixture: the {label} list names {repeated[0]!r} twice: {list(names)!r}")
    if not severities or any(isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= MAX_SEVERITY for s in severities):
        raise ValueError(f"r2bench mixture: severity must be 1..{MAX_SEVERITY} or a non-empty list of them, got {severity!r}")
    rng = np.random.Generator(np.random.Philox(key=sample_seed(seed, sample_id, MIXTURE_STREAM, 0)))
    which, visual_draw, text_draw, severity_draw = rng.random(4)
    modality, cumulative = R2BENCH_PROPORTIONS[-1][0], 0.0
    for candidate, probability in R2BENCH_PROPORTIONS:
        cumulative += probability
        if which < cumulative:
            modality = candidate
            break
    return MixtureDraw(
        modality=modality,
        visual=_pick(visual, visual_draw) if modality is not Modality.TEXT else None,
        text=_pick(text, text_draw) if modality is not Modality.VISUAL else None,
        severity=_pick(severities, severity_draw),
    )


def _pick(options: Sequence[Choice], draw: float) -> Choice:
    """The option a uniform ``draw`` in [0, 1) falls on, each equally likely."""
    return options[min(int(draw * len(options)), len(options) - 1)]
