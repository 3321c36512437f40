"""The promptable video demo: the demo promptable model starts each object, the demo VOS model follows it.

A SAM 2-like pipeline from two shipped demo models, without training of its own:
:class:`PromptedPropagation` turns each object's prompts at the frame it is given in into a mask
with :class:`~pytest_segrobust.models.demo_promptable.TinyPromptable` (the objects of one frame
compete: a pixel goes to the object of the highest logit, to none where every logit is <= 0),
and :class:`~pytest_segrobust.models.demo_video.TinyVOSNet` propagates those masks through the
clip as it propagates a mask reference. An object whose mask comes out empty is not followed.

It is a :class:`~pytest_segrobust.models.video.PromptableVideoObjectModel` for a ``task: vos``
suite with a prompt reference (``suites/demo-promptable-video.yaml``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pytest_segrobust.core.prompts import FramePrompt
from pytest_segrobust.models.demo_promptable import TinyPromptable, tiny_promptable, tiny_promptable_boxblind
from pytest_segrobust.models.demo_video import TinyVOSNet, tiny_vos
from pytest_segrobust.models.torch_module import module_fingerprint


class PromptedPropagation:
    """Prompts to first masks (:class:`TinyPromptable`), first masks through the clip (:class:`TinyVOSNet`)."""

    task = "vos"
    reference = "prompts"

    def __init__(self, segmenter: TinyPromptable, tracker: TinyVOSNet, device: str | torch.device = "cpu") -> None:
        self.device = torch.device(device)
        self.segmenter = segmenter
        self.tracker = tracker.eval().to(self.device)

    def fingerprint(self) -> str:
        return f"prompted-propagation:{self.segmenter.fingerprint()}:{module_fingerprint(self.tracker, 'vos')}"

    def first_masks(self, clips: torch.Tensor, prompts: Sequence[Sequence[FramePrompt]]) -> torch.Tensor:
        """Each object's mask at the frame its prompts are given in, 0 elsewhere: one segmenter call for
        every prompted frame of the batch.

        Shape:
            clips: ``(B, T, 3, H, W)``; return: ``(B, T, H, W)``, int64.
        """
        batch, frames, _, height, width = clips.shape
        reference = torch.zeros(batch, frames, height, width, dtype=torch.int64, device=self.device)
        prompted = sorted({(clip, p.frame) for clip, given in enumerate(prompts) for p in given})
        if not prompted:
            return reference
        images = torch.stack([clips[clip, frame] for clip, frame in prompted]).to(self.device)
        asked = [[p for p in prompts[clip] if p.frame == frame] for clip, frame in prompted]
        logits = self.segmenter.predict(images, [[p.prompt for p in here] for here in asked])
        for (clip, frame), here, scores in zip(prompted, asked, logits):
            best = scores.to(self.device).max(dim=0)
            ids = torch.tensor([p.object_id for p in here], dtype=torch.int64, device=self.device)
            reference[clip, frame] = torch.where(best.values > 0, ids[best.indices], 0)
        return reference

    def predict(self, clips: torch.Tensor, prompts: Sequence[Sequence[FramePrompt]]) -> torch.Tensor:
        """Object ids ``(B, T, H, W)`` of every frame (see the module)."""
        clips = clips.to(self.device)
        with torch.inference_mode():
            return self.tracker(clips, self.first_masks(clips, prompts))


def tiny_prompted_vos(device: str = "cpu") -> PromptedPropagation:
    """The demo promptable video model: the shipped promptable and VOS demo models, in eval mode."""
    return PromptedPropagation(tiny_promptable(device=device), tiny_vos(device=device), device)


def tiny_prompted_vos_boxblind(device: str = "cpu") -> PromptedPropagation:
    """The demo pipeline with the box-blind promptable model
    (:func:`~pytest_segrobust.models.demo_promptable.tiny_promptable_boxblind`): a degraded model for
    tests and for trying the gate, lost wherever an object is started by its box alone."""
    return PromptedPropagation(tiny_promptable_boxblind(device=device), tiny_vos(device=device), device)
