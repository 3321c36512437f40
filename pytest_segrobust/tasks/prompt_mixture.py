"""R2-Bench's cross-modal mixture for promptable segmentation: per image, image only, prompts only, or both.

A promptable suite's key::

    mixture: r2bench                  # adds the cell prompt-mixture: per image, an image corruption
                                      # only (40%), a prompt perturbation only (40%) or both (20%)
    mixture: {protocol: r2bench, visual: [gaussian_noise, rotate], prompt: [box_jitter, missing_click]}

draws from the listed image corruptions (``visual``) and prompt perturbations (``prompt``), or
else from the suite's own single ones of each kind, or else from every one of its preset. The
draw is the shared cross-modal mixture's
(:class:`~pytest_segrobust.corruptions.mixture.CrossModalMixture`) with the prompts as the
other input: a function of (seed, image id, the two lists) alone, and each part draws from
``part_seed(image seed, part name)``, so an image is perturbed alike in any batch, order or
worker. The image part comes first and the prompt part last, as in a composition: a geometric
image part moves the clean prompts with the masks, and the prompt perturbation then acts on
the moved ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.modality import Modality
from pytest_segrobust.corruptions.base import Corruption
from pytest_segrobust.corruptions.composition import SEPARATOR
from pytest_segrobust.corruptions.mixture import R2BENCH, CrossModalMixture, MixtureProtocol
from pytest_segrobust.tasks.base import SuiteKeyError, suite_list, suite_mapping
from pytest_segrobust.text.cells import CellResolver

MIXTURE_CELL = "prompt-mixture"
"""The cell name of the promptable mixture (``mixture: r2bench`` in a promptable suite)."""

MIXTURE_STREAM = "mixture:r2bench-prompt"
"""The name slot of :func:`~pytest_segrobust.randomness.seeding.sample_seed` for the mixture's draws (no perturbation has it)."""

PROMPT_MIXTURE = MixtureProtocol(Modality.PROMPT, MIXTURE_STREAM)
"""R2-Bench's mixture of an image corruption and a prompt perturbation."""


class PromptMixture(CrossModalMixture):
    """R2-Bench's cross-modal mixture for promptable segmentation at one level: per image, image only,
    prompts only or both (see the module).

    Args:
        visual: The image corruptions drawn from.
        prompt: The prompt perturbations drawn from.
        seed: The suite's global seed.
    """

    def __init__(self, visual: Sequence[Corruption[Any]], prompt: Sequence[Corruption[Any]], seed: int) -> None:
        super().__init__(MIXTURE_CELL, PROMPT_MIXTURE, visual, prompt, seed)  # the prompts are its ``other``


@dataclass(frozen=True)
class PromptMixtureSpec:
    """A promptable suite's ``mixture``: the perturbations drawn per image.

    Attributes:
        visual: Image corruption names drawn uniformly.
        prompt: Prompt perturbation names drawn uniformly.
    """

    visual: tuple[str, ...]
    prompt: tuple[str, ...]

    def cell(self, resolve: Callable[[str], Corruption[Any]], seed: int) -> PromptMixture:
        """The mixture's cell in a suite of global seed ``seed``; ``resolve`` gives a name's corruption."""
        return PromptMixture([resolve(name) for name in self.visual], [resolve(name) for name in self.prompt], seed)


# Each list's modality, what one of its names is, and what several are.
_KINDS = {
    "visual": (Modality.VISUAL, "an image corruption", "image corruptions"),
    "prompt": (Modality.PROMPT, "a prompt perturbation", "prompt perturbations"),
}


def prompt_mixture(raw: Any, corruptions: tuple[str, ...], resolve: CellResolver) -> PromptMixtureSpec:
    """A promptable suite's ``mixture: r2bench`` or ``{protocol: r2bench, visual: [...], prompt: [...]}``.

    Args:
        raw: The key's raw YAML value.
        corruptions: The suite's listed cells (the defaults' source).
        resolve: How the suite resolves a cell name.

    Raises:
        SuiteKeyError: naming the field at fault (``mixture``, ``mixture.visual[1]``...).
    """
    spec = {"protocol": raw} if isinstance(raw, str) else raw
    expected = "'r2bench' or a mapping {protocol: r2bench, visual: [...], prompt: [...]}"
    # A wrong protocol is named before an unknown field; a value that is no mapping, by suite_mapping.
    if isinstance(spec, dict) and spec.get("protocol") != R2BENCH:
        raise SuiteKeyError("mixture", f"expected {expected}, got {raw!r}")
    spec = suite_mapping(
        "mixture", spec, expected, ("protocol", *_KINDS), "unknown field; expected protocol, visual or prompt"
    )
    visual, prompt = (_names(spec, kind, corruptions, resolve) for kind in _KINDS)
    return PromptMixtureSpec(visual, prompt)


def _names(spec: Mapping[str, Any], kind: str, corruptions: tuple[str, ...], resolve: CellResolver) -> tuple[str, ...]:
    """The names of one kind: as listed under ``mixture.KIND``, else the suite's, else the preset's."""
    modality, what, several = _KINDS[kind]

    def refusal(name: str) -> str | None:
        try:
            fits = SEPARATOR not in name and resolve(name).modality is modality
        except SegRobustError as exc:
            return str(exc)
        return None if fits else f"expected {what} of preset {resolve.preset!r}, got {name!r}"

    if kind in spec:
        return suite_list(f"mixture.{kind}", spec[kind], "names", refusal)
    chosen = tuple(name for name in corruptions if refusal(name) is None)
    chosen = chosen or tuple(c.name for c in resolve.registry.preset(resolve.preset) if c.modality is modality)
    if not chosen:
        raise SuiteKeyError(f"mixture.{kind}", f"preset {resolve.preset!r} has no {several}; list some here")
    return chosen
