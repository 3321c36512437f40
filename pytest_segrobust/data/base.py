"""What a dataset is to the harness: a sized, indexable stream of samples.

Datasets yield one sample at a time (never the whole set in memory); the evaluator
batches them. Images are ``uint8`` so that a dataset costs what its pixels cost, and the
evaluator converts them to float on the model's device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.core.types import (
    DEFAULT_IGNORE_INDEX,
    InstanceTarget,
    PanopticTarget,
    boxes_from_masks,
    instance_categories,
    supercategories,
)
from pytest_segrobust.core.wording import article

__all__ = [
    "DEFAULT_IGNORE_INDEX",
    "NAMED_FIELDS",
    "InstanceTarget",
    "PanopticTarget",
    "ReferringTarget",
    "Sample",
    "SegmentationDataset",
    "SemanticTarget",
    "boxes_from_masks",
    "check_dataset",
    "check_sample",
    "instance_categories",
    "supercategories",
]


@dataclass(frozen=True)
class SemanticTarget:
    """Dense per-pixel class labels of one image.

    Shape:
        mask: ``(H, W)``, ``int64``; ``ignore_index`` marks pixels that are not scored.
    """

    mask: torch.Tensor


@dataclass(frozen=True)
class ReferringTarget:
    """A referring expression and the region it names in its image.

    Shape:
        mask: ``(H, W)``, ``bool``.
    """

    expression: str
    mask: torch.Tensor


@dataclass(frozen=True)
class Sample:
    """One sample: an open set of named fields, of which its task reads the ones it declares.

    The fields every built-in dataset fills have attributes of their own (``image``,
    ``target``, ``instances``, ``panoptic``, ``referring``); any other field (a clip's frames,
    per-frame masks, a waveform, a modality of a plugin's own) goes in ``extra`` under its name.
    :attr:`fields` is the whole mapping either way, and :meth:`of` builds a sample from it.

    Shape:
        image: ``(3, H, W)``, ``uint8``, RGB.

    Attributes:
        sample_id: Stable identifier of the sample within its dataset. It seeds the
            corruption of this sample, so it must not depend on position or split order.
            A referring dataset has one sample per expression (``image/ref/sentence``).
        image: The image; ``None`` for a sample without one (a clip).
        target: The semantic label map; ``None`` for a dataset without one (referring data).
        extra: Every other field by name.
        unit: The image (or clip) the sample shows, where several samples show one: the id of
            a referring expression's image (RefCOCO's ``image_id``), of an R-VOS expression's
            clip. The statistical gate resamples these units, not the samples, since the
            expressions of one image change together under a perturbation; a task that groups
            samples (:attr:`~pytest_segrobust.tasks.base.Task.groups_samples`) refuses a sample
            without one. Like ``sample_id`` it must not depend on position or order.
    """

    sample_id: str
    image: torch.Tensor | None = None
    target: SemanticTarget | None = None
    instances: InstanceTarget | None = None
    panoptic: PanopticTarget | None = None
    referring: ReferringTarget | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)
    unit: str | None = None

    def __post_init__(self) -> None:
        taken = sorted(set(self.extra) & set(NAMED_FIELDS))
        if taken:
            raise ValueError(
                f"sample {self.sample_id}: {', '.join(taken)} are attributes of a Sample, not extra fields"
            )

    @classmethod
    def of(cls, sample_id: str, *, unit: str | None = None, **fields: Any) -> Sample:
        """A sample of named fields: the built-in ones become attributes, the others :attr:`extra`."""
        named = {name: fields.pop(name) for name in NAMED_FIELDS if name in fields}
        return cls(sample_id, **named, extra=fields, unit=unit)

    @property
    def fields(self) -> dict[str, Any]:
        """Every field of the sample by name: the attributes that are set, then :attr:`extra`."""
        named = {name: getattr(self, name) for name in NAMED_FIELDS}
        return {name: value for name, value in named.items() if value is not None} | dict(self.extra)

    def field(self, name: str) -> Any:
        """The field called ``name``.

        Raises:
            KeyError: naming the sample and the fields it has.
        """
        fields = self.fields
        if name not in fields:
            raise KeyError(f"sample {self.sample_id} has no field {name!r}; it has {', '.join(fields) or 'none'}")
        return fields[name]


NAMED_FIELDS = ("image", "target", "instances", "panoptic", "referring")
"""The fields that are attributes of :class:`Sample`."""


@runtime_checkable
class SegmentationDataset(Protocol):
    """A sized, indexable collection of :class:`Sample`.

    A dataset may also have a ``categories`` attribute: COCO category dicts (``id``,
    ``name``, optional ``supercategory``). The report groups per-class robustness by
    supercategory through it, and instance evaluation takes its COCO category ids from it.
    """

    name: str
    class_names: tuple[str, ...]
    ignore_index: int

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Sample: ...

    def fingerprint(self) -> str:
        """A string that changes whenever the content of the dataset changes."""
        ...


def sample_position(index: int, size: int, name: str) -> int:
    """Where ``index`` points in a dataset of ``size`` samples; negative indices count from the end.

    Raises:
        IndexError: When ``index`` is out of range, which also ends plain iteration.
    """
    if not -size <= index < size:
        raise IndexError(f"index {index} out of range for {name} of size {size}")
    return index % size


# What the harness reads from a dataset besides indexing it (the protocol above).
_DATASET_METHODS = ("__len__", "__getitem__", "fingerprint")
_DATASET_ATTRIBUTES = ("name", "class_names", "ignore_index")


def check_dataset(obj: Any, source: str = "the factory") -> SegmentationDataset:
    """``obj``, which ``source`` returned, when it has what :class:`SegmentationDataset` promises.

    Raises:
        DatasetError: naming what ``obj`` lacks, before an evaluation trips over it.
    """
    missing = [f"{name}()" for name in _DATASET_METHODS if not callable(getattr(obj, name, None))]
    missing += [name for name in _DATASET_ATTRIBUTES if not hasattr(obj, name)]
    if missing:
        raise DatasetError(
            f"{source} returned {article(type(obj).__name__)}, which is not a dataset: it has no {', '.join(missing)} "
            "(a dataset has __len__, __getitem__ returning a pytest_segrobust Sample, fingerprint(), "
            "name, class_names and ignore_index)"
        )
    return obj


def check_sample(dataset: SegmentationDataset, index: int, sample: Any) -> Sample:
    """``dataset[index]``, when it is a :class:`Sample`.

    Raises:
        DatasetError: naming the dataset, the position and what it returned instead.
    """
    if not isinstance(sample, Sample):
        raise DatasetError(
            f"{dataset.name}: dataset[{index}] is {article(type(sample).__name__)}, not a Sample "
            "(pytest_segrobust.data.base.Sample(sample_id, image, target))"
        )
    return sample
