"""The example's promptable model: a colour-region grower seeded by the clicks or the box, and its factory.

The suite names the factory as ``segmenter:promptable``. It returns a plain function of numpy
arrays, which the package calls once per image (``pytest_segrobust.models.promptable_functions``)::

    masks = segment(image, prompts)
    # image: (H, W, 3) uint8, the corrupted image
    # prompts: one dict per prompt set: {"kind": "points" | "box", "points": (P, 2) float32 (x, y),
    #          "labels": (P,) int64 (1 on the instance, 0 off it), "box": (4,) float32 (x0, y0, x1, y1) or None}
    # masks: (len(prompts), H, W) bool, one mask per prompt set

Colours are compared after a 5x5 mean. A click seeds a region with the median colour of its 3x3
neighbourhood, which grows over 4-connected pixels within ``TOLERANCE`` of that colour; a box seeds it with its central pixels'
median colour and keeps the grown region inside the box. Replace this function with your own
model (a SAM predictor behind any runtime) and keep the factory's name.

Set ``SEGROBUST_EXAMPLE_DEGRADE=1`` to read the image at 1 bit per channel, as a careless
low-precision export would: the model the gate must catch.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

DEGRADE_VARIABLE = "SEGROBUST_EXAMPLE_DEGRADE"
DEGRADED_BITS = 1  # bits kept per colour channel when degraded
TOLERANCE = 60.0  # the largest summed absolute colour difference from the seed colour a region takes in
WINDOW = 5  # colours are compared after a WINDOW x WINDOW mean, which averages pixel noise away

Segment = Callable[[np.ndarray, list[dict[str, Any]]], np.ndarray]


def smoothed(image: np.ndarray) -> np.ndarray:
    """The image's ``WINDOW x WINDOW`` mean colour at every pixel (edges repeated), float32.

    Shape:
        image: ``(H, W, 3)``; return: the same.
    """
    half = WINDOW // 2
    padded = np.pad(image.astype(np.float64), ((half + 1, half), (half + 1, half), (0, 0)), mode="edge")
    summed = padded.cumsum(axis=0).cumsum(axis=1)
    window = summed[WINDOW:, WINDOW:] - summed[:-WINDOW, WINDOW:] - summed[WINDOW:, :-WINDOW] + summed[:-WINDOW, :-WINDOW]
    return (window / WINDOW**2).astype(np.float32)


def grown(image: np.ndarray, seeds: np.ndarray, colour: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """The 4-connected region of pixels within ``TOLERANCE`` of ``colour``, in ``inside``, reached from ``seeds``.

    Shape:
        image: ``(H, W, 3)`` float32; seeds, inside and return: ``(H, W)`` bool; colour: ``(3,)``.
    """
    similar = (np.abs(image - colour).sum(axis=-1) <= TOLERANCE) & inside
    region = seeds & similar
    while True:
        spread = region.copy()
        spread[1:] |= region[:-1]
        spread[:-1] |= region[1:]
        spread[:, 1:] |= region[:, :-1]
        spread[:, :-1] |= region[:, 1:]
        spread &= similar
        if np.array_equal(spread, region):
            return region
        region = spread


def segment_one(image: np.ndarray, prompt: dict[str, Any]) -> np.ndarray:
    """One prompt set's mask: grown from its foreground clicks, or from its box's centre within the box.

    Shape:
        image: ``(H, W, 3)`` float32, :func:`smoothed`; return: ``(H, W)`` bool.
    """
    height, width = image.shape[:2]
    seeds = np.zeros((height, width), dtype=bool)
    inside = np.ones((height, width), dtype=bool)
    if prompt["box"] is not None:
        x0, y0, x1, y1 = (round(float(v)) for v in prompt["box"])
        inside[:] = False
        inside[max(y0, 0) : max(y1, 0), max(x0, 0) : max(x1, 0)] = True
        cx, cy = (x0 + x1) // 2, (y0 + y1) // 2
        seeds[max(cy - 1, 0) : cy + 2, max(cx - 1, 0) : cx + 2] = True
        seeds &= inside
    for (x, y), label in zip(prompt["points"], prompt["labels"]):
        if label == 1:
            seeds[min(max(round(float(y)), 0), height - 1), min(max(round(float(x)), 0), width - 1)] = True
    if not seeds.any():
        return seeds
    near = seeds.copy()  # the seeds' 3x3 neighbourhoods give the colour: one noisy pixel does not
    near[1:] |= seeds[:-1]
    near[:-1] |= seeds[1:]
    near[:, 1:] |= near[:, :-1].copy()
    near[:, :-1] |= near[:, 1:].copy()
    colour = np.median(image[near], axis=0)
    return grown(image, seeds, colour, inside)


def promptable() -> Segment:
    """The grower as a function ``segment(image, prompts) -> (len(prompts), H, W) bool`` (see the module).

    Raises:
        ValueError: When ``SEGROBUST_EXAMPLE_DEGRADE`` is set to anything but 0 or 1.
    """
    degrade = os.environ.get(DEGRADE_VARIABLE, "0")
    if degrade not in ("0", "1"):
        raise ValueError(f"environment variable {DEGRADE_VARIABLE}: expected 0 or 1, got {degrade!r}")
    step = 2 ** (8 - DEGRADED_BITS) if degrade == "1" else 1

    def segment(image: np.ndarray, prompts: list[dict[str, Any]]) -> np.ndarray:
        seen = smoothed((image // step) * step)
        return np.stack([segment_one(seen, prompt) for prompt in prompts])

    segment.__qualname__ = f"segment_{DEGRADED_BITS}bit" if step > 1 else "segment"
    return segment
