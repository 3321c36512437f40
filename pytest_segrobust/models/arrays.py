"""Models that are functions of arrays: any runtime behind a plain callable, described in the suite.

A TFLite interpreter, an OpenCV DNN net, MediaPipe, TensorRT or an ONNX session all take a
numpy array in some layout, dtype and value range and return scores or labels in another.
The suite says which, next to the model::

    models:
      - name: person
        factory: mypkg.segmenter:load          # returns the callable
        input: {layout: NHWC, dtype: uint8, range: [0, 255], batch: false}
        output: {kind: probabilities, threshold: 0.5}

and :class:`ArrayModel` turns the callable into a semantic model of the harness: images
``(B, 3, H, W)`` in ``[0, 1]`` go in, class ids ``(B, H, W)`` come out, at the input size.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from pytest_segrobust.core.errors import FieldError, ModelOutputError
from pytest_segrobust.models.torch_module import class_ids, normalise_channels, require_finite

LAYOUTS = ("NCHW", "NHWC")
OUTPUT_KINDS = ("logits", "probabilities", "labels")
DTYPES = ("uint8", "int8", "float16", "float32", "float64")


class ArraySpecError(FieldError):
    """A bad ``input:`` or ``output:`` block; ``field`` names the key inside it."""


@dataclass(frozen=True)
class ArrayInput:
    """How images are handed to the function.

    Attributes:
        layout: ``NCHW`` or ``NHWC`` (without the ``N`` when ``batch`` is false).
        dtype: The array's numpy dtype; integer dtypes are rounded and clipped to their range.
        range: The values that black and white map to: ``(0, 1)`` for floats and the type's
            whole range for integers (``(0, 255)`` for ``uint8``) unless given.
        mean, std: Per channel, in the units of ``range``: ``(x - mean) / std`` after scaling.
        batch: Whether the function takes a batch; if not it is called once per image.
        size: ``(H, W)`` a fixed-size model needs: images are resized to it (bilinear) and the
            predictions resized back to the image (nearest for labels, bilinear for scores).
        channels: ``RGB`` or ``BGR`` (OpenCV models).
        name: The input's name (ONNX models with several inputs); the first one by default.
    """

    layout: str = "NCHW"
    dtype: str = "float32"
    range: tuple[float, float] = (0.0, 1.0)
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    batch: bool = True
    size: tuple[int, int] | None = None
    channels: str = "RGB"
    name: str | None = None

    @classmethod
    def from_yaml(cls, raw: Any) -> ArrayInput:
        """Parse a suite's ``input:`` mapping.

        Raises:
            ArraySpecError: naming the key that is unknown or has a bad value.
        """
        fields = _mapping(raw, "input", cls)
        dtype = _choice(fields, "dtype", DTYPES, cls.dtype)
        # An integer image spans its type (0..255 for uint8) unless the suite says otherwise.
        integer = np.dtype(dtype).kind in "iu"
        full = (float(np.iinfo(dtype).min), float(np.iinfo(dtype).max)) if integer else cls.range
        spec = cls(
            layout=_choice(fields, "layout", LAYOUTS, cls.layout),
            dtype=dtype,
            range=_pair(fields, "range", full, number=float),
            mean=_floats(fields, "mean"),
            std=_floats(fields, "std"),
            batch=_boolean(fields, "batch", cls.batch),
            size=_pair(fields, "size", None, number=int),
            channels=_choice(fields, "channels", ("RGB", "BGR"), cls.channels),
            name=_string(fields, "name"),
        )
        low, high = spec.range
        if not high > low:
            raise ArraySpecError("range", f"expected [low, high] with high > low, got {list(spec.range)}")
        if (spec.mean is None) != (spec.std is None):
            raise ArraySpecError("std" if spec.std is None else "mean", "mean and std are given together")
        if spec.std is not None and any(s <= 0 for s in spec.std):
            raise ArraySpecError("std", f"expected positive values, got {list(spec.std)}")
        for key in ("mean", "std"):
            values = getattr(spec, key)
            if values is not None and len(values) not in (1, 3):
                raise ArraySpecError(key, f"expected 1 or 3 values (one per channel), got {len(values)}")
        if spec.size is not None and min(spec.size) < 1:
            raise ArraySpecError("size", f"expected [height, width] of positive integers, got {list(spec.size)}")
        return spec

    def to_array(self, images: torch.Tensor) -> np.ndarray:
        """``(B, 3, H, W)`` floats in ``[0, 1]`` -> the function's batch, on the CPU."""
        x = images.float()
        if self.size is not None and tuple(x.shape[-2:]) != self.size:
            x = F.interpolate(x, size=self.size, mode="bilinear", align_corners=False).clamp(0, 1)
        if self.channels == "BGR":
            x = x.flip(1)
        low, high = self.range
        if (low, high) != (0.0, 1.0):
            x = low + x * (high - low)
        if self.mean is not None and self.std is not None:
            x = normalise_channels(x, self.mean, self.std)
        if self.layout == "NHWC":
            x = x.permute(0, 2, 3, 1)
        dtype = np.dtype(self.dtype)
        if dtype.kind in "iu":
            limits = np.iinfo(dtype)
            x = x.round().clamp(limits.min, limits.max)
        return np.ascontiguousarray(x.cpu().numpy().astype(dtype, copy=False))


