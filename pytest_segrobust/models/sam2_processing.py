"""SAM 2's processors without torchvision: a checkpoint's saved settings applied with torch ops.

transformers' ``Sam2ImageProcessor`` and the video processor of ``Sam2VideoProcessor`` are built
on its torchvision backend, so where torchvision cannot be imported (a CPU-only torch beside a
CUDA torchvision, or none) a SAM 2 checkpoint's processor cannot be built. The SAM-family
adapters (:mod:`~pytest_segrobust.models.transformers_promptable`,
:mod:`~pytest_segrobust.models.transformers_promptable_video`) then use :class:`Sam2Processing`,
which reads the same settings from the checkpoint folder and speaks the part of the processor's
interface the adapters call. Where torchvision is importable the processor itself is used.

What the processor does, and so what this does:

* **pixels**: the ``uint8`` image is resized to ``size`` (``{height, width}``) by antialiased
  bilinear interpolation on the ``uint8`` values (on the CPU torch resizes ``uint8`` natively,
  as torchvision does there), then rescaled and normalised in one step: ``(x - mean / r) / (std / r)``
  in float32, ``r`` the ``rescale_factor``;
* **prompts**: a click ``(x, y)`` and each box corner ``(x0, y0)``, ``(x1, y1)`` in the image's
  pixels are scaled to the square the model's prompt encoder expects: ``x * t / W``, ``y * t / H``,
  ``t`` the processor's ``target_size`` (``size["height"]`` unless set); labels pass as they are;
  one request holds one prompt set, so nothing is padded;
* **video prompts**: a box goes in as two clicks labelled 2 and 3 (its corners) before the object's
  clicks, as ``add_inputs_to_inference_session`` does;
* **masks**: the low-resolution logits are resized to the input's ``(H, W)`` by bilinear
  interpolation (half-pixel centres); thresholding at 0 is the caller's.

Settings come from ``preprocessor_config.json`` where the folder has one (hub checkpoints), else
from the ``image_processor`` entry of ``processor_config.json`` (``save_pretrained`` of
transformers 5); a video checkpoint's frames use ``video_preprocessor_config.json`` or the
``video_processor`` entry where present. A missing setting, an unknown key, or a value that would
change the pixels in a way not done here (another resampling filter, a crop, padding) is refused,
naming the file and the key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from pytest_segrobust.core.errors import SegRobustError

IMAGE_SETTINGS = "preprocessor_config.json"
VIDEO_SETTINGS = "video_preprocessor_config.json"
PROCESSOR_SETTINGS = "processor_config.json"
PROCESSORS = ("Sam2Processor", "Sam2VideoProcessor")
"""The processor classes whose conventions :class:`Sam2Processing` follows (EdgeTAM's are SAM 2's)."""
BILINEAR = 2
"""PIL's bilinear filter, the only ``resample`` SAM 2's processors are saved with."""
BOX_CORNER_LABELS = (2, 3)
"""The labels a video session gives a box's top-left and bottom-right corners."""

_REQUIRED = ("size", "resample", "rescale_factor", "image_mean", "image_std", "do_resize", "do_rescale", "do_normalize")
# Keys that must be unset (or false): each would change the pixels in a way the processors of SAM 2 never do.
_UNSET = ("do_center_crop", "crop_size", "do_pad", "pad_size", "mask_pad_size", "size_divisor")
# Keys that say what wrote the file or how a call is made, and never change what the model sees.
_DESCRIPTIVE = (
    "do_convert_rgb", "mask_size", "image_processor_type", "video_processor_type", "processor_class",
    "data_format", "input_data_format", "device", "return_tensors", "default_to_square", "disable_grouping",
    "return_metadata", "do_sample_frames", "fps", "num_frames", "video_metadata", "target_size", "point_pad_value",
    "_processor_class",
)


