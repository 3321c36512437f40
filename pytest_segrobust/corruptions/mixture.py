"""R2-Bench's cross-modal mixture: per sample, visual only, the other input only, or both.

R2-Bench's generators apply at most two perturbations to a sample, at most one per modality:
visual only with probability 0.4, the other modality only 0.4, both 0.2, each type drawn
uniformly from its list. The other modality is the expression for referring segmentation
(:mod:`pytest_segrobust.text.mixture`), the sound for audio-visual segmentation
(:mod:`pytest_segrobust.tasks.avs`) and the prompts for promptable segmentation
(:mod:`pytest_segrobust.tasks.prompt_mixture`): a :class:`MixtureProtocol` names it and the stream its
draws come from, and :class:`CrossModalMixture` is the cell of each.

A draw is a pure function of (seed, sample id, the two lists, the severities): four uniforms
from the sample's own Philox stream choose the modality, the visual type, the other type and
the severity; every type is drawn whatever the modality, so the draws of one sample do not
depend on each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

from pytest_segrobust.core.modality import Category, Modality
from pytest_segrobust.core.types import Field, SampleIndex
from pytest_segrobust.corruptions.base import MAX_SEVERITY, Corruption, SeverityTable
from pytest_segrobust.corruptions.composition import SEPARATOR, part_seed
from pytest_segrobust.randomness.seeding import sample_seed

Choice = TypeVar("Choice")

ALONE, TOGETHER = 0.4, 0.2  # R2-Bench: one modality only (each), both
R2BENCH = "r2bench"
"""The protocol a suite's ``mixture:`` names (``mixture: r2bench``); the only one there is."""


