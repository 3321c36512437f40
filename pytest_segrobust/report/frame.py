"""How much of the frame a geometric corruption keeps, per severity.

A rotation, a shear or a translation moves part of the image out of the frame: those pixels
turn black and their labels become the ignore label, so they are no longer scored. The share
of the frame that still shows the image tells a reader how much a geometric cell measures
robustness and how much it just measures less. Where it changes with the image size, the
corruption's constants are in pixels (a translation by 100 px leaves little of a 128 px image
and most of a 1024 px one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from pytest_segrobust.corruptions import Corruption
from pytest_segrobust.seeding import sample_seed
from pytest_segrobust.types import Image, SemanticMask, field_of

# The kept share measured again at half the size: a change beyond this means constants in pixels.
SIZE_DEPENDENT = 0.01
_OUTSIDE = 1  # the label the warp gives pixels that come from outside the frame


def frame_kept(
    corruption: Corruption[Any], height: int, width: int, severities: Sequence[int], seed: int, sample_id: str
) -> list[float]:
    """The share of the output frame that shows the image, per severity, for one image's draw.

    A zero mask is warped with the image, as the annotations are in a suite, and the pixels
    that read from outside the frame (the ignore label) are counted. Random draws (a
    rotation's sign) come from the seed the image ``sample_id`` gets in the suite.

    Args:
        corruption: A geometric corruption (or a composition with a geometric part).
        height: Image height in pixels.
        width: Image width in pixels.
        severities: The severities to measure, 1..5.
        seed: The suite's global seed.
        sample_id: The image whose draw is used.

    Returns:
        One share in ``[0, 1]`` per severity.
    """
    batch = {
        "image": Image(torch.zeros(1, 3, height, width)),
        "mask": SemanticMask(torch.zeros(1, height, width, dtype=torch.int64), ignore_index=_OUTSIDE),
    }
    kept = []
    for severity in severities:
        warped = corruption(batch, severity, [sample_seed(seed, sample_id, corruption.name, severity)])
        kept.append(float((field_of(warped, SemanticMask).data != _OUTSIDE).double().mean()))
    return kept


def describe_frames(
    corruptions: Sequence[Corruption[Any]],
    height: int,
    width: int,
    severities: Sequence[int],
    seed: int,
    sample_id: str,
) -> dict[str, Any] | None:
    """The kept share of every geometric corruption, at the image's size and at half of it (JSON-safe).

    Returns:
        ``{"size": [H, W], "severities": [...], "corruptions": {name: {"parameters": [...],
        "kept": [...], "kept_at_half_size": [...], "in_pixels": bool}}}`` (one entry per
        severity in each list), or ``None`` when none of ``corruptions`` is geometric.
    """
    geometric = [c for c in corruptions if c.geometric]
    if not geometric:
        return None
    severities = sorted(severities)
    half = (max(8, height // 2), max(8, width // 2))
    out: dict[str, Any] = {}
    for corruption in geometric:
        kept = frame_kept(corruption, height, width, severities, seed, sample_id)
        smaller = frame_kept(corruption, *half, severities, seed, sample_id)
        described = corruption.table.describe()
        out[corruption.name] = {
            "parameters": [described[s - 1] for s in severities],
            "kept": kept,
            "kept_at_half_size": smaller,
            "in_pixels": any(abs(a - b) > SIZE_DEPENDENT for a, b in zip(kept, smaller)),
        }
    return {"size": [height, width], "severities": list(severities), "corruptions": out}
