"""Pure tensor operations behind the corruptions.

Every function works on a batch ``(B, C, H, W)`` of float images in ``[0, 1]`` on any
device and touches each sample independently, so a sample's output does not depend on the
rest of its batch. Randomness comes in as per-sample ``torch.Generator`` objects or as
tensors already drawn from them; these functions hold no random state of their own.
"""

from pytest_segrobust.corruptions.functional.codec import jpeg
from pytest_segrobust.corruptions.functional.color import enhance_contrast, luma, to_uint8
from pytest_segrobust.corruptions.functional.filters import disk_kernel, filter2d, gaussian_kernel1d, separable_filter
from pytest_segrobust.corruptions.functional.geometry import (
    affine_coordinates,
    rotation_about_centre,
    sample_bilinear,
    sample_nearest,
)
from pytest_segrobust.corruptions.functional.noise import additive_gaussian_noise, shot_noise
from pytest_segrobust.corruptions.functional.random import random_signs, standard_normal_like, uniform_like

__all__ = [
    "additive_gaussian_noise",
    "affine_coordinates",
    "disk_kernel",
    "enhance_contrast",
    "filter2d",
    "gaussian_kernel1d",
    "jpeg",
    "luma",
    "random_signs",
    "rotation_about_centre",
    "sample_bilinear",
    "sample_nearest",
    "separable_filter",
    "shot_noise",
    "standard_normal_like",
    "to_uint8",
    "uniform_like",
]
