"""Image corruptions: batched, device-agnostic, deterministic per sample.

Layer 2 (a perturbation family, like :mod:`pytest_segrobust.text`): imports the layers below.
"""

from pytest_segrobust.core.modality import Category, Modality
from pytest_segrobust.corruptions.base import (
    Corruption,
    GeometricCorruption,
    PhotometricCorruption,
    SeverityTable,
)
from pytest_segrobust.corruptions.registry import DEFAULT_PRESET, PRESETS, REGISTRY, CorruptionRegistry, Preset

__all__ = [
    "DEFAULT_PRESET",
    "PRESETS",
    "REGISTRY",
    "Category",
    "Corruption",
    "CorruptionRegistry",
    "GeometricCorruption",
    "Modality",
    "PhotometricCorruption",
    "Preset",
    "SeverityTable",
]
