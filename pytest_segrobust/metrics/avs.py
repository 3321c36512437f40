"""Audio-visual segmentation (AVSBench S4 / MS3): the sounding object's mIoU (J) and F-score, as AVSBench defines them.

Definitions, as AVSBench's evaluation (github.com/OpenNLPLab/AVSBench, ``avs_scripts/*/utils/utility.py``,
``mask_iou`` and ``Eval_Fmeasure``) has them, frame by frame on the sounding mask (object 1 of
:class:`~pytest_segrobust.core.types.VideoMasks`):

* **mIoU** (``avs_miou``): a frame's IoU is ``|P & G| / |P | G|`` of the predicted mask ``P``
  (logit > 0, i.e. probability > 0.5) and the true mask ``G``; a frame whose ``G`` is empty
  scores its true-negative share ``|~P & ~G| / pixels`` (a model that predicts nothing there
  scores 1). The score is the mean over frames, in percent.
* **F** (``avs_f``): the predicted probability (``sigmoid`` of the logit) is cut at 255
  thresholds ``linspace(0, 1 - 1e-10, 255)`` in float32 (``P_k = prob >= t_k``); per frame and
  threshold, precision ``|P_k & G| / |P_k|`` (0 when ``P_k`` is empty) and recall
  ``|P_k & G| / |G|`` give ``F_k = (1 + b2) p r / (b2 p + r)`` with ``b2 = 0.3`` (0 where
  ``p = r = 0``). Frames with an empty ``G`` are left out. The score is the maximum over
  thresholds of the mean of ``F_k`` over frames, in percent.

Where this differs from AVSBench's script: it takes F's maximum over thresholds *per
batch* of its test loader and averages those maxima, so its F depends on the batch size
(and the order of the clips); here the mean over frames runs over the whole dataset and the
maximum is taken once, at the end, as if the dataset were one batch. (Pooling the
per-threshold TP / FP / FN over the dataset would be batch-free too, but it is another
measure, a micro F that weighs large objects more; AVSBench averages per-frame F.) Its mIoU
is per batch too, ``sum(iou) / N``, which averages over frames alike unless the last batch is
short; here it is the mean over every scored frame. A model returning ``bool`` masks has no
probabilities: its F is that of its masks (every threshold the same), AVSBench's F at the
one threshold there is.

Frames: only ``annotated`` frames are scored (S4's train split annotates the first frame of a
clip only); pixels marked ``ignore_index`` count nowhere (not in ``P``, ``G`` nor a frame's
pixels). AVSBench's masks have none.

Statistics: a clip's row holds sums over its scored frames, so rows add up and the
statistical gate resamples clips. ``avs_miou``: the sum of the frames' IoU and the number of
frames. ``avs_f``: per threshold, the sum of the non-empty frames' ``F_k`` (255 columns), and
the number of those frames; the maximum is taken after the sum (:meth:`AudioVisualF.score_of`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.core.types import Batch, VideoMasks, field_of
from pytest_segrobust.metrics.base import Metric, MetricContext, MetricResult, Reduction
from pytest_segrobust.metrics.registry import register_metric

SOUNDING = 1
"""The sounding object's id in the targets and the predictions."""
F_BETA_SQUARED = 0.3
F_THRESHOLDS = 255


@dataclass(frozen=True)
class SoundingMasks(VideoMasks):
    """What the audio-visual task makes of a model's output: the sounding mask per frame, and its probabilities.

    ``data`` holds 1 where a pixel sounds (the logit is above 0, or the bool mask is set) and 0
    elsewhere, with the targets' objects and frames, so the video metrics (J, F, J&F) score it
    too. ``probabilities`` is the sigmoid of the logits, or ``None`` for bool masks.

    Shape:
        probabilities: ``(B, T, H, W)``, float32.
    """

    probabilities: torch.Tensor | None = None


def thresholds(device: torch.device | str = "cpu") -> torch.Tensor:
    """AVSBench's 255 thresholds of F, ``linspace(0, 1 - 1e-10, 255)`` in float32 (the last rounds to 1)."""
    return torch.linspace(0, 1 - 1e-10, F_THRESHOLDS, dtype=torch.float32, device=device)


