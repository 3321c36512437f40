"""Video models: object segmentation given the first masks (offline or online) and referring video segmentation.

Four protocols, fixed so that the tasks (:mod:`pytest_segrobust.tasks.vos`,
:mod:`pytest_segrobust.tasks.rvos`), the demo model and a user's model agree:

* :class:`VideoObjectModel` (``task = "vos"``, offline): ``predict(clips, reference)`` sees a
  whole batch of clips and the reference masks, and returns an object id per pixel and frame.
* :class:`OnlineVideoObjectModel` (``task = "vos"``, trackers): ``start(frame, reference)``
  opens a clip, ``step(frame, reference)`` takes each later frame and returns its ids; the
  task drives it frame by frame, clip by clip, so its state is per clip.
* :class:`PromptableVideoObjectModel` (``task = "vos"`` with a prompt reference, SAM 2 style, and
  ``reference = "prompts"``): ``predict(clips, prompts)`` gets each object's clicks and/or box at
  the first frame it is shown in.
* :class:`ReferringVideoModel` (``task = "rvos"``): ``predict(clips, texts)`` returns a mask
  (bool, or float logits thresholded at 0) per frame of the object each expression names.

Every model takes frames in ``[0, 1]`` on its ``device``. The reference of a clip is the
mask of each object at the first frame it is *shown* in (after a temporal perturbation moved
the frames), 0 elsewhere: DAVIS gives every object in frame 0, YouTube-VOS objects may come
later.

Adapters fit plain models to them, as the image tasks' do: an ``nn.Module`` (offline:
``module(clips, reference)``; online: a module with ``start`` and ``step`` methods; R-VOS:
``module(clips, texts)``) and a function of numpy arrays (offline: ``fn(clips, reference)``;
online: an object with ``start`` and ``step`` taking arrays; R-VOS: ``fn(clips, texts)``). Under a
prompt reference, a module is called as ``module(clips, prompts)`` and a function once per clip
(:class:`~pytest_segrobust.models.promptable_functions.ArrayPromptableVideoModel`).
A module or function may return integer ids, or float scores with one channel per object
id after the batch and time axes (``(B, T, K, H, W)``: channel ``k`` is id ``k``, 0 the
background), of which the highest wins.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from pytest_segrobust.core.errors import ModelError, ModelOutputError
from pytest_segrobust.core.prompts import FramePrompt
from pytest_segrobust.models.adapters import register_adapter
from pytest_segrobust.models.torch_module import _TorchModuleAdapter, module_fingerprint, require_finite

__all__ = [
    "ArrayOnlineVideoObjectModel",
    "ArrayReferringVideoModel",
    "ArrayVideoObjectModel",
    "OnlineVideoObjectModel",
    "PromptableVideoObjectModel",
    "ReferringVideoModel",
    "TorchModuleOnlineVideoObjectSegmenter",
    "TorchModulePromptableVideoSegmenter",
    "TorchModuleReferringVideoSegmenter",
    "TorchModuleVideoObjectSegmenter",
    "VideoObjectModel",
    "ids_of",
]


@runtime_checkable
class VideoObjectModel(Protocol):
    """Semi-supervised video object segmentation, a clip at a time (offline)."""

    device: torch.device

    def predict(self, clips: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        """Segment every frame of each clip into the objects of its reference.

        Shape:
            clips: ``(B, T, 3, H, W)``, float in ``[0, 1]``; reference: ``(B, T, H, W)``, int64, each
            object's mask at the frame it is given in, 0 elsewhere; return: ``(B, T, H, W)``,
            integer object ids (0 background).
        """
        ...

    def fingerprint(self) -> str:
        """A string that changes whenever the model's behaviour may change (weights, config)."""
        ...


