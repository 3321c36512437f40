"""Clips under one perturbation throughout (static) or a new one every frame (dynamic), as R2-Bench has them.

R2-Bench (Li et al., appendix 1.7) perturbs a video *statically*, one perturbation at one
level for the whole clip, or *dynamically*: "treat each frame independently and randomly
select perturbation type and severity with a uniform distribution". Its levels low, medium
and high are our severities 1, 3 and 5. Its released toolbox differs in two ways, and both
can be asked for here:

* its dynamic mode for R-VOS and AVS draws the type once per video and only the level per
  frame: ``DynamicMode(types=FrameDraws.CLIP)`` (a suite's ``dynamic: {types: per_clip}``);
* its static mode re-draws noise fields, blur angles and warps every frame, so static clips
  flicker: ``StaticMode(redraw=FrameDraws.FRAME)`` (``static: {redraw: per_frame}``). Ours
  draws once per clip by default: every frame gets the same noise field and the same warp.

Static mode is any corruption applied to a clip (:meth:`StaticMode.apply`). Dynamic mode is
a corruption of its own, :class:`DynamicMixture`, over a list of perturbations. Every draw is
a function of ``(seed, clip id, frame, perturbation)`` alone (:meth:`DynamicMixture.frame_seed`):
the clip's seed is :func:`~pytest_segrobust.randomness.seeding.sample_seed` of the mixture's name, which
spells its perturbations and options, so two mixtures never share draws. Geometric
perturbations move the masks of the frame they move.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pytest_segrobust.core.modality import DYNAMIC_PREFIX, Modality
from pytest_segrobust.core.types import Field, Video, frames_of
from pytest_segrobust.corruptions import kernels
from pytest_segrobust.corruptions.base import MAX_SEVERITY, Category, Corruption, SeverityTable
from pytest_segrobust.corruptions.composition import part_seed
from pytest_segrobust.randomness.seeding import FrameDraws, SampleStreams, StreamKeys, derived_seed

# What a suite writes for each way of drawing along a clip's frames.
_SPELLING = {"per_clip": FrameDraws.CLIP, "per_frame": FrameDraws.FRAME}
FRAME_DRAW_SPELLINGS = tuple(_SPELLING)
"""What a suite may write for ``dynamic.types`` and ``static.redraw``."""
R2_LEVELS = (1, 3, 5)  # low, medium, high


def frame_draws_of(value: object, option: str) -> FrameDraws:
    """``"per_clip"`` or ``"per_frame"`` (or a :class:`FrameDraws`) as a :class:`FrameDraws`.

    Raises:
        ValueError: naming the option and what it accepts.
    """
    if isinstance(value, FrameDraws):
        return value
    if value not in _SPELLING:
        raise ValueError(f"{option} must be per_clip or per_frame, got {value!r}")
    return _SPELLING[value]  # type: ignore[index]


def _spelt(draws: FrameDraws) -> str:
    return "per_clip" if draws is FrameDraws.CLIP else "per_frame"


def _unknown_keys(options: Mapping[str, object], known: set[str], mode: str) -> None:
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"{mode}: unknown option {', '.join(unknown)}; known: {', '.join(sorted(known))}")


@dataclass(frozen=True)
class StaticMode:
    """One perturbation at one level for the whole clip.

    Attributes:
        redraw: ``FrameDraws.CLIP`` (ours, the default): random parameters and noise fields
            are drawn once per clip, so the clip does not flicker; ``FrameDraws.FRAME``: drawn
            anew every frame, as R2-Bench's toolbox does.
    """

    redraw: FrameDraws = FrameDraws.CLIP

    @classmethod
    def from_mapping(cls, options: Mapping[str, object]) -> StaticMode:
        """A suite's ``static:`` mapping (``{redraw: per_frame}``)."""
        _unknown_keys(options, {"redraw"}, "static")
        return cls(frame_draws_of(options.get("redraw", "per_clip"), "static.redraw"))

    def to_json(self) -> dict[str, str]:
        return {"redraw": _spelt(self.redraw)}

    def apply(self, corruption: Corruption[Any]) -> Corruption[Any]:
        """``corruption`` drawing along the frames as :attr:`redraw` says (itself when it already does)."""
        if corruption.frame_draws is self.redraw:
            return corruption
        return corruption.drawing(self.redraw)


