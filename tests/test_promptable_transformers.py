"""SAM-family transformers checkpoints as promptable models: tiny random-weight SAM and SAM 2
checkpoints built here score exactly what a hand-written call of the model and its processor does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers", reason="SAM-family checkpoints need the transformers extra")

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.data.demo import DemoScenes
from pytest_segrobust.data.prompt_protocol import StandardProtocol, StandardProtocolSettings
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.models.transformers import load_transformers
from pytest_segrobust.tasks.promptable import PromptableTask

# One click at the centre and the tight box: both prompt kinds, one request each per instance.
PROTOCOL = StandardProtocol(StandardProtocolSettings(1, "center", True))
IMAGE_SIZE = 48


def _classes(*names: str) -> list[Any]:
    """The named transformers classes, or a skip naming the first one this installation lacks or cannot build."""
    missing = [name for name in names if not hasattr(transformers, name)]
    if missing:
        pytest.skip(f"transformers {transformers.__version__} has no {missing[0]}")
    return [getattr(transformers, name) for name in names]


def tiny_sam(path: Path) -> Path:
    """A random-weight ``SamModel`` (16-wide ViT, 64-pixel input) and its processor, saved in ``path``."""
    config_class, model_class, image_processor_class, processor_class = _classes(
        "SamConfig", "SamModel", "SamImageProcessor", "SamProcessor"
    )
    torch.manual_seed(0)  # the global generator only initialises the throwaway weights of this fixture
    config = config_class(
        vision_config={
            "hidden_size": 16,
            "output_channels": 16,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": 64,
            "patch_size": 8,
            "mlp_dim": 32,
            "global_attn_indexes": [1],
            "window_size": 4,
            "num_pos_feats": 8,
        },
        prompt_encoder_config={"hidden_size": 16, "image_size": 64, "patch_size": 8, "mask_input_channels": 4},
        mask_decoder_config={
            "hidden_size": 16,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "mlp_dim": 32,
            "iou_head_hidden_dim": 16,
        },
    )
    image_processor = image_processor_class(
        size={"longest_edge": 64},
        pad_size={"height": 64, "width": 64},
        mask_size={"longest_edge": 16},
        mask_pad_size={"height": 16, "width": 16},
    )
    model_class(config).save_pretrained(path)
    processor_class(image_processor).save_pretrained(path)
    return path


def tiny_sam2(path: Path) -> Path:
    """A random-weight ``Sam2Model`` (a 4-stage Hiera 8 to 64 wide, 64-pixel input) and its processor, saved in ``path``."""
    config_class, model_class, image_processor_class, processor_class = _classes(
        "Sam2Config", "Sam2Model", "Sam2ImageProcessor", "Sam2Processor"
    )
    try:
        image_processor = image_processor_class(size={"height": 64, "width": 64}, mask_size={"height": 16, "width": 16})
    except ImportError as exc:
        pytest.skip(
            f"transformers' Sam2ImageProcessor cannot be built here (it needs torchvision): {str(exc).strip()[:80]}"
        )
    torch.manual_seed(0)
    backbone = {
        "model_type": "sam2_hiera_det_model",
        "hidden_size": 8,
        "num_attention_heads": 1,
        "image_size": [64, 64],
        "blocks_per_stage": [1, 1, 2, 1],
        "embed_dim_per_stage": [8, 16, 32, 64],
        "num_attention_heads_per_stage": [1, 1, 1, 1],
        "window_size_per_stage": [4, 4, 4, 4],
        "global_attention_blocks": [3],
        "window_positional_embedding_background_size": [2, 2],
    }
    config = config_class(
        vision_config={
            "backbone_config": backbone,
            "backbone_channel_list": [64, 32, 16, 8],
            "backbone_feature_sizes": [[16, 16], [8, 8], [4, 4]],
            "fpn_hidden_size": 16,
        },
        prompt_encoder_config={"hidden_size": 16, "image_size": 64, "patch_size": 16, "mask_input_channels": 4},
        mask_decoder_config={"hidden_size": 16, "mlp_dim": 32, "num_attention_heads": 2, "iou_head_hidden_dim": 16},
    )
    model_class(config).save_pretrained(path)
    processor_class(image_processor).save_pretrained(path)
    return path


BUILDERS = {"sam": tiny_sam, "sam2": tiny_sam2}


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models on one thread: on shared cores, more threads make each small matmul wait (24 s instead of 1)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def checkpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return BUILDERS[request.param](tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def scenes() -> DemoScenes:
    return DemoScenes("val", size=1, image_size=IMAGE_SIZE)


def by_hand(checkpoint: Path, scenes: DemoScenes) -> tuple[list[torch.Tensor], float]:
    """Each image's masks ``(P, H, W)`` from a plain transformers call per prompt set (the processor
    on the image and the prompts, the model's full forward pass, the best of its three masks by
    ``iou_scores``, binarised by the processor's post-processing), and their mIoU over prompt sets."""
    processor = transformers.AutoProcessor.from_pretrained(checkpoint)
    model = transformers.AutoModelForMaskGeneration.from_pretrained(checkpoint).eval()
    ious, chosen = [], []
    for index in range(len(scenes)):
        sample = scenes[index]
        chosen.append([])
        image = sample.image.permute(1, 2, 0).numpy()
        for prompt in PROTOCOL.prompts(sample.instances, sample.sample_id, 0).prompt_sets():
            if prompt.kind == "points":
                given = {"input_points": [[prompt.points.tolist()]], "input_labels": [[prompt.labels.tolist()]]}
            else:
                given = {"input_boxes": [[prompt.box.tolist()]]}
            inputs = processor(images=image, **given, return_tensors="pt")
            with torch.no_grad():
                output = model(**inputs, multimask_output=True)
            sizes = [inputs["original_sizes"]] + (
                [inputs["reshaped_input_sizes"]] if "reshaped_input_sizes" in inputs else []
            )
            masks = processor.post_process_masks(output.pred_masks, *sizes)[0][0]
            mask = masks[int(output.iou_scores[0, 0].argmax())].bool()
            chosen[-1].append(mask)
            truth = sample.instances.masks[prompt.instance].bool()
            union = int((mask | truth).sum())
            ious.append(int((mask & truth).sum()) / union if union else 1.0)
    return [torch.stack(masks) for masks in chosen], 100.0 * float(np.mean(ious))


