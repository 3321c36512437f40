"""Weather and geometric corruptions against independent oracles.

Oracles are numpy ports of the reference code (diamond-square, ``_motion_blur``, scipy's
Gaussian filter and ``reflect`` extension), brute force (distance transform), torch.roll
and closed forms.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from pytest_segrobust.core.types import Field, Image
from pytest_segrobust.corruptions import REGISTRY, SeverityTable, kernels
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.functional.weather import FogParams, FrostParams, SnowParams
from pytest_segrobust.corruptions.functional.weather import _spatter as spatter_internals
from pytest_segrobust.corruptions.geometric import ElasticParams, ElasticTransform
from pytest_segrobust.randomness.seeding import SampleStreams
from pytest_segrobust.testing import corrupt_batch
from pytest_segrobust.testing.strategies import make_batch as _make
from tests.corruptions.reference import reference_motion_blur

CPU = torch.device("cpu")
IGNORE = 255


def rngs(*seeds: int) -> SampleStreams:
    return SampleStreams(list(seeds), CPU)


# --------------------------------------------------------------------------- plasma / fog


def reference_plasma(mapsize: int, wibbledecay: float, streams: SampleStreams) -> np.ndarray:
    """imagecorruptions' plasma_fractal, line for line, with its uniform draws taken from ``streams`` (one seed)."""
    maparray = np.empty((mapsize, mapsize), dtype=np.float64)
    maparray[0, 0] = 0
    stepsize = mapsize
    wibble = 100.0

    def uniform(low: float, high: float, shape: tuple[int, ...]) -> np.ndarray:
        u = streams.uniform(shape, dtype=torch.float64)[0].numpy()
        return u * (high - low) + low

    def wibbledmean(array: np.ndarray) -> np.ndarray:
        return array / 4 + wibble * uniform(-wibble, wibble, array.shape)

    def fillsquares() -> None:
        cornerref = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        squareaccum = cornerref + np.roll(cornerref, shift=-1, axis=0)
        squareaccum += np.roll(squareaccum, shift=-1, axis=1)
        maparray[stepsize // 2 : mapsize : stepsize, stepsize // 2 : mapsize : stepsize] = wibbledmean(squareaccum)

    def filldiamonds() -> None:
        drgrid = maparray[stepsize // 2 : mapsize : stepsize, stepsize // 2 : mapsize : stepsize]
        ulgrid = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        ltsum = drgrid + np.roll(drgrid, 1, axis=0) + ulgrid + np.roll(ulgrid, -1, axis=1)
        maparray[0:mapsize:stepsize, stepsize // 2 : mapsize : stepsize] = wibbledmean(ltsum)
        ttsum = drgrid + np.roll(drgrid, 1, axis=1) + ulgrid + np.roll(ulgrid, -1, axis=0)
        maparray[stepsize // 2 : mapsize : stepsize, 0:mapsize:stepsize] = wibbledmean(ttsum)

    while stepsize >= 2:
        fillsquares()
        filldiamonds()
        stepsize //= 2
        wibble /= wibbledecay
    maparray -= maparray.min()
    return maparray / maparray.max()


@pytest.mark.parametrize(("mapsize", "decay"), [(8, 2.0), (64, 1.4), (128, 1.7)])
def test_plasma_fractal_is_the_reference_diamond_square(mapsize: int, decay: float) -> None:
    ours = Fn.plasma_fractal(mapsize, decay, rngs(3, 4))
    assert ours.shape == (2, mapsize, mapsize) and ours.dtype == torch.float64
    for i, seed in enumerate((3, 4)):
        expected = reference_plasma(mapsize, decay, rngs(seed))
        np.testing.assert_allclose(ours[i].numpy(), expected, rtol=0, atol=1e-12)
        assert float(ours[i].min()) == 0.0 and float(ours[i].max()) == 1.0


def test_plasma_fractal_needs_a_power_of_two() -> None:
    with pytest.raises(ValueError, match="power of two"):
        Fn.plasma_fractal(48, 2.0, rngs(1))


def test_fog_is_the_closed_form_over_its_plasma() -> None:
    batch = _make(batch=2, height=20, width=36, classes=3, seed=1)
    out = Fn.fog(batch.images, FogParams(2.5, 1.7), rngs(5, 6))
    plasma = Fn.plasma_fractal(64, 1.7, rngs(5, 6))[:, None, :20, :36].float()
    peak = batch.images.amax(dim=(1, 2, 3), keepdim=True)
    expected = ((batch.images + 2.5 * plasma) * peak / (peak + 2.5)).clamp(0, 1)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)


def test_fog_compresses_the_contrast_of_the_scene() -> None:
    # The same fog over two scenes with the same maximum: their difference shrinks by
    # max / (max + strength) <= 1 / (1 + 1.5), whatever the plasma looks like.
    batch = _make(batch=4, height=64, width=64, classes=3, seed=2)
    mirrored = batch.images.flip(-1)
    fog = REGISTRY.get("fog")
    for severity in range(1, 6):
        out = fog(batch.images, severity, batch.seeds)
        out_mirrored = fog(mirrored, severity, batch.seeds)
        before = (batch.images - mirrored).abs().sum()
        assert float((out - out_mirrored).abs().sum()) <= 0.4 * float(before) + 1e-3


# --------------------------------------------------------------------------- snow


@pytest.mark.parametrize(("radius", "sigma", "angle", "shape"), [(10, 4, -100.0, (40, 56)), (12, 8, -45.0, (64, 33)), (12, 12, -134.0, (9, 9))])
def test_streak_blur_is_the_reference_motion_blur(radius: int, sigma: float, angle: float, shape: tuple[int, int]) -> None:
    field = np.random.default_rng(0).random(shape)
    ours = Fn.streak_blur(torch.from_numpy(field), radius, sigma, angle).numpy()
    np.testing.assert_allclose(ours, reference_motion_blur(field, radius, sigma, angle), rtol=0, atol=1e-12)


@pytest.mark.parametrize("zoom", [2, 2.5, 3, 4.5])
def test_clipped_zoom_matches_linear_interpolation_of_the_centre_crop(zoom: float) -> None:
    field = np.random.default_rng(1).random((30, 44))
    h, w = field.shape
    ch, cw = math.ceil(h / zoom), math.ceil(w / zoom)
    top, left = (h - ch) // 2, (w - cw) // 2
    crop = field[top : top + ch, left : left + cw]
    out_h, out_w = round(ch * zoom), round(cw * zoom)
    rows = np.stack([np.interp(np.arange(out_w) * (cw - 1) / (out_w - 1), np.arange(cw), r) for r in crop])
    expected = np.stack([np.interp(np.arange(out_h) * (ch - 1) / (out_h - 1), np.arange(ch), c) for c in rows.T]).T
    ours = Fn.clipped_zoom(torch.from_numpy(field), zoom).numpy()
    np.testing.assert_allclose(ours, expected[:h, :w], rtol=0, atol=1e-12)


def test_snow_brightens_and_adds_flakes_symmetrically() -> None:
    batch = _make(batch=3, height=48, width=64, classes=3, seed=3)
    snow = REGISTRY.get("snow")
    for severity in range(1, 6):
        out = snow(batch.images, severity, batch.seeds)
        assert bool((out.mean(dim=(1, 2, 3)) > batch.images.mean(dim=(1, 2, 3))).all())
        assert bool((out >= batch.images - 1e-6).all())  # whitening and flakes only ever add light


def test_snow_layer_is_quantised_and_in_range() -> None:
    params = SnowParams(0.55, 0.3, 2.5, 0.85, 12, 12, 0.55)
    layer = Fn.snow_layer(rngs(0), 40, 50, params)[0]
    assert 0 <= float(layer.min()) and float(layer.max()) <= 1
    assert torch.equal((layer * 255).round() / 255, layer)
    assert float(layer.max()) > 0


# --------------------------------------------------------------------------- frost


def test_frost_layer_looks_like_frost() -> None:
    layer = Fn.frost_layer(rngs(1, 2, 3), 96, 128)
    assert layer.shape == (3, 3, 96, 128)
    assert 0 <= float(layer.min()) and float(layer.max()) <= 1
    for sample in layer:
        # The darkest texture averages 0.44 and the brightest 0.80; a crop strays by up to ~0.1 from its texture's mean.
        assert 0.3 < float(sample.mean()) < 0.9
        assert float(torch.quantile(sample[2].flatten(), 0.99)) > 0.7  # bright crystal streaks
        assert float(sample[2].mean()) > float(sample[0].mean())  # cool, bluish white
    assert not torch.equal(layer[0], layer[1])


def test_frost_textures_have_the_photographs_statistics() -> None:
    from pytest_segrobust.corruptions.functional.weather import _frost

    bank = _frost._frost_bank(_frost._frost_side(160, 160), CPU).float() / 255
    assert len(bank) == len(_frost.FROST_LOOKS) == _frost.FROST_TEXTURES
    for texture, look in zip(bank, _frost.FROST_LOOKS):
        torch.testing.assert_close(texture.mean(dim=(1, 2)), torch.tensor(look.mean_rgb), rtol=0, atol=0.01)
        torch.testing.assert_close(texture.flatten(1).std(dim=1), torch.tensor(look.std_rgb), rtol=0.1, atol=0)
        brightness = texture.mean(0).flatten()
        median = float(brightness.median())
        assert abs(median - look.quantiles[4]) < 0.02
        # Fine detail as in the photographs: a good part of the variance above 1/10 cycle per pixel.
        spectrum = torch.fft.rfft2(texture.mean(0) - texture.mean()).abs() ** 2
        fy = torch.fft.fftfreq(texture.shape[-2])[:, None]
        fx = torch.fft.rfftfreq(texture.shape[-1])[None, :]
        fine = float(spectrum[(fy**2 + fx**2).sqrt() > 0.1].sum() / spectrum.sum())
        assert 0.2 < fine < 0.7


def test_frost_is_the_weighted_sum_of_image_and_layer() -> None:
    batch = _make(batch=2, height=24, width=30, classes=3, seed=4)
    out = Fn.frost(batch.images, FrostParams(0.65, 0.7), rngs(7, 8))
    expected = (0.65 * batch.images + 0.7 * Fn.frost_layer(rngs(7, 8), 24, 30)).clamp(0, 1)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)


# --------------------------------------------------------------------------- spatter


def scipy_gaussian_filter(field: np.ndarray, sigma: tuple[float, float], truncate: float, mode: str) -> np.ndarray:
    """scipy.ndimage.gaussian_filter, separable, with numpy's padding (scipy modes renamed)."""
    numpy_mode = {"nearest": "edge", "reflect": "symmetric", "mirror": "reflect"}[mode]
    out = field
    for axis, s in enumerate(sigma):
        radius = int(truncate * s + 0.5)
        if radius == 0:
            continue
        x = np.arange(-radius, radius + 1)
        kernel = np.exp(-0.5 * x**2 / s**2)
        kernel /= kernel.sum()
        widths = [(0, 0), (0, 0)]
        widths[axis] = (radius, radius)
        padded = np.pad(out, widths, mode=numpy_mode)
        out = np.apply_along_axis(lambda v, k=kernel: np.convolve(v, k[::-1], mode="valid"), axis, padded)
    return out


@pytest.mark.parametrize(("sigma", "truncate", "mode"), [((4, 4), 4.0, "nearest"), ((0.48, 0.64), 3.0, "reflect"), ((2, 1), 4.0, "mirror")])
def test_gaussian_filter_is_scipys(sigma: tuple[float, float], truncate: float, mode: str) -> None:
    field = np.random.default_rng(2).random((37, 51))
    ours = Fn.gaussian_filter(torch.from_numpy(field), sigma, Fn.Border(mode), truncate).numpy()
    np.testing.assert_allclose(ours, scipy_gaussian_filter(field, sigma, truncate, mode), rtol=0, atol=1e-12)


def test_chamfer_distance_approximates_the_euclidean_distance() -> None:
    # OpenCV's 5x5 chamfer mask stays within 2% of the Euclidean distance.
    edges = torch.rand(40, 50, generator=torch.Generator().manual_seed(0)) > 0.995
    ys, xs = np.nonzero(edges.numpy())
    gy, gx = np.mgrid[0:40, 0:50]
    brute = np.minimum(np.sqrt((gy[..., None] - ys) ** 2 + (gx[..., None] - xs) ** 2).min(axis=-1), 20)
    ours = spatter_internals.chamfer_distance(edges, cap=20).numpy()
    np.testing.assert_allclose(ours, brute, rtol=0.02, atol=1e-5)
    assert float(spatter_internals.chamfer_distance(torch.zeros(5, 5, dtype=torch.bool), cap=20).min()) == 20


def test_equalize_hist_spreads_levels_like_opencv() -> None:
    levels = torch.tensor([[3.0, 3.0, 7.0, 7.0], [7.0, 9.0, 9.0, 9.0]])
    # Lowest level -> 0; then round(255 * pixels in (3, v] / pixels above 3): 7 -> 3/6, 9 -> 6/6.
    expected = torch.tensor([[0.0, 0.0, 128.0, 128.0], [128.0, 255.0, 255.0, 255.0]])
    assert torch.equal(spatter_internals._equalize_hist(levels), expected)
    assert torch.equal(spatter_internals._equalize_hist(torch.full((3, 3), 5.0)), torch.full((3, 3), 5.0))


def test_spatter_water_adds_turquoise_and_mud_paints_brown() -> None:
    batch = _make(batch=2, height=64, width=64, classes=3, seed=5)
    spatter = REGISTRY.get("spatter", "imagenet-c")
    water = spatter(batch.images, 2, batch.seeds)
    added = water - batch.images
    assert bool((added >= 0).all()) and float(added.max()) > 0
    wet = added.sum(dim=1) > 0.05
    # Pale turquoise: more green and blue than red wherever water was added (before clipping).
    assert float(added[:, 1][wet].mean()) > float(added[:, 0][wet].mean())
    mud = spatter(batch.images, 5, batch.seeds)
    muddy = (mud - batch.images).abs().sum(dim=1) > 1e-6
    assert bool(muddy.any())
    brown = torch.tensor([63, 42, 20]) / 255
    # Mud opacity is at least 0.8 where present, so those pixels sit near the mud colour.
    distance = (mud.permute(0, 2, 3, 1)[muddy] - brown).abs().max(dim=-1).values
    assert float(distance.max()) <= 0.2 + 1e-6


# --------------------------------------------------------------------------- translate


def test_translate_is_a_roll_inside_the_frame_and_ignore_outside() -> None:
    batch = _make(batch=4, height=60, width=70, classes=4, seed=6)
    translate = REGISTRY.get("translate")
    out = corrupt_batch(translate, batch, 1)
    coords = translate.sampling_coordinates(translate.table[1], rngs(*batch.seeds), 60, 70, CPU)
    for i in range(4):
        dx, dy = int(-coords[i, 0, 0, 0]), int(-coords[i, 0, 0, 1])
        assert abs(dx) == 20 and abs(dy) == 20
        rows = torch.arange(60)[:, None] - dy
        cols = torch.arange(70)[None, :] - dx
        inside = (rows >= 0) & (rows < 60) & (cols >= 0) & (cols < 70)
        rolled_image = torch.roll(batch.images[i], shifts=(dy, dx), dims=(1, 2))
        rolled_mask = torch.roll(batch.masks[i], shifts=(dy, dx), dims=(0, 1))
        # 16 float32 ulps at 1: grid_sample's round trip
        torch.testing.assert_close(out.images[i][:, inside], rolled_image[:, inside], rtol=0, atol=2e-6)
        # Black outside, up to grid_sample's normalise/unnormalise round trip (~1e-7 of a neighbour).
        assert float(out.images[i][:, ~inside].abs().max()) < 1e-5
        assert torch.equal(out.masks[i][inside], rolled_mask[inside])
        assert bool((out.masks[i][~inside] == IGNORE).all())


def test_translate_draws_each_axis_sign_independently() -> None:
    translate = REGISTRY.get("translate")
    coords = translate.sampling_coordinates(translate.table[2], rngs(*range(64)), 8, 8, CPU)
    offsets = {(int(-c[0, 0, 0]), int(-c[0, 0, 1])) for c in coords}
    assert offsets == {(40, 40), (40, -40), (-40, 40), (-40, -40)}


def test_translate_beyond_the_image_leaves_black_and_ignore() -> None:
    batch = _make(batch=2, height=16, width=16, classes=3, seed=7)
    out = corrupt_batch(REGISTRY.get("translate"), batch, 1)
    assert float(out.images.abs().max()) < 1e-5 and bool((out.masks == IGNORE).all())


# --------------------------------------------------------------------------- shear


def test_shear_tilts_a_vertical_line_by_the_angle_about_the_centre_row() -> None:
    height, width, column = 41, 81, 40
    image = torch.zeros(1, 3, height, width)
    image[..., column] = 1.0
    shear = REGISTRY.get("shear")
    for severity in range(1, 6):
        degrees = shear.table[severity].degrees
        out = shear(image, severity, [severity])[0, 0]
        centroid = (out * torch.arange(width)).sum(dim=1) / out.sum(dim=1)
        rows = torch.arange(height, dtype=torch.float32) - (height - 1) / 2
        slope = float((centroid - column) @ rows / (rows @ rows))
        assert abs(abs(slope) - math.tan(math.radians(degrees))) < 1e-4
        assert abs(float(centroid[(height - 1) // 2]) - column) < 1e-4  # the centre row does not move


def test_shear_keeps_rows() -> None:
    coords = Fn.affine_coordinates(Fn.shear_x_about_centre(torch.tensor([15.0, -15.0], dtype=torch.float64), 9, 11), 9, 11)
    ys = torch.arange(9, dtype=torch.float64)[:, None].expand(9, 11)
    assert torch.equal(coords[0, ..., 1], ys) and torch.equal(coords[1, ..., 1], ys)
    expected_x = torch.arange(11, dtype=torch.float64) + math.tan(math.radians(15)) * (ys - 4)
    torch.testing.assert_close(coords[0, ..., 0], expected_x, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- elastic


def test_elastic_with_zero_alpha_is_the_identity() -> None:
    batch = _make(batch=2, height=32, width=40, classes=4, seed=8)
    still = ElasticTransform("elastic_still", REGISTRY.get("elastic_transform", "imagenet-c").category,
                             SeverityTable(tuple(ElasticParams(0.0) for _ in range(5))))
    out = corrupt_batch(still, batch, 3)
    torch.testing.assert_close(out.images, batch.images, rtol=0, atol=1e-6)
    assert torch.equal(out.masks, batch.masks)


def test_elastic_displacement_is_the_smoothed_uniform_field() -> None:
    height, width, alpha = 50, 70, 21.25
    coords = Fn.elastic_coordinates(rngs(9), height, width, alpha)
    raw = rngs(9).uniform((2, height, width))[0] * (2 * 0.005 * height) - 0.005 * height
    grid = np.stack(np.meshgrid(np.arange(width), np.arange(height)), axis=-1)
    for axis in range(2):
        expected = scipy_gaussian_filter(raw[axis].double().numpy(), (0.5, 0.7), 3.0, "reflect") * alpha
        np.testing.assert_allclose(coords[0, ..., axis].numpy() - grid[..., axis], expected, rtol=0, atol=1e-4)


def test_reflected_coordinates_sample_like_scipys_reflect_mode() -> None:
    rng = np.random.default_rng(3)
    image = rng.random((1, 1, 9, 12))
    coords = np.stack([rng.uniform(-6, 17, (9, 12)), rng.uniform(-6, 14, (9, 12))], axis=-1)
    # Oracle: extend by half-sample mirroring (numpy "symmetric"), then interpolate bilinearly.
    pad = 20
    padded = np.pad(image[0, 0], pad, mode="symmetric")
    x, y = coords[..., 0] + pad, coords[..., 1] + pad
    x0, y0 = np.floor(x).astype(int), np.floor(y).astype(int)
    fx, fy = x - x0, y - y0
    expected = (
        padded[y0, x0] * (1 - fx) * (1 - fy) + padded[y0, x0 + 1] * fx * (1 - fy)
        + padded[y0 + 1, x0] * (1 - fx) * fy + padded[y0 + 1, x0 + 1] * fx * fy
    )
    folded = Fn.reflect_coordinates(torch.from_numpy(coords)[None], 9, 12)
    assert float(folded[..., 0].min()) >= 0 and float(folded[..., 0].max()) <= 11
    assert float(folded[..., 1].min()) >= 0 and float(folded[..., 1].max()) <= 8
    ours = Fn.sample_bilinear(torch.from_numpy(image), folded)[0, 0].numpy()
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-6)


def test_elastic_never_ignores_labels() -> None:
    batch = _make(batch=3, height=24, width=24, classes=4, seed=10)
    elastic = REGISTRY.get("elastic_transform", "imagenet-c")
    for severity in range(1, 6):
        out = corrupt_batch(elastic, batch, severity)
        assert not bool((out.masks == IGNORE).any())
        assert not torch.equal(out.masks, batch.masks) or severity == 1


# --------------------------------------------------------------------------- barrel distortion


def test_barrel_distortion_fixes_the_centre_and_pulls_in_the_corners() -> None:
    distortion = REGISTRY.get("geometric_distortion", "cityscapes-c")
    height, width = 33, 49
    previous = None
    for severity in range(1, 6):
        coords = distortion.sampling_coordinates(distortion.table[severity], rngs(0), height, width, CPU)[0].double()
        centre = torch.tensor([(width - 1) / 2, (height - 1) / 2], dtype=torch.float64)
        assert torch.equal(coords[16, 24], centre)
        radius_out = (Fn.pixel_grid(height, width) - centre).norm(dim=-1)
        radius_src = (coords - centre).norm(dim=-1)
        assert bool((radius_src[radius_out > 0] > radius_out[radius_out > 0]).all())  # barrel: reads farther out
        params = distortion.table[severity]
        np.testing.assert_allclose(float(radius_src[0, 0] / radius_out[0, 0]), 1 + params.k1 + params.k2, rtol=1e-6)
        if previous is not None:
            assert bool((radius_src >= previous - 1e-5).all())  # stronger with severity
        previous = radius_src

    batch = _make(batch=1, height=height, width=width, classes=3, seed=11)
    out = corrupt_batch(distortion, batch, 3)
    for y, x in ((0, 0), (0, width - 1), (height - 1, 0), (height - 1, width - 1)):
        assert int(out.masks[0, y, x]) == IGNORE and bool((out.images[0, :, y, x] == 0).all())
    assert int(out.masks[0, 16, 24]) == int(batch.masks[0, 16, 24])


def test_barrel_distortion_field_is_computed_once_and_never_shared() -> None:
    distortion = REGISTRY.get("geometric_distortion", "cityscapes-c")
    params = distortion.table[4]
    expected = Fn.radial_distortion_coordinates(params.k1, params.k2, 21, 34, CPU).to(torch.float32)
    first = distortion.sampling_coordinates(params, SampleStreams([1, 2], CPU), 21, 34, CPU)
    assert first.shape == (2, 21, 34, 2) and torch.equal(first[0], expected) and torch.equal(first[1], expected)
    first.zero_()  # a warp kernel that writes into its coordinates must not change the next call's
    again = distortion.sampling_coordinates(params, SampleStreams([1], CPU), 21, 34, CPU)
    assert torch.equal(again[0], expected)
    other = distortion.sampling_coordinates(distortion.table[5], SampleStreams([1], CPU), 21, 34, CPU)
    assert not torch.equal(other[0], expected)  # the severity is part of the key


def test_barrel_distortion_warps_through_its_kept_field_and_refuses_a_kernel_that_writes_into_it() -> None:
    distortion = REGISTRY.get("geometric_distortion", "cityscapes-c")
    params = distortion.table[3]
    shared = [distortion.warp_coordinates(params, SampleStreams([s], CPU), 21, 34, CPU) for s in (1, 2)]
    assert shared[0].data_ptr() == shared[1].data_ptr()  # no copy per batch
    copy = distortion.sampling_coordinates(params, SampleStreams([1], CPU), 21, 34, CPU)
    assert copy.data_ptr() != shared[0].data_ptr() and torch.equal(copy, shared[0])

    images = torch.rand(1, 3, 21, 34, generator=torch.Generator().manual_seed(0))
    expected = distortion(images, 3, [5])
    batch = {"image": Image(images), "scribble": _Scribble(1)}
    with pytest.raises(RuntimeError, match="geometric_distortion: a warp kernel wrote into the sampling coordinates"):
        distortion(batch, 3, [5])
    # The field written into is made anew: later batches warp as before.
    assert torch.equal(distortion(images, 3, [5]), expected)


@dataclasses.dataclass(frozen=True)
class _Scribble(Field):
    """A field whose warp kernel (below) writes into the coordinates it is given, as no kernel may."""

    count: int

    def batch_size(self) -> int:
        return self.count

    def size(self) -> None:
        return None


@kernels.warp.register
def _(field: _Scribble, coords: torch.Tensor) -> _Scribble:
    coords.add_(1.0)
    return field
