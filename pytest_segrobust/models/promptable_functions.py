"""Promptable models that are plain functions of numpy arrays (a SAM predictor behind any runtime).

A suite's factory that returns a function (not a module, nothing with ``predict``) for a
``task: promptable`` suite, or a ``task: vos`` suite with a prompt reference
(:class:`ArrayPromptableVideoModel`), gets it wrapped here. The function is called once per image, as
SAM-style predictors are (``set_image``, then prompts); an image with no prompt set (no instance,
or every prompt dropped) is not asked::

    def segment(image, prompts):
        # image: (H, W, 3) uint8, the corrupted image, rounded to 8 bits
        # prompts: one dict per prompt set, in the order the masks are expected:
        #   {"kind": "points" | "box", "points": (P, 2) float32 (x, y), "labels": (P,) int64
        #    (1 on the instance, 0 off it), "box": (4,) float32 (x0, y0, x1, y1) or None}
        return masks  # (len(prompts), H, W) bool or float logits, or (masks (P, M, H, W), scores (P, M))

Coordinates are the image's pixels, pixel centres at integers; a box's ends are exclusive
(:mod:`pytest_segrobust.core.prompts`). The task checks the shapes and takes the best-scoring
candidate where several come back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from pytest_segrobust.core.prompts import FramePrompt, PromptSet
from pytest_segrobust.models.adapters import register_adapter
from pytest_segrobust.models.video import _ArrayAdapter, _fingerprint_of, _is_function

__all__ = ["ArrayPromptableModel", "ArrayPromptableVideoModel", "image_array", "prompt_dict"]

_EXPECTED = "an array (len(prompts), H, W) of bool masks or float logits, or a tuple (masks (P, M, H, W), scores (P, M))"


def image_array(image: torch.Tensor) -> np.ndarray:
    """An image in ``[0, 1]`` as the ``uint8`` array a promptable function or processor is given
    (rounded, as a saved image would be).

    Shape:
        image: ``(3, H, W)``; return: ``(H, W, 3)``.
    """
    return (image.detach().float().clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).cpu().numpy()


def prompt_dict(prompt: PromptSet) -> dict[str, Any]:
    """One prompt set as numpy arrays: ``kind``, ``points`` ``(P, 2)``, ``labels`` ``(P,)``, ``box`` ``(4,)`` or ``None``."""
    return {
        "kind": prompt.kind,
        "points": prompt.points.detach().cpu().numpy().astype(np.float32),
        "labels": prompt.labels.detach().cpu().numpy().astype(np.int64),
        "box": None if prompt.box is None else prompt.box.detach().cpu().numpy().astype(np.float32),
    }


class ArrayPromptableModel(_ArrayAdapter):
    """Wraps ``fn(image, prompts)`` of an ``(H, W, 3)`` uint8 array and a list of prompt dicts (see the
    module) returning ``(P, H, W)`` masks or logits, or ``(masks (P, M, H, W), scores (P, M))``."""

    task = "promptable"

    def predict(self, images: torch.Tensor, prompts: Sequence[Sequence[PromptSet]]) -> list[Any]:
        """The function's answer for each image that has a prompt set; an image with none (no instance,
        or every prompt dropped) is not asked, as a SAM predictor given no prompt would refuse."""
        results: list[Any] = []
        for image, sets in zip(images, prompts):
            if not sets:
                results.append(torch.zeros(0, *image.shape[-2:], dtype=torch.bool, device=self.device))
                continue
            returned = self.obj(image_array(image), [prompt_dict(s) for s in sets])
            if isinstance(returned, tuple) and len(returned) == 2:
                results.append(tuple(self._masks_back(part, _EXPECTED) for part in returned))
            else:
                results.append(self._masks_back(returned, _EXPECTED))
        return results

    def fingerprint(self) -> str:
        return _fingerprint_of(self.obj, "promptable-array")


class ArrayPromptableVideoModel(_ArrayAdapter):
    """Wraps ``fn(frames, prompts)`` (a VOS suite's prompt reference), called once per clip, as video
    predictors are (one state per video)::

        def track(frames, prompts):
            # frames: (T, H, W, 3) uint8, the corrupted clip, rounded to 8 bits
            # prompts: one dict per object given: {"object_id": int, "frame": int (where its prompts
            #   are given), "kind", "points", "labels", "box"} as for images
            return ids  # (T, H, W) integer object ids (0 background), or scores (T, K, H, W)
    """

    task = "vos"
    reference = "prompts"

    def predict(self, clips: torch.Tensor, prompts: Sequence[Sequence[FramePrompt]]) -> torch.Tensor:
        results = []
        for clip, given in zip(clips, prompts):
            frames = np.stack([image_array(frame) for frame in clip])
            asked = [{"object_id": p.object_id, "frame": p.frame, **prompt_dict(p.prompt)} for p in given]
            results.append(self._back(self.obj(frames, asked), (int(clip.shape[0]), *clip.shape[-2:])))
        return torch.stack(results)

    def fingerprint(self) -> str:
        return _fingerprint_of(self.obj, "vos-prompts-array")


register_adapter("vos-prompts", _is_function, "function of numpy frames (T, H, W, 3) uint8 and prompt dicts, per clip")(
    ArrayPromptableVideoModel
)
register_adapter("promptable", _is_function, "function of a numpy image (H, W, 3) uint8 and prompt dicts")(
    ArrayPromptableModel
)
