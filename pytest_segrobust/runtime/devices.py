"""Which device a run uses: parsed once from ``--segrobust-device``, resolved per process.

Parsing needs no torch (pytest parses options in every project the plugin is installed in).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_segrobust.core.errors import SegRobustError

if TYPE_CHECKING:
    import torch

_PATTERN = re.compile(r"^(auto|cpu|cuda|mps)(?::(\d+))?$")


@dataclass(frozen=True)
class DeviceChoice:
    """A requested device: ``auto``, ``cpu``, ``mps``, ``cuda`` (any GPU) or ``cuda:N``."""

    kind: str
    index: int | None = None

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"

    def resolve(self, worker: int | None = None) -> torch.device:
        """The device this process uses.

        ``auto`` means CUDA when available, else CPU. ``cuda`` without an index spreads
        xdist workers over the visible GPUs (worker ``gwN`` takes GPU ``N mod count``).

        Raises:
            SegRobustError: when the requested device is not available here.
        """
        import torch  # only a run that evaluates pays for it

        kind = self.kind
        if kind == "auto":
            kind = "cuda" if torch.cuda.is_available() else "cpu"
            if kind == "cpu":
                return torch.device("cpu")
        if kind == "cpu":
            return torch.device("cpu")
        if kind == "mps":
            if not torch.backends.mps.is_available():
                raise SegRobustError(f"--segrobust-device {self}: MPS is not available on this machine")
            return torch.device("mps")
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise SegRobustError(f"--segrobust-device {self}: no CUDA device is available (torch {torch.__version__})")
        index = self.index if self.index is not None else (worker or 0) % count
        if index >= count:
            raise SegRobustError(f"--segrobust-device {self}: only {count} CUDA device(s) visible (0..{count - 1})")
        return torch.device("cuda", index)


def parse_device(text: str) -> DeviceChoice:
    """``argparse`` type of ``--segrobust-device``."""
    match = _PATTERN.match(text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(f"expected auto, cpu, mps, cuda or cuda:N, got {text!r}")
    kind, index = match.group(1), match.group(2)
    if index is not None and kind != "cuda":
        raise argparse.ArgumentTypeError(f"only cuda takes an index, got {text!r}")
    return DeviceChoice(kind, None if index is None else int(index))


def worker_index(worker_id: str | None) -> int | None:
    """``gw3`` -> 3; ``None`` (no xdist) -> ``None``."""
    if worker_id and worker_id.startswith("gw") and worker_id[2:].isdigit():
        return int(worker_id[2:])
    return None
