"""Instances from a semantic model: one instance per connected region of a predicted class.

:func:`connected_components` labels the 8-connected regions of equal class in a batch of
label maps, on any device, with tensor operations only. :class:`ComponentInstances` turns a
module that returns per-class logits into an instance segmentation model with it, which is
how the demo's semantic U-Net also serves the instance task. Touching objects of one class
merge into one instance, so this is a baseline, not a substitute for a real instance model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pytest_segrobust.models.torch_module import class_ids, logits_at_input_size

# The diagonal neighbours of a pixel as (row, column) offsets; runs along rows and columns
# cover the other four.
_DIAGONALS = ((-1, -1), (-1, 1), (1, -1), (1, 1))
# Iterations between two convergence checks; each check waits for the device.
_CHECK_EVERY = 2


def connected_components(labels: torch.Tensor, background: int = 0) -> torch.Tensor:
    """Give every 8-connected region of equal label its own id.

    Every pixel starts with its own id, one plus its flat index in its image. Each iteration
    gives every pixel the largest id of its run of equal labels along its row, then along its
    column (a prefix maximum each way, in one scan), then of its equal-label diagonal
    neighbours; finally each pixel jumps to the id of the pixel its id names (pointer jumping),
    which shortcuts long chains. Ids only grow and stay within their region, so the fixed
    point is, in every region, the id of its last pixel in raster order: deterministic and
    unique within the image.

    Args:
        labels: Integer label maps.
        background: Label of the pixels that belong to no region.

    Returns:
        Region ids: 0 on background, otherwise one plus the flat index (``y * W + x``) of the
        region's last pixel in raster order.

    Shape:
        labels: ``(B, H, W)``; return: ``(B, H, W)``, int64.
    """
    if labels.dim() != 3 or labels.is_floating_point() or labels.is_complex():
        raise ValueError(
            f"labels must be an integer tensor of shape (B, H, W), got {labels.dtype} {tuple(labels.shape)}"
        )
    batch, height, width = labels.shape
    if labels.numel() == 0:
        return torch.zeros(labels.shape, dtype=torch.int64, device=labels.device)
    labels = labels.long()
    foreground = labels != background
    # Keys run * scale + id, with scale above every id, order pixels by run first, so that a
    # running maximum along a line never carries an id past the end of its run.
    scale = height * width + 1
    row_offsets, column_offsets = _run_index(labels, dim=2) * scale, _run_index(labels, dim=1) * scale
    # A border of background on every side lets each neighbour be read as a shifted slice.
    padded = F.pad(labels, (1, 1, 1, 1), value=background)
    linked = [  # per diagonal, (B, H, W): whether that neighbour is in the pixel's region
        (padded[:, 1 + dy : 1 + dy + height, 1 + dx : 1 + dx + width] == labels) & foreground for dy, dx in _DIAGONALS
    ]

    flat_index = torch.arange(height * width, device=labels.device).view(1, height, width)
    ids = torch.where(foreground, flat_index + 1, 0)
    ids_padded = torch.zeros(batch, height + 2, width + 2, dtype=torch.int64, device=labels.device)
    while True:
        for _ in range(_CHECK_EVERY):
            before = ids
            ids = _run_max(_run_max(ids, row_offsets, dim=2), column_offsets, dim=1)
            ids_padded[:, 1:-1, 1:-1] = ids
            for (dy, dx), same_region in zip(_DIAGONALS, linked, strict=True):
                neighbour = ids_padded[:, 1 + dy : 1 + dy + height, 1 + dx : 1 + dx + width]
                ids = torch.maximum(ids, torch.where(same_region, neighbour, 0))
            # Pointer jumping: id k names pixel k - 1, whose id is at least k and in the same region.
            pointed = ids.view(batch, -1).gather(1, (ids - 1).clamp(min=0).view(batch, -1)).view_as(ids)
            ids = torch.where(foreground, pointed, 0)
        # Ids never shrink, so an iteration that changes nothing has reached the fixed point.
        if torch.equal(ids, before):
            return ids


def _run_index(labels: torch.Tensor, dim: int) -> torch.Tensor:
    """Number of each run of equal labels along ``dim``, counted from 0 in every line.

    Shape:
        labels: ``(B, H, W)``; return: ``(B, H, W)``, int64.
    """
    steps = labels.diff(dim=dim) != 0
    return F.pad(steps.long().cumsum(dim=dim), (1, 0) if dim == 2 else (0, 0, 1, 0))


def _run_max(ids: torch.Tensor, offsets: torch.Tensor, dim: int) -> torch.Tensor:
    """The largest id of every run of equal labels along ``dim``, at each of its pixels.

    Args:
        ids: Current ids, each below the scale of ``offsets``.
        offsets: Run number along ``dim`` times the scale.
        dim: 1 for columns, 2 for rows.

    Shape:
        ids, offsets: ``(B, H, W)``; return: ``(B, H, W)``, int64.
    """
    forward = (ids + offsets).cummax(dim=dim).values - offsets
    # Backwards the runs count down, so their offsets are negated to keep the keys increasing.
    backward = (ids - offsets).flip(dim).cummax(dim=dim).values.flip(dim) + offsets
    return torch.maximum(forward, backward)


class ComponentInstances(nn.Module):
    """Instance segmentation from a semantic segmentation module, one instance per region.

    The wrapped module maps ``(B, 3, H, W)`` images to per-class logits ``(B, K, H, W)``
    (or a mapping with key ``"out"``; other resolutions are resized to the input), class 0
    being background. Each 8-connected region of the argmax map with a class ``>= 1`` becomes
    an instance of that class, scored by the mean softmax probability of its class over its
    pixels.

    Args:
        module: The semantic segmentation network.
        min_area: Regions of fewer pixels are dropped (specks of noise, not objects).
        max_instances: At most this many instances per image, the highest-scoring ones.

    Raises:
        ValueError: On ``min_area < 1`` or ``max_instances < 0``.
    """

    def __init__(self, module: nn.Module, min_area: int = 4, max_instances: int = 100) -> None:
        super().__init__()
        if min_area < 1:
            raise ValueError(f"min_area must be at least 1, got {min_area}")
        if max_instances < 0:
            raise ValueError(f"max_instances must be non-negative, got {max_instances}")
        self.module = module
        self.min_area = min_area
        self.max_instances = max_instances

    def extra_repr(self) -> str:
        # In the repr, hence in adapters' fingerprints, which must change with these settings.
        return f"min_area={self.min_area}, max_instances={self.max_instances}"

    def forward(self, images: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        """Instances of every image, by descending score (ties: the region ending earlier first).

        Shape:
            images: ``(B, 3, H, W)``; return: ``B`` dicts with ``masks`` ``(N, H, W)`` bool,
            ``labels`` ``(N,)`` int64 and ``scores`` ``(N,)`` float32.
        """
        logits = logits_at_input_size(self.module(images), images)
        batch, _, height, width = logits.shape
        probabilities = logits.float().softmax(dim=1)
        # max over a middle dim is ~10x faster than argmax on CPU; both take the first maximum.
        class_probability, classes = probabilities.max(dim=1)
        regions = connected_components(classes)

        # Number the regions of the whole batch 0..R-1: region ids are unique within an image,
        # so an image offset makes them unique in the batch, and sorted unique keeps raster order.
        image_offset = torch.arange(batch, device=regions.device)[:, None, None] * (height * width + 1)
        foreground = regions > 0
        keys = (regions + image_offset)[foreground]
        region_keys, region_of_pixel = torch.unique(keys, sorted=True, return_inverse=True)
        count = len(region_keys)
        area = torch.zeros(count, dtype=torch.int64, device=regions.device).index_add_(
            0, region_of_pixel, torch.ones_like(region_of_pixel)
        )
        # Float64 sums of float32 probabilities (each at least 1/K) are exact for any realistic
        # region, so the order of atomic additions on a GPU cannot change a score.
        probability_sum = torch.zeros(count, dtype=torch.float64, device=regions.device).index_add_(
            0, region_of_pixel, class_probability[foreground].double()
        )
        region_class = torch.zeros(count, dtype=torch.int64, device=regions.device).scatter_(
            0, region_of_pixel, classes[foreground]
        )
        region_image = torch.div(region_keys, height * width + 1, rounding_mode="floor")
        scores = (probability_sum / area).float()
        region_map = torch.full(regions.shape, -1, dtype=torch.int64, device=regions.device)
        region_map[foreground] = region_of_pixel

        kept = area >= self.min_area
        outputs: list[dict[str, torch.Tensor]] = []
        for image in range(batch):
            candidates = torch.nonzero(kept & (region_image == image))[:, 0]  # in raster order
            # A stable sort keeps raster order among equal scores.
            order = torch.sort(scores[candidates], descending=True, stable=True).indices[: self.max_instances]
            chosen = candidates[order]
            outputs.append(
                {
                    "masks": region_map[image][None] == chosen[:, None, None],
                    "labels": region_class[chosen],
                    "scores": scores[chosen],
                }
            )
        return outputs


class ComponentPanoptic(nn.Module):
    """Panoptic segmentation from a semantic segmentation module.

    Each stuff class present in an image's argmax map is one segment; each 8-connected
    region of a thing class is one instance. Thing regions smaller than ``min_area`` pixels
    become void (segment 0): the model abstains there rather than claiming a speck.

    Args:
        module: The semantic network (logits ``(B, K, H, W)`` or a mapping with ``"out"``).
        stuff: The stuff classes; every other class is a thing.
        min_area: Thing regions of fewer pixels are dropped.
    """

    def __init__(self, module: nn.Module, stuff: tuple[int, ...] = (0,), min_area: int = 4) -> None:
        super().__init__()
        if min_area < 1:
            raise ValueError(f"min_area must be at least 1, got {min_area}")
        self.module = module
        self.stuff = tuple(int(c) for c in stuff)
        self.min_area = min_area

    def extra_repr(self) -> str:
        return f"stuff={self.stuff}, min_area={self.min_area}"

    def forward(self, images: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        """Segments of every image.

        Shape:
            images: ``(B, 3, H, W)``; return: ``B`` dicts with ``segments`` ``(H, W)`` int64,
            ``ids`` ``(S,)`` and ``labels`` ``(S,)`` int64.
        """
        classes = class_ids(logits_at_input_size(self.module(images), images))
        stuff = torch.tensor(self.stuff, dtype=torch.int64, device=classes.device)
        is_stuff = torch.isin(classes, stuff)
        # Stuff pixels are background to the components, so only thing regions get ids.
        regions = connected_components(torch.where(is_stuff, 0, classes + 1), background=0)
        height, width = classes.shape[-2:]
        outputs = []
        for image in range(classes.shape[0]):
            segments = torch.zeros(height, width, dtype=torch.int64, device=classes.device)
            ids, labels = [], []
            region_ids, areas = regions[image][regions[image] > 0].unique(return_counts=True)
            for number, (region, area) in enumerate(zip(region_ids.tolist(), areas.tolist()), start=1):
                if area >= self.min_area:
                    where = regions[image] == region
                    segments[where] = number
                    ids.append(number)
                    labels.append(int(classes[image][where][0]))
            first_stuff = len(region_ids) + 1
            for offset, label in enumerate(self.stuff):
                where = classes[image] == label
                if bool(where.any()):
                    segments[where] = first_stuff + offset
                    ids.append(first_stuff + offset)
                    labels.append(label)
            outputs.append(
                {
                    "segments": segments,
                    "ids": torch.tensor(ids, dtype=torch.int64, device=classes.device),
                    "labels": torch.tensor(labels, dtype=torch.int64, device=classes.device),
                }
            )
        return outputs
