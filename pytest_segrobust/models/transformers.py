"""Hugging Face checkpoints (the ``transformers`` extra): ``transformers: dir`` in a suite.

::

    models:
      - name: segformer
        transformers: checkpoints/segformer-b0   # saved with save_pretrained (model and image processor)
        label_map: {wall: background}            # optional: model label -> dataset class name
        allow_download: false                    # the default: only a local directory is read

Per-pixel models (``AutoModelForSemanticSegmentation``: SegFormer, UperNet, DPT, BEiT,
MobileViT, ...) serve semantic suites; mask-classification models (Mask2Former, MaskFormer)
serve semantic, instance and panoptic suites through their image processor's
``post_process_*_segmentation``; SAM-family models serve promptable suites
(:mod:`pytest_segrobust.models.transformers_promptable`), SAM 2 video models vos suites whose reference
is prompts (:mod:`pytest_segrobust.models.transformers_promptable_video`). OneFormer is refused: it needs a task prompt from its
processor's tokenizer.

Images are prepared in torch, batched, on the model's device, as the checkpoint's image
processor says (``size``, ``resample``, rescaling, ``image_mean`` / ``image_std``, channel
flip). Two departures keep one prediction per input pixel: a centre crop is replaced by a
resize to the crop size, and instead of padding to ``size_divisor`` the resize goes to the
next multiple of it (as Mask2Former's own processor does for a single size). Predictions
come back at the input size.

The model's labels (``config.id2label``) are matched to the dataset's class names by name,
ignoring case, after ``label_map`` renames them; several model labels may map to one class.
Every dataset class must be covered by a model label (except background in an instance
suite, which is never predicted), or loading fails listing what did not match. Model labels
left without a class never count as a class:

* semantic: their logits are set to ``-inf`` before the labels are read, so a pixel takes
  the most likely of the model's classes that the dataset has (the prediction conditioned on
  the dataset's classes); map them with ``label_map`` (``{wall: background}``) to count
  them as a class instead;
* instance: their instances are dropped (as are those of the background class);
* panoptic: their segments become void (0), where the model abstains.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.extras import TRANSFORMERS, import_failure
from pytest_segrobust.core.types import InstancePredictions, PanopticPredictions
from pytest_segrobust.core.wording import article
from pytest_segrobust.models.torch_module import class_ids, module_fingerprint, normalise_channels, require_finite

REQUIRES = (TRANSFORMERS,)
"""What ``transformers: dir`` models need installed; a suite with one is checked when it is loaded."""
# Mask-classification models whose image processors post-process all three tasks.
_UNIVERSAL = ("mask2former", "maskformer")
_TASKS = ("semantic", "instance", "panoptic", "promptable", "vos")
# Instance post-processing keeps every query with a mask: AP ranks by score, a cut only loses recall.
_INSTANCE_THRESHOLD = 0.0
# Panoptic post-processing keeps transformers' defaults: query score, mask probability, overlap.
_PANOPTIC_THRESHOLDS = (0.5, 0.5, 0.8)
# How many names an error lists before it says how many more there are.
_LISTED = 40


def load_transformers(
    checkpoint: str,
    *,
    task: str,
    device: torch.device,
    class_names: Sequence[str],
    label_map: Mapping[str, str] | None,
    allow_download: bool,
) -> object:
    """A Hugging Face segmentation checkpoint as a model of ``task``, on ``device``.

    Args:
        checkpoint: A directory written by ``save_pretrained`` (model and image processor),
            relative to the working directory; with ``allow_download``, also a hub id.
        task: The suite's task: ``semantic``, ``instance``, ``panoptic``, ``promptable`` (SAM-family
            checkpoints, :mod:`pytest_segrobust.models.transformers_promptable`) or ``vos`` (SAM 2 video
            checkpoints given prompts, :mod:`pytest_segrobust.models.transformers_promptable_video`).
        device: Where the model runs.
        class_names: The dataset's classes, which the model's labels are matched to.
        label_map: Model label -> dataset class name, for labels whose names differ.
        allow_download: Let transformers fetch files it does not find locally.

    Raises:
        SegRobustError: when transformers is missing, the checkpoint cannot be read or does
            not fit the task, or its labels do not cover the dataset's classes.
    """
    try:
        import transformers
    except Exception as exc:  # a broken dependency raises more than ImportError (torchvision::nms)
        raise SegRobustError(f"transformers models need Hugging Face transformers: {import_failure(exc, TRANSFORMERS)}") from exc
    if task not in _TASKS:
        raise SegRobustError(
            f"transformers model {checkpoint}: {article(repr(task))} suite is not supported; tasks: {', '.join(_TASKS)}"
        )
    if not allow_download and not Path(checkpoint).is_dir():
        raise SegRobustError(
            f"transformers model {checkpoint}: no such checkpoint directory (relative paths start at the pytest rootdir); "
            "set allow_download: true on the model to let transformers fetch it from the Hugging Face hub"
        )
    local = not allow_download
    config = _load(checkpoint, "config", lambda: transformers.AutoConfig.from_pretrained(checkpoint, local_files_only=local))
    if task in ("promptable", "vos"):
        from pytest_segrobust.models.transformers_promptable import OpenCheckpoint, load_promptable
        from pytest_segrobust.models.transformers_promptable_video import load_promptable_video

        opened = OpenCheckpoint(transformers, checkpoint, config, local, device, _load)
        return load_promptable(opened) if task == "promptable" else load_promptable_video(opened)
    family = _family(checkpoint, config, task)
    processor = _load(checkpoint, "image processor", lambda: _image_processor(transformers, checkpoint, local))
    auto = transformers.AutoModelForSemanticSegmentation if family == "semantic" else transformers.AutoModelForUniversalSegmentation
    network = _load(checkpoint, "model", lambda: auto.from_pretrained(checkpoint, local_files_only=local))
    labels = {int(k): str(v) for k, v in network.config.id2label.items()}
    match = match_labels(checkpoint, labels, class_names, label_map, skip_background=task == "instance")
    preprocessing = Preprocessing.from_processor(processor)
    adapters = {
        ("semantic", "semantic"): TransformersSegmenter,
        ("universal", "semantic"): UniversalSegmenter,
        ("universal", "instance"): UniversalInstanceSegmenter,
        ("universal", "panoptic"): UniversalPanopticSegmenter,
    }
    return adapters[family, task](network, processor, preprocessing, match, device, transformers.__version__)


def _load(checkpoint: str, what: str, load: Any) -> Any:
    """``load()``, with transformers' errors as a :class:`SegRobustError` naming the checkpoint."""
    try:
        return load()
    except ImportError as exc:  # a model's own dependency (scipy for Mask2Former), or one that is broken
        raise SegRobustError(f"transformers model {checkpoint}: cannot load its {what}: {import_failure(exc, TRANSFORMERS)}") from exc
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise SegRobustError(f"transformers model {checkpoint}: cannot load its {what}: {type(exc).__name__}: {exc}") from exc