@dataclass(frozen=True)
class ArrayOutput:
    """What the function returns and how it becomes class ids.

    Attributes:
        kind: ``logits`` or ``probabilities`` (a score per class, the arg-max is the class; a
            single channel is a foreground score, class 1 above ``threshold``), or ``labels``
            (class ids already).
        layout: Where the class axis is for scores: ``NCHW`` or ``NHWC``.
        threshold: For a single-channel score; 0.5 for probabilities and 0 for logits by default.
        index: Which of several outputs (a position, or a key of a returned mapping).
    """

    kind: str = "logits"
    layout: str = "NCHW"
    threshold: float | None = None
    index: int | str = 0

    @classmethod
    def from_yaml(cls, raw: Any) -> ArrayOutput:
        """Parse a suite's ``output:`` mapping (``kind`` is required).

        Raises:
            ArraySpecError: naming the key that is unknown or has a bad value.
        """
        fields = _mapping(raw, "output", cls)
        if "kind" not in fields:
            raise ArraySpecError("kind", f"is required: one of {', '.join(OUTPUT_KINDS)}")
        index = fields.get("index", 0)
        if isinstance(index, bool) or not isinstance(index, int | str) or (isinstance(index, int) and index < 0):
            raise ArraySpecError("index", f"expected an output position (0, 1, ...) or name, got {index!r}")
        threshold = fields.get("threshold")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int | float)):
            raise ArraySpecError("threshold", f"expected a number, got {threshold!r}")
        return cls(
            kind=_choice(fields, "kind", OUTPUT_KINDS, cls.kind),
            layout=_choice(fields, "layout", LAYOUTS, cls.layout),
            threshold=None if threshold is None else float(threshold),
            index=index,
        )

    def to_labels(self, output: Any, batch: int, size: tuple[int, int], batched: bool) -> torch.Tensor:
        """The function's return value -> class ids ``(B, H, W)`` (int64, CPU) at ``size``.

        Raises:
            ModelOutputError: for a missing output, a wrong shape, NaN or infinite scores.
        """
        array = _as_tensor(self._select(output))
        if not batched:
            array = array.unsqueeze(0)
        if self.kind == "labels":
            if array.dim() == 4 and 1 in (array.shape[1], array.shape[-1]):
                array = array.squeeze(1 if array.shape[1] == 1 else -1)
            if array.dim() != 3 or array.shape[0] != batch:
                raise ModelOutputError(f"expected labels of shape ({batch}, H, W), got {tuple(array.shape)}")
            if array.is_floating_point() and not bool((array == array.round()).all()):
                raise ModelOutputError("output kind 'labels' returned fractional values; is it 'probabilities'?")
            labels = array.long()
            if tuple(labels.shape[-2:]) != size:
                labels = F.interpolate(labels[:, None].float(), size=size, mode="nearest")[:, 0].long()
            return labels
        if array.dim() == 3:  # one score per pixel, no class axis
            array = array.unsqueeze(1 if self.layout == "NCHW" else -1)
        if array.dim() != 4 or array.shape[0] != batch:
            raise ModelOutputError(f"expected {self.kind} of shape ({batch}, C, H, W) ({self.layout}), got {tuple(array.shape)}")
        scores = array.float() if self.layout == "NCHW" else array.float().permute(0, 3, 1, 2)
        require_finite(scores, self.kind)
        if tuple(scores.shape[-2:]) != size:
            scores = F.interpolate(scores, size=size, mode="bilinear", align_corners=False)
        if scores.shape[1] == 1:
            default = 0.5 if self.kind == "probabilities" else 0.0
            return (scores[:, 0] > (default if self.threshold is None else self.threshold)).long()
        return class_ids(scores)

    def _select(self, output: Any) -> Any:
        if isinstance(output, Mapping):
            if isinstance(self.index, str):
                if self.index not in output:
                    raise ModelOutputError(f"the model returned no output {self.index!r}; it has {', '.join(map(str, output))}")
                return output[self.index]
            return list(output.values())[self.index] if self.index < len(output) else self._missing(len(output))
        if isinstance(output, list | tuple):
            if isinstance(self.index, str):
                raise ModelOutputError(f"output index {self.index!r} names an output, but the model returned a sequence")
            return output[self.index] if self.index < len(output) else self._missing(len(output))
        if self.index not in (0, "0"):
            raise ModelOutputError(f"output index {self.index!r}, but the model returned one array")
        return output

    def _missing(self, count: int) -> Any:
        raise ModelOutputError(f"output index {self.index} is out of range: the model returned {count} outputs")


