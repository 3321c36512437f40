"""Weather: fog, frost, snow and spatter layers, after ImageNet-C (imagecorruptions 1.1.2).

One module per effect, each with the params it takes. Each layer is drawn per sample from
that sample's Philox stream and built from that sample alone (one small loop over the batch,
never over pixels; frost crops a cached bank of fixed textures), so a sample's layer is
bitwise the same whatever batch it travels in. The image is then blended with its layer
elementwise. The filters the layers use live in :mod:`~pytest_segrobust.corruptions.functional.filters`.
"""

from pytest_segrobust.corruptions.functional.blur import streak_blur
from pytest_segrobust.corruptions.functional.filters import gaussian_filter
from pytest_segrobust.corruptions.functional.weather._fog import FogParams, fog, next_power_of_two, plasma_fractal
from pytest_segrobust.corruptions.functional.weather._frost import FROST_TEXTURES, FrostParams, frost, frost_layer
from pytest_segrobust.corruptions.functional.weather._snow import SnowParams, clipped_zoom, snow, snow_layer
from pytest_segrobust.corruptions.functional.weather._spatter import (
    SpatterParams,
    spatter,
    spatter_layer,
    water_shading,
)

__all__ = [
    "FROST_TEXTURES",
    "FogParams",
    "FrostParams",
    "SnowParams",
    "SpatterParams",
    "clipped_zoom",
    "fog",
    "frost",
    "frost_layer",
    "gaussian_filter",
    "next_power_of_two",
    "plasma_fractal",
    "snow",
    "snow_layer",
    "spatter",
    "spatter_layer",
    "streak_blur",
    "water_shading",
]