def frame_ious(predicted: torch.Tensor, truth: torch.Tensor, scored: torch.Tensor) -> torch.Tensor:
    """AVSBench's IoU of each frame: ``|P & G| / |P | G|``, the true-negative share where ``G`` is empty.

    Shape:
        predicted, truth, scored: ``(N, H, W)``, bool; return: ``(N,)``, float64 (NaN for a frame without a scored pixel).
    """
    predicted, truth = (predicted & scored).flatten(1), (truth & scored).flatten(1)
    pixels = scored.flatten(1).sum(dim=1).double()
    both = (predicted & truth).sum(dim=1).double()
    union = (predicted | truth).sum(dim=1).double()
    empty = truth.sum(dim=1) == 0
    negatives = pixels - union  # neither predicted nor true, among the scored pixels
    return torch.where(empty, negatives / pixels, both / union.clamp_min(1.0))


def frame_f_scores(
    probabilities: torch.Tensor | None, predicted: torch.Tensor, truth: torch.Tensor, scored: torch.Tensor
) -> torch.Tensor:
    """Each frame's F at each of the 255 thresholds (:func:`thresholds`); a bool mask (``probabilities`` None)
    gives its one F in every column.

    Shape:
        probabilities: ``(N, H, W)``, float32 or ``None``; predicted, truth, scored: ``(N, H, W)``, bool;
        return: ``(N, 255)``, float64.
    """
    count = truth.shape[0]
    truth = (truth & scored).flatten(1)
    true = truth.sum(dim=1).double()  # (N,)
    if probabilities is None:
        marked = (predicted & scored).flatten(1)
        hits = (marked & truth).sum(dim=1).double()[:, None].expand(count, F_THRESHOLDS)
        shown = marked.sum(dim=1).double()[:, None].expand(count, F_THRESHOLDS)
    else:
        # A pixel of probability p is in P_k for every t_k <= p: bucketize gives how many those are,
        # and a suffix sum of the counts per bucket gives |P_k| (and |P_k & G|) for every k at once.
        levels = torch.bucketize(probabilities.float().contiguous(), thresholds(probabilities.device), right=True)
        levels = torch.where(scored, levels, 0).flatten(1)  # unscored pixels: in no P_k
        offsets = torch.arange(count, device=levels.device)[:, None] * (F_THRESHOLDS + 1)
        size = count * (F_THRESHOLDS + 1)
        per_level = torch.bincount((levels + offsets).flatten(), minlength=size).view(count, -1)
        true_level = torch.bincount((levels + offsets)[truth], minlength=size).view(count, -1)
        # Column k of the suffix sums from level k + 1 on: the pixels with t_k <= p.
        shown = per_level.flip(1).cumsum(1).flip(1)[:, 1:].double()
        hits = true_level.flip(1).cumsum(1).flip(1)[:, 1:].double()
    precision = torch.where(shown > 0, hits / shown.clamp_min(1.0), 0.0)
    recall = hits / true.clamp_min(1.0)[:, None]
    denominator = F_BETA_SQUARED * precision + recall
    return torch.where(denominator > 0, (1 + F_BETA_SQUARED) * precision * recall / denominator.clamp_min(1e-300), 0.0)


