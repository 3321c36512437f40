"""Per-sample random streams that do not depend on batching, order, worker or process.

Every random draw of a corruption comes from a generator seeded by
``(global seed, sample id, corruption, severity)`` through a stable hash, so the corrupted
pixels of one image are a function of those four values alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch


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


def generators(seeds: Sequence[int], device: torch.device) -> list[torch.Generator]:
    """One freshly seeded generator per sample, living on ``device``."""
    return [torch.Generator(device=device).manual_seed(s) for s in seeds]