@dataclass(frozen=True)
class MixtureDraw:
    """One sample's draw.

    Attributes:
        modality: Visual only, the other modality only, or :attr:`Modality.BOTH`.
        visual: The visual perturbation's name, or None where only the other input is perturbed.
        other: The other input's perturbation's name, or None for visual only.
        severity: The level both are applied at, 1..5; None where the cell's own level is
            applied (a draw asked for without severities).
        other_modality: What the other perturbation acts on: text, audio or prompts.
    """

    modality: Modality
    visual: str | None
    other: str | None
    severity: int | None = None
    other_modality: Modality = Modality.TEXT

    @property
    def text(self) -> str | None:
        """The text perturbation's name (referring segmentation), or None."""
        return self.other if self.other_modality is Modality.TEXT else None

    @property
    def audio(self) -> str | None:
        """The acoustic perturbation's name (audio-visual segmentation), or None."""
        return self.other if self.other_modality is Modality.AUDIO else None

    @property
    def prompt(self) -> str | None:
        """The prompt perturbation's name (promptable segmentation), or None."""
        return self.other if self.other_modality is Modality.PROMPT else None

    @property
    def name(self) -> str:
        """The cell-style name: ``"gaussian_noise"``, ``"misspelling"`` or ``"gaussian_noise+misspelling"``."""
        return SEPARATOR.join(part for part in (self.visual, self.other) if part is not None)

    def to_json(self) -> dict[str, object]:
        """A JSON-safe record (what crosses a process or lands in a report)."""
        return {
            "modality": self.modality.value,
            "visual": self.visual,
            self.other_modality.value: self.other,
            "severity": self.severity,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> MixtureDraw:
        """The draw :meth:`to_json` wrote."""
        other_modality = next((m for m in (Modality.AUDIO, Modality.PROMPT) if m.value in data), Modality.TEXT)
        severity = data["severity"]
        return cls(
            Modality(str(data["modality"])),
            _name(data["visual"]),
            _name(data[other_modality.value]),
            None if severity is None else int(str(severity)),
            other_modality,
        )


def _name(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class MixtureProtocol:
    """R2-Bench's mixture between the visual input and one other.

    Attributes:
        other: The other modality: :attr:`Modality.TEXT`, :attr:`Modality.AUDIO` or :attr:`Modality.PROMPT`.
        stream: The name slot of :func:`~pytest_segrobust.randomness.seeding.sample_seed` for
            the draws (no perturbation has it).
    """

    other: Modality
    stream: str

    @property
    def proportions(self) -> tuple[tuple[Modality, float], ...]:
        """The probabilities of visual only, the other only, both."""
        return ((Modality.VISUAL, ALONE), (self.other, ALONE), (Modality.BOTH, TOGETHER))

    def shares(self) -> str:
        """``"visual 40%, text 40%, both 20%"``: what a mixture cell's severity table says."""
        return ", ".join(f"{m.value} {p:.0%}" for m, p in self.proportions)

    def draw(
        self,
        seed: int,
        sample_id: str,
        visual: Sequence[str],
        other: Sequence[str],
        severity: int | Sequence[int] | None = None,
    ) -> MixtureDraw:
        """Draw one sample's modality, perturbation types and severity, R2-Bench's way.

        Args:
            seed: The suite's global seed.
            sample_id: The sample's stable id.
            visual: Visual perturbation names to draw from (uniformly), non-empty.
            other: The other modality's perturbation names to draw from (uniformly), non-empty.
            severity: The cell's level 1..5, several levels to draw from uniformly, or None
                (the draw has no severity: the cell's level applies).

        Raises:
            ValueError: for an empty list, a repeated name, or a severity outside 1..5.
        """
        for label, names in ((Modality.VISUAL.value, visual), (self.other.value, other)):
            if isinstance(names, str) or not names:
                raise ValueError(
                    f"r2bench mixture: the {label} list must be a non-empty sequence of names, got {names!r}"
                )
            repeated = [name for i, name in enumerate(names) if name in names[:i]]
            if repeated:
                raise ValueError(f"r2bench mixture: the {label} list names {repeated[0]!r} twice: {list(names)!r}")
        severities = () if severity is None else (severity,) if isinstance(severity, int) else tuple(severity)
        if severity is not None and (
            not severities
            or any(isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= MAX_SEVERITY for s in severities)
        ):
            raise ValueError(
                f"r2bench mixture: severity must be 1..{MAX_SEVERITY} or a non-empty list of them, got {severity!r}"
            )
        rng = np.random.Generator(np.random.Philox(key=sample_seed(seed, sample_id, self.stream, 0)))
        # Four uniforms whether or not a severity is drawn: the first three are the same either way.
        which, visual_draw, other_draw, severity_draw = rng.random(4)
        modality, cumulative = self.proportions[-1][0], 0.0
        for candidate, probability in self.proportions:
            cumulative += probability
            if which < cumulative:
                modality = candidate
                break
        return MixtureDraw(
            modality=modality,
            visual=_pick(visual, visual_draw) if modality is not self.other else None,
            other=_pick(other, other_draw) if modality is not Modality.VISUAL else None,
            severity=_pick(severities, severity_draw) if severities else None,
            other_modality=self.other,
        )


def _pick(options: Sequence[Choice], draw: float) -> Choice:
    """The option a uniform ``draw`` in [0, 1) falls on, each equally likely."""
    return options[min(int(draw * len(options)), len(options) - 1)]


class CrossModalMixture(Corruption[Any]):
    """R2-Bench's mixture at one level: per sample, visual only, the other input only or both.

    Each sample's draw is :meth:`MixtureProtocol.draw` of the suite's seed and the sample's id
    (in the batch's :class:`~pytest_segrobust.core.types.SampleIndex`), the same at every
    level; the cell's severity is the level of both parts. A part perturbs the samples that
    drew it as a batch of their own, drawing from ``part_seed(sample seed, part name)``, so a
    sample is perturbed alike in any batch, order or process. Visual parts come first, as in
    R2-Bench's chain; the two act on different inputs, so their order does not change the result.

    Args:
        name: The cell's name.
        protocol: Which other modality, and the stream the draws come from.
        visual: The visual perturbations drawn from.
        other: The other modality's perturbations drawn from.
        seed: The suite's global seed.

    Raises:
        ValueError: for an empty list of either.
    """

    def __init__(
        self,
        name: str,
        protocol: MixtureProtocol,
        visual: Sequence[Corruption[Any]],
        other: Sequence[Corruption[Any]],
        seed: int,
    ) -> None:
        if not visual or not other:
            raise ValueError(
                f"{name}: the mixture needs at least one visual and one {protocol.other.value} perturbation"
            )
        self.protocol = protocol
        self.visual = {c.name: c for c in visual}
        self.other = {c.name: c for c in other}
        self.seed = seed
        rows = tuple(
            f"{protocol.shares()}; visual from {', '.join(self.visual)}; "
            f"{protocol.other.value} from {', '.join(self.other)}; level {s}"
            for s in range(1, MAX_SEVERITY + 1)
        )
        super().__init__(name, Category.MIXTURE, SeverityTable(rows))
        self.geometric = any(c.geometric for c in visual)
        self.acts_on = tuple(dict.fromkeys(k for c in (*visual, *other) for k in c.acts_on))
        self.requires = tuple(dict.fromkeys(r for c in (*visual, *other) for r in c.requires))

    def draws(self, sample_ids: Sequence[str], severity: int | None = None) -> list[MixtureDraw]:
        """Each sample's modality and perturbation types (the same at every level), at ``severity``."""
        return [self.protocol.draw(self.seed, i, list(self.visual), list(self.other), severity) for i in sample_ids]

    def _corrupt(self, batch, severity, seeds, size, device):  # type: ignore[no-untyped-def]
        indices = [f for f in batch.values() if isinstance(f, SampleIndex)]
        if len(indices) != 1:
            raise ValueError(f"{self.name}: the mixture draws per sample id, and needs one SampleIndex field")
        draws = self.draws(indices[0].sample_ids, severity)
        for parts, drawn in ((self.visual, [d.visual for d in draws]), (self.other, [d.other for d in draws])):
            for name, part in parts.items():
                chosen = [i for i, one in enumerate(drawn) if one == name]
                if chosen:
                    done = part(take(batch, chosen), severity, [part_seed(seeds[i], name) for i in chosen])
                    batch = put(batch, chosen, done)
        return batch


def take(batch: dict[str, Field], indices: Sequence[int]) -> dict[str, Field]:
    """The samples ``indices`` of a batch, every field cut alike (:meth:`Field.take`)."""
    return {name: f.take(indices) for name, f in batch.items()}


def put(batch: dict[str, Field], indices: Sequence[int], part: dict[str, Field]) -> dict[str, Field]:
    """``batch`` with the samples ``indices`` replaced by the samples of ``part``."""
    out = {}
    for name, f in batch.items():
        values = {x.name: _put(getattr(f, x.name), indices, getattr(part[name], x.name)) for x in dataclasses.fields(f)}  # type: ignore[arg-type]
        out[name] = dataclasses.replace(f, **values)  # type: ignore[type-var]
    return out


def _put(value: Any, indices: Sequence[int], part: Any) -> Any:
    if isinstance(value, torch.Tensor):
        out = value.clone()
        out[torch.as_tensor(list(indices), dtype=torch.long, device=value.device)] = part.to(value.dtype)
        return out
    if isinstance(value, (tuple, list)):
        items = list(value)
        for position, i in enumerate(indices):
            items[i] = part[position]
        return type(value)(items)
    return value
