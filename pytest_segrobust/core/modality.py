"""What a perturbation acts on (its :class:`Modality`) and the family it is reported under (its :class:`Category`).

Every perturbation of the package, whichever family defines it (image corruptions, the
temporal and acoustic families, text perturbations, compositions and mixtures), is reported
under one :class:`Category`, and every category belongs to one :class:`Modality`. A
corruption reads its modality from its category (:attr:`Corruption.modality
<pytest_segrobust.corruptions.base.Corruption.modality>`); the report reads a stored cell's
from the category string it was written with (:func:`modality_of_category`). The strings are
the ones reports and baselines have always held.

A dynamic mixture is the one perturbation whose modality its category does not tell: it is
reported as ``composed``, as a composition is, and declares :attr:`Modality.DYNAMIC` itself
(:mod:`pytest_segrobust.corruptions.dynamic`); a stored one is told by its name
(:func:`cell_modality`).

Layer 0, so that the report, which imports no perturbation family, reads the same model.
"""

from __future__ import annotations

from enum import Enum


class Modality(str, Enum):
    """What a perturbation changes: one input of a sample, or several at once (a composite).

    The values are R2-Bench's words where it has them (``visual``, ``text``, ``both``), which
    the mixtures' draws are written with.
    """

    VISUAL = "visual"  # the pixels of an image, or of each frame of a clip
    TEMPORAL = "temporal"  # the order of a clip's frames
    AUDIO = "audio"  # a clip's waveform
    TEXT = "text"  # a referring expression
    PROMPT = "prompt"  # the clicks and boxes given to a promptable model
    BOTH = "both"  # a visual and a non-visual perturbation at once (R2-Bench's cross-modal pair)
    COMPOSITION = "composition"  # a chain of perturbations applied in stage order
    DYNAMIC = "dynamic"  # a perturbation and a level drawn per frame (or per clip)
    MIXTURE = "mixture"  # per sample, visual only, the other input only, or both

    @property
    def composite(self) -> bool:
        """Whether it is made of other perturbations (a composition, a dynamic mixture, a mixture)."""
        return self in (Modality.COMPOSITION, Modality.DYNAMIC, Modality.MIXTURE)


class Category(str, Enum):
    """The families scores are grouped under, as in the papers' tables, each of one :class:`Modality`."""

    NOISE = "noise"
    BLUR = "blur"
    COMPRESSION = "compression"
    DIGITAL = "digital"
    CAMERA = "camera"
    ENVIRONMENT = "environment"
    TEMPORAL = "temporal"
    COMPOSED = "composed"
    ACOUSTIC = "acoustic"  # R2-Bench's acoustic modality: every acoustic perturbation
    TEXT = "text"
    PROMPT = "prompt"  # the clicks and boxes of a promptable suite
    CROSS_MODAL = "cross-modal"  # one image corruption then one text (or prompt) perturbation
    MIXTURE = "mixture"  # R2-Bench's per-sample mixture (referring, audio-visual, promptable)

    @property
    def modality(self) -> Modality:
        """What the category's perturbations act on; the image families' is :attr:`Modality.VISUAL`."""
        return _MODALITY.get(self, Modality.VISUAL)


_MODALITY = {
    Category.TEMPORAL: Modality.TEMPORAL,
    Category.COMPOSED: Modality.COMPOSITION,
    Category.ACOUSTIC: Modality.AUDIO,
    Category.TEXT: Modality.TEXT,
    Category.PROMPT: Modality.PROMPT,
    Category.CROSS_MODAL: Modality.BOTH,
    Category.MIXTURE: Modality.MIXTURE,
}


def modality_of_category(category: str) -> Modality:
    """The modality of a category as a report or a baseline stores it (``"noise"``, ``"acoustic"``...).

    A category no family of the package has (a plugin's own) counts as visual, as an image
    corruption's would.
    """
    try:
        return Category(category).modality
    except ValueError:
        return Modality.VISUAL


DYNAMIC_PREFIX = "dynamic["
"""How a dynamic mixture's name begins (:func:`pytest_segrobust.corruptions.dynamic.dynamic_name`); no other cell's does."""


def cell_modality(category: str, name: str) -> Modality:
    """The modality of a stored cell, from the category and the name it was written with.

    A dynamic mixture is stored under the category ``composed``, as a composition is (reports
    and baselines have always held it so); its name tells the two apart.
    """
    return Modality.DYNAMIC if name.startswith(DYNAMIC_PREFIX) else modality_of_category(category)