def _image_processor(transformers: Any, checkpoint: str, local: bool) -> Any:
    """The checkpoint's image processor, on the PIL/numpy backend (the fast one imports torchvision)."""
    if int(transformers.__version__.split(".")[0]) >= 5:
        return transformers.AutoImageProcessor.from_pretrained(checkpoint, backend="pil", local_files_only=local)
    return transformers.AutoImageProcessor.from_pretrained(checkpoint, use_fast=False, local_files_only=local)


def _family(checkpoint: str, config: Any, task: str) -> str:
    """``semantic`` for per-pixel logits, ``universal`` for mask classification; refuses the rest."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES

    model_type = getattr(config, "model_type", "")
    if model_type == "oneformer":
        raise SegRobustError(
            f"transformers model {checkpoint}: OneFormer is not supported (it needs a task prompt from its processor's "
            "tokenizer); Mask2Former and MaskFormer checkpoints serve the same tasks"
        )
    if model_type in _UNIVERSAL:
        return "universal"
    if model_type in MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES:
        if task != "semantic":
            raise SegRobustError(
                f"transformers model {checkpoint}: {article(model_type)} model predicts a class per pixel and serves "
                f"semantic suites only, not {article(task)} suite; use a Mask2Former or MaskFormer checkpoint"
            )
        return "semantic"
    supported = sorted({*MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES, *_UNIVERSAL})
    raise SegRobustError(
        f"transformers model {checkpoint}: model type {model_type!r} is not a supported segmentation model; "
        f"supported: {', '.join(supported)}"
    )


@dataclass(frozen=True)
class LabelMatch:
    """Which dataset class each of the model's labels stands for.

    Attributes:
        dataset_ids: For each model label id ``0..M-1``, the dataset's class id, or ``-1``
            when the label has none (or is background in an instance suite).
        unmatched: The model's labels without a dataset class, for messages.
    """

    dataset_ids: tuple[int, ...]
    unmatched: tuple[str, ...]

    def table(self, device: torch.device) -> torch.Tensor:
        """Model label id -> dataset class id (``-1`` for none). Shape: ``(M,)``, int64."""
        return torch.tensor(self.dataset_ids, dtype=torch.int64, device=device)


def match_labels(
    checkpoint: str,
    id2label: Mapping[int, str],
    class_names: Sequence[str],
    label_map: Mapping[str, str] | None,
    skip_background: bool = False,
) -> LabelMatch:
    """Match a model's labels to the dataset's classes by name (case-insensitive) after ``label_map``.

    Args:
        checkpoint: For messages.
        id2label: The model's ``config.id2label``; ids must be ``0..M-1``.
        class_names: The dataset's classes, in id order.
        label_map: Model label -> dataset class name; every key must be a model label and
            every value a dataset class.
        skip_background: An instance suite: class 0 is background, never predicted, so it
            need not be covered and labels mapped to it are dropped.

    Raises:
        SegRobustError: naming the labels and classes that did not match, and ``label_map``.
    """
    where = f"transformers model {checkpoint}"
    if sorted(id2label) != list(range(len(id2label))) or not id2label:
        raise SegRobustError(f"{where}: config.id2label must number the labels 0..M-1, got ids {sorted(id2label)}")
    classes: dict[str, int] = {}
    for k, name in enumerate(class_names):
        if _key(name) in classes:
            raise SegRobustError(f"{where}: the dataset has two classes named {name!r} (ignoring case); labels cannot be matched")
        classes[_key(name)] = k
    model_labels = {_key(label) for label in id2label.values()}
    renames = {_key(source): target for source, target in (label_map or {}).items()}
    for source, target in (label_map or {}).items():
        if _key(source) not in model_labels:
            raise SegRobustError(
                f"{where}: label_map renames {source!r}, which is not one of the model's labels: {_listed(id2label.values())}"
            )
        if _key(target) not in classes:
            raise SegRobustError(
                f"{where}: label_map maps {source!r} to {target!r}, which is not one of the dataset's classes: "
                f"{', '.join(class_names)}"
            )
    dataset_ids, unmatched = [], []
    for model_id in range(len(id2label)):
        label = id2label[model_id]
        k = classes.get(_key(renames.get(_key(label), label)), -1)
        if k < 0:
            unmatched.append(label)
        dataset_ids.append(-1 if skip_background and k == 0 else k)
    required = range(1 if skip_background else 0, len(class_names))
    uncovered = [class_names[k] for k in required if k not in dataset_ids]
    if uncovered:
        raise SegRobustError(
            f"{where}: the model's labels do not cover the dataset's classes; no model label for "
            f"{', '.join(uncovered)}. Model labels without a dataset class: {_listed(unmatched) or 'none'}. "
            f"Dataset classes: {', '.join(class_names)}. Names match ignoring case; give the model entry "
            "label_map: {model label: dataset class} for labels named otherwise"
        )
    return LabelMatch(tuple(dataset_ids), tuple(unmatched))


def _key(name: str) -> str:
    return name.strip().casefold()


def _listed(names: Any) -> str:
    names = list(names)
    more = f" (and {len(names) - _LISTED} more)" if len(names) > _LISTED else ""
    return ", ".join(names[:_LISTED]) + more


# PIL's resampling filters (the processors' ``resample``) and their nearest torch mode.
_RESAMPLE = {0: "nearest", 1: "bicubic", 2: "bilinear", 3: "bicubic", 4: "bilinear", 5: "bilinear"}


@dataclass(frozen=True)
class Preprocessing:
    """What an image processor does to an image before the model sees it, as data.

    Attributes:
        size: The processor's ``size`` (the keys that are set): ``height``/``width``,
            ``shortest_edge`` (and ``longest_edge``) or ``max_height``/``max_width``;
            ``None`` without resizing.
        resample: The torch interpolation mode of the processor's PIL filter.
        multiple: Both sides are rounded up to a multiple of it (``size_divisor``).
        keep_aspect_ratio, ensure_multiple_of: DPT's resizing rule.
        scale: Factor from pixel values ``0..255`` to the model's (``rescale_factor``, or 1).
        mean, std: Per channel, after scaling; ``None`` without normalisation.
        flip_channels: RGB -> BGR (MobileViT).
    """

    size: dict[str, int] | None
    resample: str = "bilinear"
    multiple: int = 1
    keep_aspect_ratio: bool = False
    ensure_multiple_of: int = 1
    scale: float = 1 / 255
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    flip_channels: bool = False

    @classmethod
    def from_processor(cls, processor: Any) -> Preprocessing:
        """Read a transformers image processor's settings (its attributes, as its config set them)."""
        size = _size_dict(getattr(processor, "size", None)) if getattr(processor, "do_resize", True) else None
        crop = _size_dict(getattr(processor, "crop_size", None))
        if getattr(processor, "do_center_crop", False) and crop and "height" in crop:
            # A crop would leave border pixels without a prediction: resize to the crop's size instead.
            size = {"height": crop["height"], "width": crop["width"]}
        normalise = bool(getattr(processor, "do_normalize", False))
        mean, std = getattr(processor, "image_mean", None), getattr(processor, "image_std", None)
        return cls(
            size=size,
            resample=_RESAMPLE.get(int(getattr(processor, "resample", 2) or 2), "bilinear"),
            multiple=max(1, int(getattr(processor, "size_divisor", 0) or 0)),
            keep_aspect_ratio=bool(getattr(processor, "keep_aspect_ratio", False)),
            ensure_multiple_of=max(1, int(getattr(processor, "ensure_multiple_of", 1) or 1)),
            scale=float(processor.rescale_factor) if getattr(processor, "do_rescale", False) else 1.0,
            mean=_floats(mean) if normalise and mean is not None else None,
            std=_floats(std) if normalise and std is not None else None,
            flip_channels=bool(getattr(processor, "do_flip_channel_order", False)),
        )

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        """The ``(height, width)`` an image of this size is resized to."""
        size = self.size or {}
        if "shortest_edge" in size and "longest_edge" in size:
            from transformers.image_transforms import get_size_with_aspect_ratio

            new = get_size_with_aspect_ratio((height, width), size["shortest_edge"], size["longest_edge"])
        elif "shortest_edge" in size:
            short, long = (height, width) if height <= width else (width, height)
            new_short, new_long = size["shortest_edge"], int(size["shortest_edge"] * long / short)
            new = (new_short, new_long) if height <= width else (new_long, new_short)
        elif "max_height" in size and "max_width" in size:
            from transformers.image_utils import get_image_size_for_max_height_width

            new = get_image_size_for_max_height_width((height, width), size["max_height"], size["max_width"])
        elif "height" in size and "width" in size:
            new = (size["height"], size["width"])
            if self.keep_aspect_ratio or self.ensure_multiple_of > 1:
                new = _dpt_size(height, width, new, self.keep_aspect_ratio, self.ensure_multiple_of)
        else:
            new = (height, width)
        return tuple(-(-int(side) // self.multiple) * self.multiple for side in new)  # type: ignore[return-value]

    def __call__(self, images: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The model's ``pixel_values`` from images in ``[0, 1]``.

        Shape:
            images: ``(B, 3, H, W)``; return: ``(B, 3, h, w)`` at :meth:`output_size`.
        """
        x = images.float()
        size = self.output_size(int(x.shape[-2]), int(x.shape[-1]))
        if self.size is not None and size != tuple(x.shape[-2:]):
            smooth = self.resample != "nearest"
            x = F.interpolate(x, size=size, mode=self.resample, align_corners=False if smooth else None, antialias=smooth)
            x = x.clamp(0, 1)  # as PIL's uint8 result is; bicubic overshoots
        if self.flip_channels:
            x = x.flip(1)
        x = x * (255 * self.scale)
        if self.mean is not None and self.std is not None:
            x = normalise_channels(x, self.mean, self.std)
        return x.to(dtype)


def _size_dict(size: Any) -> dict[str, int] | None:
    """A processor's ``size`` (a dict, transformers' ``SizeDict`` or an int) as the keys that are set."""
    if size is None:
        return None
    if isinstance(size, int):
        return {"height": size, "width": size}
    fields = size if isinstance(size, Mapping) else vars(size)
    found = {str(k): int(v) for k, v in fields.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0}
    return found or None


def _floats(values: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in values) if isinstance(values, list | tuple) else (float(values),)


def _dpt_size(height: int, width: int, target: tuple[int, int], keep_aspect_ratio: bool, multiple: int) -> tuple[int, int]:
    """DPT's rule: scale as little as possible when keeping the aspect ratio, round to a multiple."""
    scale_height, scale_width = target[0] / height, target[1] / width
    if keep_aspect_ratio:
        if abs(1 - scale_width) < abs(1 - scale_height):
            scale_height = scale_width
        else:
            scale_width = scale_height

    def nearest_multiple(value: float) -> int:
        rounded = round(value / multiple) * multiple
        return rounded if rounded > 0 else -(-int(value) // multiple) * multiple

    return nearest_multiple(scale_height * height), nearest_multiple(scale_width * width)


class _TransformersModel:
    """What the adapters share: placement, eval mode, pre-processing and the fingerprint."""

    task = "semantic"

    def __init__(
        self,
        network: torch.nn.Module,
        processor: Any,
        preprocessing: Preprocessing,
        labels: LabelMatch,
        device: torch.device | str,
        version: str,
    ) -> None:
        self.device = torch.device(device)
        self.network = network.to(self.device).eval()
        self.processor = processor
        self.preprocessing = preprocessing
        self.labels = labels
        self.version = version
        self.dtype = next((p.dtype for p in network.parameters() if p.is_floating_point()), torch.float32)

    def pixel_values(self, images: torch.Tensor) -> torch.Tensor:
        """The model's input for a batch, on its device. Shape: ``(B, 3, H, W)`` -> ``(B, 3, h, w)``."""
        return self.preprocessing(images.to(self.device), self.dtype)

    def fingerprint(self) -> str:
        """Digest of the weights, the model's and the processor's configs, the label match and the adapter."""
        return module_fingerprint(
            self.network,
            f"{type(self).__name__} transformers {self.version}",
            _config_json(self.network.config),
            json.dumps(asdict(self.preprocessing), sort_keys=True),
            repr(self.labels.dataset_ids),
            repr((_INSTANCE_THRESHOLD, _PANOPTIC_THRESHOLDS)),
        )


def _config_json(config: Any) -> str:
    """The model's config, less where it was loaded from: moving a checkpoint does not change it."""
    settings = {k: v for k, v in config.to_dict().items() if k != "_name_or_path"}
    return json.dumps(settings, sort_keys=True, default=str)


class TransformersSegmenter(_TransformersModel):
    """A per-pixel model (``AutoModelForSemanticSegmentation``) as a semantic model of the harness."""

    @torch.inference_mode()
    def predict(self, images: torch.Tensor) -> torch.Tensor:
        """Shape: images ``(B, 3, H, W)`` -> dataset class ids ``(B, H, W)``, int64.

        Logits are resized bilinearly to the input; model classes without a dataset class
        are left out of the arg-max.
        """
        logits = self.network(pixel_values=self.pixel_values(images)).logits.float()
        logits = F.interpolate(logits, size=images.shape[-2:], mode="bilinear", align_corners=False)
        require_finite(logits, "logits")
        table = self.labels.table(logits.device)
        logits = logits.masked_fill((table < 0).view(1, -1, 1, 1), float("-inf"))
        return table[class_ids(logits)]


class _UniversalModel(_TransformersModel):
    def outputs(self, images: torch.Tensor) -> SimpleNamespace:
        """The two outputs the post-processors read, in float32."""
        output = self.network(pixel_values=self.pixel_values(images))
        classes, masks = output.class_queries_logits.float(), output.masks_queries_logits.float()
        require_finite(classes, "class logits")
        require_finite(masks, "mask logits")
        return SimpleNamespace(class_queries_logits=classes, masks_queries_logits=masks)


class UniversalSegmenter(_UniversalModel):
    """A Mask2Former / MaskFormer model as a semantic model, through ``post_process_semantic_segmentation``."""

    @torch.inference_mode()
    def predict(self, images: torch.Tensor) -> torch.Tensor:
        """Shape: images ``(B, 3, H, W)`` -> dataset class ids ``(B, H, W)``, int64.

        The queries' class logits of model classes without a dataset class are ``-inf``:
        their probability goes to the remaining classes and "no object".
        """
        outputs = self.outputs(images)
        table = self.labels.table(outputs.class_queries_logits.device)
        unmatched = torch.cat([table < 0, table.new_zeros(1, dtype=torch.bool)])  # the last column is "no object"
        outputs.class_queries_logits = outputs.class_queries_logits.masked_fill(unmatched, float("-inf"))
        size = (int(images.shape[-2]), int(images.shape[-1]))
        maps = self.processor.post_process_semantic_segmentation(outputs, target_sizes=[size] * images.shape[0])
        return table[torch.stack([m.to(table.device) for m in maps]).long()]


class UniversalInstanceSegmenter(_UniversalModel):
    """A Mask2Former / MaskFormer model as an instance model, through ``post_process_instance_segmentation``.

    Every query with a non-empty mask is kept (threshold 0): AP ranks by score. Instances of
    model classes without a dataset class, or of background, are dropped.
    """

    task = "instance"

    @torch.inference_mode()
    def predict(self, images: torch.Tensor) -> list[InstancePredictions]:
        """Shape: images ``(B, 3, H, W)`` -> ``B`` predictions with masks ``(N, H, W)``."""
        outputs = _on_cpu(self.outputs(images))  # transformers' per-query loop mixes devices
        size = (int(images.shape[-2]), int(images.shape[-1]))
        results = self.processor.post_process_instance_segmentation(
            outputs, threshold=_INSTANCE_THRESHOLD, target_sizes=[size] * images.shape[0], return_binary_maps=True
        )
        table = self.labels.table(torch.device("cpu"))
        predictions = []
        for result in results:
            segments = result["segments_info"]
            if segments:
                masks = result["segmentation"].reshape(len(segments), *size) > 0.5
                labels = table[torch.tensor([s["label_id"] for s in segments], dtype=torch.int64)]
                scores = torch.tensor([float(s["score"]) for s in segments], dtype=torch.float32)
            else:
                masks = torch.zeros(0, *size, dtype=torch.bool)
                labels, scores = torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.float32)
            keep = labels > 0
            predictions.append(
                InstancePredictions(masks[keep].to(self.device), labels[keep].to(self.device), scores[keep].to(self.device))
            )
        return predictions


class UniversalPanopticSegmenter(_UniversalModel):
    """A Mask2Former / MaskFormer model as a panoptic model, through ``post_process_panoptic_segmentation``.

    transformers' default thresholds; no class is fused (the checkpoint does not say which
    are stuff), so a stuff region may come as several segments. Segments of model classes
    without a dataset class become void.
    """

    task = "panoptic"

    @torch.inference_mode()
    def predict(self, images: torch.Tensor) -> list[PanopticPredictions]:
        """Shape: images ``(B, 3, H, W)`` -> ``B`` predictions with segments ``(H, W)``."""
        outputs = _on_cpu(self.outputs(images))
        size = (int(images.shape[-2]), int(images.shape[-1]))
        threshold, mask_threshold, overlap = _PANOPTIC_THRESHOLDS
        results = self.processor.post_process_panoptic_segmentation(
            outputs,
            threshold=threshold,
            mask_threshold=mask_threshold,
            overlap_mask_area_threshold=overlap,
            label_ids_to_fuse=set(),
            target_sizes=[size] * images.shape[0],
        )
        table = self.labels.table(torch.device("cpu"))
        predictions = []
        for result in results:
            segments = result["segmentation"].cpu().long().clamp(min=0)  # -1 everywhere when nothing was found
            ids, labels = [], []
            for info in result["segments_info"]:
                label = int(table[int(info["label_id"])])
                if label < 0:
                    segments[segments == int(info["id"])] = 0
                else:
                    ids.append(int(info["id"]))
                    labels.append(label)
            predictions.append(
                PanopticPredictions(
                    segments.to(self.device),
                    torch.tensor(ids, dtype=torch.int64, device=self.device),
                    torch.tensor(labels, dtype=torch.int64, device=self.device),
                )
            )
        return predictions


def _on_cpu(outputs: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(**{name: value.cpu() for name, value in vars(outputs).items()})