@dataclass(frozen=True)
class DynamicMode:
    """How a dynamic mixture draws each frame's perturbation and level.

    Attributes:
        types: ``FrameDraws.FRAME`` (R2-Bench's paper, the default): each frame draws its own
            perturbation; ``FrameDraws.CLIP`` (its toolbox for R-VOS and AVS): one per clip.
        levels: The severities each frame draws its level from, uniformly; R2-Bench's low,
            medium and high by default.
    """

    types: FrameDraws = FrameDraws.FRAME
    levels: tuple[int, ...] = R2_LEVELS

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", FrameDraws(self.types))
        levels = tuple(self.levels)
        if not levels or any(not isinstance(v, int) or isinstance(v, bool) for v in levels):
            raise ValueError(f"dynamic.levels must be a non-empty list of severities, got {self.levels!r}")
        if any(not 1 <= level <= MAX_SEVERITY for level in levels) or len(set(levels)) != len(levels):
            raise ValueError(f"dynamic.levels must be distinct severities 1..{MAX_SEVERITY}, got {list(levels)}")
        object.__setattr__(self, "levels", levels)

    @classmethod
    def from_mapping(cls, options: Mapping[str, object]) -> DynamicMode:
        """A suite's ``dynamic:`` mapping (``{types: per_clip, levels: [1, 3, 5]}``)."""
        _unknown_keys(options, {"types", "levels"}, "dynamic")
        levels = options.get("levels", R2_LEVELS)
        if not isinstance(levels, (list, tuple)):
            raise ValueError(f"dynamic.levels must be a list of severities, got {levels!r}")
        return cls(frame_draws_of(options.get("types", "per_frame"), "dynamic.types"), tuple(levels))

    def to_json(self) -> dict[str, object]:
        return {"types": _spelt(self.types), "levels": list(self.levels)}

    def label(self) -> str:
        """What a mixture's name adds for this mode: nothing for the paper's."""
        if self == DynamicMode():
            return ""
        return f";types={_spelt(self.types)};levels={','.join(map(str, self.levels))}"


def dynamic_name(parts: Sequence[Corruption[Any]], mode: DynamicMode) -> str:
    """``dynamic[fog,gaussian_noise,rotate]``, with the mode after a ``;`` when it is not the paper's."""
    return f"{DYNAMIC_PREFIX}{','.join(part.name for part in parts)}{mode.label()}]"