class ArrayModel:
    """A semantic model around ``function(array) -> array`` described by ``input`` and ``output``.

    Args:
        function: Called with a batch (or, without ``input.batch``, one image) as a numpy array.
        input: How images become the array.
        output: How its return value becomes class ids.
        identity: What identifies the function's behaviour (its weights file's digest, a
            version): part of :meth:`fingerprint`, with the two specs. ``None`` when nothing
            does: the fingerprint then stands for the specs alone, and a clean result of the
            model is not kept across runs.
        device: Where images are corrupted before they are handed over; the function itself
            runs wherever it runs.
    """

    def __init__(
        self,
        function: Callable[[np.ndarray], Any],
        input: ArrayInput,
        output: ArrayOutput,
        identity: str | None,
        device: torch.device | str = "cpu",
    ) -> None:
        if not callable(function):
            raise TypeError(f"an input/output spec needs a callable model, got {type(function).__name__}")
        self.function = function
        self.input = input
        self.output = output
        self.identity = identity
        self.device = torch.device(device)

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        """Shape: images ``(B, 3, H, W)`` -> class ids ``(B, H, W)`` on the images' device."""
        batch, size = images.shape[0], (int(images.shape[-2]), int(images.shape[-1]))
        array = self.input.to_array(images)
        if self.input.batch:
            labels = self.output.to_labels(self.function(array), batch, size, batched=True)
        else:
            labels = torch.cat([self.output.to_labels(self.function(one), 1, size, batched=False) for one in array])
        return labels.to(images.device)

    def fingerprint(self) -> str:
        described = repr((self.identity, sorted(asdict(self.input).items()), sorted(asdict(self.output).items())))
        return hashlib.sha256(described.encode()).hexdigest()[:32]


def _as_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    try:
        array = np.asarray(value)
    except Exception as exc:
        raise ModelOutputError(f"the model returned {type(value).__name__}, not an array") from exc
    if array.dtype == object or array.dtype.kind not in "biuf":
        raise ModelOutputError(f"the model returned an array of {array.dtype}, expected numbers")
    return torch.from_numpy(np.ascontiguousarray(array))


def _mapping(raw: Any, block: str, spec: type) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ArraySpecError("", f"expected a mapping, got {raw!r}")
    known = set(spec.__dataclass_fields__)
    for key in raw:
        if key not in known:
            raise ArraySpecError(str(key), f"unknown field of {block}; expected one of {', '.join(sorted(known))}")
    return raw


def _choice(fields: dict[str, Any], key: str, choices: tuple[str, ...], default: str) -> str:
    value = fields.get(key, default)
    if value not in choices:
        raise ArraySpecError(key, f"expected one of {', '.join(choices)}, got {value!r}")
    return value


def _boolean(fields: dict[str, Any], key: str, default: bool) -> bool:
    value = fields.get(key, default)
    if not isinstance(value, bool):
        raise ArraySpecError(key, f"expected true or false, got {value!r}")
    return value


def _string(fields: dict[str, Any], key: str) -> str | None:
    value = fields.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ArraySpecError(key, f"expected a name, got {value!r}")
    return value


def _floats(fields: dict[str, Any], key: str) -> tuple[float, ...] | None:
    value = fields.get(key)
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value or any(isinstance(v, bool) or not isinstance(v, int | float) for v in value):
        raise ArraySpecError(key, f"expected a number or a list of numbers, got {value!r}")
    return tuple(float(v) for v in value)


def _pair(fields: dict[str, Any], key: str, default: Any, number: type) -> Any:
    value = fields.get(key)
    if value is None:
        return default
    kinds = (int,) if number is int else (int, float)
    if not isinstance(value, list) or len(value) != 2 or any(isinstance(v, bool) or not isinstance(v, kinds) for v in value):
        raise ArraySpecError(key, f"expected a list of two {'integers' if number is int else 'numbers'}, got {value!r}")
    return (number(value[0]), number(value[1]))
