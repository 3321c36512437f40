"""Temporal corruptions: the frames of a clip stall, repeat or come out of order.

Each draws one frame order per clip (:class:`~pytest_segrobust.corruptions.base.TemporalCorruption`):
the frames, their per-frame masks and their frame ids move together, so a model is scored
against the annotation of the frame it was shown. They act on clips only
(:class:`~pytest_segrobust.types.Video`) and belong to no image preset.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions.base import Category, SeverityTable, TemporalCorruption
from pytest_segrobust.seeding import SampleStreams


@dataclass(frozen=True)
class FreezeParams:
    """Share of a clip's frames that stall: one run of them shows the frame before the run."""

    fraction: float


FRAME_FREEZE = SeverityTable(tuple(FreezeParams(f) for f in (0.1, 0.2, 0.3, 0.4, 0.5)))


def freeze_length(fraction: float, frames: int) -> int:
    """Frames in the stalled run of a clip of ``frames``: ``round(fraction * T)``, at least 1 and
    at most ``T - 1`` (the frame shown during the run must come before it); 0 for a single frame."""
    if frames < 2:
        return 0
    return min(frames - 1, max(1, round(fraction * frames)))


class FrameFreeze(TemporalCorruption[FreezeParams]):
    """The picture stalls (a dropped stream, a stuck decoder): a run of frames repeats the frame before it.

    The run's length is :func:`freeze_length`; its first frame is drawn uniformly among the
    positions ``1 .. T - length``, once per clip. The annotations stall with the picture.
    """

    def frame_order(
        self, params: FreezeParams, streams: SampleStreams, frames: int, device: torch.device
    ) -> torch.Tensor:
        length = freeze_length(params.fraction, frames)
        # Drawn for every clip, even where nothing can stall, so that the draws never depend on T.
        first = streams.integers(1, max(2, frames - length + 1), (1,)).to(device)  # (B, 1)
        positions = torch.arange(frames, dtype=torch.int64, device=device).expand(len(streams), frames)
        if length == 0:
            return positions.clone()
        stalled = (positions >= first) & (positions < first + length)
        return torch.where(stalled, first - 1, positions)


frame_freeze = FrameFreeze("frame_freeze", Category.TEMPORAL, FRAME_FREEZE)