@runtime_checkable
class OnlineVideoObjectModel(Protocol):
    """Semi-supervised video object segmentation frame by frame (a tracker keeping state per clip)."""

    device: torch.device

    def start(self, frame: torch.Tensor, reference: torch.Tensor) -> None:
        """Open a clip with its first frame and the objects given in it.

        Shape:
            frame: ``(3, H, W)``, float in ``[0, 1]``; reference: ``(H, W)``, int64.
        """
        ...

    def step(self, frame: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        """The object ids of the clip's next frame; ``reference`` holds the objects first given at
        this frame (all 0 when none).

        Shape:
            frame: ``(3, H, W)``; reference: ``(H, W)``, int64; return: ``(H, W)``, integer ids.
        """
        ...

    def fingerprint(self) -> str:
        """A string that changes whenever the model's behaviour may change (weights, config)."""
        ...


@runtime_checkable
class PromptableVideoObjectModel(Protocol):
    """Promptable video object segmentation (SAM 2 style): objects started by clicks or a box, offline.

    ``prompts[b]`` holds clip ``b``'s objects, each a
    :class:`~pytest_segrobust.core.prompts.FramePrompt`: its id, the frame it is first shown in,
    and its prompts in pixels of that frame. An object whose prompts all left the frame is not passed.

    Such a model says that it takes prompts with a ``reference = "prompts"`` attribute (the
    structure alone cannot tell it from a :class:`VideoObjectModel`): the VOS task refuses it
    under the mask reference, and refuses a model without it under a prompt reference.
    """

    device: torch.device

    def predict(self, clips: torch.Tensor, prompts: Sequence[Sequence[FramePrompt]]) -> torch.Tensor:
        """Segment every frame of each clip into the objects its prompts start.

        Shape:
            clips: ``(B, T, 3, H, W)``, float in ``[0, 1]``; return: ``(B, T, H, W)``, integer
            object ids (0 background; an object's id is its ``FramePrompt.object_id``), or float
            scores ``(B, T, K, H, W)`` as :func:`ids_of` reads them.
        """
        ...

    def fingerprint(self) -> str:
        """A string that changes whenever the model's behaviour may change (weights, config)."""
        ...


@runtime_checkable
class ReferringVideoModel(Protocol):
    """Referring video object segmentation: per frame, the mask of the object an expression names."""

    device: torch.device

    def predict(self, clips: torch.Tensor, texts: Sequence[str]) -> torch.Tensor:
        """Segment, in every frame, the object each expression names in its clip.

        Shape:
            clips: ``(B, T, 3, H, W)``, float in ``[0, 1]``; texts: ``B`` strings; return:
            ``(B, T, H, W)``, bool masks or float logits (a pixel is in the mask where its logit is > 0).
        """
        ...

    def fingerprint(self) -> str:
        """A string that changes whenever the model's behaviour may change (weights, config)."""
        ...


def ids_of(output: Any, shape: Sequence[int], what: str = "model") -> torch.Tensor:
    """Object ids from what a module or function returned: integer ids as they are, float scores
    ``(..., K, H, W)`` (one channel per id, after the leading axes of ``shape``) by their highest channel.

    Raises:
        ModelOutputError: for another shape, or NaN / infinite scores.

    Shape:
        shape: the ids' ``(..., H, W)``; return: ``shape``, int64 (float scores) or the output's integer type.
    """
    tensor = torch.as_tensor(output) if isinstance(output, np.ndarray) else output
    if not isinstance(tensor, torch.Tensor):
        raise ModelOutputError(
            f"{what} returned {type(output).__name__}, expected a tensor of object ids {tuple(shape)}"
        )
    if tensor.is_floating_point() and tensor.dim() == len(shape) + 1:
        leading, size = tuple(shape[:-2]), tuple(shape[-2:])
        if tuple(tensor.shape[: len(leading)]) != leading or tuple(tensor.shape[-2:]) != size:
            raise ModelOutputError(
                f"{what} returned scores of shape {tuple(tensor.shape)}, expected {(*leading, 'K', *size)}"
            )
        require_finite(tensor, "scores")
        return tensor.max(dim=len(leading)).indices
    return tensor


def _fingerprint_of(obj: Any, kind: str) -> str:
    """``obj.fingerprint()`` when it has one; otherwise its qualified name (a function's behaviour is its code)."""
    identify = getattr(obj, "fingerprint", None)
    if callable(identify):
        return f"{kind}:{identify()}"
    name = f"{getattr(type(obj), '__module__', '')}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"
    return hashlib.blake2b(f"{kind}:{name}".encode(), digest_size=16).hexdigest()


class TorchModuleVideoObjectSegmenter(_TorchModuleAdapter):
    """Wraps an ``nn.Module`` called as ``module(clips, reference)`` returning ids or per-id scores (offline VOS)."""

    task = "vos"

    @torch.inference_mode()
    def predict(self, clips: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        return ids_of(self._forward(clips, reference), reference.shape)

    def fingerprint(self) -> str:
        return module_fingerprint(self.module, "vos")


class TorchModulePromptableVideoSegmenter(_TorchModuleAdapter):
    """Wraps an ``nn.Module`` called as ``module(clips, prompts)`` (a VOS suite's prompt reference) returning
    ids ``(B, T, H, W)`` or per-id scores ``(B, T, K, H, W)``."""

    task = "vos"
    reference = "prompts"

    @torch.inference_mode()
    def predict(self, clips: torch.Tensor, prompts: Sequence[Sequence[FramePrompt]]) -> torch.Tensor:
        """The module's ids for ``clips`` started by ``prompts``.

        Raises:
            ModelError: when the module raises, with its exception and, since a mask model taken for a
                prompt one fails just so, how it is called here and what a mask model needs instead.
        """
        shape = (*clips.shape[:2], *clips.shape[-2:])
        try:
            output = self._forward(clips, [list(p) for p in prompts])
        except Exception as exc:  # the module's own code: its error is kept, with the call it got
            raise ModelError(
                f"module {type(self.module).__name__} raised {type(exc).__name__}: {exc}; under the suite's prompt "
                "reference it is called as module(clips, prompts), prompts[b] clip b's FramePrompts; if it takes "
                "reference masks (module(clips, reference)), remove the suite's reference: (or declare "
                "reference = 'masks' on it to have it refused)"
            ) from exc
        return ids_of(output, shape)

    def fingerprint(self) -> str:
        return module_fingerprint(self.module, "vos-prompts")


class TorchModuleOnlineVideoObjectSegmenter(_TorchModuleAdapter):
    """Wraps an ``nn.Module`` with ``start(frame, reference)`` and ``step(frame, reference)`` methods (a tracker)."""

    task = "vos"

    @torch.inference_mode()
    def start(self, frame: torch.Tensor, reference: torch.Tensor) -> None:
        self.module.start(frame, reference)  # type: ignore[operator]

    @torch.inference_mode()
    def step(self, frame: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        dtype = torch.float16 if self.device.type == "cuda" else torch.bfloat16
        with torch.autocast(self.device.type, dtype=dtype, enabled=self.amp):
            output = self.module.step(frame, reference)  # type: ignore[operator]
        return ids_of(output, reference.shape)

    def fingerprint(self) -> str:
        return module_fingerprint(self.module, "vos-online")


class TorchModuleReferringVideoSegmenter(_TorchModuleAdapter):
    """Wraps an ``nn.Module`` called as ``module(clips, texts)`` returning ``(B, T, H, W)`` bool masks or logits."""

    task = "rvos"

    @torch.inference_mode()
    def predict(self, clips: torch.Tensor, texts: Sequence[str]) -> torch.Tensor:
        return self._forward(clips, list(texts))

    def fingerprint(self) -> str:
        return module_fingerprint(self.module, "rvos")


class _ArrayAdapter:
    """What the numpy adapters share: frames go out as float32 arrays, what comes back lands on ``device``."""

    def __init__(self, obj: Any, device: torch.device | str | None = None, amp: bool = False) -> None:
        del amp  # a function of arrays runs as it is written
        self.obj = obj
        self.device = torch.device("cpu" if device is None else device)

    def _back(self, output: Any, shape: Sequence[int]) -> torch.Tensor:
        return ids_of(output, shape, "function").to(self.device)

    def _masks_back(self, output: Any, expected: str = "an array (B, T, H, W)") -> torch.Tensor:
        """The function's masks or logits as a tensor on ``device`` (shapes are the task's to check).

        Args:
            output: What the function returned.
            expected: What it should have returned, in the message when it did not.

        Raises:
            ModelOutputError: when the function returned something other than an array or tensor.
        """
        tensor = torch.as_tensor(output) if isinstance(output, np.ndarray) else output
        if not isinstance(tensor, torch.Tensor):
            raise ModelOutputError(f"function returned {type(output).__name__}, expected {expected}")
        return tensor.to(self.device)

    @staticmethod
    def _array(values: torch.Tensor) -> np.ndarray:
        return values.detach().cpu().numpy()


class ArrayVideoObjectModel(_ArrayAdapter):
    """Wraps ``fn(clips, reference)`` of numpy arrays (``(B, T, 3, H, W)`` float32, ``(B, T, H, W)`` int64)
    returning ids ``(B, T, H, W)`` or per-id scores ``(B, T, K, H, W)``."""

    task = "vos"

    def predict(self, clips: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        return self._back(self.obj(self._array(clips), self._array(reference)), reference.shape)

    def fingerprint(self) -> str:
        return _fingerprint_of(self.obj, "vos-array")


class ArrayOnlineVideoObjectModel(_ArrayAdapter):
    """Wraps an object whose ``start(frame, reference)`` and ``step(frame, reference)`` take numpy arrays
    (``(3, H, W)`` float32, ``(H, W)`` int64); ``step`` returns ids ``(H, W)`` or scores ``(K, H, W)``."""

    task = "vos"

    def start(self, frame: torch.Tensor, reference: torch.Tensor) -> None:
        self.obj.start(self._array(frame), self._array(reference))

    def step(self, frame: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        return self._back(self.obj.step(self._array(frame), self._array(reference)), reference.shape)

    def fingerprint(self) -> str:
        return _fingerprint_of(self.obj, "vos-online-array")


class ArrayReferringVideoModel(_ArrayAdapter):
    """Wraps ``fn(clips, texts)`` of a numpy array ``(B, T, 3, H, W)`` float32 and a list of strings,
    returning ``(B, T, H, W)`` bool masks or float logits."""

    task = "rvos"

    def predict(self, clips: torch.Tensor, texts: Sequence[str]) -> torch.Tensor:
        return self._masks_back(self.obj(self._array(clips), list(texts)))

    def fingerprint(self) -> str:
        return _fingerprint_of(self.obj, "rvos-array")


def _is_module(obj: Any) -> bool:
    return isinstance(obj, torch.nn.Module)


def _is_tracker(obj: Any) -> bool:
    return callable(getattr(obj, "start", None)) and callable(getattr(obj, "step", None))


def _is_function(obj: Any) -> bool:
    return callable(obj) and not _is_module(obj) and not callable(getattr(obj, "predict", None))


def _register(task: str, matches: Callable[[Any], bool], name: str, build: type) -> None:
    register_adapter(task, matches, name)(build)


# Later registrations are tried first: the specific (a module that tracks) before the generic.
_register("vos", _is_function, "function of numpy clips and reference masks", ArrayVideoObjectModel)
_register(
    "vos",
    lambda obj: _is_tracker(obj) and not _is_module(obj),
    "object with start/step on numpy frames",
    ArrayOnlineVideoObjectModel,
)
_register(
    "vos", _is_module, "torch.nn.Module(clips, reference) returning ids or scores", TorchModuleVideoObjectSegmenter
)
_register(
    "vos",
    lambda obj: _is_module(obj) and _is_tracker(obj),
    "torch.nn.Module with start/step (a tracker)",
    TorchModuleOnlineVideoObjectSegmenter,
)
_register(
    "vos-prompts",
    # A module that declares another reference (``reference = "masks"``) is a mask model, not one of these.
    lambda obj: _is_module(obj) and getattr(obj, "reference", "prompts") == "prompts",
    "torch.nn.Module(clips, prompts) returning ids or scores",
    TorchModulePromptableVideoSegmenter,
)
_register("rvos", _is_function, "function of numpy clips and texts", ArrayReferringVideoModel)
_register(
    "rvos", _is_module, "torch.nn.Module(clips, texts) returning masks or logits", TorchModuleReferringVideoSegmenter
)