def test_a_sam_family_checkpoint_scores_what_a_hand_written_call_does(checkpoint: Path, scenes: DemoScenes) -> None:
    model = load_transformers(
        str(checkpoint),
        task="promptable",
        device=torch.device("cpu"),
        class_names=(),
        label_map=None,
        allow_download=False,
    )
    settings = EvalSettings(PromptableTask(PROTOCOL, seed=0), ("promptable_miou",), batch_size=2)
    scored = evaluate(model, scenes, settings=settings).metrics["promptable_miou"]
    masks, score = by_hand(checkpoint, scenes)
    images = torch.stack([scenes[i].image for i in range(len(scenes))]).float() / 255
    sets = [PROTOCOL.prompts(scenes[i].instances, scenes[i].sample_id, 0).prompt_sets() for i in range(len(scenes))]
    for expected, (candidates, scores) in zip(masks, model.predict(images, sets)):
        best = candidates[torch.arange(len(candidates)), scores.argmax(dim=1)]
        assert torch.equal(best > 0, expected)
    assert scored.score == pytest.approx(score, rel=1e-12)  # the same IoUs, summed in another order
    assert 0.0 < scored.score < 100.0  # random weights: neither nothing nor everything right


def test_a_checkpoint_that_takes_no_prompts_is_refused_for_a_promptable_suite(tmp_path: Path) -> None:
    from tests.models.test_transformers import segformer

    path = segformer(tmp_path / "segformer")
    with pytest.raises(
        SegRobustError, match=r"segformer.*not a promptable \(mask-generation\) model; supported: .*sam"
    ):
        load_transformers(
            str(path),
            task="promptable",
            device=torch.device("cpu"),
            class_names=(),
            label_map=None,
            allow_download=False,
        )
