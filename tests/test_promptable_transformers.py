"""SAM-family transformers checkpoints as promptable models: tiny random-weight SAM and SAM 2
checkpoints built here score exactly what a hand-written call of the model and its processor does."""

from __future__ import annotations

import json
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
from tests.models.test_sam2_processing import SAM2_PIXELS, SAM2_PROCESSOR

# One click at the centre and the tight box: both prompt kinds, one request each per instance.
PROTOCOL = StandardProtocol(StandardProtocolSettings(1, "center", True))


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


def sam2_vision_config(fpn_hidden_size: int) -> dict[str, Any]:
    """A 4-stage Hiera 8 to 64 wide on 64-pixel images, its neck ``fpn_hidden_size`` wide."""
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
    return {
        "backbone_config": backbone,
        "backbone_channel_list": [64, 32, 16, 8],
        "backbone_feature_sizes": [[16, 16], [8, 8], [4, 4]],
        "fpn_hidden_size": fpn_hidden_size,
    }


def save_sam2_processor(path: Path, settings: dict[str, Any], build: Any) -> None:
    """``build()``'s processor saved in ``path``, or, where it needs a torchvision that cannot be imported,
    ``settings`` written as its ``processor_config.json``."""
    try:
        processor = build()
    except ImportError:
        (path / "processor_config.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    else:
        processor.save_pretrained(path)


def tiny_sam2(path: Path) -> Path:
    """A random-weight ``Sam2Model`` (a 4-stage Hiera 8 to 64 wide, 64-pixel input) and its processor, saved in ``path``."""
    (config_class, model_class) = _classes("Sam2Config", "Sam2Model")
    torch.manual_seed(0)
    config = config_class(
        vision_config=sam2_vision_config(16),
        prompt_encoder_config={"hidden_size": 16, "image_size": 64, "patch_size": 16, "mask_input_channels": 4},
        mask_decoder_config={"hidden_size": 16, "mlp_dim": 32, "num_attention_heads": 2, "iou_head_hidden_dim": 16},
    )
    model_class(config).save_pretrained(path)

    def build() -> Any:
        image_processor = transformers.Sam2ImageProcessor(size={"height": 64, "width": 64}, mask_size={"height": 16, "width": 16})
        return transformers.Sam2Processor(image_processor)

    save_sam2_processor(path, SAM2_PROCESSOR, build)
    return path


BUILDERS = {"sam": tiny_sam, "sam2": tiny_sam2}
IMAGE_SIZE = 48


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models on one thread: on shared cores, more threads make each small matmul wait (24 s instead of 1)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def family(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def checkpoint(family: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return BUILDERS[family](tmp_path_factory.mktemp(family))


@pytest.fixture(scope="module")
def scenes() -> DemoScenes:
    return DemoScenes("val", size=1, image_size=IMAGE_SIZE)


def bilinear(values: np.ndarray, size: int, axis: int) -> np.ndarray:
    """``values`` resampled to ``size`` along ``axis`` by linear interpolation with pixel centres at
    half-integers and edges repeated, in float64 (what ``align_corners=False`` means)."""
    source = np.clip((np.arange(size) + 0.5) * values.shape[axis] / size - 0.5, 0, values.shape[axis] - 1)
    low = np.floor(source).astype(np.int64)
    high = np.minimum(low + 1, values.shape[axis] - 1)
    weight = (source - low).reshape((-1,) + (1,) * (values.ndim - 1 - axis))
    return np.take(values, low, axis=axis) * (1 - weight) + np.take(values, high, axis=axis) * weight


def sam2_inputs(image: np.ndarray, given: dict[str, Any]) -> tuple[dict[str, torch.Tensor], tuple[int, int]]:
    """SAM 2's documented conventions by hand, in numpy: the image resized to 64 x 64 as an 8-bit image is
    (along its rows, rounded, then along its columns, rounded: the separable ``uint8`` resize torch and
    torchvision do on the CPU), scaled to [0, 1] and normalised by ImageNet's mean and std; clicks ``(x, y)`` and box corners scaled by
    ``64 / W`` and ``64 / H``; one image, one object. Returns the model's inputs and the image's ``(H, W)``."""
    height, width = image.shape[:2]
    rows = np.floor(bilinear(image.astype(np.float64), 64, axis=1) + 0.5)
    resized = np.floor(bilinear(rows, 64, axis=0) + 0.5)
    mean, std = np.array(SAM2_PIXELS["image_mean"]), np.array(SAM2_PIXELS["image_std"])
    pixels = ((resized / 255 - mean) / std).astype(np.float32).transpose(2, 0, 1)[None]
    scale = np.array([64 / width, 64 / height])
    inputs = {"pixel_values": torch.from_numpy(pixels)}
    if "input_points" in given:
        points = np.asarray(given["input_points"], dtype=np.float64) * scale
        inputs["input_points"] = torch.from_numpy(points.astype(np.float32))
        inputs["input_labels"] = torch.tensor(given["input_labels"], dtype=torch.int64)
    if "input_boxes" in given:
        box = np.asarray(given["input_boxes"], dtype=np.float64).reshape(1, 1, 2, 2) * scale
        inputs["input_boxes"] = torch.from_numpy(box.reshape(1, 1, 4).astype(np.float32))
    return inputs, (height, width)


def by_hand(family: str, checkpoint: Path, scenes: DemoScenes) -> tuple[list[torch.Tensor], float]:
    """Each image's masks ``(P, H, W)`` from a plain transformers call per prompt set (the image and the
    prompts prepared by SAM's processor, or for SAM 2 by :func:`sam2_inputs`; the model's full forward
    pass; the best of its three masks by ``iou_scores``, resized to the image and thresholded at 0 by the
    processor's post-processing or, for SAM 2, by :func:`bilinear`), and their mIoU over prompt sets."""
    processor = transformers.AutoProcessor.from_pretrained(checkpoint) if family == "sam" else None
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
            if processor is None:
                inputs, size = sam2_inputs(image, given)
            else:
                inputs = processor(images=image, **given, return_tensors="pt")
            with torch.no_grad():
                output = model(**inputs, multimask_output=True)
            best = int(output.iou_scores[0, 0].argmax())
            if processor is None:
                logits = output.pred_masks[0, 0, best].double().numpy()
                mask = torch.from_numpy(bilinear(bilinear(logits, size[0], axis=0), size[1], axis=1) > 0)
            else:
                sizes = [inputs["original_sizes"], inputs["reshaped_input_sizes"]]
                mask = processor.post_process_masks(output.pred_masks, *sizes)[0][0][best].bool()
            chosen[-1].append(mask)
            truth = sample.instances.masks[prompt.instance].bool()
            union = int((mask | truth).sum())
            ious.append(int((mask & truth).sum()) / union if union else 1.0)
    return [torch.stack(masks) for masks in chosen], 100.0 * float(np.mean(ious))


def test_a_sam_family_checkpoint_scores_what_a_hand_written_call_does(
    family: str, checkpoint: Path, scenes: DemoScenes
) -> None:
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
    masks, score = by_hand(family, checkpoint, scenes)
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
