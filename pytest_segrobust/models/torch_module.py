"""Adapters for plain PyTorch modules: per-class logits, instances per image, or referring masks."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.core.types import InstancePredictions, PanopticPredictions
from pytest_segrobust.models.adapters import register_adapter
from pytest_segrobust.models.base import REFERRING_LOGIT_THRESHOLD

_INSTANCE_KEYS = ("masks", "labels", "scores")


def logits_at_input_size(output: Any, images: torch.Tensor) -> torch.Tensor:
    """The per-class logits a segmentation module returned, at the resolution of its input.

    Accepts a tensor or a mapping with key ``"out"`` (torchvision's segmentation models);
    logits at another resolution are resized bilinearly.

    Raises:
        ModelOutputError: When the output is neither, or not ``(B, K, h, w)``.

    Shape:
        images: ``(B, 3, H, W)``; return: ``(B, K, H, W)``.
    """
    output = _unwrap_out(output)
    if not isinstance(output, torch.Tensor) or output.dim() != 4 or output.shape[0] != images.shape[0]:
        shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
        raise ModelOutputError(f"expected logits of shape (B, K, H, W) for B={images.shape[0]}, got {shape}")
    if output.shape[-2:] != images.shape[-2:]:
        output = torch.nn.functional.interpolate(output, size=images.shape[-2:], mode="bilinear", align_corners=False)
    return output


def _unwrap_out(output: Any) -> Any:
    """``output["out"]`` for a mapping (as torchvision's segmentation models return), else ``output``.

    Raises:
        ModelOutputError: for a mapping without key ``"out"``, naming the keys it has.
    """
    if not isinstance(output, Mapping):
        return output
    if "out" not in output:
        raise ModelOutputError(f"model returned a mapping without key 'out' (keys: {sorted(output)})")
    return output["out"]


def class_ids(scores: torch.Tensor) -> torch.Tensor:
    """The class with the highest score per pixel: ``(B, K, H, W)`` -> ``(B, H, W)`` int64.

    ``max`` over the class axis gives the same first maximum as ``argmax`` and is about 3x
    faster on CPU, where the arg-max is a large share of a small model's post-processing.
    """
    return scores.max(dim=1).indices


def normalise_channels(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """``(x - mean) / std`` channel by channel, in ``x``'s dtype and on its device.

    Shape:
        x: ``(B, C, H, W)``; mean, std: ``C`` values (or one for every channel); return: as ``x``.
    """
    mean_values = torch.tensor(mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    std_values = torch.tensor(std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    return (x - mean_values) / std_values


def require_finite(values: torch.Tensor, what: str) -> None:
    """Raise :class:`ModelOutputError` when ``values`` hold NaN or infinity, saying how many."""
    # One sum is finite exactly when no value is NaN or infinite, unless the sum overflows:
    # only then is every value looked at (a pass over the values, ~20x slower than the sum).
    if bool(torch.isfinite(values.sum(dtype=torch.float64 if values.dtype == torch.float64 else torch.float32))):
        return
    finite = torch.isfinite(values)
    if not bool(finite.all()):
        bad = int(finite.numel() - finite.sum())
        raise ModelOutputError(f"model returned NaN or infinite {what} ({bad} of {values.numel()} values)")


def module_fingerprint(module: torch.nn.Module, *settings: str) -> str:
    """Digest of a module's class, an adapter's settings and every parameter and buffer.

    Configuration that lives outside the state dict (a threshold, a size) must reach
    ``settings``, or a changed setting would reuse results computed with the old one.
    """
    digest = hashlib.blake2b(digest_size=16)
    digest.update(type(module).__qualname__.encode())
    for setting in settings:
        digest.update(setting.encode())
    for name, tensor in module.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


class _TorchModuleAdapter:
    """What the adapters share: device placement, eval mode and mixed precision.

    Args:
        module: The network; it is put in eval mode and moved to ``device``.
        device: Where inference runs; corruption and metric follow it.
        amp: Run the forward pass under autocast (float16 on CUDA, bfloat16 elsewhere).
    """

    def __init__(self, module: torch.nn.Module, device: torch.device | str | None = None, amp: bool = False) -> None:
        if device is None:
            device = next((p.device for p in module.parameters()), torch.device("cpu"))
        self.device = torch.device(device)
        self.module = module.to(self.device).eval()
        self.amp = amp

    def _forward(self, *inputs: Any) -> Any:
        """Run the module under autocast (float16 on CUDA, bfloat16 elsewhere) when ``amp`` is set."""
        dtype = torch.float16 if self.device.type == "cuda" else torch.bfloat16
        with torch.autocast(self.device.type, dtype=dtype, enabled=self.amp):
            return self.module(*inputs)

    def _per_image(self, output: Any, batch: int, expected: str, hint: str = "") -> Sequence[Any]:
        """``output`` when it is a sequence of one item per image of the batch.

        Args:
            output: What the module returned.
            batch: Images in the batch.
            expected: What each item should be, for the message.
            hint: Said after what was found, for outputs with a known remedy.

        Raises:
            ModelOutputError: naming what was expected and what came instead.
        """
        if not isinstance(output, Sequence) or isinstance(output, str) or len(output) != batch:
            found = f"a sequence of {len(output)}" if isinstance(output, Sequence) else type(output).__name__
            raise ModelOutputError(f"expected a list of {batch} per-image {expected}, got {found}{hint}")
        return output

    def fingerprint(self) -> str:
        """Digest of the module's class, its configuration (repr), the precision and the weights."""
        return module_fingerprint(self.module, self._precision, repr(self.module))

    @property
    def _precision(self) -> str:
        return "amp" if self.amp else "fp32"


class TorchModuleSegmenter(_TorchModuleAdapter):
    """Wraps an ``nn.Module`` mapping ``(B, 3, H, W)`` images in ``[0, 1]`` to logits.

    The module may return a tensor ``(B, K, H, W)`` or a mapping with key ``"out"``
    (torchvision's segmentation models). Logits at another resolution are resized
    bilinearly to the input size before the argmax.

    ``module``, ``device`` and ``amp`` as every adapter here takes them (:class:`_TorchModuleAdapter`).
    """

    task = "semantic"

    @torch.inference_mode()
    def predict(self, images: torch.Tensor) -> torch.Tensor:
        """Shape: images ``(B, 3, H, W)`` -> class ids ``(B, H, W)``.

        Raises:
            ModelOutputError: for NaN or infinite logits, which the argmax would turn into class 0.
        """
        logits = logits_at_input_size(self._forward(images), images)
        require_finite(logits, "logits")
        return class_ids(logits)

    def fingerprint(self) -> str:
        """Digest of the module's class, the precision and every parameter and buffer (not its repr)."""
        return module_fingerprint(self.module, self._precision)


class TorchModuleInstanceSegmenter(_TorchModuleAdapter):
    """Wraps an ``nn.Module`` mapping ``(B, 3, H, W)`` images in ``[0, 1]`` to instances.

    The module returns one item per image (a list, as torchvision's Mask R-CNN does in eval
    mode): an :class:`InstancePredictions` or a mapping with ``masks``, ``labels`` and
    ``scores``. Masks are bool ``(N, H, W)`` or probabilities ``(N, 1, H, W)`` / ``(N, H, W)``,
    which are thresholded at ``mask_threshold``; other keys (``boxes``) are ignored. Labels
    must follow the dataset's contiguous numbering (see
    :class:`~pytest_segrobust.models.base.InstanceSegmentationModel`).

    ``module``, ``device`` and ``amp`` as every adapter here takes them (:class:`_TorchModuleAdapter`).

    Args:
        mask_threshold: Probability from which a pixel belongs to a soft mask.
    """

    task = "instance"

    def __init__(
        self,
        module: torch.nn.Module,
        device: torch.device | str | None = None,
        amp: bool = False,
        mask_threshold: float = 0.5,
    ) -> None:
        super().__init__(module, device, amp)
        self.mask_threshold = mask_threshold

    @torch.inference_mode()
    def predict(self, images: torch.Tensor) -> list[InstancePredictions]:
        """Shape: images ``(B, 3, H, W)`` -> ``B`` predictions with masks ``(N, H, W)``."""
        output = self._forward(images)
        hint = (
            "; a semantic network's logits become instances with pytest_segrobust.models.ComponentInstances"
            if isinstance(output, torch.Tensor)
            else ""
        )
        expected = f"instance predictions (dicts with {', '.join(_INSTANCE_KEYS)})"
        items = self._per_image(output, images.shape[0], expected, hint)
        return [self._instances(item, index, tuple(images.shape[-2:])) for index, item in enumerate(items)]

    def _instances(self, item: Any, index: int, size: tuple[int, int]) -> InstancePredictions:
        """One image's output as :class:`InstancePredictions`, checked against the image size."""
        where = f"image {index} of the batch"
        if isinstance(item, InstancePredictions):
            predictions = item
        elif isinstance(item, Mapping):
            missing = [key for key in _INSTANCE_KEYS if key not in item]
            if missing:
                raise ModelOutputError(
                    f"{where}: instance predictions need keys {', '.join(_INSTANCE_KEYS)}; "
                    f"missing {', '.join(missing)} (keys: {sorted(item)})"
                )
            masks, labels, scores = (item[key] for key in _INSTANCE_KEYS)
            if not all(isinstance(value, torch.Tensor) for value in (masks, labels, scores)):
                raise ModelOutputError(f"{where}: masks, labels and scores must be tensors")
            masks = self._binary(masks, where)
            try:  # checks the dtypes as the model returned them, before any conversion
                InstancePredictions(masks, labels, scores)
            except ModelOutputError as error:
                raise ModelOutputError(f"{where}: {error}") from None
            predictions = InstancePredictions(masks, labels.long(), scores.float())
        else:
            raise ModelOutputError(
                f"{where}: expected a dict with {', '.join(_INSTANCE_KEYS)} or InstancePredictions, "
                f"got {type(item).__name__}"
            )
        if tuple(predictions.masks.shape[1:]) != size:
            raise ModelOutputError(
                f"{where}: instance masks of shape {tuple(predictions.masks.shape)}, expected (N, {size[0]}, {size[1]}) "
                "at the input resolution"
            )
        return predictions

    def _binary(self, masks: torch.Tensor, where: str) -> torch.Tensor:
        """Bool ``(N, H, W)`` masks from bool masks or ``(N, [1,] H, W)`` probabilities."""
        if masks.dim() == 4 and masks.shape[1] == 1:
            masks = masks[:, 0]
        if masks.dim() != 3:
            raise ModelOutputError(
                f"{where}: instance masks must be (N, H, W) or (N, 1, H, W), got shape {tuple(masks.shape)}"
            )
        if masks.dtype == torch.bool:
            return masks
        if not masks.is_floating_point():
            raise ModelOutputError(f"{where}: instance masks must be bool or float probabilities, got {masks.dtype}")
        require_finite(masks, f"{where}: mask probabilities")
        return masks >= self.mask_threshold

    def fingerprint(self) -> str:
        """Digest of the module's class, its configuration, the adapter's settings and the weights.

        The module's repr joins in, so that settings a module shows there (as
        :class:`~pytest_segrobust.models.components.ComponentInstances` shows ``min_area``)
        change the fingerprint; settings kept only in plain attributes do not.
        """
        threshold = f"mask_threshold={self.mask_threshold!r}"
        return module_fingerprint(self.module, self._precision, threshold, repr(self.module))


class TorchModulePanopticSegmenter(_TorchModuleAdapter):
    """Wraps an ``nn.Module`` mapping ``(B, 3, H, W)`` images in ``[0, 1]`` to panoptic segments.

    The module returns one item per image: a :class:`PanopticPredictions` or a mapping with
    ``segments`` ``(H, W)``, ``ids`` and ``labels`` (as
    :class:`~pytest_segrobust.models.components.ComponentPanoptic` does).

    ``module``, ``device`` and ``amp`` as every adapter here takes them (:class:`_TorchModuleAdapter`).
    """

    task = "panoptic"

    @torch.inference_mode()
    def predict(self, images: torch.Tensor) -> list[PanopticPredictions]:
        """Shape: images ``(B, 3, H, W)`` -> ``B`` predictions with segments ``(H, W)``."""
        output = self._per_image(self._forward(images), images.shape[0], "panoptic predictions (segments, ids, labels)")
        predictions = []
        for index, item in enumerate(output):
            if isinstance(item, Mapping):
                missing = [k for k in ("segments", "ids", "labels") if k not in item]
                if missing:
                    raise ModelOutputError(f"image {index} of the batch: panoptic output lacks {', '.join(missing)}")
                item = PanopticPredictions(item["segments"], item["ids"], item["labels"])
            if not isinstance(item, PanopticPredictions):
                raise ModelOutputError(f"image {index} of the batch: expected PanopticPredictions or a mapping, got {type(item).__name__}")
            predictions.append(item)
        return predictions


class TorchModuleReferringSegmenter(_TorchModuleAdapter):
    """Wraps an ``nn.Module`` whose ``forward(images, texts)`` returns one mask's logits per expression.

    ``images`` are ``(B, 3, H, W)`` in ``[0, 1]`` and ``texts`` a list of ``B`` strings
    (tokenising them is the module's business). The module returns logits ``(B, h, w)`` or
    ``(B, 1, h, w)``, or a mapping with key ``"out"``; logits at another resolution are
    resized bilinearly to the input size, and a pixel is in the mask where its logit is
    > 0 (sigmoid > 0.5). Bool masks at the input size pass as they are.

    ``module``, ``device`` and ``amp`` as every adapter here takes them (:class:`_TorchModuleAdapter`).
    """

    task = "referring"

    @torch.inference_mode()
    def predict(self, images: torch.Tensor, texts: Sequence[str]) -> torch.Tensor:
        """Shape: images ``(B, 3, H, W)``, ``B`` texts -> bool masks ``(B, H, W)``.

        Raises:
            ModelOutputError: for an output that is not one mask per expression, or NaN logits.
        """
        output = _unwrap_out(self._forward(images, list(texts)))
        batch = images.shape[0]
        if isinstance(output, torch.Tensor) and output.dim() == 4 and output.shape[1] == 1:
            output = output[:, 0]
        if not isinstance(output, torch.Tensor) or output.dim() != 3 or output.shape[0] != batch:
            shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
            raise ModelOutputError(
                f"expected mask logits of shape (B, H, W) or (B, 1, H, W) for B={batch} expressions, got {shape}"
            )
        if output.dtype == torch.bool:
            return output
        if not output.is_floating_point():
            raise ModelOutputError(f"expected float mask logits or bool masks, got {output.dtype}")
        if output.shape[-2:] != images.shape[-2:]:
            output = torch.nn.functional.interpolate(
                output[:, None].float(), size=images.shape[-2:], mode="bilinear", align_corners=False
            )[:, 0]
        require_finite(output, "mask logits")
        return output > REFERRING_LOGIT_THRESHOLD


def _is_module(obj: Any) -> bool:
    return isinstance(obj, torch.nn.Module)


register_adapter("semantic", _is_module, "torch.nn.Module returning logits")(TorchModuleSegmenter)
register_adapter("instance", _is_module, "torch.nn.Module returning instances per image")(TorchModuleInstanceSegmenter)
register_adapter("panoptic", _is_module, "torch.nn.Module returning segments per image")(TorchModulePanopticSegmenter)
register_adapter("referring", _is_module, "torch.nn.Module returning mask logits per expression")(
    TorchModuleReferringSegmenter
)