@dataclass(frozen=True)
class PixelSettings:
    """How a SAM 2 processor prepares images (or video frames), read from its saved settings.

    Attributes:
        size: ``(height, width)`` the model's input is resized to; ``None`` without resizing.
        rescale_factor: Factor from ``0..255`` to the model's range; ``None`` without rescaling.
        mean, std: Per channel, after rescaling; ``None`` without normalisation.
    """

    size: tuple[int, int] | None
    rescale_factor: float | None
    mean: tuple[float, ...] | None
    std: tuple[float, ...] | None

    @classmethod
    def read(cls, settings: Mapping[str, Any], where: str) -> PixelSettings:
        """The settings of one saved image or video processor.

        Args:
            settings: The saved dict.
            where: The file (and entry) it came from, for messages.

        Raises:
            SegRobustError: naming ``where`` and the key, for a missing or unknown key or a value
                not supported here.
        """
        for key in settings:
            if key not in (*_REQUIRED, *_UNSET, *_DESCRIPTIVE):
                raise SegRobustError(f"{where}: unknown key {key!r}; a SAM 2 processor's settings are {', '.join(_REQUIRED)}")
        for key in _REQUIRED:
            if key not in settings:
                raise SegRobustError(f"{where}: missing key {key!r}, which SAM 2's processors are saved with")
        for key in _UNSET:
            if settings.get(key):
                raise SegRobustError(f"{where}: {key} is {settings[key]!r}; SAM 2's processors neither crop nor pad")
        if settings["resample"] != BILINEAR:
            raise SegRobustError(f"{where}: resample is {settings['resample']!r}; only {BILINEAR} (bilinear) is supported")
        size = settings["size"]
        if not (isinstance(size, Mapping) and all(isinstance(size.get(k), int) for k in ("height", "width"))):
            raise SegRobustError(f"{where}: size is {size!r}; expected {{height: int, width: int}}")
        return cls(
            size=(size["height"], size["width"]) if settings["do_resize"] else None,
            rescale_factor=float(settings["rescale_factor"]) if settings["do_rescale"] else None,
            mean=_channels(settings, "image_mean", where) if settings["do_normalize"] else None,
            std=_channels(settings, "image_std", where) if settings["do_normalize"] else None,
        )

    def pixel_values(self, images: torch.Tensor) -> torch.Tensor:
        """Images as the model's ``pixel_values``, computed on the CPU as the processor computes them there.

        Shape:
            images: ``(N, 3, H, W)`` uint8; return: ``(N, 3, h, w)`` float32, ``(h, w)`` the ``size``.
        """
        pixels = images.cpu()
        if self.size is not None and tuple(pixels.shape[-2:]) != self.size:
            pixels = F.interpolate(pixels, size=self.size, mode="bilinear", align_corners=False, antialias=True)
        if self.mean is not None and self.std is not None:
            # Rescaling folded into the normalisation, in float32: the processor's own arithmetic.
            scale = 1.0 / self.rescale_factor if self.rescale_factor is not None else 1.0
            mean = (torch.tensor(self.mean) * scale).view(-1, 1, 1)
            std = (torch.tensor(self.std) * scale).view(-1, 1, 1)
            return (pixels.to(torch.float32) - mean) / std
        if self.rescale_factor is not None:
            return pixels * self.rescale_factor
        return pixels.to(torch.float32)


def _channels(settings: Mapping[str, Any], key: str, where: str) -> tuple[float, ...]:
    values = settings[key]
    if not (isinstance(values, Sequence) and len(values) == 3 and all(isinstance(v, (int, float)) for v in values)):
        raise SegRobustError(f"{where}: {key} is {values!r}; expected three numbers (one per channel)")
    return tuple(float(v) for v in values)


