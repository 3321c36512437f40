"""Spatter: ImageNet-C's water drops (with a shaded relief) or mud splashes on the lens."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from pytest_segrobust.core.opencv import opencv as _opencv
from pytest_segrobust.corruptions.functional.color import luma
from pytest_segrobust.corruptions.functional.filters import gaussian_filter, kernel_taps, shift_sum
from pytest_segrobust.corruptions.functional.padding import Border
from pytest_segrobust.corruptions.functional.weather._threshold import zero_below
from pytest_segrobust.randomness.seeding import SampleStreams


@dataclass(frozen=True)
class SpatterParams:
    """Liquid field ``N(loc, scale)`` blurred by ``sigma`` and cut at ``threshold``.

    ``intensity`` is the peak opacity for water and the mask blur sigma for mud.
    """

    loc: float
    scale: float
    sigma: float
    threshold: float
    intensity: float
    liquid: Literal["water", "mud"]


# Spatter colours, 8-bit RGB. The reference's water colour is written as BGR (175, 238, 238)
# but added to an RGB image without swapping channels, so red gets 175 and green/blue 238:
# pale turquoise (#AFEEEE) in RGB. We add exactly that. Mud is added in RGB order as written.
_WATER_RGB = (175, 238, 238)
_MUD_RGB = (63, 42, 20)

# OpenCV's 3x3 kernels of the water relief, applied by filter2D/blur under their default
# border (Border.MIRROR); the fused sums are the ones the baselines were computed with.
_BOX3 = kernel_taps(torch.ones(3, 3, dtype=torch.float64))
_EMBOSS_KERNEL = np.array(((-2.0, -1.0, 0.0), (-1.0, 1.0, 1.0), (0.0, 1.0, 2.0)), dtype=np.float32)
_EMBOSS = kernel_taps(torch.from_numpy(_EMBOSS_KERNEL).double())


def _box3(field: torch.Tensor) -> torch.Tensor:
    # OpenCV's blur(ksize=(3, 3)): the sum first, then one scaling, so flat areas stay exact.
    return shift_sum(field, _BOX3, Border.MIRROR, fused=True) * (1 / 9)


_CANNY_LOW, _CANNY_HIGH = 50, 150
"""The reference's Canny thresholds on the 8-bit liquid layer."""

_DISTANCE_CAP = 20
"""The reference truncates the distance to the nearest edge at 20 pixels."""

# OpenCV's 5x5 chamfer mask for DIST_L2: weights 1 (edge neighbours), 1.4 (corners) and
# 2.1969 (knight moves), summed in float32 as OpenCV does.
_CHAMFER_STEPS = (
    [(dy, dx, 1.0) for dy, dx in ((0, 1), (0, -1), (1, 0), (-1, 0))]
    + [(dy, dx, 1.4) for dy in (1, -1) for dx in (1, -1)]
    + [(dy, dx, 2.1969) for a, b in ((1, 2), (2, 1)) for dy in (a, -a) for dx in (b, -b)]
)


def canny_edges(levels: torch.Tensor) -> torch.Tensor:
    """OpenCV's ``Canny(levels, 50, 150)`` (3x3 Sobel, L1 gradient) in torch.

    Sobel gradients with the edge pixel replicated; non-maximum suppression along the
    gradient direction quantised to 0, 45, 90 or 135 degrees with OpenCV's tie rules
    (strictly greater than the neighbour behind, at least the one ahead; strictly greater
    than both on diagonals) and magnitude 0 beyond the frame; then hysteresis: candidates
    above 50 joined (8-connected) to one above 150.

    Shape:
        levels: ``(H, W)`` 8-bit levels as float; return: ``(H, W)`` bool.
    """
    # The gradients are integers below 2^11: float32 holds them exactly.
    image = levels.to(torch.float32)[None, None]
    padded = F.pad(image, (1, 1, 1, 1), mode="replicate")[0, 0]
    h, w = levels.shape

    def at(dy: int, dx: int) -> torch.Tensor:
        return padded[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]

    gx = (at(-1, 1) + 2 * at(0, 1) + at(1, 1)) - (at(-1, -1) + 2 * at(0, -1) + at(1, -1))
    gy = (at(1, -1) + 2 * at(1, 0) + at(1, 1)) - (at(-1, -1) + 2 * at(-1, 0) + at(-1, 1))
    magnitude = gx.abs() + gy.abs()
    around = F.pad(magnitude[None, None], (1, 1, 1, 1))[0, 0]

    def near(dy: int, dx: int) -> torch.Tensor:
        return around[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]

    # OpenCV compares |gy| * 2^15 with |gx| * round(tan(22.5 deg) * 2^15), in integers
    # (under 2^32 here, so float64 keeps them exact).
    ax, ay = gx.abs().double(), gy.abs().double() * 32768
    tan22 = ax * 13573
    tan67 = tan22 + ax * 65536
    horizontal = ay < tan22
    vertical = ~horizontal & (ay > tan67)
    sign = torch.where((gx < 0) != (gy < 0), -1, 1)
    peak = torch.where(
        horizontal,
        (magnitude > near(0, -1)) & (magnitude >= near(0, 1)),
        torch.where(
            vertical,
            (magnitude > near(-1, 0)) & (magnitude >= near(1, 0)),
            (magnitude > torch.where(sign < 0, near(-1, 1), near(-1, -1)))
            & (magnitude > torch.where(sign < 0, near(1, -1), near(1, 1))),
        ),
    )
    candidate = peak & (magnitude > _CANNY_LOW)
    edges = candidate & (magnitude > _CANNY_HIGH)
    while True:
        grown = candidate & _dilate(edges)
        if torch.equal(grown, edges):
            return edges
        edges = grown


