"""Pixel noise models."""

from __future__ import annotations

import functools

import numpy as np
import torch

from pytest_segrobust.corruptions.functional import color
from pytest_segrobust.randomness.seeding import SampleStreams


def additive_gaussian_noise(images: torch.Tensor, noise: torch.Tensor, std: float) -> torch.Tensor:
    """Add ``std``-scaled standard normal ``noise`` and clip to ``[0, 1]``.

    On the CPU in one compiled pass where numba is installed (:func:`_compiled_sum`), bit for
    bit what the tensor operations give.

    Shape:
        images, noise: ``(B, C, H, W)``; return: same.
    """
    compiled = _compiled_sum(images, noise, "add_noise_into", std)
    return compiled if compiled is not None else (images + std * noise).clamp_(0.0, 1.0)


def shot_noise(images: torch.Tensor, photons: float, streams: SampleStreams) -> torch.Tensor:
    """Poisson photon noise: ``poisson(x * photons) / photons``, clipped.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    rate = images * photons
    counts = streams.poisson(rate)
    return (counts / photons).clamp_(0.0, 1.0)


_NUMPY_FLOATS = {torch.float32: np.float32, torch.float64: np.float64}


def salt_and_pepper(images: torch.Tensor, amount: float, streams: SampleStreams) -> torch.Tensor:
    """``skimage.util.random_noise(mode="s&p", amount=amount)``: impulse noise per element, clipped.

    Each value (every channel on its own) is replaced with probability ``amount``, half of
    the time by 0 (pepper), half by 1 (salt): one ``U[0, 1)`` draw per value from the
    sample's stream (one draw for the batch), pepper below ``amount / 2``, salt from
    ``1 - amount / 2`` on. On the CPU the draws stay integers (their 24-bit levels, compared
    with the levels where the float comparisons flip: the same outcome for every draw) and
    the bounds of the clamp come from them in numpy, where boolean masks are cheap.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    if images.device.type == "cpu" and images.dtype in (torch.float32, torch.float64) and not images.requires_grad:
        levels = streams.uniform_levels(images.shape[1:]).numpy()
        pepper_below, salt_from = _impulse_levels(amount, images.dtype)
        dtype = _NUMPY_FLOATS[images.dtype]
        floor = torch.from_numpy((levels >= salt_from).astype(dtype))
        ceiling = torch.from_numpy((levels >= pepper_below).astype(dtype))
        return torch.clamp(images, min=floor, max=ceiling)
    draw = streams.uniform(images.shape[1:]).to(images.dtype)
    # Each value is clipped to [floor, ceiling]: [1, 1] for salt, [0, 0] for pepper,
    # [0, 1] otherwise.
    floor = (draw >= 1.0 - amount / 2).to(images.dtype)
    ceiling = draw.ge_(amount / 2)
    return torch.clamp(images, min=floor, max=ceiling)


@functools.lru_cache(maxsize=64)
def _impulse_levels(amount: float, dtype: torch.dtype) -> tuple[int, int]:
    """The first 24-bit levels whose float32 uniform, as ``dtype``, is ``>= amount / 2`` and ``>= 1 - amount / 2``.

    Found by bisection with the very comparison the tensor path makes, so a level is pepper
    or salt exactly when its float draw is.
    """

    def first_at_least(threshold: float) -> int:
        low, high = 0, 2**24  # the answer lies in [low, high]; 2**24: no level reaches it
        while low < high:
            middle = (low + high) // 2
            draw = (torch.tensor([middle], dtype=torch.float32) * 2.0**-24).to(dtype)
            if bool(draw.ge(threshold)[0]):
                high = middle
            else:
                low = middle + 1
        return low

    return first_at_least(amount / 2), first_at_least(1.0 - amount / 2)


def speckle_noise(images: torch.Tensor, noise: torch.Tensor, std: float) -> torch.Tensor:
    """Multiplicative noise ``x + x * std * n``, clipped: brighter values get more (on the CPU in
    one compiled pass where numba is installed, as :func:`additive_gaussian_noise`).

    Shape:
        images, noise: ``(B, C, H, W)``, noise standard normal; return: same.
    """
    compiled = _compiled_sum(images, noise, "add_scaled_noise_into", std)
    return compiled if compiled is not None else (images + images * (noise * std)).clamp_(0.0, 1.0)


def _compiled_sum(images: torch.Tensor, noise: torch.Tensor, loop: str, std: float) -> torch.Tensor | None:
    """The noisy images from the compiled ``loop`` of :mod:`.color_kernel` (the tensor
    operations' IEEE steps in their order and the images' float type, so the same bits, in one
    pass instead of three with two temporaries), or None where it does not apply: not on the
    CPU, not one float type, not contiguous, a graph to keep, numba missing or not worth loading."""
    same = images.dtype == noise.dtype in (torch.float32, torch.float64) and images.shape == noise.shape
    on_cpu = images.device.type == noise.device.type == "cpu"
    if not (same and on_cpu and images.is_contiguous() and noise.is_contiguous()):
        return None
    if images.requires_grad or noise.requires_grad or (kernel := color._compiled_color_for(images)) is None:
        return None
    out = torch.empty_like(images, memory_format=torch.contiguous_format)
    zero, one = color._scalar(images, 0.0), color._scalar(images, 1.0)
    getattr(kernel, loop)(images.numpy(), noise.numpy(), color._scalar(images, std), zero, one, out.numpy())
    return out


def intensity_noise(
    images: torch.Tensor, luminance: torch.Tensor, chrominance: torch.Tensor, weight: float
) -> torch.Tensor:
    """Kamann & Rother's eq. 1: ``log2(2^x + weight * (n_lum + n_chrom))``, clipped.

    Noise is added in a linearised space (``2^x``), so after the log it is largest where
    the image is dark. ``n_lum`` is one value per pixel shared by its channels (grey
    noise), ``n_chrom`` one per channel (colour noise).

    Shape:
        images, chrominance: ``(B, C, H, W)``; luminance: ``(B, 1, H, W)``, both standard
        normal; return: same as images.
    """
    noise = (luminance + chrominance) * weight
    # exp2 and log2 round differently in the vectorised body and the scalar tail of a CPU
    # kernel, so each sample goes through them alone, always in the same layout.
    out = []
    for image, sample_noise in zip(images, noise):
        # Arguments below 1 map below 0, which the final clip sends to 0 anyway: clamping
        # at 1 keeps log2 finite without changing any output.
        out.append(torch.log2((torch.exp2(image) + sample_noise).clamp_(min=1.0)))
    return torch.stack(out).clamp_(0.0, 1.0)
