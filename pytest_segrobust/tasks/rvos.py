"""Referring video object segmentation (Ref-DAVIS, Ref-YouTube-VOS): a clip and an expression naming one object.

A sample is one expression of a clip (ids ``seq/exp_id``): the clip's frames (``video``), its
objects (``objects``) and the expression (``expression``, with the id of the object it
names). The target is that object alone, as a one-object
:class:`~pytest_segrobust.core.types.VideoMasks` (id 1 where the object is, 0 elsewhere, unscored
pixels kept), so J, F and J&F score it as VOS scores an object. Models follow
:class:`~pytest_segrobust.models.video.ReferringVideoModel`: ``predict(clips, texts)`` returns
``(B, T, H, W)`` bool masks, or float logits thresholded at 0, as the image referring task's.
Text perturbations change the expressions; image corruptions, static and dynamic, the frames.
Suite keys: the video tasks' ``static``, ``dynamic`` and ``temporal``
(:mod:`pytest_segrobust.tasks.clip_cells`) and the referring ones, ``text_replay`` and
``mixture`` (:mod:`pytest_segrobust.tasks.referring_cells`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import torch

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.core.types import Batch, Expressions, Field, SampleIndex, Video, VideoMasks, field_of
from pytest_segrobust.data.base import Sample, SegmentationDataset
from pytest_segrobust.data.clips import ClipExpression
from pytest_segrobust.models.video import ReferringVideoModel
from pytest_segrobust.tasks import register_task
from pytest_segrobust.tasks.base import SuiteCells, clip_tensor, logit_masks, non_empty_text, upload
from pytest_segrobust.tasks.clip_cells import CLIP_SUITE_KEYS, clip_cells
from pytest_segrobust.tasks.referring_cells import TEXT_SUITE_KEYS, TextKeys, text_beneath
from pytest_segrobust.tasks.vos import ClipTask, clip_fields

# The named object's id in the target and in the predictions.
NAMED = 1


@register_task
class ReferringVideoTask(TextKeys, ClipTask):
    name = "rvos"
    default_metrics = ("vos_jf", "vos_j", "vos_f")
    target_types = (VideoMasks, Expressions)
    reads = ("video", "objects", "expression")
    collates: ClassVar[Mapping[str, type[Field]]] = {
        "video": Video,
        "objects": VideoMasks,
        "expression": Expressions,
        "index": SampleIndex,
    }
    model_protocol = ReferringVideoModel
    model_description = (
        "a ReferringVideoModel (predict(clips, texts) -> (B, T, H, W) bool masks or float logits, device, fingerprint)"
    )
    suite_keys = (*CLIP_SUITE_KEYS, *TEXT_SUITE_KEYS)
    groups_samples = True  # a sample is an expression; several describe one clip

    def suite_cells(
        self, options: Mapping[str, Any], corruptions: tuple[str, ...], resolve: Callable[..., Any]
    ) -> SuiteCells:
        """``text_replay`` and ``mixture``, then ``static``, ``dynamic`` and ``temporal`` over those cells."""
        return text_beneath(options, corruptions, resolve, clip_cells)  # type: ignore[arg-type]

    def targets(
        self, samples: Sequence[Sample], dataset: SegmentationDataset, device: torch.device
    ) -> dict[str, Field]:
        clips = clip_fields(self, samples, dataset)
        named, texts, unseen = [], [], []
        for sample, (_, objects) in zip(samples, clips, strict=True):
            expression = self.read(sample, "expression", dataset)
            if not isinstance(expression, ClipExpression):
                raise DatasetError(
                    f"{dataset.name}: sample {sample.sample_id}: field 'expression' is {type(expression).__name__}, "
                    "expected pytest_segrobust.data.clips.ClipExpression"
                )
            non_empty_text(expression.text, dataset, sample, "expression")
            if expression.object_id not in objects.object_ids:
                raise DatasetError(
                    f"{dataset.name}: sample {sample.sample_id}: the expression names object {expression.object_id}, "
                    f"which is not among the clip's objects {list(objects.object_ids)}"
                )
            masks = objects.masks
            target = torch.where(masks == expression.object_id, NAMED, 0)
            named.append(torch.where(masks == objects.ignore_index, objects.ignore_index, target))
            texts.append(expression.text)
            unseen.append((objects.unseen[objects.object_ids.index(expression.object_id)],))
        data = upload(torch.stack(named), device)
        batch, frames = int(data.shape[0]), int(data.shape[1])
        masks = VideoMasks(
            data,
            tuple((NAMED,) for _ in samples),
            torch.stack([objects.annotated for _, objects in clips]).to(device),
            torch.arange(frames, dtype=torch.int64, device=device).expand(batch, frames).contiguous(),
            clips[0][1].ignore_index,
            tuple(unseen),
        )
        return {"objects": masks, "expression": Expressions(tuple(texts))}

    def predict(self, model: Any, batch: Batch) -> Any:
        """``model.predict(clips, texts)`` with the batch's (possibly perturbed) expressions as a list."""
        return model.predict(field_of(batch, Video).data, list(field_of(batch, Expressions).texts))

    def check_predictions(self, predictions: Any, batch: Batch) -> torch.Tensor:
        """Ids ``(B, T, H, W)``: 1 where the bool mask is set or the logit is above 0, else 0.

        Raises:
            ModelOutputError: for a non-tensor, a wrong shape, an integer dtype, or NaN / infinite logits.
        """
        expected = tuple(field_of(batch, VideoMasks).data.shape)
        wanted = f"a tensor {expected} (a mask per frame)"
        return logit_masks(clip_tensor(predictions, expected, batch, values="masks", wanted=wanted), batch).long()