class DynamicMixture(Corruption[DynamicMode]):
    """Each frame of a clip under a perturbation and a level of its own, drawn uniformly (R2-Bench's dynamic mode).

    Frame ``t`` of a clip with seed ``s`` draws its perturbation index and its level from the
    key ``derived_seed(s, "frame", t)`` (Philox streams 0 and 1; with ``types`` drawn per clip,
    the index comes from ``s`` itself), then goes through that perturbation at that level as
    a one-frame clip with the key :meth:`frame_seed`: what the perturbation drawn once per
    frame would give that frame (``with_frame_draws(part, FrameDraws.FRAME)`` on the clip's
    :func:`~pytest_segrobust.corruptions.composition.part_seed`). The frame's masks move with
    it under a geometric perturbation; fields without pixels (audio, the sample index, the
    expressions) pass through. Frames that drew the same perturbation and level are corrupted
    in one batch; no frame's pixels depend on which.

    Every severity 1..5 runs the mixture as its mode says (the levels are drawn, not given):
    a suite gives a dynamic mixture one cell.

    Args:
        parts: The perturbations to draw from, at least one, each by its own name; temporal
            ones cannot take part (one frame has no order).
        mode: How the perturbation and the level are drawn.

    Raises:
        ValueError: for no parts, a repeated name or a temporal part.
    """

    acts_on = (Video,)

    def __init__(self, parts: Sequence[Corruption[Any]], mode: DynamicMode = DynamicMode()) -> None:
        if not parts:
            raise ValueError("a dynamic mixture draws from at least one perturbation, got none")
        names = [part.name for part in parts]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"a dynamic mixture lists {', '.join(repeated)} more than once")
        temporal = [part.name for part in parts if part.temporal]
        if temporal:
            raise ValueError(
                f"a dynamic mixture perturbs frames one by one; {', '.join(temporal)} reorders whole clips"
            )
        self.parts = tuple(parts)
        self.mode = mode
        super().__init__(dynamic_name(self.parts, mode), Category.COMPOSED, SeverityTable((mode,) * MAX_SEVERITY))
        self.geometric = any(part.geometric for part in self.parts)
        self.requires = tuple(dict.fromkeys(extra for part in self.parts for extra in part.requires))

    @property
    def modality(self) -> Modality:
        """:attr:`Modality.DYNAMIC`: reported under ``composed`` as a composition is, it draws per frame."""
        return Modality.DYNAMIC

    def choices(self, seeds: Sequence[int], frames: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Each frame's perturbation (an index into :attr:`parts`) and level, on the CPU.

        Shape:
            return: two ``(B, T)`` int64 tensors: part indices in ``[0, len(parts))``, and levels
            taken from the mode's ``levels``.
        """
        count = len(seeds)
        streams = SampleStreams(StreamKeys(tuple(seeds), FrameDraws.FRAME).frames(frames), "cpu")
        types = streams.integers(0, len(self.parts), (1,)).view(count, frames)
        drawn = streams.integers(0, len(self.mode.levels), (1,)).view(count, frames)
        if self.mode.types is FrameDraws.CLIP:
            types = SampleStreams(seeds, "cpu").integers(0, len(self.parts), (1,)).expand(count, frames).clone()
        return types, torch.tensor(self.mode.levels, dtype=torch.int64)[drawn]

    def frame_seed(self, seed: int, part: Corruption[Any], frame: int) -> int:
        """The key of the draws of ``part`` on frame ``frame`` of the clip whose seed is ``seed``."""
        return derived_seed(part_seed(seed, part.name), "frame", frame)

    def _corrupt(self, batch, severity, seeds, size, device):  # type: ignore[no-untyped-def]
        frames = frames_of(batch)
        assert frames is not None  # a Video field has frames
        moving = {name: f for name, f in batch.items() if f.size() is not None and f.frames() is not None}
        if self.geometric:
            still = [
                f"{name} ({type(f).__name__})"
                for name, f in batch.items()
                if f.size() is not None and f.frames() is None
            ]
            if still:
                raise ValueError(
                    f"{self.name}: moves every frame on its own, so a field with pixels but without frames cannot "
                    f"follow: {', '.join(still)}"
                )
        types, levels = self.choices(seeds, frames)
        types, levels = types.flatten().tolist(), levels.flatten().tolist()
        split = {name: kernels.split_frames(f) for name, f in moving.items()}
        pieces: list[dict[str, Field]] = []
        placed: list[int] = []
        for index, part in enumerate(self.parts):
            for level in self.mode.levels:
                chosen = [i for i, (k, v) in enumerate(zip(types, levels)) if k == index and v == level]
                if not chosen:
                    continue
                keys = [self.frame_seed(seeds[i // frames], part, i % frames) for i in chosen]
                pieces.append(part({name: f.take(chosen) for name, f in split.items()}, level, keys))
                placed.extend(chosen)
        back = torch.argsort(torch.tensor(placed)).tolist()  # every frame once: a permutation
        joined = {
            name: kernels.join_frames(type(f).join([piece[name] for piece in pieces]).take(back), frames)
            for name, f in split.items()
        }
        return {name: joined.get(name, f) for name, f in batch.items()}


def dynamic(
    parts: Sequence[Corruption[Any]], types: FrameDraws | str = FrameDraws.FRAME, levels: Sequence[int] = R2_LEVELS
) -> DynamicMixture:
    """A :class:`DynamicMixture` of ``parts``; ``types`` as a suite spells it (``"per_clip"``) or a :class:`FrameDraws`."""
    return DynamicMixture(parts, DynamicMode(frame_draws_of(types, "dynamic.types"), tuple(levels)))
