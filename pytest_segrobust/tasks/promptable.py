"""Promptable segmentation (SAM-style): the model is given the image and prompts, and returns a mask per prompt set.

Each ground-truth instance yields prompts by the protocol the suite declares
(:mod:`pytest_segrobust.data.prompt_protocol`)::

    task: promptable
    prompts: {points: {count: 1, where: center}, box: tight, mask: false}

and one prompt set per declared kind (``points``, ``box``). Models follow
:class:`~pytest_segrobust.models.base.PromptableSegmentationModel`: ``predict(images, prompts)``
with ``prompts[b]`` image ``b``'s prompt sets returns, per image, ``(P, H, W)`` bool masks or
float logits (thresholded at 0), or ``(masks (P, M, H, W), scores (P, M))`` of which the best
candidate is taken. A set whose prompts a corruption dropped entirely is not asked; it scores an
empty mask. Geometric corruptions move prompts with the masks
(:mod:`pytest_segrobust.corruptions.prompt_kernels`); prompt perturbations change them
(:mod:`pytest_segrobust.corruptions.prompts`), and ``mixture: r2bench`` adds R2-Bench's cross-modal
mixture of both as one cell (:mod:`pytest_segrobust.tasks.prompt_mixture`). The default metric is
``promptable_miou`` (:mod:`pytest_segrobust.metrics.promptable`). The gate resamples images.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from pytest_segrobust.core.errors import DatasetError, FieldError, ModelOutputError
from pytest_segrobust.core.prompts import InstancePrompts, PromptedInstances, PromptSet
from pytest_segrobust.core.types import Batch, Field, Image, InstanceTarget, SampleIndex, field_of
from pytest_segrobust.data.base import Sample, SegmentationDataset
from pytest_segrobust.data.prompt_protocol import PromptProtocol, StandardProtocol, protocol_of
from pytest_segrobust.models.base import PromptableSegmentationModel
from pytest_segrobust.pictures.prompted import PROMPT_VIEW
from pytest_segrobust.tasks import register_task
from pytest_segrobust.tasks.base import ImageAnnotation, SuiteCells, SuiteKeyError, Task, first_id, logit_masks
from pytest_segrobust.tasks.prompt_mixture import MIXTURE_CELL, PromptMixtureSpec, prompt_mixture


@dataclasses.dataclass(frozen=True)
class PromptCells(SuiteCells):
    """A promptable suite's ``prompts:`` protocol and its ``mixture`` (the one cell it adds).

    Attributes:
        protocol: How each instance's prompts are drawn.
        mixture: R2-Bench's mixture of image corruptions and prompt perturbations, where the suite sets it.
        seed: The suite's global seed (the mixture's draws per image).
    """

    protocol: PromptProtocol = dataclasses.field(default_factory=StandardProtocol)
    mixture: PromptMixtureSpec | None = None
    seed: int = 0

    @property
    def added(self) -> tuple[str, ...]:  # type: ignore[override]
        return () if self.mixture is None else (MIXTURE_CELL,)

    def with_seed(self, seed: int) -> SuiteCells:
        return dataclasses.replace(self, seed=seed)

    def cell(self, name: str, resolve: Callable[..., Any]) -> Any:
        if self.mixture is not None and name == MIXTURE_CELL:
            return self.mixture.cell(resolve, self.seed)
        return resolve(name)


@register_task
class PromptableTask(Task):
    name = "promptable"
    version = "1"
    default_metrics = ("promptable_miou",)
    annotation = ImageAnnotation(
        "instances",
        "prompted",
        PromptedInstances,
        tensor="masks",
        leading=1,
        what="instance annotations",
        needs="a promptable evaluation draws its prompts from instances, e.g. COCO-format data",
        mismatch="instance masks of size {} differ",
    )
    model_protocol = PromptableSegmentationModel
    model_description = (
        "a PromptableSegmentationModel (predict(images, prompts) -> per image (P, H, W) masks or logits, "
        "or (masks (P, M, H, W), scores (P, M)); device, fingerprint)"
    )
    suite_keys = ("prompts", "mixture")
    picture_view = PROMPT_VIEW  # a panel per prompt kind, with the prompts drawn

    def __init__(self, protocol: PromptProtocol | None = None, seed: int = 0) -> None:
        self.protocol = protocol or StandardProtocol()
        self.seed = seed
        # Each sample's prompts, drawn once: every cell of a suite starts from the same ones.
        self._drawn: dict[str, InstancePrompts] = {}

    def suite_cells(
        self, options: Mapping[str, Any], corruptions: tuple[str, ...], resolve: Callable[..., Any]
    ) -> SuiteCells:
        """``prompts:`` (the protocol; the standard one, one centre click and the tight box, when left out) and
        ``mixture`` (:mod:`pytest_segrobust.tasks.prompt_mixture`)."""
        try:
            protocol = protocol_of(options["prompts"]) if "prompts" in options else StandardProtocol()
        except FieldError as exc:
            raise SuiteKeyError(f"prompts.{exc.field}".rstrip("."), str(exc)) from None
        mixture = prompt_mixture(options["mixture"], corruptions, resolve) if "mixture" in options else None  # type: ignore[arg-type]
        return PromptCells(protocol, mixture)

    def for_suite(self, cells: SuiteCells, seed: int) -> PromptableTask:
        """This task drawing prompts by the suite's protocol, with its seed."""
        protocol = cells.protocol if isinstance(cells, PromptCells) else self.protocol
        return PromptableTask(protocol, seed)

    @property
    def setting(self) -> str:
        """The recorded setting (:attr:`recorded_setting`) as canonical JSON, and the seed, which random
        clicks are drawn with: a cached clean result is keyed by both."""
        return f"{json.dumps(self.recorded_setting, sort_keys=True)}; seed {self.seed}"

    @property
    def recorded_setting(self) -> dict[str, Any]:
        """The prompt protocol (the seed is a condition of every suite already)."""
        return {"prompts": self.protocol.record()}

    def targets(self, samples: Sequence[Sample], dataset: SegmentationDataset, device: torch.device) -> dict[str, Field]:
        prompted = []
        for sample, instances in zip(samples, self.annotations(samples, dataset), strict=True):
            if sample.sample_id not in self._drawn:
                _refuse_empty_instances(instances, sample.sample_id, dataset.name)
                self._drawn[sample.sample_id] = self.protocol.prompts(instances.to("cpu"), sample.sample_id, self.seed)
            prompted.append(self._drawn[sample.sample_id].to(device))
        height, width = samples[0].image.shape[1:]
        return {"prompted": PromptedInstances(tuple(prompted), int(height), int(width))}

    def predict(self, model: Any, batch: Batch) -> Any:
        """``model.predict(images, prompts)`` with each image's non-empty prompt sets."""
        return model.predict(field_of(batch, Image).data, asked_sets(batch))

    def check_predictions(self, predictions: Any, batch: Batch) -> list[torch.Tensor]:
        """One bool mask per prompt set of every image, ``(P_all, H, W)`` per image (empty sets empty).

        Raises:
            ModelOutputError: for a wrong count, type, shape or dtype, naming the image.
        """
        prompted = field_of(batch, PromptedInstances)
        ids = field_of(batch, SampleIndex).sample_ids
        size = prompted.size()
        if isinstance(predictions, torch.Tensor) or not isinstance(predictions, Sequence) or len(predictions) != len(ids):
            got = len(predictions) if isinstance(predictions, Sequence) and not isinstance(predictions, torch.Tensor) else None
            raise ModelOutputError(
                f"model returned {type(predictions).__name__}{'' if got is None else f' of {got}'}, expected a list of "
                f"{len(ids)} results (one per image; first sample {first_id(batch)})"
            )
        masks = []
        for sample_id, target, returned in zip(ids, prompted.targets, predictions):
            sets = target.prompt_sets()
            asked = [s for s in sets if not s.empty]
            chosen = _best(returned, len(asked), size, sample_id)
            full = torch.zeros(len(sets), *size, dtype=torch.bool, device=target.masks.device)
            rows = [i for i, s in enumerate(sets) if not s.empty]
            if rows:
                full[torch.tensor(rows, device=full.device)] = logit_masks(chosen, batch).to(full.device)
            masks.append(full)
        return masks