def _dilate(mask: torch.Tensor) -> torch.Tensor:
    # 3x3 dilation of a boolean map: the OR of its nine shifts (outside the frame is False).
    padded = F.pad(mask[None, None].to(torch.uint8), (1, 1, 1, 1))[0, 0]
    rows = padded[:, :-2] | padded[:, 1:-1] | padded[:, 2:]
    return (rows[:-2] | rows[1:-1] | rows[2:]).bool()


def chamfer_distance(edges: torch.Tensor, cap: int) -> torch.Tensor:
    """OpenCV's ``distanceTransform(DIST_L2, 5)`` to the nearest edge pixel, truncated at ``cap``.

    The 5x5 chamfer distance is the cheapest path to an edge through steps of the mask;
    ``cap + 1`` rounds of relaxing every pixel over its 16 steps settle every distance up
    to ``cap`` (each step costs at least 1), and larger ones only need to stay above it.
    Sums are float32 like OpenCV's; paths may add up in another order than its two raster
    sweeps, so a distance can differ from OpenCV's in the last bit.

    Shape:
        edges: ``(H, W)`` bool; return: ``(H, W)`` float32 in ``[0, cap]``.
    """
    far = float(cap + 3)
    costs = torch.where(edges, 0.0, far).to(torch.float32)
    h, w = edges.shape
    for _ in range(cap + 1):
        padded = F.pad(costs, (2, 2, 2, 2), value=far)
        relaxed = costs
        for dy, dx, weight in _CHAMFER_STEPS:
            relaxed = torch.minimum(relaxed, padded[2 + dy : 2 + dy + h, 2 + dx : 2 + dx + w] + weight)
        if torch.equal(relaxed, costs):
            break
        costs = relaxed
    return costs.clamp_(max=cap)


def _opencv_for_shading(levels: torch.Tensor, backend: str) -> ModuleType | None:
    # ``cv2`` where the water relief runs on OpenCV: on the CPU, installed, not forced off.
    cv2 = _opencv() if backend != "torch" else None
    if backend == "opencv" and cv2 is None:
        raise RuntimeError("water_shading(backend='opencv') needs opencv-python-headless")
    return cv2 if levels.device.type == "cpu" else None


def _edge_distance(levels: torch.Tensor, cv2: ModuleType | None) -> torch.Tensor:
    # Distance (truncated at the cap) from each pixel to the nearest Canny edge of the 8-bit
    # liquid layer: OpenCV itself where ``cv2`` is given, the torch twin otherwise.
    if cv2 is not None:
        host = levels.to(torch.uint8).numpy()
        distance = cv2.distanceTransform(255 - cv2.Canny(host, _CANNY_LOW, _CANNY_HIGH), cv2.DIST_L2, 5)
        return torch.from_numpy(distance).clamp_(max=_DISTANCE_CAP).to(levels.dtype)
    return chamfer_distance(canny_edges(levels), _DISTANCE_CAP).to(levels.dtype)


def _equalize_hist(levels: torch.Tensor) -> torch.Tensor:
    # OpenCV's equalizeHist on 8-bit levels: the lowest occupied level maps to 0, level v to
    # round(255 * (pixels in (lowest, v]) / (pixels above the lowest level)).
    flat = levels.flatten().long()
    hist = torch.bincount(flat, minlength=256)
    lowest = int(torch.nonzero(hist)[0])
    total = flat.numel()
    if int(hist[lowest]) == total:
        return torch.full_like(levels, float(lowest))
    scale = torch.tensor(255.0 / (total - int(hist[lowest])), dtype=torch.float32)
    cumulative = hist.cumsum(0) - hist[: lowest + 1].sum()
    lut = (cumulative.float() * scale.to(levels.device)).round().clamp(0, 255)
    lut[: lowest + 1] = 0
    return lut[flat].view_as(levels).to(levels.dtype)


