"""Prompt protocols: how a promptable suite's prompts are drawn from each ground-truth instance.

A suite of ``task: promptable`` declares its protocol::

    prompts: {protocol: standard, points: {count: 1, where: center}, box: tight, mask: false}

A protocol is a registered, versioned class (:data:`PROMPT_PROTOCOLS`; installed packages add
theirs under the ``segrobust.prompt_protocols`` entry point group): a new way of drawing prompts
is a new module, and a protocol's ``version`` is part of what a clean result is cached under.

The built-in ``standard`` protocol (version 1):

* ``points``: ``count`` foreground clicks per instance (1 to 8), ``where: center`` (the first
  click at the instance's innermost pixel, the last to vanish when the mask is eroded
  repeatedly, the one nearest the mask's centroid among those, then further clicks drawn
  uniformly from the rest of the mask) or ``where: random`` (all drawn uniformly from the mask).
  Random clicks come from the sample's own Philox stream keyed by (suite seed, sample id,
  instance, prompt kind), so they do not depend on batch, order, worker or device.
* ``box: tight``: the mask's tight box; ``box: none`` (or leaving it out) asks no box.
* ``mask: false``: mask prompts are not part of version 1.

Each declared kind is a prompt set of its own (:meth:`~pytest_segrobust.core.prompts.InstancePrompts.prompt_sets`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from pytest_segrobust.core.errors import FieldError
from pytest_segrobust.core.prompts import ABSENT, BOX, FOREGROUND, POINTS, InstancePrompts
from pytest_segrobust.core.registry import NamedRegistry
from pytest_segrobust.core.types import InstanceTarget, boxes_from_masks
from pytest_segrobust.randomness.seeding import SampleStreams, derived_seed

ENTRY_POINT_GROUP = "segrobust.prompt_protocols"
MAX_CLICKS = 8


class PromptProtocol(ABC):
    """A way of drawing prompts for every instance of an image.

    Attributes:
        name: Registry name, as ``prompts.protocol`` names it.
        version: Bumped when a change can move a prompt: it keys cached clean results.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "1"

    @classmethod
    @abstractmethod
    def of(cls, options: Mapping[str, Any]) -> PromptProtocol:
        """The protocol a suite's ``prompts:`` mapping (without ``protocol``) declares.

        Raises:
            FieldError: naming the option at fault relative to ``prompts`` (``points.count``).
        """

    @property
    @abstractmethod
    def kinds(self) -> tuple[str, ...]:
        """The prompt kinds asked, in :data:`~pytest_segrobust.core.prompts.PROMPT_KINDS` order."""

    @abstractmethod
    def describe(self) -> str:
        """One line naming the protocol, its version and options (what a clean result is keyed by)."""

    def prompts(self, instances: InstanceTarget, sample_id: str, seed: int) -> InstancePrompts:
        """The prompts of one image's instances (crowd regions are left out), instance ``i`` keyed by
        ``(sample_id, i)``."""
        masks = instances.masks[~instances.iscrowd].bool()
        return self.keyed_prompts(masks, [(sample_id, i) for i in range(int(masks.shape[0]))], seed)

    @abstractmethod
    def keyed_prompts(self, masks: torch.Tensor, keys: Sequence[tuple[object, ...]], seed: int) -> InstancePrompts:
        """The prompts of the masks ``masks``, each drawn from its own stream keyed by ``(seed, *keys[i], kind)``:
        an image's instances (:meth:`prompts`), or a clip's objects at one frame
        (:mod:`pytest_segrobust.data.clip_prompts`).

        Shape:
            masks: ``(N, H, W)``, bool; keys: ``N`` tuples.
        """

    def options(self) -> dict[str, Any]:
        """The protocol's options as JSON values; by default its :meth:`describe` line."""
        return {"described": self.describe()}

    def record(self) -> dict[str, Any]:
        """The protocol as a baseline records it: ``{"protocol": name, "version": v, "options": {...}}``."""
        return {"protocol": self.name, "version": self.version, "options": self.options()}


PROMPT_PROTOCOLS: NamedRegistry[type[PromptProtocol]] = NamedRegistry(
    "prompt protocol", ENTRY_POINT_GROUP, ("pytest_segrobust.data.prompt_protocol",)
)


@dataclass(frozen=True)
class StandardProtocolSettings:
    """The options of the ``standard`` protocol."""

    clicks: int = 1
    where: str = "center"
    box: bool = True


