"""Every property of the public kit, over every registered corruption and two compositions.

Each (property, corruption) pair is its own test, so a failure names both.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import settings

from pytest_segrobust import testing
from pytest_segrobust.core.types import Image
from pytest_segrobust.corruptions import REGISTRY, Category, Corruption, PhotometricCorruption, SeverityTable
from pytest_segrobust.randomness.seeding import SampleStreams

# Every registered corruption that acts on images (the kit's properties are about images; the
# clip-only ones are tested in test_clips and test_temporal), plus compositions (one geometric,
# one photometric).
LABELLED = [(label, c) for label, c in REGISTRY.labelled() if c.accepts(Image)] + [
    (name, REGISTRY.get(name)) for name in ("gaussian_noise+rotate", "contrast+jpeg_compression")
]
CASES = [
    pytest.param(prop, corruption, id=f"{prop.__name__}[{label}]")
    for label, corruption in LABELLED
    for prop in testing.properties_for(corruption)
]


# A third of the profile's examples (8 of CI's 25) where one costs 10-30x another's (measured:
# Poisson counts per value; frost's textures and snow's layers drawn at every size), which was
# half this file's time. A property holds or not whatever the corruption costs; 8 derandomized
# examples still span batches of 1 to 4 and odd sizes, and the others keep the profile's count.
COSTLY = {"shot_noise", "frost", "snow"}

# Two properties hold by construction, whatever the batch: a corruption's call returns the
# batch as given at severity 0, and a photometric one hands its annotations through untouched
# (the kernels, not the corruption, decide). The batch an example draws takes no other path
# there, so a few examples fail as surely as 25 when a change breaks it.
BY_CONSTRUCTION = {testing.severity_zero_is_identity, testing.photometric_leaves_targets_untouched}
BY_CONSTRUCTION_EXAMPLES = 4


@pytest.mark.parametrize(("prop", "corruption"), CASES)
def test_property(prop: testing.Property, corruption: Corruption) -> None:
    examples = max(1, settings().max_examples // 3) if corruption.name in COSTLY else None
    if prop in BY_CONSTRUCTION:
        examples = min(examples or BY_CONSTRUCTION_EXAMPLES, BY_CONSTRUCTION_EXAMPLES)
    testing.check_property(prop, corruption, examples)


# Where the definition implies it. Not rotate: the pixel distance of a rotated image need not
# grow with the angle (50 degrees can land closer to the original than 40 on real content).
MONOTONE = [
    "gaussian_noise",
    "shot_noise",
    "defocus_blur",
    "jpeg_compression",
    "contrast",
    "impulse_noise",
    "speckle_noise",
    "motion_blur",
    "zoom_blur",
    "pixelate",
    "brightness",
    "darkness",
]


@pytest.mark.parametrize("name", MONOTONE)
def test_distance_from_clean_grows_with_severity(name: str) -> None:
    testing.distance_grows_with_severity(REGISTRY.get(name))


class GlobalNoise(PhotometricCorruption[float]):
    """A broken corruption: it draws from torch's global generator instead of the per-sample streams."""

    def corrupt_images(self, images: torch.Tensor, params: float, streams: SampleStreams) -> torch.Tensor:
        return (images + params * torch.randn_like(images)).clamp(0, 1)


def test_the_kit_catches_a_corruption_that_ignores_its_seeds() -> None:
    broken = GlobalNoise("global_noise", Category.NOISE, SeverityTable((0.1, 0.2, 0.3, 0.4, 0.5)))
    with pytest.raises(AssertionError):
        testing.check_property(testing.same_seed_gives_bitwise_equal_output, broken, max_examples=5, shrink=False)
