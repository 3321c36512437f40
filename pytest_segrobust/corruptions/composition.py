"""Chains of corruptions (R2-Bench): up to two, applied source -> environment -> sensor -> transmission.

A composition is named by its parts joined with ``+`` (``"fog+jpeg_compression"``) and is
itself a corruption: one suite cell, one severity applied to every part. Whatever order a
suite writes the parts in, they run in stage order, and the canonical name lists them so.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from enum import IntEnum
from typing import Any

from pytest_segrobust.core.modality import Modality
from pytest_segrobust.core.types import PixelField
from pytest_segrobust.corruptions.base import Category, Corruption, SeverityTable
from pytest_segrobust.randomness.seeding import FrameDraws

MAX_PARTS = 2
SEPARATOR = "+"


class Stage(IntEnum):
    """Where in the imaging chain a corruption happens; compositions apply them in this order."""

    SOURCE = 0  # the scene itself moves or deforms
    ENVIRONMENT = 1  # weather and illumination between scene and camera
    SENSOR = 2  # optics and sensor: blur, noise, tone, lens distortion
    TRANSMISSION = 3  # coding and resampling after capture
    PROMPT = 4  # the prompts a user gives a promptable model, on the image as it arrived


# Weather and illumination belong to the environment whatever family reports them.
_ENVIRONMENT = {"brightness", "darkness", "fog", "frost", "snow", "spatter"}
# Lens distortion is optics, not a change of the scene.
_SENSOR_GEOMETRY = {"geometric_distortion"}


def stage_of(corruption: Corruption[Any]) -> Stage:
    """The imaging stage of a corruption (R2-Bench's ordering)."""
    if corruption.modality is Modality.PROMPT:
        return Stage.PROMPT
    if corruption.name in _ENVIRONMENT or corruption.category is Category.ENVIRONMENT:
        return Stage.ENVIRONMENT
    if corruption.category is Category.COMPRESSION or corruption.temporal:  # a stalled or resampled stream
        return Stage.TRANSMISSION
    if corruption.geometric and corruption.name not in _SENSOR_GEOMETRY:
        return Stage.SOURCE
    return Stage.SENSOR


def part_seed(seed: int, part: str) -> int:
    """Seed of one part of a chain, derived from the sample's seed of the whole chain."""
    digest = hashlib.blake2b(f"{seed}\x1f{part}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


class Composition(Corruption[tuple[Any, ...]]):
    """Up to two corruptions applied in stage order at the same severity.

    Args:
        parts: The corruptions; they are sorted by :func:`stage_of` (stable for ties).

    Raises:
        ValueError: for more than two parts, fewer than two, or a repeated corruption.
    """

    def __init__(self, parts: Sequence[Corruption[Any]]) -> None:
        if not 2 <= len(parts) <= MAX_PARTS:
            allowed = f"exactly {MAX_PARTS}" if MAX_PARTS == 2 else f"2 to {MAX_PARTS}"
            raise ValueError(f"a composition chains {allowed} corruptions, got {len(parts)}")
        names = [p.name for p in parts]
        if len(set(names)) != len(names):
            raise ValueError(f"a composition cannot repeat a corruption: {SEPARATOR.join(names)}")
        self.parts = tuple(sorted(parts, key=stage_of))
        rows = tuple(tuple(p.table[s] for p in self.parts) for s in range(1, 6))
        # Pixels and another field (a promptable suite's prompts) at once: R2-Bench's cross-modal pair.
        pixels = [all(issubclass(kind, PixelField) for kind in p.acts_on) for p in self.parts]
        category = Category.CROSS_MODAL if any(pixels) and not all(pixels) else Category.COMPOSED
        super().__init__(SEPARATOR.join(p.name for p in self.parts), category, SeverityTable(rows))
        self.geometric = any(p.geometric for p in self.parts)
        self.temporal = any(p.temporal for p in self.parts)
        self.acts_on = tuple(dict.fromkeys(kind for p in self.parts for kind in p.acts_on))
        self.requires = tuple(dict.fromkeys(extra for p in self.parts for extra in p.requires))

    def drawing(self, frame_draws: FrameDraws) -> Composition:
        # The parts draw the random numbers: each of them must draw along the frames so.
        copied = copy.copy(self)
        copied.frame_draws = FrameDraws(frame_draws)
        copied.parts = tuple(part.drawing(frame_draws) for part in self.parts)
        return copied

    def _corrupt(self, batch, severity, seeds, size, device):  # type: ignore[no-untyped-def]
        for part in self.parts:
            batch = part(batch, severity, [part_seed(s, part.name) for s in seeds])
        return batch