@PROMPT_PROTOCOLS.register
class StandardProtocol(PromptProtocol):
    """Clicks at the centre or at random in the mask, and the tight box (see the module)."""

    name = "standard"
    version = "1"

    def __init__(self, settings: StandardProtocolSettings | None = None) -> None:
        self.settings = settings or StandardProtocolSettings()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StandardProtocol) and other.settings == self.settings

    def __hash__(self) -> int:
        return hash(self.settings)

    def __repr__(self) -> str:
        return f"StandardProtocol({self.settings})"

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> StandardProtocol:
        unknown = sorted(set(options) - {"points", "box", "mask"})
        if unknown:
            raise FieldError(unknown[0], "unknown option; expected points, box or mask")
        points, clicks, where = options.get("points"), 0, "center"
        if points is not None:
            if not isinstance(points, Mapping) or set(points) - {"count", "where"}:
                raise FieldError("points", f"expected a mapping {{count: 1, where: center|random}}, got {points!r}")
            clicks = points.get("count", 1)
            if isinstance(clicks, bool) or not isinstance(clicks, int) or not 1 <= clicks <= MAX_CLICKS:
                raise FieldError("points.count", f"expected an integer 1..{MAX_CLICKS}, got {clicks!r}")
            where = points.get("where", "center")
            if where not in ("center", "random"):
                raise FieldError("points.where", f"expected center or random, got {where!r}")
        box = options.get("box", "none")
        if box not in ("tight", "none", None):
            raise FieldError("box", f"expected tight or none, got {box!r}")
        if options.get("mask", False) is not False:
            raise FieldError("mask", f"mask prompts are not part of protocol standard v{cls.version}; expected false")
        if clicks == 0 and box != "tight":
            raise FieldError("", "declares no prompt; give points, box: tight, or both")
        return cls(StandardProtocolSettings(clicks, where, box == "tight"))

    @property
    def kinds(self) -> tuple[str, ...]:
        return (*((POINTS,) if self.settings.clicks else ()), *((BOX,) if self.settings.box else ()))

    def options(self) -> dict[str, Any]:
        return asdict(self.settings)

    def describe(self) -> str:
        s = self.settings
        return f"prompt protocol {self.name} v{self.version}: {s.clicks} click(s) at {s.where}, box {'tight' if s.box else 'none'}"

    def keyed_prompts(self, masks: torch.Tensor, keys: Sequence[tuple[object, ...]], seed: int) -> InstancePrompts:
        count, slots = int(masks.shape[0]), max(self.settings.clicks, 1)
        points = torch.zeros(count, slots, 2, dtype=torch.float32)
        labels = torch.full((count, slots), ABSENT, dtype=torch.int64)
        cpu = masks.cpu()
        for i in range(count):
            if not self.settings.clicks or not bool(cpu[i].any()):
                continue
            streams = SampleStreams([derived_seed(seed, *keys[i], POINTS)], "cpu")
            chosen = self._clicks(cpu[i], streams)
            points[i, : len(chosen)] = chosen
            labels[i, : len(chosen)] = FOREGROUND
        device = masks.device
        return InstancePrompts(
            masks,
            points.to(device),
            labels.to(device),
            boxes_from_masks(masks),
            torch.full((count,), self.settings.box, dtype=torch.bool, device=device),
            torch.ones(count, dtype=torch.bool, device=device),
            masks.flatten(1).count_nonzero(dim=1),
            ",".join(self.kinds),
        )

    def _clicks(self, mask: torch.Tensor, streams: SampleStreams) -> torch.Tensor:
        """``clicks`` distinct pixels of ``mask`` (fewer where it is smaller), ``(n, 2)`` float32 ``(x, y)``."""
        pixels = mask.flatten().nonzero().flatten()  # raster order
        chosen: list[int] = []
        if self.settings.where == "center":
            chosen.append(innermost_pixel(mask))
        wanted = min(self.settings.clicks, int(pixels.numel()))
        if len(chosen) >= wanted:
            return _xy(chosen, int(mask.shape[1]))
        # One draw of uniforms ranks every pixel: the first clicks of a count are those of a smaller count.
        order = streams.uniform([int(pixels.numel())], dtype=torch.float64)[0].argsort(stable=True)
        for index in order.tolist():
            if len(chosen) >= wanted:
                break
            if int(pixels[index]) not in chosen:
                chosen.append(int(pixels[index]))
        return _xy(chosen, int(mask.shape[1]))


def _xy(pixels: list[int], width: int) -> torch.Tensor:
    """Raster indices as ``(n, 2)`` float32 ``(x, y)``."""
    return torch.tensor([[p % width, p // width] for p in pixels], dtype=torch.float32).reshape(-1, 2)


def innermost_pixel(mask: torch.Tensor) -> int:
    """The raster index of the mask pixel farthest inside: of the last pixels left by repeated 3x3
    erosion, the one nearest their centroid (the first in raster order on a tie).

    Shape:
        mask: ``(H, W)``, bool, not empty.
    """
    rows, columns = mask.any(dim=1).nonzero().flatten(), mask.any(dim=0).nonzero().flatten()
    top, left = int(rows[0]), int(columns[0])
    crop = mask[top : int(rows[-1]) + 1, left : int(columns[-1]) + 1]  # erosion never leaves the box
    current = crop.float()[None, None]
    while True:
        eroded = -F.max_pool2d(-F.pad(current, (1, 1, 1, 1), value=0.0), 3, stride=1)
        if not bool(eroded.any()):
            break
        current = eroded
    last = current[0, 0].bool()
    ys, xs = last.nonzero(as_tuple=True)
    ys, xs = ys + top, xs + left
    cy, cx = ys.double().mean(), xs.double().mean()
    distance = (ys.double() - cy) ** 2 + (xs.double() - cx) ** 2
    best = int(distance.argmin())
    return int(ys[best]) * int(mask.shape[1]) + int(xs[best])


def protocol_of(raw: Any) -> PromptProtocol:
    """The protocol a suite's ``prompts:`` value declares (``protocol`` defaults to ``standard``).

    Raises:
        FieldError: naming the option at fault relative to ``prompts``.
    """
    if not isinstance(raw, Mapping):
        raise FieldError("", f"expected a mapping such as {{points: {{count: 1, where: center}}, box: tight}}, got {raw!r}")
    name = raw.get("protocol", StandardProtocol.name)
    try:
        chosen = PROMPT_PROTOCOLS.get(name)
    except Exception as exc:  # noqa: BLE001 - the registry's own words, under the field
        raise FieldError("protocol", str(exc)) from None
    return chosen.of({key: value for key, value in raw.items() if key != "protocol"})
