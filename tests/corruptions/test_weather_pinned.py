"""Weather corruptions pinned bit for bit to their plain formulations.

The weather layers were restructured for speed (crops before arithmetic, in-place steps,
cached resampling matrices, OpenCV where it computes the same integers). Each formulation
below is the straightforward one, every step a fresh tensor rounded as written, as the
corruptions computed it before; the corruptions must still give exactly its bits, so that
baselines recorded before the restructuring stay valid.
"""

from __future__ import annotations

import math

import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.functional.color import luma
from pytest_segrobust.corruptions.functional.padding import Border
from pytest_segrobust.corruptions.functional.weather import SnowParams, SpatterParams, _spatter
from pytest_segrobust.corruptions.functional.weather._threshold import zero_below
from pytest_segrobust.randomness.seeding import SampleStreams
from pytest_segrobust.testing.strategies import make_batch

SHAPES = [(2, 3, 48, 64), (1, 3, 61, 37), (2, 1, 40, 40)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("threshold", [0.9, 0.85, 0.68, 1 / 3, 0.0])
def test_zero_below_is_the_where_cut_at_the_thresholds_neighbours(dtype: torch.dtype, threshold: float) -> None:
    cut = torch.tensor(threshold, dtype=dtype)
    below, above = (torch.nextafter(cut, cut.new_tensor(bound)) for bound in (-math.inf, math.inf))
    field = torch.cat([torch.stack([below, cut, above]), torch.linspace(-0.5, 1.5, 101, dtype=dtype)])
    expected = torch.where(field < threshold, torch.zeros_like(field), field)
    assert torch.equal(zero_below(field.clone(), threshold), expected)


def plain_snow(images: torch.Tensor, params: SnowParams, seeds: list[int]) -> torch.Tensor:
    """Snow as first written: zoom of the whole affine field, fresh tensors at every step."""
    streams = SampleStreams(seeds, images.device)
    height, width = images.shape[-2:]
    p = params
    noise = streams.normal((height, width))
    angles = (streams.uniform((1,), dtype=torch.float64)[:, 0] * 90 - 135).tolist()
    layers = []
    for sample_noise, angle in zip(noise, angles):
        flakes = Fn.clipped_zoom(sample_noise * p.scale + p.loc, p.zoom, trim=False)
        flakes = torch.where(flakes < p.threshold, torch.zeros_like(flakes), flakes).clamp(0.0, 1.0)
        streaks = Fn.streak_blur(flakes, p.motion_radius, p.motion_sigma, angle)[:height, :width]
        layers.append((streaks * 255).round() / 255)
    layer = torch.stack(layers)[:, None].to(images.dtype)
    gray = luma(images) if images.shape[1] == 3 else images
    whitened = p.blend * images + (1 - p.blend) * torch.maximum(images, gray * 1.5 + 0.5)
    return (whitened + layer + layer.flip(-2, -1)).clamp_(0.0, 1.0)


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_snow_is_bitwise_its_plain_formulation(severity: int, shape: tuple[int, int, int, int]) -> None:
    snow = REGISTRY.get("snow", "imagenet-c")
    batch, channels, height, width = shape
    images = make_batch(batch=batch, height=height, width=width, classes=3, seed=severity).images[:, :channels]
    seeds = [severity * 1000 + k for k in range(batch)]
    assert torch.equal(snow(images, severity, seeds), plain_snow(images, snow.table[severity], seeds))


def plain_water_shading(wet: torch.Tensor, backend: str) -> torch.Tensor:
    """The water relief as first written: every step after the distance transform in torch."""
    if backend == "opencv":
        cv2 = pytest.importorskip("cv2")
        edges = 255 - cv2.Canny(wet.to(torch.uint8).numpy(), 50, 150)
        distance = torch.from_numpy(cv2.distanceTransform(edges, cv2.DIST_L2, 5)).clamp_(max=20)
    else:
        distance = _spatter.chamfer_distance(_spatter.canny_edges(wet), 20)
    distance = _spatter._box3(distance).floor()
    equalised = _spatter._equalize_hist(distance)
    embossed = Fn.shift_sum(equalised, _spatter._EMBOSS, Border.MIRROR, fused=True).round().clamp(0, 255)
    return _spatter._box3(embossed)


def plain_spatter(images: torch.Tensor, params: SpatterParams, seeds: list[int], backend: str) -> torch.Tensor:
    """Spatter as first written, fresh tensors at every step."""
    p = params
    opacities = []
    for noise in SampleStreams(seeds, images.device).normal(images.shape[-2:]):
        layer = Fn.gaussian_filter(noise * p.scale + p.loc, p.sigma, Border.NEAREST)
        layer = torch.where(layer < p.threshold, torch.zeros_like(layer), layer)
        if p.liquid == "water":
            wet = (layer * 255).floor().clamp(0, 255)
            opacity = wet * plain_water_shading(wet, backend)
            peak = opacity.max()
            opacities.append(opacity / peak * p.intensity if peak > 0 else opacity)
        else:
            mask = Fn.gaussian_filter((layer > p.threshold).float(), p.intensity, Border.NEAREST)
            opacities.append(torch.where(mask < 0.8, torch.zeros_like(mask), mask))
    opacity = torch.stack(opacities)[:, None].to(images.dtype)
    rgb = (175, 238, 238) if p.liquid == "water" else (63, 42, 20)
    colour = torch.tensor(rgb, dtype=images.dtype).view(1, 3, 1, 1) / 255
    if images.shape[1] != 3:
        colour = luma(colour)
    if p.liquid == "water":
        return (images + opacity * colour).clamp_(0.0, 1.0)
    return (images * (1 - opacity) + opacity * colour).clamp_(0.0, 1.0)


@pytest.mark.parametrize("backend", ["opencv", "torch"])
@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_spatter_is_bitwise_its_plain_formulation(
    monkeypatch: pytest.MonkeyPatch, backend: str, severity: int, shape: tuple[int, int, int, int]
) -> None:
    spatter = REGISTRY.get("spatter", "imagenet-c")
    batch, channels, height, width = shape
    images = make_batch(batch=batch, height=height, width=width, classes=3, seed=severity).images[:, :channels]
    seeds = [severity * 1000 + k for k in range(batch)]
    expected = plain_spatter(images, spatter.table[severity], seeds, backend)
    if backend == "torch":
        monkeypatch.setattr(_spatter, "_opencv", lambda: None)
    assert torch.equal(spatter(images, severity, seeds), expected)
