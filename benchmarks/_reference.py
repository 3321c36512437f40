"""The reference implementation (imagecorruptions 1.1.2), importable on current numpy/scikit-image.

It is never a dependency of the project. Make a throwaway environment for it:

    python3 -m venv /tmp/refenv && . /tmp/refenv/bin/activate
    pip install torch==2.13.0
    pip install numpy "setuptools<82" scikit-image scipy opencv-python-headless Pillow pyyaml
    pip install --no-deps imagecorruptions==1.1.2
    pip install --no-deps -e .

The shims below are the ones 1.1.2 needs today: ``np.float_`` is gone from NumPy 2 and
scikit-image's ``gaussian(multichannel=True)`` became ``channel_axis=-1``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np


def load_reference() -> Callable[[np.ndarray, str, int], np.ndarray]:
    """``corrupt(image_uint8_hwc, name, severity) -> uint8 image`` of imagecorruptions."""
    if not hasattr(np, "float_"):
        np.float_ = np.float64  # type: ignore[attr-defined]
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import imagecorruptions.corruptions as reference
    import skimage.filters

    original = skimage.filters.gaussian

    def gaussian(*args, multichannel=None, **kwargs):  # type: ignore[no-untyped-def]
        if multichannel:
            kwargs["channel_axis"] = -1
        return original(*args, **kwargs)

    reference.gaussian = gaussian
    from imagecorruptions import corrupt

    def run(image: np.ndarray, name: str, severity: int) -> np.ndarray:
        return np.asarray(corrupt(image, corruption_name=name, severity=severity))

    return run