def water_shading(liquid: torch.Tensor, backend: Literal["auto", "opencv", "torch"] = "auto") -> torch.Tensor:
    """The relief ImageNet-C paints on water drops.

    The reference takes Canny edges (thresholds 50, 150) of the 8-bit liquid layer, OpenCV's
    5x5-mask distance transform truncated at 20, a 3x3 box blur, histogram equalisation, a
    3x3 emboss kernel (saturated to 8 bit) and another box blur. On the CPU, with OpenCV
    installed (``backend="auto"``), its own ``Canny`` and ``distanceTransform`` compute the
    distance; elsewhere (a GPU, or no OpenCV) :func:`canny_edges` and
    :func:`chamfer_distance`, torch ports of the same operators, do; ``backend`` forces one.
    The distance blur is torch's on both paths; the steps after it are integer arithmetic,
    OpenCV's own where OpenCV computes the distance and torch's elsewhere, with the same
    results bit for bit.

    Shape:
        liquid: ``(H, W)`` thresholded 8-bit liquid layer; return: ``(H, W)`` shading in ``[0, 255]``.
    """
    cv2 = _opencv_for_shading(liquid, backend)
    distance = _box3(_edge_distance(liquid, cv2)).floor()
    if cv2 is not None:
        return _opencv_relief(cv2, distance)
    equalised = _equalize_hist(distance)
    embossed = shift_sum(equalised, _EMBOSS, Border.MIRROR, fused=True).round().clamp(0, 255)
    return _box3(embossed)


def _opencv_relief(cv2: ModuleType, distance: torch.Tensor) -> torch.Tensor:
    # water_shading's steps after the distance blur, by OpenCV's own equalizeHist, filter2D
    # and (unnormalised) boxFilter. From the equalisation on every value is an integer below
    # 2^13, so the sums are exact in float32 in any order: the same values as the torch
    # steps, bit for bit; the final 1/9 is the torch path's own multiplication.
    levels = distance.to(torch.uint8).numpy()
    equalised = cv2.equalizeHist(levels).astype(np.float32)
    embossed = cv2.filter2D(equalised, -1, _EMBOSS_KERNEL, borderType=cv2.BORDER_REFLECT_101)
    np.clip(embossed, 0, 255, out=embossed)
    summed = cv2.boxFilter(embossed, -1, (3, 3), normalize=False, borderType=cv2.BORDER_REFLECT_101)
    return torch.from_numpy(summed).to(distance.dtype) * (1 / 9)


def spatter_layer(streams: SampleStreams, height: int, width: int, params: SpatterParams) -> torch.Tensor:
    """Each image's spatter opacity: water drops (shaded relief) or mud splashes.

    One normal draw for the batch; each layer is then built from its image's draws alone.

    Water: ``liquid * shading``, normalised to its maximum, times ``intensity``. Mud: the
    liquid mask blurred by sigma ``intensity`` and cut below 0.8. Both Gaussians read
    ``Border.NEAREST`` beyond the frame, as scikit-image's ``gaussian`` does in the reference.

    Shape:
        return: ``(B, H, W)``, float32, on the streams' device.
    """
    return torch.stack([_spatter_one(noise, params) for noise in streams.normal((height, width))])


def _spatter_one(noise: torch.Tensor, params: SpatterParams) -> torch.Tensor:
    # One image's opacity (H, W) from its standard normal field (H, W).
    p = params
    layer = gaussian_filter(torch.mul(noise, p.scale).add_(p.loc), p.sigma, Border.NEAREST)
    zero_below(layer, p.threshold)
    if p.liquid == "water":
        # The reference casts to uint8 (truncation); values above 1 would wrap there, we saturate.
        wet = layer.mul_(255).floor_().clamp_(0, 255)
        opacity = water_shading(wet).mul_(wet)
        peak = opacity.max()
        return opacity.div_(peak).mul_(p.intensity) if peak > 0 else opacity
    mask = gaussian_filter((layer > p.threshold).float(), p.intensity, Border.NEAREST)
    return zero_below(mask, 0.8)


def spatter(images: torch.Tensor, params: SpatterParams, streams: SampleStreams) -> torch.Tensor:
    """ImageNet-C spatter: add pale-turquoise water, or paint mud brown over the image.

    Water: ``clip(x + m * (175, 238, 238) / 255)``. Mud: ``clip(x * (1 - m) + m * (63, 42, 20) / 255)``.
    Single-channel images get the colour's luma.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    height, width = images.shape[-2:]
    opacity = spatter_layer(streams, height, width, params)
    opacity = opacity[:, None].to(images.dtype)
    rgb = _WATER_RGB if params.liquid == "water" else _MUD_RGB
    colour = torch.tensor(rgb, dtype=images.dtype, device=images.device).view(1, 3, 1, 1) / 255
    if images.shape[1] != 3:
        colour = luma(colour)
    # In place on the first product; sums as written (addition commutes exactly).
    if params.liquid == "water":
        return (opacity * colour).add_(images).clamp_(0.0, 1.0)
    return (images * (1 - opacity)).add_(opacity * colour).clamp_(0.0, 1.0)
