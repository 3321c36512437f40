"""Per-sample random streams that do not depend on batching, order, worker, process or device.

Every random draw of a corruption comes from a counter-based generator (Philox-4x32-10,
:mod:`pytest_segrobust.randomness.philox`) keyed by ``(global seed, sample id, corruption, severity)``
through a stable hash, so the corrupted pixels of one image are a function of those four
values alone: the same on CPU and CUDA, alone or in any batch, in any order.

Within a sample, :class:`StreamKeys` derives further keys from the sample's seed: one per
field (:meth:`StreamKeys.of_field`: a waveform draws apart from the frames), one per frame of a
clip (:meth:`StreamKeys.frames`: drawn once per clip, every frame seeing the same numbers, or
once per frame, as :class:`FrameDraws` says) and one per channel (:meth:`StreamKeys.channels`).
A sample's own seed is the key of its pixel field (an image, or every frame of a clip drawn
once per clip), so an image corrupted alone and a one-frame clip corrupted once per clip draw
the same numbers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import torch

from pytest_segrobust.randomness import philox


def sample_seed(seed: int, sample_id: str, corruption: str, severity: int) -> int:
    """Derive the seed of one image's corruption.

    Args:
        seed: The suite's global seed.
        sample_id: The dataset's stable identifier of the image.
        corruption: Name of the corruption (or composition) applied.
        severity: Severity level, 0 to 5.

    Returns:
        A non-negative 63-bit integer.
    """
    key = f"{seed}\x1f{sample_id}\x1f{corruption}\x1f{severity}".encode()
    digest = hashlib.blake2b(key, digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def derived_seed(seed: int, *key: object) -> int:
    """A seed derived from ``seed`` and a key (``"frame", 3``), as stable as :func:`sample_seed`.

    Returns:
        A non-negative 63-bit integer.
    """
    text = "\x1f".join([str(int(seed)), *(str(part) for part in key)])
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


class FrameDraws(str, Enum):
    """How often a corruption draws its random numbers along a clip's frames."""

    CLIP = "clip"  # once per clip: every frame sees the same draws (static, no flicker)
    FRAME = "frame"  # once per frame: each frame its own draws (dynamic)


@dataclass(frozen=True)
class StreamKeys:
    """The keys of a batch's random streams: one seed per sample and the keys derived from it.

    A kernel picks the keys it draws from: the samples' own (:attr:`seeds`), a field's
    (:meth:`of_field`), one per frame (:meth:`frames`) or one per channel (:meth:`channels`),
    and hands them to :class:`SampleStreams`. Every key is a function of the sample's seed and
    the key's parts alone, so no draw depends on the batch.

    Attributes:
        seeds: One seed per sample (:func:`sample_seed`).
        frame_draws: Whether :meth:`frames` gives every frame of a clip the clip's key or its own.
    """

    seeds: tuple[int, ...]
    frame_draws: FrameDraws = FrameDraws.CLIP

    def __len__(self) -> int:
        return len(self.seeds)

    def of_field(self, field: str) -> StreamKeys:
        """The keys of one field's own draws (``"audio"``), apart from every other field's."""
        return StreamKeys(tuple(derived_seed(seed, "field", field) for seed in self.seeds), self.frame_draws)

    def frames(self, count: int) -> list[int]:
        """One key per frame of every sample, sample-major (``B * count`` keys).

        Drawn once per clip (:attr:`FrameDraws.CLIP`), a frame's key is its sample's; once per
        frame, frame ``t``'s is derived from the sample's seed and ``t``.
        """
        if self.frame_draws is FrameDraws.CLIP:
            return [seed for seed in self.seeds for _ in range(count)]
        return [derived_seed(seed, "frame", t) for seed in self.seeds for t in range(count)]

    def channels(self, count: int) -> list[int]:
        """One key per channel of every sample, sample-major (``B * count`` keys): channel ``c``'s
        is derived from the sample's seed and ``c``."""
        return [derived_seed(seed, "channel", c) for seed in self.seeds for c in range(count)]


