"""SAM 2 video checkpoints as promptable video object models: a tiny random-weight ``Sam2VideoModel`` built
here segments a clip into the same object ids as a hand-written inference session does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers", reason="SAM 2 video checkpoints need the transformers extra")

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.prompts import FramePrompt, PromptSet
from pytest_segrobust.data.prompt_protocol import StandardProtocol, StandardProtocolSettings
from pytest_segrobust.models.adapters import adapt_model
from pytest_segrobust.models.transformers import load_transformers
from pytest_segrobust.models.video import PromptableVideoObjectModel
from pytest_segrobust.tasks import get_task
from pytest_segrobust.tasks.vos import VideoObjectTask
from tests.models.test_sam2_processing import SAM2_PIXELS, SAM2_PROCESSOR
from tests.test_promptable_transformers import (
    _classes,
    bilinear,
    one_thread,  # noqa: F401 - its autouse fixture: one thread here too
    sam2_vision_config,
    save_sam2_processor,
    tiny_sam2,
)
from tests.video_fakes import ClipScenes

SIDE = 64
FRAMES = 3
# What save_pretrained writes for Sam2VideoProcessor (transformers 5): the image processor's settings and the
# video processor's, both for 64-pixel frames.
SAM2_VIDEO_PROCESSOR = {
    **SAM2_PROCESSOR,
    "processor_class": "Sam2VideoProcessor",
    "video_processor": {**SAM2_PIXELS, "return_metadata": False, "video_processor_type": "Sam2VideoVideoProcessor"},
}


def tiny_sam2_video(path: Path) -> Path:
    """A random-weight ``Sam2VideoModel`` (the Hiera of the image test, a 128-wide neck and decoder, one
    memory-attention layer, 64-channel memories as the model requires) and its processor, saved in ``path``."""
    config_class, model_class = _classes("Sam2VideoConfig", "Sam2VideoModel")
    torch.manual_seed(0)  # the global generator only initialises the throwaway weights of this fixture
    config = config_class(
        vision_config=sam2_vision_config(128),
        prompt_encoder_config={"hidden_size": 128, "image_size": SIDE, "patch_size": 16, "mask_input_channels": 4},
        mask_decoder_config={"hidden_size": 128, "mlp_dim": 32, "num_attention_heads": 2, "iou_head_hidden_dim": 16},
        image_size=SIDE,
        memory_attention_hidden_size=128,
        memory_attention_num_layers=1,
        memory_attention_feed_forward_hidden_size=32,
        memory_attention_rope_feat_sizes=[SIDE // 16, SIDE // 16],
        memory_encoder_hidden_size=128,
        memory_encoder_output_channels=64,
        mask_downsampler_embed_dim=128,
        memory_fuser_embed_dim=128,
        memory_fuser_intermediate_dim=32,
    )
    model_class(config).save_pretrained(path)

    def build() -> Any:
        from transformers.models.sam2_video.video_processing_sam2_video import Sam2VideoVideoProcessor

        size = {"height": SIDE, "width": SIDE}
        image_processor = transformers.Sam2ImageProcessor(size=size, mask_size={"height": 16, "width": 16})
        return transformers.Sam2VideoProcessor(image_processor, Sam2VideoVideoProcessor(size=size))

    save_sam2_processor(path, SAM2_VIDEO_PROCESSOR, build)
    return path


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_sam2_video(tmp_path_factory.mktemp("sam2-video"))


def clip_and_prompts() -> tuple[torch.Tensor, list[FramePrompt]]:
    """A 3-frame 64-pixel clip (a bright square drifting right over noise) and two objects: id 3 started at
    frame 0 by a click on the square and one off it, id 5 at frame 1 by a box and a click."""
    generator = torch.Generator().manual_seed(0)
    clip = 0.3 * torch.rand(FRAMES, 3, SIDE, SIDE, generator=generator)
    for t in range(FRAMES):
        clip[t, :, 20:40, 10 + 4 * t : 30 + 4 * t] += 0.6
    clicks = PromptSet(torch.tensor([[20.0, 30.0], [50.0, 8.0]]), torch.tensor([1, 0]), None, "points", 0)
    box = PromptSet(torch.tensor([[45.0, 50.0]]), torch.tensor([1]), torch.tensor([36.0, 40.0, 58.0, 60.0]), "points,box", 1)
    return clip, [FramePrompt(3, 0, clicks), FramePrompt(5, 1, box)]


def by_hand(checkpoint: Path, clip: torch.Tensor, objects: list[FramePrompt]) -> torch.Tensor:
    """The clip's ids from a hand-written session: frames rounded to 8 bits, scaled to [0, 1] and normalised
    by ImageNet's mean and std in numpy (64-pixel frames need no resize, and prompts no scaling); each
    object's clicks (a box as two clicks labelled 2 and 3 before them) added at its frame and that frame
    run; every frame run in order; logits resized bilinearly to the clip; the highest logit's id where > 0."""
    from transformers.models.sam2_video.modeling_sam2_video import Sam2VideoInferenceSession

    model = transformers.Sam2VideoModel.from_pretrained(checkpoint).eval()
    frames = np.round(clip.numpy().astype(np.float64) * 255)
    mean = np.array(SAM2_PIXELS["image_mean"])[:, None, None]
    std = np.array(SAM2_PIXELS["image_std"])[:, None, None]
    pixels = torch.from_numpy(((frames / 255 - mean) / std).astype(np.float32))
    session = Sam2VideoInferenceSession(video=pixels, video_height=SIDE, video_width=SIDE, dtype=torch.float32)
    ids = torch.zeros(FRAMES, SIDE, SIDE, dtype=torch.int64)
    with torch.no_grad():
        for t in range(FRAMES):
            output = None
            for obj in (o for o in objects if o.frame == t):
                coords, labels = obj.prompt.points, obj.prompt.labels
                if obj.prompt.box is not None:
                    coords = torch.cat([obj.prompt.box.reshape(2, 2), coords])
                    labels = torch.cat([torch.tensor([2, 3]), labels])
                index = session.obj_id_to_idx(obj.object_id)
                session.add_point_inputs(index, t, {"point_coords": coords[None, None], "point_labels": labels[None, None]})
                session.obj_with_new_inputs = [obj.object_id]
                output = model(inference_session=session, frame_idx=t)
            if output is None:
                output = model(inference_session=session, frame_idx=t)
            low = output.pred_masks[:, 0].double().numpy().transpose(1, 2, 0)
            logits = bilinear(bilinear(low, SIDE, axis=0), SIDE, axis=1)
            best = logits.argmax(axis=2)
            chosen = np.asarray(output.object_ids)[best]
            ids[t] = torch.from_numpy(np.where(logits.max(axis=2) > 0, chosen, 0))
    return ids


