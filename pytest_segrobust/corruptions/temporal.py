"""Temporal corruptions: the frames of a clip stall, repeat or come out of order.

Each draws one frame order per clip (:class:`~pytest_segrobust.corruptions.base.TemporalCorruption`):
the frames, their per-frame masks, their ``annotated`` flags and their frame ids move together
(:func:`~pytest_segrobust.corruptions.kernels.reorder`). The scoring rule follows: a position
is scored against the ground truth of the frame shown there, never against the frame that
was dropped, so a model that segments what it sees loses nothing, and what is measured is
how it copes with the broken motion (a tracker that propagates masks from frame to frame
sees jumps, stalls and time running backwards). A position showing a frame without an
annotation is not scored. Audio plays on in time.

They act on clips only (:class:`~pytest_segrobust.core.types.Video`), belong to no image preset,
and make up the ``video-temporal`` preset. Besides :data:`frame_freeze` (ours), the tables
are those of Schiappa et al., *Large-scale Robustness Analysis of Video Action Recognition
Models* (CVPR 2023), as their released code writes them (``core/video_perturb.py`` of
``Maddy12/ActionRecognitionRobustnessEval``; the repeated form of sampling is that of the
group's ``VideoLanguageModelRobustness``, which keeps the clip's length):

=================  =======================================  ======================
corruption         severities 1..5                          random per clip
=================  =======================================  ======================
frame_sampling     rate 2, 4, 8, 16, 32                     nothing
reverse_sampling   rate 2, 4, 8, 16, 32                     nothing
jumble             segment 32, 16, 8, 4, 2 frames           the order in segments
box_jumble         segment 4, 9, 16, 25, 36 frames          the order of segments
=================  =======================================  ======================

In the reference, jumble's and box jumble's segment sizes are functions of the severity
(``64 // 2**s`` and ``(s + 1)**2``) chosen for clips of 32 to 128 frames; on a clip shorter
than a segment, the whole clip is one segment (jumble shuffles all of it, box jumble leaves
it as it is). Every length here is in frames of the clip as given, and every clip keeps its
``T`` frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions.base import Category, SeverityTable, TemporalCorruption
from pytest_segrobust.randomness.seeding import SampleStreams


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


@dataclass(frozen=True)
class SamplingParams:
    """Every ``rate``-th frame is kept and shown ``rate`` times: the clip at ``1 / rate`` of its frame rate."""

    rate: int


# Schiappa et al.: sampling_rate = [2, 4, 8, 16, 32][severity - 1], for both.
FRAME_SAMPLING = SeverityTable(tuple(SamplingParams(rate) for rate in (2, 4, 8, 16, 32)))
REVERSE_SAMPLING = SeverityTable(tuple(SamplingParams(rate) for rate in (2, 4, 8, 16, 32)))


def _positions(streams: SampleStreams, frames: int, device: torch.device) -> torch.Tensor:
    """``0 .. T - 1`` for every clip. Shape: return ``(B, T)``, int64."""
    return torch.arange(frames, dtype=torch.int64, device=device).expand(len(streams), frames).clone()


class FrameSampling(TemporalCorruption[SamplingParams]):
    """A low frame rate (a dropping stream, a slow camera): position ``t`` shows frame ``(t // rate) * rate``.

    Nothing is random: every clip of a length is sampled alike. At a rate of ``T`` or more the
    whole clip is its first frame.
    """

    def frame_order(
        self, params: SamplingParams, streams: SampleStreams, frames: int, device: torch.device
    ) -> torch.Tensor:
        positions = _positions(streams, frames, device)
        return positions // params.rate * params.rate


class ReverseSampling(TemporalCorruption[SamplingParams]):
    """The sampled clip played backwards: :class:`FrameSampling` of the clip padded to a multiple of
    ``rate`` frames, reversed, and cut back to ``T`` frames (so the last kept frame comes first).

    At rate ``r`` position ``t`` shows frame ``((L - 1 - t) // r) * r`` with ``L = ceil(T / r) * r``;
    for ``T`` a multiple of ``r`` that is the reference's ``x[::r]``, repeated, flipped.
    """

    def frame_order(
        self, params: SamplingParams, streams: SampleStreams, frames: int, device: torch.device
    ) -> torch.Tensor:
        padded = -(-frames // params.rate) * params.rate
        positions = _positions(streams, frames, device)
        return (padded - 1 - positions) // params.rate * params.rate


@dataclass(frozen=True)
class SegmentParams:
    """The clip is cut into runs of ``length`` frames (the last one may be shorter)."""

    length: int


# Schiappa et al.: jumble's seg = 64 // 2**severity, box jumble's seg = (severity + 1)**2.
JUMBLE = SeverityTable(tuple(SegmentParams(length) for length in (32, 16, 8, 4, 2)))
BOX_JUMBLE = SeverityTable(tuple(SegmentParams(length) for length in (4, 9, 16, 25, 36)))


def _stable_order(keys: torch.Tensor) -> torch.Tensor:
    """The positions of ``keys`` sorted along the last axis, ties in position order (the same on every device)."""
    return torch.sort(keys, dim=-1, stable=True).indices


class Jumble(TemporalCorruption[SegmentParams]):
    """Frames shuffled within each segment (a muxer that mixes up nearby frames); the segments stay in place.

    One uniform permutation per segment and clip, drawn from the clip's seed: ``T`` float64
    uniforms, sorted within their segments.
    """

    def frame_order(
        self, params: SegmentParams, streams: SampleStreams, frames: int, device: torch.device
    ) -> torch.Tensor:
        positions = _positions(streams, frames, device)
        # float64 uniforms are multiples of 2^-32, so segment + uniform is exact and sorts
        # every frame inside its own segment.
        keys = (positions // params.length).to(torch.float64) + streams.uniform((frames,), torch.float64).to(device)
        return _stable_order(keys)


class BoxJumble(TemporalCorruption[SegmentParams]):
    """Segments shuffled as wholes (a stream whose chunks arrive out of order); each plays on in order.

    One uniform permutation of the ``ceil(T / length)`` segments per clip, drawn from the
    clip's seed; the last, shorter segment moves as one like the others.
    """

    def frame_order(
        self, params: SegmentParams, streams: SampleStreams, frames: int, device: torch.device
    ) -> torch.Tensor:
        segments = -(-frames // params.length)
        positions = _positions(streams, frames, device)
        keys = streams.uniform((segments,), torch.float64).to(device)  # (B, S)
        # Every frame sorts by its segment's key; the stable sort keeps a segment's frames in order
        # and together (two equal keys put their segments one after the other).
        return _stable_order(torch.gather(keys, 1, positions // params.length))


frame_sampling = FrameSampling("frame_sampling", Category.TEMPORAL, FRAME_SAMPLING)
reverse_sampling = ReverseSampling("reverse_sampling", Category.TEMPORAL, REVERSE_SAMPLING)
jumble = Jumble("jumble", Category.TEMPORAL, JUMBLE)
box_jumble = BoxJumble("box_jumble", Category.TEMPORAL, BOX_JUMBLE)