class Sam2Processing:
    """A SAM 2 checkpoint's processing without torchvision, as the part of ``Sam2Processor`` /
    ``Sam2VideoProcessor`` the adapters call (``__call__``, ``post_process_masks``,
    ``init_video_session``, ``add_inputs_to_inference_session``, ``to_dict``).

    Args:
        image: How images are prepared.
        video: How video frames are prepared (the image settings where the checkpoint has none).
        target_size: The side of the square prompt coordinates are scaled to.
        files: ``{file name: saved settings}`` read, for the fingerprint.
    """

    def __init__(
        self, image: PixelSettings, video: PixelSettings, target_size: int, files: Mapping[str, Any]
    ) -> None:
        self.image = image
        self.video = video
        self.target_size = target_size
        self.files = dict(files)

    @classmethod
    def from_checkpoint(cls, checkpoint: str | Path) -> Sam2Processing:
        """Read a SAM 2 checkpoint folder's processor settings (see the module for which files).

        Raises:
            SegRobustError: naming the file and key, when they are missing, unknown, or not SAM 2's.
        """
        folder = Path(checkpoint)
        files = {name: _json(folder / name) for name in (IMAGE_SETTINGS, VIDEO_SETTINGS, PROCESSOR_SETTINGS)}
        processor = files[PROCESSOR_SETTINGS] or {}
        if files[IMAGE_SETTINGS] is not None:
            image_where, image = folder / IMAGE_SETTINGS, files[IMAGE_SETTINGS]
        elif isinstance(processor.get("image_processor"), Mapping):
            image_where, image = folder / PROCESSOR_SETTINGS, processor["image_processor"]
        else:
            raise SegRobustError(
                f"transformers model {checkpoint}: no {IMAGE_SETTINGS}, nor an image_processor entry in "
                f"{PROCESSOR_SETTINGS}; save the checkpoint's processor beside its model (save_pretrained)"
            )
        general = {**image, **processor}
        processor_class = general.get("processor_class")
        if processor_class not in PROCESSORS:
            raise SegRobustError(
                f"{folder / PROCESSOR_SETTINGS if 'processor_class' in processor else image_where}: processor_class is "
                f"{processor_class!r}; without torchvision only {', '.join(PROCESSORS)} checkpoints are prepared here "
                "(install a torchvision that matches torch for the others)"
            )
        pixels = PixelSettings.read(image, f"{image_where}" + (" (image_processor)" if image is not files[IMAGE_SETTINGS] else ""))
        if files[VIDEO_SETTINGS] is not None:
            video = PixelSettings.read(files[VIDEO_SETTINGS], str(folder / VIDEO_SETTINGS))
        elif isinstance(processor.get("video_processor"), Mapping):
            video = PixelSettings.read(processor["video_processor"], f"{folder / PROCESSOR_SETTINGS} (video_processor)")
        else:
            video = pixels
        target = general.get("target_size")
        if target is None:
            if pixels.size is None:
                raise SegRobustError(f"{image_where}: neither target_size nor a size to scale prompts to")
            target = pixels.size[0]
        if not isinstance(target, int) or target <= 0:
            raise SegRobustError(f"{folder / PROCESSOR_SETTINGS}: target_size is {target!r}; expected a positive integer")
        return cls(pixels, video, target, {k: v for k, v in files.items() if v is not None})

    def __call__(
        self,
        images: np.ndarray,
        input_points: list[Any] | None = None,
        input_labels: list[Any] | None = None,
        input_boxes: list[Any] | None = None,
        return_tensors: str = "pt",
    ) -> Any:
        """One image and one request's prompts as the model's inputs (the processor's call for one image).

        Args:
            images: ``(H, W, 3)`` uint8.
            input_points: ``[[clicks]]``, clicks ``[[x, y], ...]`` in the image's pixels.
            input_labels: ``[[labels]]``.
            input_boxes: ``[[box]]``, the box ``[x0, y0, x1, y1]``.
            return_tensors: ``"pt"`` only.

        Returns:
            A ``BatchFeature`` with ``pixel_values`` ``(1, 3, h, w)``, ``original_sizes`` ``(1, 2)``
            and the prompts present: ``input_points`` ``(1, 1, P, 2)``, ``input_labels`` ``(1, 1, P)``,
            ``input_boxes`` ``(1, 1, 4)``.
        """
        from transformers import BatchFeature

        if return_tensors != "pt":
            raise ValueError(f"return_tensors={return_tensors!r}: only 'pt' is supported")
        height, width = int(images.shape[0]), int(images.shape[1])
        data: dict[str, Any] = {
            "pixel_values": self.image.pixel_values(torch.from_numpy(np.ascontiguousarray(images)).permute(2, 0, 1)[None]),
            "original_sizes": torch.tensor([[height, width]], dtype=torch.int64),
        }
        data.update(self.prompts(input_points, input_labels, input_boxes, height, width))
        return BatchFeature(data)

    def prompts(
        self, points: list[Any] | None, labels: list[Any] | None, boxes: list[Any] | None, height: int, width: int
    ) -> dict[str, torch.Tensor]:
        """Nested-list prompts of one image in its pixels, as the model's tensors in its coordinates."""
        prompts: dict[str, torch.Tensor] = {}
        if points is not None:
            prompts["input_points"] = self.scaled(torch.tensor(points, dtype=torch.float32), height, width)
            prompts["input_labels"] = torch.tensor(labels, dtype=torch.int64)
        if boxes is not None:
            corners = torch.tensor(boxes, dtype=torch.float32)
            prompts["input_boxes"] = self.scaled(corners.reshape(*corners.shape[:-1], 2, 2), height, width).reshape(
                corners.shape
            )
        return prompts

    def scaled(self, points: torch.Tensor, height: int, width: int) -> torch.Tensor:
        """Points ``(..., 2)`` ``(x, y)`` from an ``height`` x ``width`` image to the model's ``target_size`` square."""
        scaled = points.clone()
        scaled[..., 0] = points[..., 0] * (self.target_size / width)
        scaled[..., 1] = points[..., 1] * (self.target_size / height)
        return scaled

    def post_process_masks(
        self, masks: Sequence[torch.Tensor], original_sizes: torch.Tensor | Sequence[Sequence[int]], binarize: bool = True
    ) -> list[torch.Tensor]:
        """Each image's low-resolution mask logits ``(P, M, h, w)`` at its size ``(P, M, H, W)`` (thresholded at 0 with ``binarize``)."""
        sizes = original_sizes.tolist() if isinstance(original_sizes, torch.Tensor) else original_sizes
        resized = []
        for logits, size in zip(masks, sizes):
            upsampled = F.interpolate(logits, size=(int(size[0]), int(size[1])), mode="bilinear", align_corners=False)
            resized.append(upsampled > 0 if binarize else upsampled)
        return resized

    def init_video_session(
        self,
        video: np.ndarray,
        inference_device: torch.device | str = "cpu",
        processing_device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> Any:
        """An inference session over one clip's frames, as ``Sam2VideoProcessor`` opens one (its session
        class serves EdgeTAM's video model too).

        Args:
            video: ``(T, H, W, 3)`` uint8 frames.
            inference_device: Where the model runs, and where the frames and its state are kept.
            processing_device: Ignored: frames are prepared on the CPU (as the processor does there).
            dtype: The session's dtype.
        """
        from transformers.models.sam2_video.modeling_sam2_video import Sam2VideoInferenceSession

        del processing_device
        frames = torch.from_numpy(np.ascontiguousarray(video)).permute(0, 3, 1, 2)
        return Sam2VideoInferenceSession(
            video=self.video.pixel_values(frames),
            video_height=int(video.shape[1]),
            video_width=int(video.shape[2]),
            inference_device=inference_device,
            inference_state_device=inference_device,
            video_storage_device=inference_device,
            dtype=dtype,
        )

    def add_inputs_to_inference_session(
        self,
        inference_session: Any,
        frame_idx: int,
        obj_ids: int,
        input_points: list[Any] | None = None,
        input_labels: list[Any] | None = None,
        input_boxes: list[Any] | None = None,
    ) -> None:
        """One object's clicks and/or box at ``frame_idx``, replacing what it had there (nested lists of
        one image and one object, in the frame's pixels)."""
        height, width = int(inference_session.video_height), int(inference_session.video_width)
        given = self.prompts(input_points, input_labels, input_boxes, height, width)
        coords = given.get("input_points", torch.zeros(1, 1, 0, 2))
        labels = given.get("input_labels", torch.zeros(1, 1, 0, dtype=torch.int64))
        if "input_boxes" in given:
            corners = given["input_boxes"].reshape(1, 1, 2, 2)
            coords = torch.cat([corners, coords], dim=2)
            labels = torch.cat([torch.tensor([[list(BOX_CORNER_LABELS)]], dtype=labels.dtype), labels], dim=2)
        index = inference_session.obj_id_to_idx(obj_ids)
        inference_session.add_point_inputs(index, frame_idx, {"point_coords": coords, "point_labels": labels})
        inference_session.remove_mask_inputs(index, frame_idx)
        inference_session.obj_with_new_inputs = [obj_ids]

    def to_dict(self) -> dict[str, Any]:
        """The settings read and what was made of them (the adapters' fingerprints hash it)."""
        return {
            "files": self.files,
            "image": asdict(self.image),
            "video": asdict(self.video),
            "target_size": self.target_size,
        }


def _json(path: Path) -> dict[str, Any] | None:
    """A settings file's dict, or ``None`` where the folder has no such file."""
    if not path.is_file():
        return None
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SegRobustError(f"{path}: cannot read it: {exc}") from exc
    if not isinstance(settings, dict):
        raise SegRobustError(f"{path}: expected a JSON object, got {type(settings).__name__}")
    return settings