def test_a_sam2_video_checkpoint_segments_a_clip_as_a_hand_written_session_does(checkpoint: Path) -> None:
    model = load_transformers(
        str(checkpoint), task="vos", device=torch.device("cpu"), class_names=(), label_map=None, allow_download=False
    )
    assert isinstance(model, PromptableVideoObjectModel)
    clip, objects = clip_and_prompts()
    ids = model.predict(clip[None], [objects])
    assert ids.shape == (1, FRAMES, SIDE, SIDE) and ids.dtype == torch.int64
    assert torch.equal(ids[0], by_hand(checkpoint, clip, objects))
    assert not (ids[0, 0] == 5).any()  # object 5 is started at frame 1: frame 0 has no mask of it
    assert {0, 3, 5} <= set(ids.unique().tolist())  # random weights: neither nothing nor everything


def test_the_vos_task_runs_a_sam2_video_checkpoint_under_a_prompt_reference_only(checkpoint: Path) -> None:
    model = load_transformers(
        str(checkpoint), task="vos", device=torch.device("cpu"), class_names=(), label_map=None, allow_download=False
    )
    prompted = VideoObjectTask(StandardProtocol(StandardProtocolSettings(1, "center", True)))
    assert adapt_model(model, prompted) is model
    with pytest.raises(TypeError, match="VideoObjectModel"):
        adapt_model(model, get_task("vos"))  # the mask reference: a prompt model is refused
    # 32-pixel clips (the processor resizes them to 64), the second with an object that appears at frame 3.
    dataset = ClipScenes(count=2, frames=4)
    batch = prompted.collate([dataset[i] for i in range(2)], range(2), dataset, torch.device("cpu"))
    ids = prompted.check_predictions(prompted.predict(model, batch), batch)  # only the ids each clip asks for
    assert ids.shape == (2, 4, 32, 32)
    assert not (ids[1, :3] == 3).any()  # object 3 is started at frame 3: no mask of it before


def test_an_image_checkpoint_is_refused_for_a_vos_suite(tmp_path: Path) -> None:
    path = tiny_sam2(tmp_path / "sam2")
    with pytest.raises(SegRobustError, match=r"sam2.*model type 'sam2' is not a promptable video model \(for a vos suite\); supported: .*sam2_video"):
        load_transformers(
            str(path), task="vos", device=torch.device("cpu"), class_names=(), label_map=None, allow_download=False
        )