def sounding_of(predictions: Any, target: VideoMasks, name: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The predicted sounding masks (bool) and probabilities of checked predictions.

    Raises:
        ModelOutputError: for anything but :class:`SoundingMasks` or ids of the targets' shape.
    """
    if isinstance(predictions, SoundingMasks):
        return predictions.data == SOUNDING, predictions.probabilities
    data = predictions.data if isinstance(predictions, VideoMasks) else predictions
    if not isinstance(data, torch.Tensor) or data.shape != target.data.shape or data.is_floating_point():
        got = f"{data.dtype} {tuple(data.shape)}" if isinstance(data, torch.Tensor) else type(data).__name__
        raise ModelOutputError(f"{name}: expected sounding masks of shape {tuple(target.data.shape)}, got {got}")
    return data == SOUNDING, None


class AudioVisualMetric(Metric):
    """What ``avs_miou`` and ``avs_f`` share: a row of sums over each clip's scored frames."""

    accepts = (VideoMasks,)
    chance_by_classes = False  # the sounding masks against their truth: all background scores 0
    columns: ClassVar[int]
    clips: list[torch.Tensor]

    def __init__(self, context: MetricContext) -> None:
        super().__init__(context)
        self.add_state("clips", [], Reduction.CONCAT)
        self.keep_row_units()  # under R-VOS, an expression's clip: the gate resamples clips

    def update(self, predictions: Any, batch: Batch) -> None:
        """Add a batch of clips (:class:`SoundingMasks`, or ids ``(B, T, H, W)`` where 1 sounds)."""
        target = field_of(batch, VideoMasks)
        predicted, probabilities = sounding_of(predictions, target, self.name)
        device = target.data.device
        annotated = target.annotated.to(device=device, dtype=torch.bool)
        truth = target.data == SOUNDING
        scored = (target.data != target.ignore_index) & annotated[:, :, None, None]
        frames = annotated.flatten()
        values = self.frame_values(
            None if probabilities is None else probabilities.to(device).flatten(0, 1)[frames],
            predicted.to(device).flatten(0, 1)[frames],
            truth.flatten(0, 1)[frames],
            scored.flatten(0, 1)[frames],
        )
        clip_of = torch.arange(target.batch_size(), device=device).repeat_interleave(target.frames())[frames]
        rows = torch.zeros(target.batch_size(), self.columns, dtype=torch.float64, device=device)
        rows.index_add_(0, clip_of, values)
        self.clips.append(rows.cpu())
        self.add_row_units(batch)

    def frame_values(
        self, probabilities: torch.Tensor | None, predicted: torch.Tensor, truth: torch.Tensor, scored: torch.Tensor
    ) -> torch.Tensor:
        """Each scored frame's contribution to its clip's row, ``(N, columns)``, float64."""
        raise NotImplementedError

    def image_statistics(self) -> np.ndarray:
        """``(N, columns)``: per clip, its sums over scored frames (see the module)."""
        if not self.clips:
            return np.zeros((0, self.columns), dtype=np.float64)
        return torch.cat(
            [torch.as_tensor(c, dtype=torch.float64).reshape(-1, self.columns) for c in self.clips]
        ).numpy()

    def compute(self) -> MetricResult:
        summed = self.image_statistics().sum(axis=0)
        return MetricResult(
            float(self.score_of(summed)), tuple(None for _ in self.context.class_names), self.details(summed)
        )

    def details(self, summed: np.ndarray) -> dict[str, float]:
        return {"frames": float(summed[..., -1])}


@register_metric
class AudioVisualIoU(AudioVisualMetric):
    """AVSBench's mIoU (J) of the sounding mask: per-frame IoU (true-negative share on empty frames), mean over frames."""

    name, label = "avs_miou", "mIoU"
    columns = 2  # the sum of the frames' IoU, the number of frames
    detail_labels: ClassVar[dict[str, str]] = {"frames": "frames"}

    def frame_values(self, probabilities, predicted, truth, scored):  # type: ignore[no-untyped-def]
        ious = frame_ious(predicted, truth, scored)
        counted = scored.flatten(1).any(dim=1)
        return torch.stack([torch.where(counted, ious, 0.0), counted.double()], dim=1)

    @classmethod
    def score_of(cls, summed: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return 100.0 * summed[..., 0] / summed[..., 1]


@register_metric
class AudioVisualF(AudioVisualMetric):
    """AVSBench's F-score (beta^2 = 0.3) of the sounding mask: the best of 255 thresholds of the mean per-frame F,
    over the whole dataset (not per batch)."""

    name, label = "avs_f", "F"
    columns = F_THRESHOLDS + 1  # per threshold the sum of the frames' F, then the number of non-empty frames
    detail_labels: ClassVar[dict[str, str]] = {"frames": "frames", "threshold": "best threshold"}

    def frame_values(self, probabilities, predicted, truth, scored):  # type: ignore[no-untyped-def]
        counted = (truth & scored).flatten(1).any(dim=1)  # frames with an empty truth are left out
        f_scores = frame_f_scores(probabilities, predicted, truth, scored) * counted[:, None]
        return torch.cat([f_scores, counted.double()[:, None]], dim=1)

    @classmethod
    def score_of(cls, summed: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return 100.0 * summed[..., :-1].max(axis=-1) / summed[..., -1]

    def details(self, summed: np.ndarray) -> dict[str, float]:
        best = int(np.argmax(summed[:-1]))
        return {"frames": float(summed[-1]), "threshold": float(thresholds()[best])}
