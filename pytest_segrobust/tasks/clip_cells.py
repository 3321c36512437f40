"""The suite keys of the video tasks: ``static:`` and ``dynamic:`` (R2-Bench's two ways to perturb a clip).

A video suite (``task: vos`` or ``rvos``) may set::

    static: {redraw: per_frame}       # the listed corruptions re-draw their noise and warps every
                                      # frame, as R2-Bench's toolbox (default per_clip: no flicker)
    dynamic:                          # adds the cell dynamic[...]: each frame its own perturbation and level
      corruptions: [gaussian_noise, motion_blur, rotate]   # default: the listed ones that perturb frames
      types: per_frame                # or per_clip (the toolbox's R-VOS / AVS variant)
      levels: [1, 3, 5]
    temporal: [frame_freeze, frame_sampling]   # adds these cells of the video-temporal preset
                                               # (whatever the suite's preset): frames stall or reorder

``static`` applies to every listed corruption that perturbs frames (not the temporal ones,
which draw one frame order per clip, nor text perturbations). A static mode that re-draws per
frame says so in the cell's severity table, so baselines recorded under the other mode are
refused rather than compared. See :mod:`pytest_segrobust.corruptions.dynamic`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.modality import DYNAMIC_PREFIX, Modality
from pytest_segrobust.core.types import Video
from pytest_segrobust.corruptions.base import Corruption, NotedTable
from pytest_segrobust.corruptions.dynamic import DynamicMixture, DynamicMode, StaticMode
from pytest_segrobust.tasks.base import SuiteCells, SuiteKeyError, suite_list, suite_mapping

CLIP_SUITE_KEYS = ("static", "dynamic", "temporal")
TEMPORAL_PRESET = "video-temporal"


def perturbs_frames(corruption: Corruption[Any]) -> bool:
    """Whether a corruption changes the pixels of frames one at a time (a static or dynamic part)."""
    return corruption.accepts(Video) and not corruption.temporal and corruption.modality is not Modality.DYNAMIC


@dataclass(frozen=True)
class ClipCells(SuiteCells):
    """A video suite's ``static`` mode and its ``dynamic`` cell.

    Attributes:
        static: How the listed corruptions draw along frames.
        dynamic: The parts and the mode of the dynamic cell; ``None`` without one.
    """

    static: StaticMode = field(default_factory=StaticMode)
    dynamic_parts: tuple[str, ...] = ()
    dynamic: DynamicMode | None = None
    temporal: tuple[str, ...] = ()

    @property
    def added(self) -> tuple[str, ...]:  # type: ignore[override]
        return (*(() if self.dynamic is None else (self.dynamic_cell,)), *self.temporal)

    @property
    def once(self) -> tuple[str, ...]:  # type: ignore[override]
        return () if self.dynamic is None else (self.dynamic_cell,)

    @property
    def dynamic_cell(self) -> str:
        assert self.dynamic is not None
        # corruptions.dynamic.dynamic_name of the parts: the name the mixture itself takes
        return f"{DYNAMIC_PREFIX}{','.join(self.dynamic_parts)}{self.dynamic.label()}]"

    def cell(self, name: str, resolve: Callable[[str], Any]) -> Any:
        if self.dynamic is not None and name == self.dynamic_cell:
            return DynamicMixture([resolve(part) for part in self.dynamic_parts], self.dynamic)
        if name in self.temporal:
            return resolve(name, TEMPORAL_PRESET)
        corruption = resolve(name)
        if not isinstance(corruption, Corruption) or not perturbs_frames(corruption):
            return corruption
        static = self.static.apply(corruption)
        if static is corruption:
            return corruption
        static.table = NotedTable(corruption.table.rows, "static redraw per_frame")
        return static


def clip_cells(options: Mapping[str, Any], corruptions: tuple[str, ...], resolve: Callable[[str], Any]) -> ClipCells:
    """A video suite's ``static`` and ``dynamic`` keys (see the module).

    Raises:
        SuiteKeyError: naming the field: an unknown option, a wrong value, a dynamic part that is
            not a frame perturbation.
    """
    static = StaticMode()
    if "static" in options:
        raw = suite_mapping(
            "static",
            options["static"],
            "a mapping such as {redraw: per_frame}",
            ("redraw",),
            "unknown option; expected redraw (per_clip or per_frame)",
        )
        try:
            static = StaticMode.from_mapping(raw)
        except ValueError as exc:
            raise SuiteKeyError("static.redraw", str(exc)) from None
    temporal = _temporal(options.get("temporal"), corruptions, resolve) if "temporal" in options else ()
    if "dynamic" not in options:
        return ClipCells(static, temporal=temporal)
    raw = suite_mapping(
        "dynamic",
        options["dynamic"],
        "a mapping such as {corruptions: [...], types: per_frame, levels: [1, 3, 5]}",
        ("corruptions", "types", "levels"),
        "unknown option; expected corruptions, types or levels",
    )
    parts = _dynamic_parts(raw.get("corruptions"), corruptions, resolve)
    mode_options = {key: value for key, value in raw.items() if key != "corruptions"}
    try:
        mode = DynamicMode.from_mapping(mode_options)
    except ValueError as exc:
        text = str(exc)
        where = "dynamic.levels" if "levels" in text else "dynamic.types"
        raise SuiteKeyError(where, text) from None
    return ClipCells(static, parts, mode, temporal)


def _temporal(raw: Any, listed: tuple[str, ...], resolve: Callable[..., Any]) -> tuple[str, ...]:
    return preset_list("temporal", raw, "temporal perturbations", listed, resolve, TEMPORAL_PRESET)


def preset_list(
    field: str, raw: Any, what: str, listed: tuple[str, ...], resolve: Callable[..., Any], preset: str
) -> tuple[str, ...]:
    """A suite key that adds cells of ``preset`` (``temporal``, ``acoustic``): its list of names, each one
    of ``preset``'s and none of the suite's ``listed`` corruptions.

    Raises:
        SuiteKeyError: naming the list, or the item at fault with the registry's words for an unknown name.
    """

    def refusal(name: str) -> str | None:
        try:
            resolve(name, preset)
        except SegRobustError as exc:
            return str(exc)
        return None

    return suite_list(field, raw, what, refusal, listed)


def _dynamic_parts(raw: Any, listed: tuple[str, ...], resolve: Callable[[str], Any]) -> tuple[str, ...]:
    if raw is None:
        parts = tuple(name for name in listed if _fits(name, resolve))
        if not parts:
            raise SuiteKeyError("dynamic.corruptions", "none of the listed corruptions perturbs frames; list some here")
        return parts

    def refusal(name: str) -> str | None:
        try:
            corruption = resolve(name)
        except SegRobustError as exc:  # an unknown name: the registry's message lists the known ones
            return str(exc)
        if not isinstance(corruption, Corruption) or not perturbs_frames(corruption):
            return f"{name!r} does not perturb frames one at a time (temporal and text perturbations cannot take part)"
        return None

    return suite_list("dynamic.corruptions", raw, "corruption names", refusal)


def _fits(name: str, resolve: Callable[[str], Any]) -> bool:
    corruption = resolve(name)
    return isinstance(corruption, Corruption) and perturbs_frames(corruption)
