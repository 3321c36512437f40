"""Text perturbations, cross-modal compositions and R2-Bench's mixture as suite cells.

A referring suite's ``corruptions:`` may name, besides image corruptions:

* a text perturbation (``misspelling``, ``mispunctuation``, ``grammar_error``,
  ``character_missing``, or a replayed one, see :mod:`pytest_segrobust.suite.schema`'s
  ``text_replay``): a :class:`TextCell`, category ``text``;
* one image corruption and one text perturbation joined by ``+``
  (``gaussian_noise+misspelling``): a :class:`CrossModalComposition`, category ``cross-modal``;
* ``r2bench-mixture``, added by the suite option ``mixture: r2bench``: a :class:`MixtureCell`,
  category ``mixture``.

Each is a :class:`~pytest_segrobust.corruptions.base.Corruption`: called with a batch, a
severity and one seed per sample, it returns the batch with the same field names, so the
engine evaluates these cells as any other.

Determinism. A text part changes only the :class:`~pytest_segrobust.core.types.Expressions` field,
through :meth:`TextPerturbation.perturb` with the suite's seed (bound when the cell is
built) and the sample ids of the batch's :class:`~pytest_segrobust.core.types.SampleIndex`: a
sample's text depends on (suite seed, sample id, perturbation, severity) alone, and the text
package's nesting holds (the edits at severity ``s`` are a subset of those at ``s + 1``),
because it keys its streams by the suite seed, not by the per-severity image seeds. A visual
part draws from the per-sample image seed it is given, as every corruption does (inside a
cross-modal chain, from :func:`~pytest_segrobust.corruptions.composition.part_seed` of it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from pytest_segrobust.core.errors import UnknownCorruptionError
from pytest_segrobust.core.modality import Category, Modality, modality_of_category
from pytest_segrobust.core.types import Expressions, Field, SampleIndex
from pytest_segrobust.core.wording import did_you_mean
from pytest_segrobust.corruptions.base import MAX_SEVERITY, Corruption, SeverityTable
from pytest_segrobust.corruptions.composition import MAX_PARTS, SEPARATOR, part_seed
from pytest_segrobust.corruptions.mixture import CrossModalMixture
from pytest_segrobust.corruptions.registry import CorruptionRegistry
from pytest_segrobust.text.base import TextPerturbation
from pytest_segrobust.text.mixture import REFERRING_MIXTURE
from pytest_segrobust.text.registry import TextPerturbationRegistry

MIXTURE_CELL = "r2bench-mixture"
"""The cell name of R2-Bench's mixture (``mixture: r2bench`` in a suite)."""


# The modalities R2-Bench's referring tables keep apart; every other one is shown as visual there.
_SHOWN = (Modality.TEXT, Modality.BOTH, Modality.MIXTURE)


def modality(category: str) -> str:
    """R2-Bench's modality of a stored cell's category: ``visual``, ``text``, ``both`` or ``mixture``."""
    found = modality_of_category(category)
    return (found if found in _SHOWN else Modality.VISUAL).value


def is_visual(corruption: Corruption[Any]) -> bool:
    """Whether a cell leaves the expressions alone (galleries and frame tables show those)."""
    return corruption.modality not in _SHOWN


def _expressions(batch: dict[str, Field], cell: str) -> tuple[str, Expressions]:
    found = [(name, f) for name, f in batch.items() if isinstance(f, Expressions)]
    if len(found) != 1:
        raise ValueError(
            f"{cell}: a text perturbation needs one Expressions field (a referring batch), got {len(found)}"
        )
    return found[0]


def _sample_ids(batch: dict[str, Field], cell: str) -> tuple[str, ...]:
    found = [f for f in batch.values() if isinstance(f, SampleIndex)]
    if len(found) != 1:
        raise ValueError(f"{cell}: a text perturbation needs the batch's sample ids (a SampleIndex field)")
    return found[0].sample_ids