class SampleStreams:
    """The random draws of one batch, one independent Philox sequence per sample.

    Each draw method returns a ``(B, ...)`` tensor whose row ``i`` depends on ``seeds[i]``
    and on the draw's *stream index* alone, computed for the whole batch in one Philox call.

    The rule: the ``k``-th draw call on this object (counting from 0) reads Philox stream
    ``k`` of every sample's key (:func:`pytest_segrobust.randomness.philox.random_bits`), from block 0.
    A draw therefore never depends on the length of another draw, nor on the batch: a
    corruption that makes the same draw calls in the same order (its code fixes the order;
    the shapes and counts may depend on the image size and the params, never on the batch
    or on random values of other samples) gives each sample the same numbers alone or in
    any batch. :meth:`poisson` takes two streams (a second one for its normal
    approximation), every other draw one. Create a fresh object for every field that must
    see the same draws (as :class:`~pytest_segrobust.corruptions.base.PhotometricCorruption`
    does for each image-like field).

    Float results are exact functions of the integers (see :mod:`pytest_segrobust.randomness.philox`):
    uniforms and integers are bit-identical on every device; normals agree to one float32
    ulp; Poisson counts agree except where a uniform falls within float64 rounding of a
    CDF step.

    Args:
        seeds: One unsigned 64-bit seed per sample (:func:`sample_seed`).
        device: Where the draws are made and returned.
    """

    def __init__(self, seeds: Sequence[int], device: torch.device | str) -> None:
        self.seeds = [int(s) for s in seeds]
        self.device = torch.device(device)
        self._next_stream = 0

    def __len__(self) -> int:
        return len(self.seeds)

    def __repr__(self) -> str:
        return f"SampleStreams({len(self.seeds)} samples on {self.device}, next stream {self._next_stream})"

    def _take(self, count: int = 1) -> int:
        stream = self._next_stream
        self._next_stream += count
        return stream

    def uniform(self, shape: Sequence[int], dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``U[0, 1)`` per sample: float32 on a 2^-24 grid, float64 on a 2^-32 grid.

        Shape:
            return: ``(B, *shape)``, ``dtype``.
        """
        return philox.uniform(self.seeds, tuple(shape), self.device, self._take(), dtype=dtype)

    def uniform_levels(self, shape: Sequence[int]) -> torch.Tensor:
        """The float32 :meth:`uniform` draws times 2^24 (one draw, the same stream), as int32.

        Shape:
            return: ``(B, *shape)``, int32 in ``[0, 2**24)``.
        """
        return philox.uniform_levels(self.seeds, tuple(shape), self.device, self._take())

    def normal(self, shape: Sequence[int], dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Standard normal per sample (Box-Muller, computed in float64, rounded to float32).

        Shape:
            return: ``(B, *shape)``, ``dtype``.
        """
        return philox.normal(self.seeds, tuple(shape), self.device, self._take()).to(dtype)

    def exact_normal(self, shape: Sequence[int], dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Standard normal per sample from float32 steps alone, the same bits on every device
        (:func:`~pytest_segrobust.randomness.philox.exact_normal`, one draw); within 3 float32 ulps of
        what :meth:`normal` draws from the same stream.

        Shape:
            return: ``(B, *shape)``, ``dtype``.
        """
        return philox.exact_normal(self.seeds, tuple(shape), self.device, self._take()).to(dtype)

    def integers(self, low: int, high: int, shape: Sequence[int]) -> torch.Tensor:
        """Integers uniform on ``[low, high)`` per sample.

        Shape:
            return: ``(B, *shape)``, int64.
        """
        return philox.integers(self.seeds, low, high, tuple(shape), self.device, self._take())

    def signs(self, dtype: torch.dtype = torch.float32, magnitude: float = 1.0) -> torch.Tensor:
        """One random sign per sample, +1 or -1 with equal chance (``2 * integers(0, 2) - 1``, one draw), times ``magnitude``.

        Shape:
            return: ``(B,)``, ``dtype``.
        """
        return philox.signs(self.seeds, self.device, self._take(), dtype, magnitude)

    def poisson(self, rates: torch.Tensor) -> torch.Tensor:
        """One Poisson variate per rate; row ``i`` of ``rates`` belongs to sample ``i``.

        Shape:
            rates: ``(B, ...)`` on this object's device; return: same shape and dtype.
        """
        return philox.poisson(self.seeds, rates, self._take(2))