def _refuse_empty_instances(instances: InstanceTarget, sample_id: str, dataset: str) -> None:
    """Every instance to prompt has a pixel: an empty one has no click to draw and no box, and its prompt
    sets would score an empty answer as a perfect one.

    Raises:
        DatasetError: naming the dataset, the sample and the instance (its position among the sample's).
    """
    empty = (instances.masks.flatten(1).count_nonzero(dim=1) == 0) & ~instances.iscrowd.bool()
    if bool(empty.any()):
        index = int(empty.nonzero()[0])
        raise DatasetError(
            f"{dataset}: sample {sample_id}: instance {index} (label {int(instances.labels[index])}) has an empty "
            f"mask ({int(empty.sum())} of the sample's {len(instances)} instances): a promptable evaluation draws "
            "each instance's prompts from its pixels and scores the answer against them; remove the annotation "
            "or fix its segmentation"
        )


def asked_sets(batch: Batch) -> list[list[PromptSet]]:
    """Each image's prompt sets that hold a prompt: what the model is asked."""
    return [[s for s in target.prompt_sets() if not s.empty] for target in field_of(batch, PromptedInstances).targets]


def _best(returned: Any, count: int, size: tuple[int, int], sample_id: str) -> torch.Tensor:
    """``(count, H, W)`` masks or logits: as returned, or each set's best-scoring candidate."""
    if isinstance(returned, tuple) and len(returned) == 2:
        candidates, scores = returned
        if not isinstance(candidates, torch.Tensor) or candidates.dim() != 4 or tuple(candidates.shape[-2:]) != size:
            raise ModelOutputError(
                f"sample {sample_id}: expected candidate masks of shape ({count}, M, {size[0]}, {size[1]}), got "
                f"{_shape_of(candidates)}"
            )
        if not isinstance(scores, torch.Tensor) or tuple(scores.shape) != tuple(candidates.shape[:2]):
            raise ModelOutputError(
                f"sample {sample_id}: expected scores of shape {tuple(candidates.shape[:2])} beside the candidates "
                f"(one per candidate mask), got {_shape_of(scores)}"
            )
        if scores.is_floating_point() and not bool(torch.isfinite(scores).all()):
            raise ModelOutputError(
                f"sample {sample_id}: model returned NaN or infinite candidate scores "
                f"({int((~torch.isfinite(scores)).sum())} of {scores.numel()}): the best candidate cannot be chosen"
            )
        best = scores.argmax(dim=1).to(candidates.device)
        returned = candidates[torch.arange(candidates.shape[0], device=candidates.device), best]
    if not isinstance(returned, torch.Tensor):
        raise ModelOutputError(f"sample {sample_id}: model returned {type(returned).__name__}, expected masks ({count}, H, W)")
    if tuple(returned.shape) != (count, *size):
        raise ModelOutputError(
            f"sample {sample_id}: model returned masks of shape {tuple(returned.shape)}, expected {(count, *size)} "
            f"(one mask per prompt set it was given, in their order, at the input resolution; {_asked(count)})"
        )
    return returned


def _asked(count: int) -> str:
    """How many prompt sets the model was given, for a message about its answer."""
    if count == 0:
        return "it was given no prompt set for this image: return an empty (0, H, W) array"
    return f"it was given {count}; a set whose prompts were all dropped is not given and needs no mask"


def _shape_of(value: Any) -> str:
    """A returned value's shape, or its type where it has none."""
    shape = getattr(value, "shape", None)
    return str(tuple(shape)) if shape is not None else type(value).__name__
