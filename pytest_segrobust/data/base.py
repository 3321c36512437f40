"""What a dataset is to the harness: a sized, indexable stream of samples.

Datasets yield one sample at a time (never the whole set in memory); the evaluator
batches them. Images are ``uint8`` so that a dataset costs what its pixels cost, and the
evaluator converts them to float on the model's device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from pytest_segrobust.errors import DatasetError

DEFAULT_IGNORE_INDEX = 255


@dataclass(frozen=True)
class SemanticTarget:
    """Dense per-pixel class labels of one image.

    Shape:
        mask: ``(H, W)``, ``int64``; ``ignore_index`` marks pixels that are not scored.
    """

    mask: torch.Tensor


@dataclass(frozen=True)
class InstanceTarget:
    """Object instances of one image.

    Boxes are ``(x0, y0, x1, y1)`` in pixels with exclusive ends: a mask covering columns
    3..5 has ``x0 = 3, x1 = 6``, so ``x1 - x0`` is the COCO width.

    Shape:
        masks: ``(N, H, W)``, bool; labels: ``(N,)``, int64; boxes: ``(N, 4)``, float32;
        iscrowd: ``(N,)``, bool.
    """

    masks: torch.Tensor
    labels: torch.Tensor
    boxes: torch.Tensor
    iscrowd: torch.Tensor

    @classmethod
    def from_masks(cls, masks: torch.Tensor, labels: torch.Tensor, iscrowd: torch.Tensor | None = None) -> InstanceTarget:
        """Build a target whose boxes are tight around ``masks``."""
        crowd = torch.zeros(len(labels), dtype=torch.bool, device=masks.device) if iscrowd is None else iscrowd
        return cls(masks.bool(), labels.long(), boxes_from_masks(masks), crowd.bool())

    def __len__(self) -> int:
        return int(self.labels.numel())

    def to(self, device: torch.device | str, non_blocking: bool = False) -> InstanceTarget:
        """The same instances on ``device``."""
        return InstanceTarget(
            *(t.to(device, non_blocking=non_blocking) for t in (self.masks, self.labels, self.boxes, self.iscrowd))
        )


def boxes_from_masks(masks: torch.Tensor) -> torch.Tensor:
    """Tight ``(x0, y0, x1, y1)`` boxes (exclusive ends) of binary masks; empty masks give zeros.

    Shape:
        masks: ``(N, H, W)``; return: ``(N, 4)``, float32.
    """
    n, h, w = masks.shape
    if n == 0:
        return torch.zeros(0, 4, dtype=torch.float32, device=masks.device)
    rows, cols = masks.any(dim=2), masks.any(dim=1)  # (N, H), (N, W)
    y = torch.arange(h, device=masks.device)
    x = torch.arange(w, device=masks.device)
    big = max(h, w) + 1
    y0 = torch.where(rows, y, big).amin(dim=1)
    y1 = torch.where(rows, y, -1).amax(dim=1) + 1
    x0 = torch.where(cols, x, big).amin(dim=1)
    x1 = torch.where(cols, x, -1).amax(dim=1) + 1
    boxes = torch.stack([x0, y0, x1, y1], dim=1).float()
    return torch.where(rows.any(dim=1, keepdim=True), boxes, torch.zeros_like(boxes))


@dataclass(frozen=True)
class Sample:
    """One image with its annotation.

    Shape:
        image: ``(3, H, W)``, ``uint8``, RGB.

    Attributes:
        sample_id: Stable identifier of the image within its dataset. It seeds the
            corruption of this image, so it must not depend on position or split order.
    """

    sample_id: str
    image: torch.Tensor
    target: SemanticTarget
    instances: InstanceTarget | None = None


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


def instance_categories(dataset: SegmentationDataset) -> tuple[dict[str, Any], ...]:
    """COCO category dicts of labels ``1..K``, in label order.

    Label ``k`` is ``class_names[k]`` (0 is background). A dataset's own ``categories``
    are used when it has them (their names must then be ``class_names[1:]``); otherwise
    the classes become categories with ids ``1..K``.

    Raises:
        DatasetError: when the dataset's categories do not match its class names.
    """
    names = tuple(dataset.class_names[1:])
    given = getattr(dataset, "categories", None)
    if given is None:
        return tuple({"id": label, "name": name} for label, name in enumerate(names, 1))
    categories = tuple(sorted((dict(c) for c in given), key=lambda c: c["id"]))
    if tuple(c["name"] for c in categories) != names:
        raise DatasetError(
            f"{dataset.name}: categories in id order ({', '.join(c['name'] for c in categories)}) are not "
            f"class_names[1:] ({', '.join(names)}); instance labels would be ambiguous"
        )
    return categories


def supercategories(dataset: SegmentationDataset) -> list[str | None]:
    """The COCO supercategory of each of ``class_names`` (``None`` where there is none)."""
    of_name = {c["name"]: c.get("supercategory") for c in getattr(dataset, "categories", None) or ()}
    return [of_name.get(name) for name in dataset.class_names]
