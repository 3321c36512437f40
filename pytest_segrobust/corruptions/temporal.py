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
(``64 // 2**s`` and ``(s + 1)**2``) chosen for clips of 32 to 128 frames. Every length here is
in frames of the clip as given, and every clip keeps its ``T`` frames.

Every level changes every clip of two frames or more. On a short clip the reference does not:
at a rate of ``T`` or more sampling shows frame 0 throughout and "reverse" is not reversed, and a
box jumble segment of ``T`` frames or more leaves the clip as it is. So a level's *unit* (the
run a kept frame is shown for, a box jumble segment) is at most half the clip, rounded up
(:func:`longest_unit`): frame and reverse sampling keep at least two frames (a 2-frame clip
sampled shows its first frame twice, reversed shows its two frames backwards), box jumble
moves at least two segments. On a clip of ``2 * unit - 1`` frames or more every level is the
reference's; below that, levels whose unit is capped coincide (on 12 frames sampling runs at
rates 2, 4, 6, 6, 6), so the levels stay in the order of the table. Jumble's segments are the
reference's (a segment longer than the clip shuffles the whole clip). The shuffles draw one
order per clip and, where that order is the clip's own (jumble of pairs leaves a 2-frame clip
as it is one time in two), draw again from the clip's next stream until the order changes: the order is
uniform over those that change the clip, and on a clip of many segments it is the
reference's draw all but always. A clip of one frame cannot change: a temporal cell refuses
it (:meth:`~pytest_segrobust.corruptions.base.TemporalCorruption.frame_count`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions.base import Category, NotedTable, SeverityTable, TemporalCorruption
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


# Schiappa et al.: sampling_rate = [2, 4, 8, 16, 32][severity - 1], for both. The notes say the
# rule for short clips, so that baselines measured before it are refused rather than compared.
HALF_CLIP = "at most half the clip"
FRAME_SAMPLING = NotedTable(tuple(SamplingParams(rate) for rate in (2, 4, 8, 16, 32)), HALF_CLIP)
REVERSE_SAMPLING = NotedTable(tuple(SamplingParams(rate) for rate in (2, 4, 8, 16, 32)), HALF_CLIP)


def longest_unit(frames: int) -> int:
    """The most frames a level's unit may span on a clip of ``frames``: half of it, rounded up (at least 1).

    A unit is the run a sampled frame is shown for, or a box jumble segment; at this length
    every clip of two frames or more holds at least two of them, so a level changes it.
    """
    return max(1, -(-frames // 2))


def sampling_rate(rate: int, frames: int) -> int:
    """:class:`FrameSampling`'s rate on a clip of ``frames``: the table's ``rate``, at most
    :func:`longest_unit` (at least two frames are kept) and at least 2 (a rate of 1 is the clip itself)."""
    return max(2, min(rate, longest_unit(frames)))


def reverse_rate(rate: int, frames: int) -> int:
    """:class:`ReverseSampling`'s rate on a clip of ``frames``: the table's ``rate``, at most
    :func:`longest_unit` (at least two frames are kept, so the clip plays backwards; rate 1 is the
    clip reversed, frame by frame)."""
    return min(rate, longest_unit(frames))


def box_segment(length: int, frames: int) -> int:
    """:class:`BoxJumble`'s segment length on a clip of ``frames``: the table's ``length``, at most
    :func:`longest_unit` (at least two segments trade places)."""
    return min(length, longest_unit(frames))


def _positions(streams: SampleStreams, frames: int, device: torch.device) -> torch.Tensor:
    """``0 .. T - 1`` for every clip. Shape: return ``(B, T)``, int64."""
    return torch.arange(frames, dtype=torch.int64, device=device).expand(len(streams), frames).clone()


class FrameSampling(TemporalCorruption[SamplingParams]):
    """A low frame rate (a dropping stream, a slow camera): position ``t`` shows frame ``(t // r) * r``.

    ``r`` is :func:`sampling_rate`: the table's rate, capped at half the clip (rounded up), so
    at least two frames are kept (one on a 2-frame clip, shown twice). Nothing is random: every
    clip of a length is sampled alike.
    """

    def frame_order(
        self, params: SamplingParams, streams: SampleStreams, frames: int, device: torch.device
    ) -> torch.Tensor:
        rate = sampling_rate(params.rate, frames)
        return _positions(streams, frames, device) // rate * rate


class ReverseSampling(TemporalCorruption[SamplingParams]):
    """The sampled clip played backwards: :class:`FrameSampling` of the clip padded to a multiple of
    ``r`` frames, reversed, and cut back to ``T`` frames (so the last kept frame comes first).

    ``r`` is :func:`reverse_rate`: the table's rate, capped at half the clip (rounded up), so
    at least two frames are kept and the clip really plays backwards. Position ``t`` shows
    frame ``((L - 1 - t) // r) * r`` with ``L = ceil(T / r) * r``; for ``T`` a multiple of ``r``
    that is the reference's ``x[::r]``, repeated, flipped.
    """

    def frame_order(
        self, params: SamplingParams, streams: SampleStreams, frames: int, device: torch.device
    ) -> torch.Tensor:
        rate = reverse_rate(params.rate, frames)
        padded = -(-frames // rate) * rate
        return (padded - 1 - _positions(streams, frames, device)) // rate * rate


@dataclass(frozen=True)
class SegmentParams:
    """The clip is cut into runs of ``length`` frames (the last one may be shorter)."""

    length: int


# Schiappa et al.: jumble's seg = 64 // 2**severity, box jumble's seg = (severity + 1)**2.
REDRAWN = "the clip's own order drawn again"
JUMBLE = NotedTable(tuple(SegmentParams(length) for length in (32, 16, 8, 4, 2)), REDRAWN)
BOX_JUMBLE = NotedTable(tuple(SegmentParams(length) for length in (4, 9, 16, 25, 36)), f"{HALF_CLIP}, {REDRAWN}")


def _stable_order(keys: torch.Tensor) -> torch.Tensor:
    """The positions of ``keys`` sorted along the last axis, ties in position order (the same on every device)."""
    return torch.sort(keys, dim=-1, stable=True).indices


def changing_order(draw: Callable[[], torch.Tensor], frames: int) -> torch.Tensor:
    """Per clip, the first of ``draw()``'s successive orders that is not the clip's own.

    Each call of ``draw`` reads the next stream of every clip, so a clip's ``k``-th candidate
    depends on its seed alone, and the one it keeps does not depend on the batch (the batch only
    says how many calls are made). Uniform draws give an order uniform over those that change
    the clip. ``draw`` must be able to change a clip of ``frames`` (two frames or more).

    Shape:
        return: ``(B, T)``, int64.
    """
    order = draw()
    if frames < 2:
        return order
    own = torch.arange(frames, dtype=order.dtype, device=order.device)
    unchanged = (order == own).all(dim=1)
    while bool(unchanged.any()):
        again = draw()
        order = torch.where(unchanged.unsqueeze(1), again, order)
        unchanged &= (again == own).all(dim=1)
    return order


class Jumble(TemporalCorruption[SegmentParams]):
    """Frames shuffled within each segment (a muxer that mixes up nearby frames); the segments stay in place.

    One uniform permutation per segment and clip, drawn from the clip's seed: ``T`` float64
    uniforms, sorted within their segments. A segment longer than the clip shuffles all of
    it. An order that leaves the whole clip as it was is drawn again (:func:`changing_order`).
    """

    def frame_order(
        self, params: SegmentParams, streams: SampleStreams, frames: int, device: torch.device
    ) -> torch.Tensor:
        segment = (_positions(streams, frames, device) // params.length).to(torch.float64)

        def draw() -> torch.Tensor:
            # float64 uniforms are multiples of 2^-32, so segment + uniform is exact and sorts
            # every frame inside its own segment.
            return _stable_order(segment + streams.uniform((frames,), torch.float64).to(device))

        return changing_order(draw, frames)


class BoxJumble(TemporalCorruption[SegmentParams]):
    """Segments shuffled as wholes (a stream whose chunks arrive out of order); each plays on in order.

    The segments are :func:`box_segment` frames long: the table's length, capped at half the
    clip (rounded up), so there are at least two. One uniform permutation of the
    ``ceil(T / length)`` segments per clip, drawn from the clip's seed; the last, shorter
    segment moves as one like the others. An order that leaves every segment in its place is
    drawn again (:func:`changing_order`).
    """

    def frame_order(
        self, params: SegmentParams, streams: SampleStreams, frames: int, device: torch.device
    ) -> torch.Tensor:
        length = box_segment(params.length, frames)
        segments = -(-frames // length)
        segment = _positions(streams, frames, device) // length

        def draw() -> torch.Tensor:
            keys = streams.uniform((segments,), torch.float64).to(device)  # (B, S)
            # Every frame sorts by its segment's key; the stable sort keeps a segment's frames in order
            # and together (two equal keys put their segments one after the other).
            return _stable_order(torch.gather(keys, 1, segment))

        return changing_order(draw, frames)


frame_sampling = FrameSampling("frame_sampling", Category.TEMPORAL, FRAME_SAMPLING)
reverse_sampling = ReverseSampling("reverse_sampling", Category.TEMPORAL, REVERSE_SAMPLING)
jumble = Jumble("jumble", Category.TEMPORAL, JUMBLE)
box_jumble = BoxJumble("box_jumble", Category.TEMPORAL, BOX_JUMBLE)
