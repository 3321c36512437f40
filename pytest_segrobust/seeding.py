"""Per-sample random streams that do not depend on batching, order, worker, process or device.

Every random draw of a corruption comes from a counter-based generator (Philox-4x32-10,
:mod:`pytest_segrobust.philox`) keyed by ``(global seed, sample id, corruption, severity)``
through a stable hash, so the corrupted pixels of one image are a function of those four
values alone: the same on CPU and CUDA, alone or in any batch, in any order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch

from pytest_segrobust import philox


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


class SampleStreams:
    """The random draws of one batch, one independent Philox sequence per sample.

    Each draw method returns a ``(B, ...)`` tensor whose row ``i`` depends on ``seeds[i]``
    and on the draw's *stream index* alone, computed for the whole batch in one Philox call.

    The rule: the ``k``-th draw call on this object (counting from 0) reads Philox stream
    ``k`` of every sample's key (:func:`pytest_segrobust.philox.random_bits`), from block 0.
    A draw therefore never depends on the length of another draw, nor on the batch: a
    corruption that makes the same draw calls in the same order (its code fixes the order;
    the shapes and counts may depend on the image size and the params, never on the batch
    or on random values of other samples) gives each sample the same numbers alone or in
    any batch. :meth:`poisson` takes two streams (a second one for its normal
    approximation), every other draw one. Create a fresh object for every field that must
    see the same draws (as :class:`~pytest_segrobust.corruptions.base.PhotometricCorruption`
    does for each image-like field).

    Float results are exact functions of the integers (see :mod:`pytest_segrobust.philox`):
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

    def integers(self, low: int, high: int, shape: Sequence[int]) -> torch.Tensor:
        """Integers uniform on ``[low, high)`` per sample.

        Shape:
            return: ``(B, *shape)``, int64.
        """
        return philox.integers(self.seeds, low, high, tuple(shape), self.device, self._take())

    def signs(self) -> torch.Tensor:
        """One random sign per sample, +1 or -1 with equal chance.

        Shape:
            return: ``(B,)``, float32.
        """
        return self.integers(0, 2, (1,))[:, 0].to(torch.float32) * 2 - 1

    def poisson(self, rates: torch.Tensor) -> torch.Tensor:
        """One Poisson variate per rate; row ``i`` of ``rates`` belongs to sample ``i``.

        Shape:
            rates: ``(B, ...)`` on this object's device; return: same shape and dtype.
        """
        return philox.poisson(self.seeds, rates, self._take(2))