class TextCell(Corruption[Any]):
    """A text perturbation as a cell: changes the expressions, nothing else.

    Args:
        perturbation: The perturbation (built-in or replayed).
        seed: The suite's global seed; with each sample's id it keys the sample's text stream.
    """

    def __init__(self, perturbation: TextPerturbation, seed: int) -> None:
        table = getattr(perturbation, "table", None)
        if not isinstance(table, SeverityTable):
            rows = tuple(
                f"{perturbation.description}, level {s}{_stored(perturbation, s)}" for s in range(1, MAX_SEVERITY + 1)
            )
            table = SeverityTable(rows)  # type: ignore[arg-type]
        super().__init__(perturbation.name, Category.TEXT, table)
        self.acts_on = (Expressions,)
        self.perturbation = perturbation
        self.seed = seed
        self.requires = perturbation.requires

    def texts(self, texts: Sequence[str], sample_ids: Sequence[str], severity: int) -> list[str]:
        """The perturbed expressions of samples ``sample_ids`` at ``severity``."""
        return self.perturbation.perturb(list(texts), list(sample_ids), severity, self.seed)

    def _corrupt(self, batch, severity, seeds, size, device):  # type: ignore[no-untyped-def]
        name, expressions = _expressions(batch, self.name)
        ids = _sample_ids(batch, self.name)
        return {**batch, name: Expressions(tuple(self.texts(expressions.texts, ids, severity)))}


def _stored(perturbation: TextPerturbation, severity: int) -> str:
    """For a replayed perturbation, a digest of its stored texts at ``severity``: the suite's
    conditions (and so its baselines) change when the replay file's texts do."""
    replay, stored_as = getattr(perturbation, "replay", None), getattr(perturbation, "stored_as", None)
    if replay is None or stored_as is None:
        return ""
    texts = dict(sorted(replay.texts[stored_as].get(severity, {}).items()))
    digest = hashlib.blake2b(json.dumps(texts, ensure_ascii=False).encode(), digest_size=8).hexdigest()
    return f", {len(texts)} texts, digest {digest}"


class CrossModalComposition(Corruption[Any]):
    """One image corruption then one text perturbation, at one severity (R2-Bench's chain).

    The text part comes after the whole visual chain (source -> environment -> sensor ->
    transmission); a geometric visual part moves the referring mask as it does alone.
    """

    def __init__(self, visual: Corruption[Any], text: TextCell) -> None:
        rows = tuple((visual.table[s], text.table[s]) for s in range(1, MAX_SEVERITY + 1))
        super().__init__(f"{visual.name}{SEPARATOR}{text.name}", Category.CROSS_MODAL, SeverityTable(rows))
        self.visual, self.text = visual, text
        self.parts = (visual, text)
        self.geometric = visual.geometric
        self.acts_on = tuple(dict.fromkeys((*visual.acts_on, *text.acts_on)))
        self.requires = tuple(dict.fromkeys((*visual.requires, *text.requires)))

    def _corrupt(self, batch, severity, seeds, size, device):  # type: ignore[no-untyped-def]
        batch = self.visual(batch, severity, [part_seed(s, self.visual.name) for s in seeds])
        return self.text(batch, severity, seeds)


class MixtureCell(CrossModalMixture):
    """R2-Bench's mixture at one level: per sample, visual only, text only or both.

    Each sample's draw is :func:`~pytest_segrobust.text.mixture.r2bench_mixture` with the
    suite's seed and the sample's id (visual only 40%, text only 40%, both 20%; the image
    corruption drawn uniformly from ``visual``, the text perturbation from ``text``), the same
    at every level; the cell's severity is the level of both parts. The image part draws from
    ``part_seed(image seed, corruption name)``, the text part from the suite's seed, so a
    sample's perturbation is the same in any batch, order or process.
    """

    def __init__(self, visual: Sequence[Corruption[Any]], text: Sequence[TextCell], seed: int) -> None:
        super().__init__(MIXTURE_CELL, REFERRING_MIXTURE, visual, text, seed)

    @property
    def text(self) -> dict[str, Corruption[Any]]:
        """The text cells drawn from, by name."""
        return self.other


@dataclasses.dataclass(frozen=True)
class MixtureSpec:
    """A suite's ``mixture``: the protocol and the types it draws from.

    Attributes:
        protocol: ``r2bench``.
        visual: Image corruption names drawn uniformly.
        text: Text perturbation names drawn uniformly.
    """

    protocol: str
    visual: tuple[str, ...]
    text: tuple[str, ...]


