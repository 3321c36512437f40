"""Hugging Face SAM 2 video checkpoints as promptable video object models: ``transformers: dir`` in a
``task: vos`` suite whose reference is prompts.

::

    task: vos
    models:
      - name: sam2-video
        transformers: checkpoints/sam2-hiera-tiny-video   # save_pretrained of Sam2VideoModel and its processor

A checkpoint whose ``model_type`` is one of :data:`VIDEO_MODELS` (``Sam2VideoModel``, EdgeTAM's
video model: the same inference-session interface) serves a
:class:`~pytest_segrobust.models.video.PromptableVideoObjectModel`. Each clip gets one inference
session over its frames (``uint8``, the pixels rounded as a saved video's would be). The frames
are run in order, as a stream: at the frame an object is first shown in its clicks and/or box are
added (``obj_ids`` its object id; a box goes in as its two corners before the clicks) and the
frame is run once per object started there, which makes that output the object's conditioning
frame; every later frame tracks every started object from the session's memory.

Frames before an object's start have no mask for it. SAM 2's ``propagate_in_video_iterator``,
run from the earliest prompted frame, would also segment a later-starting object in the frames
before its prompt, from the memory of that later frame; by the contract the object is not shown
there, so such a mask could only be wrong, and a stream is what a tracker sees.

Each object's mask logits come back at the clip's size through the processor's
``post_process_masks`` (bilinear; SAM 2 already sets an object it judges absent to a large
negative logit). A pixel takes the object of the highest logit, and 0 where every logit is <= 0.
Where torchvision cannot be imported the processor is
:class:`~pytest_segrobust.models.sam2_processing.Sam2Processing`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.prompts import FramePrompt
from pytest_segrobust.models.promptable_functions import image_array
from pytest_segrobust.models.torch_module import require_finite
from pytest_segrobust.models.transformers_promptable import CheckpointAdapter, OpenCheckpoint, prompt_arguments

VIDEO_MODELS = ("sam2_video", "edgetam_video")
"""The ``model_type`` values read as promptable video models (their processor is ``Sam2VideoProcessor``)."""


def load_promptable_video(checkpoint: OpenCheckpoint) -> TransformersPromptableVideo:
    """A SAM 2 video checkpoint (model and processor) as a promptable video object model on its device.

    Raises:
        SegRobustError: naming the checkpoint, when its model is not a promptable video model.
    """
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    classes = {model_type: MODEL_MAPPING_NAMES[model_type] for model_type in VIDEO_MODELS if model_type in MODEL_MAPPING_NAMES}
    model_class = checkpoint.model_class(classes, "a promptable video model (for a vos suite)")
    processor = checkpoint.processor()
    network = checkpoint.network(model_class)
    return TransformersPromptableVideo(network, processor, checkpoint.device, checkpoint.transformers.__version__)


class TransformersPromptableVideo(CheckpointAdapter):
    """A SAM 2 video model and its processor as a :class:`~pytest_segrobust.models.video.PromptableVideoObjectModel`."""

    task = "vos"
    reference = "prompts"  # started by prompts: the VOS task takes it under a prompt reference only

    @torch.inference_mode()
    def predict(self, clips: torch.Tensor, prompts: Sequence[Sequence[FramePrompt]]) -> torch.Tensor:
        """Each clip's object ids, from one inference session per clip.

        Shape:
            clips: ``(B, T, 3, H, W)`` in ``[0, 1]``; return: ``(B, T, H, W)`` int64.
        """
        return torch.stack([self.clip_ids(clip, objects) for clip, objects in zip(clips, prompts)])

    def clip_ids(self, clip: torch.Tensor, objects: Sequence[FramePrompt]) -> torch.Tensor:
        """One clip's object ids: the highest logit's object where it is > 0, else 0.

        Shape:
            clip: ``(T, 3, H, W)``; return: ``(T, H, W)`` int64.
        """
        if not objects:
            return torch.zeros(clip.shape[0], *clip.shape[-2:], dtype=torch.int64, device=self.device)
        best = self.clip_logits(clip, objects).max(dim=1)
        ids = torch.tensor([o.object_id for o in objects], dtype=torch.int64, device=self.device)
        return torch.where(best.values > 0, ids[best.indices], 0)

    def clip_logits(self, clip: torch.Tensor, objects: Sequence[FramePrompt]) -> torch.Tensor:
        """Each object's mask logits on every frame, ``-inf`` on the frames before its start.

        Shape:
            clip: ``(T, 3, H, W)``; return: ``(T, K, H, W)`` float, ``K = len(objects)``, in their order.
        """
        frames, height, width = int(clip.shape[0]), int(clip.shape[-2]), int(clip.shape[-1])
        logits = torch.full((frames, len(objects), height, width), float("-inf"), device=self.device)
        position = {o.object_id: k for k, o in enumerate(objects)}
        if len(position) != len(objects):
            raise SegRobustError(f"promptable video model: two objects of a clip share an id: {sorted(position)}")
        video = np.stack([image_array(frame) for frame in clip])
        session = self.processor.init_video_session(
            video=video, inference_device=self.device, processing_device="cpu", dtype=torch.float32
        )
        started = False
        for t in range(frames):
            output = None
            # An object whose prompts all left the frame is not passed; an empty set would start nothing.
            for obj in (o for o in objects if o.frame == t and not o.prompt.empty):
                self.processor.add_inputs_to_inference_session(
                    inference_session=session, frame_idx=t, obj_ids=obj.object_id, **prompt_arguments(obj.prompt)
                )
                output = self.network(inference_session=session, frame_idx=t)
                started = True
            if not started:
                continue
            if output is None:
                output = self.network(inference_session=session, frame_idx=t)
            masks = output.pred_masks.float().cpu()
            require_finite(masks, "mask logits")
            resized = self.processor.post_process_masks([masks], original_sizes=[[height, width]], binarize=False)[0]
            for k, object_id in enumerate(output.object_ids):
                logits[t, position[int(object_id)]] = resized[k, 0].to(self.device)
        return logits
