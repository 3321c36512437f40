"""Semantics taken over from the reference implementation: glass blur's chained copies
(colour) and swaps (grey), spatter's Canny/distance operators on both backends, snow's trim
order, legacy shear."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.base import Category
from pytest_segrobust.corruptions.functional.blur import chained_copy_sources, chained_swap_sources
from pytest_segrobust.corruptions.functional.weather import SnowParams, _spatter
from pytest_segrobust.corruptions.functional.weather._snow import clipped_zoom
from pytest_segrobust.corruptions.geometric import SHEAR, Shear, shear, shear_legacy
from pytest_segrobust.corruptions.weather import SPATTER
from pytest_segrobust.randomness.seeding import SampleStreams
from pytest_segrobust.testing import corrupt_batch
from pytest_segrobust.testing.strategies import make_batch

# --------------------------------------------------------------------------- glass blur


def sequential_exchanges(dy: list[list[int]], dx: list[list[int]], h: int, w: int, delta: int, swap: bool) -> list[int]:
    """The reference's loop, written out: which original pixel ends where (row-major).

    ``x[h, w], x[h', w'] = x[h', w'], x[h, w]`` swaps scalars (a grey image), but on the
    ``(3,)`` pixel views of a colour image it copies ``x[h', w']`` over ``x[h, w]`` and then
    writes that copy back: ``x[h', w']`` stays as it was.
    """
    content = list(range(h * w))
    for row in range(h - delta, delta, -1):
        for col in range(w - delta, delta, -1):
            here, there = row * w + col, (row + dy[row][col]) * w + (col + dx[row][col])
            if swap:
                content[here], content[there] = content[there], content[here]
            else:
                content[here] = content[there]
    return content


def test_the_reference_tuple_swap_copies_colour_pixels() -> None:
    np = pytest.importorskip("numpy")
    colour = np.arange(12).reshape(2, 2, 3)
    colour[0, 0], colour[1, 1] = colour[1, 1], colour[0, 0]
    assert colour[0, 0].tolist() == colour[1, 1].tolist() == [9, 10, 11]
    grey = np.arange(4).reshape(2, 2)
    grey[0, 0], grey[1, 1] = grey[1, 1], grey[0, 0]
    assert grey.tolist() == [[3, 1], [2, 0]]


@pytest.mark.parametrize("swap", [False, True], ids=["copies", "swaps"])
@pytest.mark.parametrize("delta", [1, 2, 3, 4])
@pytest.mark.parametrize("size", [(12, 15), (23, 19)])
def test_chained_exchanges_match_the_sequential_loop_exactly(swap: bool, delta: int, size: tuple[int, int]) -> None:
    h, w = size
    offsets = torch.randint(-delta, delta, (3, 2, h, w), generator=torch.Generator().manual_seed(delta * 100 + h))
    ours = (chained_swap_sources if swap else chained_copy_sources)(offsets, delta)
    for i in range(3):
        expected = sequential_exchanges(offsets[i, 0].tolist(), offsets[i, 1].tolist(), h, w, delta, swap)
        assert ours[i].tolist() == expected


@pytest.mark.parametrize("channels", [1, 3])
def test_glass_blur_moves_pixels_as_the_reference_loop_does(channels: int) -> None:
    # sigma 0 blurs nothing, so the output is the quantised image after the exchanges.
    h, w, delta = 14, 17, 2
    images = (torch.arange(h * w, dtype=torch.float64) % 251 / 255).view(1, 1, h, w).expand(1, channels, h, w)
    out = Fn.glass_blur(images.float(), 0.0, delta, 2, SampleStreams([9], "cpu"))
    replay = SampleStreams([9], "cpu")
    content = list(range(h * w))
    for _ in range(2):
        codes = replay.integers(0, 16, (h, w))[0]
        dy, dx = (codes // 4 - delta).tolist(), (codes % 4 - delta).tolist()
        moved = sequential_exchanges(dy, dx, h, w, delta, swap=channels == 1)
        content = [content[k] for k in moved]
    expected = images.flatten(2)[:, :, torch.tensor(content)].view(1, channels, h, w).float()
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)


def test_chained_swaps_carry_pixels_further_than_one_offset() -> None:
    # With max_delta 1 every swap reaches ahead of the cursor: a pixel can ride it far.
    h = w = 64
    offsets = torch.randint(-1, 1, (1, 2, h, w), generator=torch.Generator().manual_seed(5))
    sources = chained_swap_sources(offsets, 1)[0]
    rows, cols = sources // w, sources % w
    here = torch.arange(h * w)
    travel = torch.maximum((rows - here // w).abs(), (cols - here % w).abs())
    assert int(travel.max()) > 3


def mean_travel(delta: int, iterations: int, size: int = 160, seeds: int = 2) -> float:
    # Mean distance from each pixel to where its colour came from, after the passes of one
    # severity (colour images: chained copies).
    total = 0.0
    for seed in range(seeds):
        g = torch.Generator().manual_seed(seed)
        position = torch.arange(size * size)
        for _ in range(iterations):
            offsets = torch.randint(-delta, delta, (1, 2, size, size), generator=g)
            position = position[chained_copy_sources(offsets, delta)[0]]
        here = torch.arange(size * size)
        dy, dx = (position // size - here // size).double(), (position % size - here % size).double()
        total += float((dy**2 + dx**2).sqrt().mean())
    return total / seeds


def test_glass_blur_displacement_grows_with_severity() -> None:
    # Severity 2 (one pass, max_delta 2) carries colours only a little further than
    # severity 1 (two passes, max_delta 1), thanks to the chains: one local offset per pass
    # instead travels less at severity 2 than at 1.
    table = REGISTRY.get("glass_blur", "imagenet-c").table
    travel = [mean_travel(table[s].max_delta, table[s].iterations) for s in range(1, 6)]
    assert all(a < b for a, b in itertools.pairwise(travel)), travel


# --------------------------------------------------------------------------- spatter


def liquid_layer(seed: int, sigma: float, threshold: float, size: tuple[int, int] = (96, 120)) -> torch.Tensor:
    layer = torch.randn(size, generator=torch.Generator().manual_seed(seed)) * 0.3 + 0.65
    layer = Fn.gaussian_filter(layer, sigma, Fn.Border.NEAREST)
    layer = torch.where(layer < threshold, torch.zeros_like(layer), layer)
    return (layer * 255).floor().clamp(0, 255)


@pytest.mark.parametrize("severity", [1, 2, 3])
def test_water_shading_agrees_between_opencv_and_torch(severity: int) -> None:
    pytest.importorskip("cv2")
    params = SPATTER[severity]
    for seed in range(3):
        wet = liquid_layer(seed, params.sigma, params.threshold)
        opencv, twin = _spatter.water_shading(wet, "opencv"), _spatter.water_shading(wet, "torch")
        assert float((opencv - twin).abs().max()) <= 0.5


def test_canny_and_distance_twins_match_opencv() -> None:
    cv2 = pytest.importorskip("cv2")
    import numpy as np

    wet = liquid_layer(7, 3, 0.68)
    host = wet.to(torch.uint8).numpy()
    edges = cv2.Canny(host, 50, 150) > 0
    assert torch.equal(_spatter.canny_edges(wet), torch.from_numpy(edges))
    expected = np.minimum(cv2.distanceTransform(255 - cv2.Canny(host, 50, 150), cv2.DIST_L2, 5), 20)
    ours = _spatter.chamfer_distance(torch.from_numpy(edges), 20)
    torch.testing.assert_close(ours, torch.from_numpy(expected), rtol=0, atol=1e-5)


def test_chamfer_distance_uses_opencvs_5x5_weights() -> None:
    edges = torch.zeros(9, 9, dtype=torch.bool)
    edges[4, 4] = True
    distance = _spatter.chamfer_distance(edges, 20)
    assert float(distance[4, 5]) == 1.0
    assert abs(float(distance[5, 5]) - 1.4) < 1e-6
    assert abs(float(distance[5, 6]) - 2.1969) < 1e-6
    assert abs(float(distance[6, 6]) - 2.8) < 1e-6


def test_spatter_backends_agree_on_the_whole_corruption(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("cv2")
    images = torch.rand(2, 3, 64, 80, generator=torch.Generator().manual_seed(3))
    spatter = REGISTRY.get("spatter", "imagenet-c")
    with_opencv = spatter(images, 2, [11, 12])
    monkeypatch.setattr(_spatter, "_opencv", lambda: None)
    with_torch = spatter(images, 2, [11, 12])
    assert float((with_opencv - with_torch).abs().max()) <= 1 / 255


# --------------------------------------------------------------------------- snow


@pytest.mark.parametrize("seed", [4, 5])
def test_snow_blurs_the_untrimmed_zoomed_layer_and_trims_afterwards(seed: int) -> None:
    params = SnowParams(0.2, 0.3, 3, 0.5, 12, 4, 0.7)
    h, w = 61, 83
    layer = Fn.snow_layer(SampleStreams([seed], "cpu"), h, w, params)[0]
    # Replay the same draws in the reference's order.
    replay = SampleStreams([seed], "cpu")
    flakes = replay.normal((h, w))[0] * params.scale + params.loc
    zoomed = clipped_zoom(flakes, params.zoom, trim=False)
    assert zoomed.shape == (63, 84)  # round(ceil(61 / 3) * 3), round(ceil(83 / 3) * 3)
    zoomed = torch.where(zoomed < params.threshold, torch.zeros_like(zoomed), zoomed).clamp(0, 1)
    angle = float(replay.uniform((1,), dtype=torch.float64)[0, 0]) * 90 - 135
    expected = Fn.streak_blur(zoomed, params.motion_radius, params.motion_sigma, angle)[:h, :w]
    torch.testing.assert_close(layer, (expected * 255).round() / 255, rtol=0, atol=0)
    # Streaks between -90 and -45 degrees read to the right, into the overhanging columns:
    # there, trimming first (edge replication at the image's border) gives other streaks.
    trimmed_first = Fn.streak_blur(zoomed[:h, :w], params.motion_radius, params.motion_sigma, angle)
    assert torch.equal(layer, (trimmed_first * 255).round() / 255) == (angle < -90)


def test_clipped_zoom_untrimmed_starts_with_the_trimmed() -> None:
    field = torch.rand(30, 37, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    full = clipped_zoom(field, 4.5, trim=False)
    assert full.shape[0] >= 30 and full.shape[1] >= 37
    torch.testing.assert_close(full[:30, :37], clipped_zoom(field, 4.5), rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- shear


def test_legacy_shear_squeezes_rows_by_cos_and_shifts_by_sin() -> None:
    h, w = 41, 61
    angle = torch.tensor([20.0], dtype=torch.float64)
    source = Fn.affine_coordinates(Fn.shear_x_about_centre(angle, h, w, squeeze_rows=True), h, w)[0]
    cy, a = (h - 1) / 2, math.radians(20)
    # The forward map: x' = x - sin(a) (y - cy), y' = cy + cos(a) (y - cy); the source of
    # each output pixel maps forward onto it.
    x, y = source[..., 0], source[..., 1]
    forward_x, forward_y = x - math.sin(a) * (y - cy), cy + math.cos(a) * (y - cy)
    grid = Fn.pixel_grid(h, w)
    torch.testing.assert_close(torch.stack([forward_x, forward_y], -1), grid, rtol=0, atol=1e-9)
    plain = Fn.affine_coordinates(Fn.shear_x_about_centre(angle, h, w), h, w)[0]
    assert torch.equal(plain[..., 1], grid[..., 1])  # the default keeps rows


def test_legacy_shear_is_a_registered_variant_with_the_same_table() -> None:
    assert shear_legacy.name == shear.name and shear_legacy.table is SHEAR
    assert shear_legacy.convention == "legacy" and shear.convention == "tan"
    with pytest.raises(ValueError, match="convention"):
        Shear("shear", Category.DIGITAL, SHEAR, convention="tanh")  # type: ignore[arg-type]


@pytest.mark.parametrize("corruption", [shear, shear_legacy], ids=["tan", "legacy"])
def test_shear_moves_masks_with_the_image(corruption: Shear) -> None:
    # A picture whose colour is its class: after the warp, every labelled pixel's colour
    # must still say its label (nearest-neighbour labels, bilinear image, away from edges).
    h, w, classes = 48, 64, 4
    stripes = (torch.arange(w) // 16).expand(h, w)  # vertical stripes, 16 px wide
    labels = stripes[None].clone()
    images = (stripes.double() / (classes - 1)).expand(1, 3, h, w).float().contiguous()
    batch = make_batch(1, h, w, classes, seed=0)
    out = corrupt_batch(corruption, batch, 5, images=images, masks=labels, seeds=[3])
    warped, moved = out.images[0, 0], out.masks[0]
    colour_class = (warped * (classes - 1)).round().long()
    valid = moved != 255
    interior = valid & (warped * (classes - 1) - colour_class).abs().lt(0.01)
    assert int(interior.sum()) > h * w // 2
    assert torch.equal(colour_class[interior], moved[interior])
    if corruption is shear_legacy:
        assert not bool(valid[0].any()) and not bool(valid[-1].any())  # squeezed rows leave bands
