"""Static and dynamic perturbation of clips (R2-Bench): one draw per clip, or a perturbation and level per frame."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from pytest_segrobust.core.types import ReferringMask, Video, VideoMasks
from pytest_segrobust.corruptions import REGISTRY, Corruption
from pytest_segrobust.corruptions.base import whole_batches, with_frame_draws
from pytest_segrobust.corruptions.composition import part_seed
from pytest_segrobust.corruptions.dynamic import DynamicMixture, DynamicMode, StaticMode, dynamic
from pytest_segrobust.corruptions.temporal import frame_freeze
from pytest_segrobust.randomness.seeding import FrameDraws
from tests.corruptions.test_clips import clips, same

PARTS = ("gaussian_noise", "rotate", "motion_blur")


def mixture(types: str = "per_frame", levels: tuple[int, ...] = (1, 3, 5)) -> DynamicMixture:
    return dynamic([REGISTRY.get(name) for name in PARTS], types, levels)


@pytest.mark.parametrize("types", ["per_frame", "per_clip"])
def test_each_frame_is_its_drawn_perturbation_at_its_drawn_level(types: str) -> None:
    mix = mixture(types)
    fields, seeds = clips(batch=3, frames=6)
    out = mix(fields, 3, seeds)
    chosen, levels = mix.choices(seeds, 6)
    for b in range(3):
        for t in range(6):
            part = mix.parts[int(chosen[b, t])]
            # What the part drawn once per frame gives this frame, keyed by the clip and the part.
            alone = with_frame_draws(part, FrameDraws.FRAME)(
                fields, int(levels[b, t]), [part_seed(s, part.name) for s in seeds]
            )
            assert torch.equal(out["video"].data[b, t], alone["video"].data[b, t]), (b, t)
            assert torch.equal(out["masks"].data[b, t], alone["masks"].data[b, t]), (b, t)  # moved with its frame
    assert torch.equal(out["video"].frame_ids, fields["video"].frame_ids)
    assert out["masks"].object_ids == fields["masks"].object_ids
    assert out["audio"] is fields["audio"] and out["index"] is fields["index"]
    assert {int(v) for v in levels.flatten()} <= {1, 3, 5}


def test_a_clips_draws_do_not_depend_on_its_batch() -> None:
    mix = mixture()
    fields, seeds = clips(batch=4, frames=5)
    whole = mix(fields, 2, seeds)
    with whole_batches():
        assert all(same(whole[name], f) for name, f in mix(fields, 2, seeds).items())
    order = [3, 0, 2]
    part = mix({name: f.take(order) for name, f in fields.items()}, 2, [seeds[i] for i in order])
    for name, f in part.items():
        assert same(f, whole[name].take(order)), name
    assert all(same(whole[name], f) for name, f in mix(fields, 2, seeds).items())  # and again


def test_every_severity_runs_the_mixture_and_zero_is_clean() -> None:
    mix = mixture()
    fields, seeds = clips(batch=2, frames=4)
    assert mix(fields, 0, seeds)["video"] is fields["video"]
    for severity in range(1, 6):
        out = mix(fields, severity, seeds)
        assert out["video"].data.shape == fields["video"].data.shape
        assert float(out["video"].data.min()) >= 0 and float(out["video"].data.max()) <= 1
        assert not torch.equal(out["video"].data, fields["video"].data)


def test_per_frame_draws_are_uniform_over_types_and_levels() -> None:
    mix = mixture()
    clips_, frames = 400, 25
    chosen, levels = mix.choices(list(range(10_000, 10_000 + clips_)), frames)
    total = clips_ * frames
    for values, options in ((chosen, range(3)), (levels, (1, 3, 5))):
        counts = [int((values == v).sum()) for v in options]
        assert all(abs(c - total / 3) < 0.1 * total / 3 for c in counts), counts  # about 7 sigma
    pairs = [int(((chosen == k) & (levels == v)).sum()) for k in range(3) for v in (1, 3, 5)]
    assert all(abs(c - total / 9) < 0.2 * total / 9 for c in pairs), pairs
    # Frames draw independently: a frame repeats the previous frame's type about a third of the time.
    repeats = float((chosen[:, 1:] == chosen[:, :-1]).float().mean())
    assert 0.3 < repeats < 0.37
    assert all(len(set(row)) > 1 for row in chosen.tolist())


def test_per_clip_types_hold_for_the_clip_and_levels_still_change() -> None:
    mix = mixture("per_clip")
    clips_, frames = 600, 12
    chosen, levels = mix.choices(list(range(clips_)), frames)
    assert bool((chosen == chosen[:, :1]).all())
    counts = [int((chosen[:, 0] == k).sum()) for k in range(3)]
    assert all(abs(c - clips_ / 3) < 0.25 * clips_ / 3 for c in counts), counts
    assert sum(len(set(row)) > 1 for row in levels.tolist()) > 0.9 * clips_
    per_frame = mixture("per_frame").choices(list(range(clips_)), frames)[0]
    assert not bool((per_frame == per_frame[:, :1]).all())


def test_levels_are_those_asked_for() -> None:
    mix = mixture(levels=(2, 4))
    _, levels = mix.choices(list(range(50)), 10)
    assert {int(v) for v in levels.unique()} == {2, 4}
    assert mix.name == "dynamic[gaussian_noise,rotate,motion_blur;types=per_frame;levels=2,4]"
    assert mixture().name == "dynamic[gaussian_noise,rotate,motion_blur]"
    assert mixture("per_clip").name == "dynamic[gaussian_noise,rotate,motion_blur;types=per_clip;levels=1,3,5]"


def test_modes_read_from_a_suites_mapping() -> None:
    assert DynamicMode.from_mapping({}) == DynamicMode(FrameDraws.FRAME, (1, 3, 5))
    mode = DynamicMode.from_mapping({"types": "per_clip", "levels": [1, 3, 5]})
    assert mode == DynamicMode(FrameDraws.CLIP, (1, 3, 5)) and mode.to_json() == {
        "types": "per_clip",
        "levels": [1, 3, 5],
    }
    assert StaticMode.from_mapping({"redraw": "per_frame"}) == StaticMode(FrameDraws.FRAME)
    assert StaticMode.from_mapping({}).to_json() == {"redraw": "per_clip"}
    with pytest.raises(ValueError, match="dynamic.types must be per_clip or per_frame, got 'each'"):
        DynamicMode.from_mapping({"types": "each"})
    with pytest.raises(ValueError, match=r"dynamic.levels must be distinct severities 1..5, got \[0, 3\]"):
        DynamicMode.from_mapping({"levels": [0, 3]})
    with pytest.raises(ValueError, match="dynamic.levels must be a list of severities, got 3"):
        DynamicMode.from_mapping({"levels": 3})
    with pytest.raises(ValueError, match="static: unknown option redraws; known: redraw"):
        StaticMode.from_mapping({"redraws": "per_frame"})


def test_a_mixture_refuses_what_it_cannot_draw_from() -> None:
    with pytest.raises(ValueError, match="at least one perturbation"):
        DynamicMixture([])
    with pytest.raises(ValueError, match="lists rotate more than once"):
        dynamic([REGISTRY.get("rotate"), REGISTRY.get("rotate")])
    with pytest.raises(ValueError, match="frame_freeze reorders whole clips"):
        dynamic([REGISTRY.get("rotate"), frame_freeze])
    fields, seeds = clips(batch=2, frames=3)
    first = ReferringMask(fields["masks"].data[:, 0] == 1)  # pixels, no frames: no frame's warp can move it
    with pytest.raises(
        ValueError, match=r"field with pixels but without frames cannot follow: first \(ReferringMask\)"
    ):
        mixture()({**fields, "first": first}, 1, seeds)
    photometric = dynamic([REGISTRY.get("gaussian_noise")])
    assert photometric({**fields, "first": first}, 1, seeds)["first"] is first


def test_a_composition_can_take_part() -> None:
    mix = dynamic([REGISTRY.get("fog+jpeg_compression"), REGISTRY.get("gaussian_noise")])
    fields, seeds = clips(batch=2, frames=4)
    out = mix(fields, 1, seeds)
    assert mix.name == "dynamic[fog+jpeg_compression,gaussian_noise]" and out["video"].data.shape == (2, 4, 3, 24, 32)


STILL_IMAGE_CORRUPTIONS = sorted(
    {(c.name, p) for p in ("coco-p", "imagenet-c") for c in REGISTRY.preset(p)}, key=lambda pair: pair
)


@pytest.mark.parametrize(
    ("name", "preset"), STILL_IMAGE_CORRUPTIONS, ids=[f"{n}@{p}" for n, p in STILL_IMAGE_CORRUPTIONS]
)
def test_a_static_clip_does_not_flicker(name: str, preset: str) -> None:
    corruption = StaticMode().apply(REGISTRY.get(name, preset))
    fields, seeds = clips(batch=2, frames=3, still=True)
    out = corruption(fields, 3, seeds)
    for t in (1, 2):  # every frame of a clip whose frames are alike stays alike: the same draws
        assert torch.equal(out["video"].data[:, t], out["video"].data[:, 0]), t
        assert torch.equal(out["masks"].data[:, t], out["masks"].data[:, 0]), t


def test_a_static_clip_gets_one_noise_field_and_the_toolboxs_redraws_it() -> None:
    # Three different grey frames, far from 0 and 1: gaussian noise adds one field to all of them.
    greys = torch.tensor([0.4, 0.5, 0.6]).view(1, 3, 1, 1, 1).expand(2, 3, 3, 24, 32).contiguous()
    fields = {"video": Video.of(greys), "masks": VideoMasks.of(torch.zeros(2, 3, 24, 32, dtype=torch.int64))}
    seeds = [7, 8]
    noise = REGISTRY.get("gaussian_noise")
    static = StaticMode().apply(noise)
    assert static is noise
    added = static(fields, 1, seeds)["video"].data - greys
    inside = ((greys + added > 0) & (greys + added < 1)).all(dim=1)  # unclipped in every frame
    for t in (1, 2):
        assert torch.allclose(added[:, t][inside], added[:, 0][inside], atol=1e-6)
    redrawn = StaticMode(FrameDraws.FRAME).apply(noise)
    assert redrawn.name == noise.name and redrawn.frame_draws is FrameDraws.FRAME
    flicker = redrawn(fields, 1, seeds)["video"].data - greys
    assert float((flicker[:, 1] - flicker[:, 0]).abs().mean()) > 0.05


@pytest.mark.parametrize("name", ["gaussian_noise+rotate", "fog+jpeg_compression"])
def test_a_composition_redraws_every_frame_when_asked(name: str) -> None:
    composition: Corruption[Any] = REGISTRY.get(name)
    fields, seeds = clips(batch=2, frames=3, still=True)
    per_clip = StaticMode().apply(composition)(fields, 3, seeds)["video"].data
    per_frame = StaticMode(FrameDraws.FRAME).apply(composition)(fields, 3, seeds)["video"].data
    assert torch.equal(per_clip[:, 1], per_clip[:, 0])
    assert not torch.equal(per_frame[:, 1], per_frame[:, 0])
    assert all(part.frame_draws is FrameDraws.CLIP for part in composition.parts)  # the original is untouched
