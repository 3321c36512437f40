"""Temporal levels on clips of any length: every level changes every clip of two frames or more.

Schiappa et al.'s tables are made for clips of 32 to 128 frames; on a shorter clip a rate or a
segment of ``T`` frames or more would show frame 0 throughout, not reverse, or leave the clip as
it was. Here a level's unit is capped at half the clip (rounded up) and the shuffles never keep
the clip's own order; a clip of one frame is refused, naming it.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.core.types import SampleIndex
from pytest_segrobust.corruptions.base import TemporalCorruption
from pytest_segrobust.corruptions.temporal import (
    box_jumble,
    box_segment,
    frame_freeze,
    frame_sampling,
    jumble,
    longest_unit,
    reverse_rate,
    reverse_sampling,
    sampling_rate,
)
from tests.corruptions.test_clips import clips
from tests.corruptions.test_temporal import TEMPORAL, order_of

LEVELS = range(1, 6)


clip_lengths = st.integers(min_value=2, max_value=80)
clip_seeds = st.lists(st.integers(min_value=0, max_value=2**63 - 1), min_size=1, max_size=4)


@settings(max_examples=80, deadline=None)
@given(frames=clip_lengths, seeds=clip_seeds)
def test_every_level_changes_every_clip(frames: int, seeds: list[int]) -> None:
    own = torch.arange(frames)
    for corruption in TEMPORAL:
        for severity in LEVELS:
            order = order_of(corruption, severity, frames, seeds)
            assert order.shape == (len(seeds), frames)
            assert bool(((order >= 0) & (order < frames)).all())
            for row in order:
                assert not torch.equal(row, own), (corruption.name, severity, frames, row.tolist())


@settings(max_examples=80, deadline=None)
@given(frames=clip_lengths)
def test_sampling_keeps_two_frames_or_more_and_reverse_plays_backwards(frames: int) -> None:
    for severity in LEVELS:
        kept = order_of(frame_sampling, severity, frames, [0])[0]
        assert len(set(kept.tolist())) >= min(2, frames - 1), (severity, kept.tolist())
        backwards = order_of(reverse_sampling, severity, frames, [0])[0]
        assert len(set(backwards.tolist())) >= 2, (severity, backwards.tolist())
        assert bool((backwards[1:] <= backwards[:-1]).all()) and int(backwards[0]) > int(backwards[-1])


@settings(max_examples=80, deadline=None)
@given(frames=clip_lengths)
def test_the_levels_stay_in_the_order_of_the_table(frames: int) -> None:
    rates = [sampling_rate(frame_sampling.table[s].rate, frames) for s in LEVELS]
    backwards = [reverse_rate(reverse_sampling.table[s].rate, frames) for s in LEVELS]
    segments = [box_segment(box_jumble.table[s].length, frames) for s in LEVELS]
    for unit in (rates, backwards, segments):
        assert unit == sorted(unit) and max(unit) <= max(2, longest_unit(frames)), unit
    # The orders run at those rates: a higher one keeps no more frames; a longer segment leaves no more segments.
    distinct = [len(set(order_of(frame_sampling, s, frames, [0])[0].tolist())) for s in LEVELS]
    assert distinct == [-(-frames // rate) for rate in rates] == sorted(distinct, reverse=True)
    assert [len(set(order_of(reverse_sampling, s, frames, [0])[0].tolist())) for s in LEVELS] == [
        -(-frames // rate) for rate in backwards
    ]
    assert all(-(-frames // length) >= 2 for length in segments)


def test_on_the_demos_twelve_frames_the_high_levels_keep_two_frames() -> None:
    # Rates 16 and 32 would show frame 0 at every position of a 12-frame clip (the reference's).
    assert [sampling_rate(frame_sampling.table[s].rate, 12) for s in LEVELS] == [2, 4, 6, 6, 6]
    assert order_of(frame_sampling, 5, 12, [3])[0].tolist() == [0] * 6 + [6] * 6
    assert order_of(reverse_sampling, 5, 12, [3])[0].tolist() == [6] * 6 + [0] * 6
    # Box jumble's 16-frame segments would leave the clip as it is: two halves trade places.
    assert order_of(box_jumble, 3, 12, [3])[0].tolist() == [*range(6, 12), *range(6)]


def test_the_shortest_clips() -> None:
    assert order_of(frame_sampling, 5, 2, [0])[0].tolist() == [0, 0]
    for corruption in (reverse_sampling, jumble, box_jumble):
        assert order_of(corruption, 5, 2, [0])[0].tolist() == [1, 0], corruption.name
    assert order_of(reverse_sampling, 5, 3, [0])[0].tolist() == [2, 2, 0]


def test_a_clip_that_draws_its_own_order_draws_again_alone_as_in_any_batch() -> None:
    # Jumble of pairs on 2 frames draws the clip's own order one time in two.
    seeds = list(range(40))
    together = order_of(jumble, 5, 2, seeds)
    assert together.tolist() == [[1, 0]] * len(seeds)
    four = order_of(box_jumble, 1, 4, seeds)  # two segments of 2: they always trade places
    assert four.tolist() == [[2, 3, 0, 1]] * len(seeds)
    shuffled = order_of(jumble, 4, 5, seeds)
    for i, seed in enumerate(seeds):
        assert torch.equal(order_of(jumble, 4, 5, [seed])[0], shuffled[i])
        assert torch.equal(order_of(jumble, 4, 5, [seeds[-1], seed])[1], shuffled[i])


@pytest.mark.parametrize("corruption", TEMPORAL, ids=lambda c: c.name)
def test_a_clip_of_one_frame_is_refused_naming_it(corruption: TemporalCorruption[Any]) -> None:
    fields, seeds = clips(batch=2, frames=1)
    fields["index"] = SampleIndex((0, 1), ("blackswan", "bmx-trees"))
    with pytest.raises(DatasetError, match=rf"{corruption.name}: clips blackswan, bmx-trees have 1 frame"):
        corruption(fields, 1, seeds)
    assert corruption(fields, 0, seeds)["video"] is fields["video"]  # the clean cell takes it as it is


def test_the_tables_say_the_rule_so_baselines_measured_before_it_are_refused() -> None:
    assert frame_sampling.table.describe()[4] == "rate=32; at most half the clip"
    assert reverse_sampling.table.describe()[0] == "rate=2; at most half the clip"
    assert box_jumble.table.describe()[2] == "length=16; at most half the clip, the clip's own order drawn again"
    assert jumble.table.describe()[4] == "length=2; the clip's own order drawn again"
    assert frame_freeze.table.describe()[0] == "fraction=0.1"  # it always changed every clip
