"""The temporal family: frame orders, their severity tables, and the fields that move with the frames."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.core.types import Image, Video, VideoMasks
from pytest_segrobust.corruptions import REGISTRY, Corruption
from pytest_segrobust.corruptions.base import TemporalCorruption, whole_batches
from pytest_segrobust.corruptions.temporal import (
    box_jumble,
    frame_freeze,
    frame_sampling,
    jumble,
    reverse_sampling,
)
from pytest_segrobust.randomness.seeding import SampleStreams
from tests.corruptions.test_clips import clips, same

TEMPORAL = [frame_freeze, frame_sampling, reverse_sampling, jumble, box_jumble]
CPU = torch.device("cpu")


def order_of(corruption: TemporalCorruption[Any], severity: int, frames: int, seeds: list[int]) -> torch.Tensor:
    return corruption.frame_order(corruption.table[severity], SampleStreams(seeds, CPU), frames, CPU)


def test_the_video_temporal_preset_lists_the_family_for_clips_only() -> None:
    assert [c.name for c in REGISTRY.preset("video-temporal")] == [c.name for c in TEMPORAL]
    for corruption in TEMPORAL:
        assert REGISTRY.get(corruption.name, "video-temporal") is corruption
        assert corruption.temporal and not corruption.geometric
        assert corruption.accepts(Video) and not corruption.accepts(Image)
    assert all(c.accepts(Image) for c in REGISTRY.preset("coco-p"))


def test_the_tables_are_the_references() -> None:
    # Schiappa et al.'s code: sampling_rate = [2, 4, 8, 16, 32]; jumble 64 // 2**s; box jumble (s + 1)**2.
    assert [frame_sampling.table[s].rate for s in range(1, 6)] == [2, 4, 8, 16, 32]
    assert [reverse_sampling.table[s].rate for s in range(1, 6)] == [2, 4, 8, 16, 32]
    assert [jumble.table[s].length for s in range(1, 6)] == [64 // 2**s for s in range(1, 6)]
    assert [box_jumble.table[s].length for s in range(1, 6)] == [(s + 1) ** 2 for s in range(1, 6)]


@pytest.mark.parametrize("corruption", TEMPORAL, ids=lambda c: c.name)
@pytest.mark.parametrize("frames", [2, 7, 12])
def test_frames_masks_annotations_and_ids_move_together_at_every_severity(
    corruption: Corruption[Any], frames: int
) -> None:
    fields, seeds = clips(batch=3, frames=frames)
    video, masks = fields["video"], fields["masks"]
    assert isinstance(video, Video) and isinstance(masks, VideoMasks)
    sparse = torch.arange(frames).expand(3, frames) % 3 == 0  # every third frame annotated
    fields["masks"] = masks = VideoMasks(masks.data, masks.object_ids, sparse, masks.frame_ids)
    for severity in range(1, 6):
        if bool((order_of(corruption, severity, frames, seeds).diff(dim=1) == 0).all(dim=1).any()):
            with pytest.raises(DatasetError, match="1 distinct frame"):  # a still clip is refused
                corruption(fields, severity, seeds)
            continue
        out = corruption(fields, severity, seeds)
        shown = out["video"].frame_ids
        assert shown.shape == (3, frames) and shown.dtype == torch.int64
        assert bool(((shown >= 0) & (shown < frames)).all())
        assert torch.equal(out["masks"].frame_ids, shown)
        for b in range(3):
            assert torch.equal(out["video"].data[b], video.data[b, shown[b]]), (severity, b)
            assert torch.equal(out["masks"].data[b], masks.data[b, shown[b]]), (severity, b)
            assert torch.equal(out["masks"].annotated[b], sparse[b, shown[b]]), (severity, b)
        assert out["masks"].object_ids == masks.object_ids
        assert out["audio"] is fields["audio"] and out["index"] is fields["index"]


def test_an_order_that_leaves_a_clip_one_frame_is_refused_naming_the_clip_and_what_remains() -> None:
    # Capped at half the clip, the levels can still freeze a 2-frame clip into one picture, whose
    # J&F is trivially high (the first-frame mask is right on every frame): the cell is refused.
    fields, seeds = clips(batch=3, frames=2)
    with pytest.raises(DatasetError) as refused:
        frame_freeze(fields, 1, seeds)
    message = str(refused.value)
    assert "frame_freeze[1]" in message and "clip/0, clip/1, clip/2 (2 frames) with 1 distinct frame" in message
    assert "Leave severity 1 of frame_freeze out" in message
    # Orders that keep two frames or more pass, on clips as short and as long as the demo's.
    for corruption in (reverse_sampling, jumble, box_jumble):
        for severity in range(1, 6):
            corruption(fields, severity, seeds)
    long_fields, long_seeds = clips(batch=3, frames=12)
    for corruption in TEMPORAL:
        for severity in range(1, 6):
            corruption(long_fields, severity, long_seeds)


@pytest.mark.parametrize("corruption", TEMPORAL, ids=lambda c: c.name)
def test_a_clips_order_depends_on_its_seed_alone(corruption: Corruption[Any]) -> None:
    fields, seeds = clips(batch=4, frames=40)
    whole = corruption(fields, 4, seeds)
    with whole_batches():
        assert all(same(whole[name], f) for name, f in corruption(fields, 4, seeds).items())
    again = corruption(fields, 4, seeds)
    assert all(same(whole[name], f) for name, f in again.items())
    order = [3, 0, 2]
    part = corruption({name: f.take(order) for name, f in fields.items()}, 4, [seeds[i] for i in order])
    for name, f in part.items():
        assert same(f, whole[name].take(order)), name


def test_the_shuffles_are_drawn_per_clip_and_sampling_draws_nothing() -> None:
    seeds = list(range(100, 108))
    for corruption in (jumble, box_jumble):
        orders = order_of(corruption, 1, 64, seeds)
        assert len({tuple(row) for row in orders.tolist()}) == len(seeds), corruption.name
        assert torch.equal(orders, order_of(corruption, 1, 64, seeds))
    for corruption in (frame_sampling, reverse_sampling):
        orders = order_of(corruption, 2, 30, seeds)
        assert len({tuple(row) for row in orders.tolist()}) == 1, corruption.name


def test_worked_examples() -> None:
    assert order_of(frame_sampling, 1, 7, [1])[0].tolist() == [0, 0, 2, 2, 4, 4, 6]
    assert order_of(reverse_sampling, 1, 8, [1])[0].tolist() == [6, 6, 4, 4, 2, 2, 0, 0]
    # 7 frames at rate 2: padded to 8 ([0, 0, 2, 2, 4, 4, 6, 6]), reversed, cut to 7.
    assert order_of(reverse_sampling, 1, 7, [1])[0].tolist() == [6, 6, 4, 4, 2, 2, 0]
    # Rate 32 on 20 frames is capped at half the clip: two frames kept, each shown 10 times.
    assert order_of(frame_sampling, 5, 20, [1])[0].tolist() == [0] * 10 + [10] * 10
    # Box jumble at severity 1 (segments of 4) on 10 frames: [0..3], [4..7], [8, 9] in some order.
    runs = order_of(box_jumble, 1, 10, [5])[0].tolist()
    assert sorted(tuple(runs[i : i + n]) for i, n in _run_starts(runs)) == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9)]


def _run_starts(order: list[int]) -> list[tuple[int, int]]:
    """``(start, length)`` of every maximal run of consecutive frame numbers."""
    starts = [0] + [i for i in range(1, len(order)) if order[i] != order[i - 1] + 1]
    return [(s, e - s) for s, e in zip(starts, [*starts[1:], len(order)])]


frame_counts = st.integers(min_value=1, max_value=80)
severities = st.integers(min_value=1, max_value=5)
clip_seeds = st.lists(st.integers(min_value=0, max_value=2**63 - 1), min_size=1, max_size=3)
# Frames beyond the least a level's unit needs to be the reference's (twice the unit, less one).
frames_beyond = st.integers(min_value=0, max_value=60)


@settings(max_examples=60, deadline=None)
@given(beyond=frames_beyond, severity=severities, seeds=clip_seeds)
def test_sampling_shows_every_rth_frame_rate_times(beyond: int, severity: int, seeds: list[int]) -> None:
    rate = frame_sampling.table[severity].rate
    frames = 2 * rate - 1 + beyond  # long enough that the reference keeps two frames or more
    order = order_of(frame_sampling, severity, frames, seeds)
    t = torch.arange(frames)
    assert torch.equal(order, (t - t % rate).expand(len(seeds), frames))
    padded = -(-frames // rate) * rate
    backwards = order_of(reverse_sampling, severity, frames, seeds)
    expected = (torch.arange(padded) // rate * rate).flip(0)[:frames]  # the padded clip, sampled, reversed, cut
    assert torch.equal(backwards, expected.expand(len(seeds), frames))
    assert bool((backwards % rate == 0).all()) and bool((backwards < frames).all())


@settings(max_examples=60, deadline=None)
@given(frames=frame_counts, severity=severities, seeds=clip_seeds)
def test_jumble_permutes_each_segment_within_itself(frames: int, severity: int, seeds: list[int]) -> None:
    length = jumble.table[severity].length
    for order in order_of(jumble, severity, frames, seeds).tolist():
        assert sorted(order) == list(range(frames))
        for start in range(0, frames, length):
            assert sorted(order[start : start + length]) == list(range(start, min(start + length, frames)))


@settings(max_examples=60, deadline=None)
@given(beyond=frames_beyond, severity=severities, seeds=clip_seeds)
def test_box_jumble_moves_whole_segments(beyond: int, severity: int, seeds: list[int]) -> None:
    length = box_jumble.table[severity].length
    frames = 2 * length - 1 + beyond  # long enough for two of the reference's segments
    segments = [tuple(range(s, min(s + length, frames))) for s in range(0, frames, length)]
    for order in order_of(box_jumble, severity, frames, seeds).tolist():
        assert sorted(order) == list(range(frames))
        pieces, at = [], 0
        while at < frames:  # each segment starts at a segment's first frame and plays through
            segment = segments[order[at] // length]
            assert order[at] == segment[0] and tuple(order[at : at + len(segment)]) == segment, order
            pieces.append(segment)
            at += len(segment)
        assert sorted(pieces) == segments


def test_the_shuffles_are_uniform_enough() -> None:
    # Jumble of one 4-frame segment: each of the 23 orders that change the clip about 1/23 of
    # 4800 clips (the clip's own order is drawn again).
    orders = order_of(jumble, 4, 4, list(range(4800)))
    values, counts = torch.unique(orders, dim=0, return_counts=True)
    assert torch.arange(4).tolist() not in values.tolist()
    assert len(counts) == 23 and int(counts.min()) > 150 and int(counts.max()) < 270
    # Box jumble of 3 segments: each of the 5 segment orders that move a segment about 1/5.
    firsts = order_of(box_jumble, 1, 12, list(range(3000)))[:, [0, 4, 8]]
    values, counts = torch.unique(firsts, dim=0, return_counts=True)
    assert [0, 4, 8] not in values.tolist()
    assert len(counts) == 5 and int(counts.min()) > 500 and int(counts.max()) < 700