def resolve_cell(
    name: str,
    *,
    registry: CorruptionRegistry,
    preset: str,
    text: TextPerturbationRegistry,
    seed: int,
    mixture: MixtureSpec | None = None,
) -> Corruption[Any]:
    """The cell a suite's corruption name stands for: an image corruption, a text perturbation,
    a cross-modal composition or the mixture.

    Raises:
        UnknownCorruptionError: for an unknown name, two text parts, too many parts, or the
            mixture's name in a suite without ``mixture``.
    """
    if name == MIXTURE_CELL:
        if mixture is None:
            raise UnknownCorruptionError(
                f"{MIXTURE_CELL!r} is the cell of the suite option 'mixture: r2bench', which is not set"
            )
        visual = [registry.get(v, preset) for v in mixture.visual]
        return MixtureCell(visual, [TextCell(text.get(t), seed) for t in mixture.text], seed)
    if SEPARATOR in name:
        parts = [part.strip() for part in name.split(SEPARATOR)]
        texts = [part for part in parts if part in text]
        if not texts:
            for part in parts:
                _require_known(part, registry, preset, text, f"invalid composition {name!r}: ")
            return registry.get(name, preset)
        if len(parts) > MAX_PARTS:
            raise UnknownCorruptionError(
                f"invalid composition {name!r}: a composition chains at most {MAX_PARTS} perturbations, "
                "one image corruption and one text perturbation"
            )
        if len(texts) > 1:
            raise UnknownCorruptionError(
                f"invalid composition {name!r}: at most one text perturbation per cell (R2-Bench: one visual and one textual)"
            )
        (visual,) = [part for part in parts if part not in text]
        return CrossModalComposition(registry.get(visual, preset), TextCell(text.get(texts[0]), seed))
    if name in text:
        return TextCell(text.get(name), seed)
    _require_known(name, registry, preset, text)
    return registry.get(name, preset)


@dataclasses.dataclass(frozen=True)
class CellResolver:
    """How a suite resolves a cell name (:func:`resolve_cell`), before a task's own keys make more of it.

    A task's suite cells (:meth:`Task.suite_cells <pytest_segrobust.tasks.base.Task.suite_cells>`)
    receive one: called as ``resolve(name, preset=None)``, it gives the name's corruption in the
    suite's preset (or in ``preset``).

    Attributes:
        registry: The image corruptions.
        preset: The suite's preset.
        text: The text perturbations the suite may name (none for a task without expressions).
        seed: The suite's global seed (text cells bind it).
        mixture: R2-Bench's mixture, where a task's key sets one (:meth:`with_mixture`).
    """

    registry: CorruptionRegistry
    preset: str
    text: TextPerturbationRegistry
    seed: int = 0
    mixture: MixtureSpec | None = None

    def __call__(self, name: str, preset: str | None = None) -> Corruption[Any]:
        return resolve_cell(
            name, registry=self.registry, preset=preset or self.preset, text=self.text, seed=self.seed,
            mixture=self.mixture,
        )

    def image(self, name: str, preset: str | None = None) -> Corruption[Any]:
        """The image corruption ``name`` alone (a text perturbation is not one)."""
        return self.registry.get(name, preset or self.preset)

    def with_mixture(self, mixture: MixtureSpec | None) -> CellResolver:
        """This resolver, resolving :data:`MIXTURE_CELL` to ``mixture`` (unchanged for ``None``)."""
        return self if mixture is None else dataclasses.replace(self, mixture=mixture)


def _require_known(
    name: str, registry: CorruptionRegistry, preset: str, text: TextPerturbationRegistry, where: str = ""
) -> None:
    """Refuse a name that is neither an image corruption of ``preset`` nor a text perturbation,
    listing both: where text perturbations may be named, a misspelt one is not an image corruption."""
    images = registry.definition(preset).corruption_names
    if not len(text) or name in text or name in images:
        return
    close = did_you_mean(name, [*images, *text.names()])
    raise UnknownCorruptionError(
        f"{where}unknown corruption or text perturbation {name!r}{close}; image corruptions of preset {preset!r}: "
        f"{', '.join(sorted(images))}; text perturbations: {', '.join(text.names())}"
    )


def is_text_name(name: str, text: TextPerturbationRegistry) -> bool:
    """Whether a suite's corruption name involves a text perturbation (or is the mixture)."""
    return name == MIXTURE_CELL or any(part.strip() in text for part in name.split(SEPARATOR))
