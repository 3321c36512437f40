"""Factories for the model zoos teams use: torchvision and segmentation_models_pytorch (timm encoders).

Each loads a local weights file (never a download) into the zoo's architecture and returns a
``torch.nn.Module`` the built-in adapters take, with the zoo's input convention built in:

* semantic networks expect ImageNet-normalised images, so they are wrapped in
  :class:`Normalized` (the harness hands every model images in ``[0, 1]``);
* torchvision's Mask R-CNN normalises by itself but labels detections with COCO category ids
  (1..90 with gaps), so it is wrapped in :class:`Relabelled`, which maps them to the
  dataset's contiguous ids.

The zoos are imported when a factory is called, never by the harness: torchvision, timm and
segmentation_models_pytorch are the user's to install (with a torch build they match). A
suite names a factory as any other::

    models:
      - name: deeplab
        factory: pytest_segrobust.models.zoo:torchvision_segmentation
        kwargs: {arch: deeplabv3_resnet50, weights: weights/deeplab.pt, num_classes: 21}
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.extras import installed, torchvision_mismatch

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# The category ids of COCO's 80 thing classes, in id order: what torchvision's COCO detectors
# predict (their label k is category id k), and what CocoInstances numbers 1..80 in this order.
COCO_THING_IDS = (
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32, 33, 34,
    35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63,
    64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90,
)  # fmt: skip


class Normalized(torch.nn.Module):
    """``module((images - mean) / std)``: a network trained on normalised images, fed ``[0, 1]`` ones.

    Mean and std are buffers, so they are part of the state dict and of the model's fingerprint.
    """

    def __init__(self, module: torch.nn.Module, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD) -> None:
        super().__init__()
        if len(mean) != len(std) or any(s <= 0 for s in std):
            raise ValueError(f"mean and std need one value per channel and std > 0, got {list(mean)} and {list(std)}")
        self.module = module
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))

    def forward(self, images: torch.Tensor) -> Any:
        return self.module((images - self.mean) / self.std)


class Relabelled(torch.nn.Module):
    """An instance network whose labels are category ids, relabelled to contiguous ids ``1..K``.

    ``category_ids[k - 1]`` is the category of the dataset's class ``k``. Detections of a
    category the dataset does not have are dropped: they could never match a ground truth,
    and keeping them under some other label would be wrong.
    """

    def __init__(self, module: torch.nn.Module, category_ids: Sequence[int] = COCO_THING_IDS) -> None:
        super().__init__()
        if len(set(category_ids)) != len(category_ids) or any(c < 1 for c in category_ids):
            raise ValueError("category_ids must be distinct ids >= 1 (background is 0)")
        self.module = module
        lookup = torch.zeros(max(category_ids) + 1, dtype=torch.int64)
        lookup[torch.tensor(list(category_ids))] = torch.arange(1, len(category_ids) + 1)
        self.register_buffer("lookup", lookup)

    def forward(self, images: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        return [self._relabel(item) for item in self.module(images)]

    def _relabel(self, item: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        labels = item["labels"].long()
        known = (labels >= 0) & (labels < len(self.lookup))
        contiguous = torch.zeros_like(labels)
        contiguous[known] = self.lookup[labels[known]]
        keep = contiguous > 0
        relabelled = {key: value[keep] if _per_detection(value, len(labels)) else value for key, value in item.items()}
        relabelled["labels"] = contiguous[keep]
        return relabelled


def torchvision_segmentation(
    arch: str, weights: str | Path, num_classes: int, aux_loss: bool | None = None, device: torch.device | str = "cpu"
) -> torch.nn.Module:
    """A torchvision segmentation network (``deeplabv3_resnet50``, ``fcn_resnet101``, ``lraspp_mobilenet_v3_large``, ...)
    with a local state dict, fed ImageNet-normalised images.

    Args:
        arch: A builder in ``torchvision.models.segmentation``.
        weights: A state dict saved with ``torch.save(model.state_dict(), path)``.
        num_classes: The classes the weights were trained for (21 for torchvision's VOC weights).
        aux_loss: Whether the weights include the auxiliary head (torchvision's do).
        device: Where the network is placed (the run's device).
    """
    segmentation = _import("torchvision.models.segmentation", "torchvision")
    build = _builder(segmentation, arch, "torchvision.models.segmentation")
    network = build(weights=None, weights_backbone=None, num_classes=num_classes, aux_loss=aux_loss)
    _load(network, weights)
    return Normalized(network).to(device).eval()


def torchvision_mask_rcnn(
    weights: str | Path,
    arch: str = "maskrcnn_resnet50_fpn",
    num_classes: int = 91,
    category_ids: Sequence[int] = COCO_THING_IDS,
    device: torch.device | str = "cpu",
) -> torch.nn.Module:
    """torchvision's Mask R-CNN with a local state dict, its labels mapped to the dataset's ids.

    Args:
        weights: A state dict saved with ``torch.save(model.state_dict(), path)``.
        arch: ``maskrcnn_resnet50_fpn`` or ``maskrcnn_resnet50_fpn_v2``.
        num_classes: The network's classes, background included (91 for COCO weights).
        category_ids: The category id of each of the dataset's classes, in its order (COCO's
            80 thing ids by default, as :class:`~pytest_segrobust.data.coco.CocoInstances` numbers them).
        device: Where the network is placed (the run's device).
    """
    detection = _import("torchvision.models.detection", "torchvision")
    network = _builder(detection, arch, "torchvision.models.detection")(weights=None, weights_backbone=None, num_classes=num_classes)
    _load(network, weights)
    return Relabelled(network, category_ids).to(device).eval()


def smp_model(
    arch: str, encoder_name: str, weights: str | Path, classes: int, device: torch.device | str = "cpu"
) -> torch.nn.Module:
    """A segmentation_models_pytorch network (any timm or smp encoder) with a local state dict,
    fed images normalised as its encoder expects.

    Args:
        arch: ``Unet``, ``FPN``, ``DeepLabV3Plus``, ``Segformer``, ... (``smp.create_model``'s names).
        encoder_name: ``resnet34``, ``tu-convnext_tiny`` (a timm encoder), ...
        weights: A state dict saved with ``torch.save(model.state_dict(), path)``.
        classes: Output classes.
        device: Where the network is placed (the run's device).
    """
    smp = _import("segmentation_models_pytorch", "segmentation_models_pytorch")
    network = smp.create_model(arch, encoder_name=encoder_name, encoder_weights=None, classes=classes)
    _load(network, weights)
    try:
        params = smp.encoders.get_preprocessing_params(encoder_name)
        mean, std = params["mean"], params["std"]
    except (KeyError, ValueError, TypeError):  # an encoder without published statistics
        mean, std = IMAGENET_MEAN, IMAGENET_STD
    return Normalized(network, mean, std).to(device).eval()


def _import(module: str, package: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except Exception as exc:  # a broken install raises more than ImportError (torchvision::nms)
        if isinstance(exc, ModuleNotFoundError) and not installed(package):
            raise SegRobustError(f"{package} is not installed: pip install {package.replace('_', '-')}") from exc
        fix = torchvision_mismatch(exc) or "install a build that matches your torch"
        raise SegRobustError(f"{package} cannot be imported ({type(exc).__name__}: {exc}); {fix}") from exc


def _builder(module: ModuleType, arch: str, where: str) -> Any:
    build = getattr(module, arch, None)
    if not callable(build) or arch.startswith("_"):
        raise SegRobustError(f"{where} has no model builder {arch!r}")
    return build


def _load(network: torch.nn.Module, weights: str | Path) -> None:
    path = Path(weights)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError as exc:
        raise SegRobustError(f"{path}: no such weights file") from exc
    except Exception as exc:  # torch.load's errors vary with the file
        raise SegRobustError(f"{path}: not a state dict torch can load: {type(exc).__name__}: {exc}") from exc
    if isinstance(state, Mapping) and "state_dict" in state and isinstance(state["state_dict"], Mapping):
        state = state["state_dict"]  # a training checkpoint
    try:
        network.load_state_dict(state)
    except (RuntimeError, TypeError) as exc:
        raise SegRobustError(f"{path}: the weights do not fit {type(network).__name__}: {exc}") from exc


def _per_detection(value: Any, count: int) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == count
