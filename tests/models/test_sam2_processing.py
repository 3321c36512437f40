"""SAM 2's processing without torchvision: which saved settings are read, which are refused (naming the
file and key), and, where torchvision can be imported, that it prepares exactly what transformers'
processor does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.models.sam2_processing import Sam2Processing

# What save_pretrained writes for Sam2Processor(Sam2ImageProcessor(size=64, mask_size=16)) (transformers 5).
SAM2_PIXELS: dict[str, Any] = {
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.485, 0.456, 0.406],
    "image_std": [0.229, 0.224, 0.225],
    "resample": 2,
    "rescale_factor": 1 / 255,
    "size": {"height": 64, "width": 64},
}
SAM2_PROCESSOR: dict[str, Any] = {
    "image_processor": {**SAM2_PIXELS, "image_processor_type": "Sam2ImageProcessor", "mask_size": {"height": 16, "width": 16}},
    "point_pad_value": -10,
    "processor_class": "Sam2Processor",
    "target_size": 64,
}


def saved(folder: Path, **files: dict[str, Any]) -> Path:
    """``folder`` holding each ``name=settings`` as ``name.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, settings in files.items():
        (folder / f"{name}.json").write_text(json.dumps(settings), encoding="utf-8")
    return folder


def image_settings(**changes: Any) -> dict[str, Any]:
    """SAM 2's processor settings with the image processor's keys changed (``None`` drops a key)."""
    image = {**SAM2_PROCESSOR["image_processor"], **changes}
    return {**SAM2_PROCESSOR, "image_processor": {k: v for k, v in image.items() if v is not None}}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (image_settings(image_std=None), r"processor_config.json \(image_processor\): missing key 'image_std'"),
        (image_settings(do_magic=True), r"processor_config.json \(image_processor\): unknown key 'do_magic'"),
        (image_settings(resample=3), r"processor_config.json \(image_processor\): resample is 3; only 2 \(bilinear\)"),
        (image_settings(do_pad=True), r"processor_config.json \(image_processor\): do_pad is True; .*neither crop nor pad"),
        (image_settings(size={"longest_edge": 64}), r"size is \{'longest_edge': 64\}; expected \{height: int, width: int\}"),
        (image_settings(image_mean=[0.5]), r"image_mean is \[0.5\]; expected three numbers"),
        ({**SAM2_PROCESSOR, "processor_class": "SamProcessor"}, r"processor_config.json: processor_class is 'SamProcessor'"),
        ({**SAM2_PROCESSOR, "target_size": "big"}, r"processor_config.json: target_size is 'big'"),
        ({"processor_class": "Sam2Processor"}, r"no preprocessor_config.json, nor an image_processor entry"),
    ],
)
def test_settings_that_are_missing_unknown_or_not_sam2s_are_refused_naming_the_file_and_key(
    tmp_path: Path, settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(SegRobustError, match=message):
        Sam2Processing.from_checkpoint(saved(tmp_path, processor_config=settings))


def test_a_hub_checkpoints_preprocessor_config_is_read_before_the_processors_entries(tmp_path: Path) -> None:
    # A hub checkpoint saved by transformers 4: the image processor flat in preprocessor_config.json, with keys
    # that say how it was called, and the prompt square in processor_config.json.
    flat = {**SAM2_PIXELS, "size": {"height": 32, "width": 32}, "crop_size": None, "do_pad": None,
            "data_format": "channels_first", "image_processor_type": "Sam2ImageProcessorFast",
            "processor_class": "Sam2VideoProcessor"}
    folder = saved(tmp_path, preprocessor_config=flat, processor_config={**SAM2_PROCESSOR, "target_size": 32})
    processing = Sam2Processing.from_checkpoint(folder)
    assert processing.image.size == (32, 32) and processing.video == processing.image
    assert processing.target_size == 32
    inputs = processing(np.zeros((16, 8, 3), dtype=np.uint8), input_points=[[[[2.0, 4.0]]]], input_labels=[[[1]]])
    assert inputs["pixel_values"].shape == (1, 3, 32, 32)
    assert inputs["input_points"].tolist() == [[[[8.0, 8.0]]]]  # x * 32 / 8, y * 32 / 16


def test_without_a_target_size_prompts_are_scaled_to_the_images_size(tmp_path: Path) -> None:
    settings = {k: v for k, v in SAM2_PROCESSOR.items() if k != "target_size"}
    processing = Sam2Processing.from_checkpoint(saved(tmp_path, processor_config=settings))
    assert processing.target_size == 64


def test_sam2_processing_prepares_what_transformers_sam2_processor_does(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers", reason="the comparison needs the transformers extra")
    try:
        image_processor = transformers.Sam2ImageProcessor(size={"height": 64, "width": 64}, mask_size={"height": 16, "width": 16})
    except ImportError as exc:
        pytest.skip(f"transformers' Sam2ImageProcessor cannot be built here (it needs torchvision): {str(exc).strip()[:80]}")
    processor = transformers.Sam2Processor(image_processor)
    processor.save_pretrained(tmp_path)
    ours = Sam2Processing.from_checkpoint(tmp_path)
    rng = np.random.default_rng(0)
    prompts = {"input_points": [[[[10.5, 20.0], [3.0, 7.25]]]], "input_labels": [[[1, 0]]], "input_boxes": [[[2.0, 3.0, 30.0, 33.0]]]}
    for height, width in ((48, 48), (40, 56), (100, 80), (64, 64)):  # up, up and across, down, none
        image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        expected = processor(images=image, **prompts, return_tensors="pt")
        got = ours(images=image, **prompts, return_tensors="pt")
        assert sorted(got) == sorted(expected)
        for key in expected:
            assert torch.equal(got[key], expected[key]), key
        logits = torch.from_numpy(rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
        assert torch.equal(
            ours.post_process_masks([logits], got["original_sizes"], binarize=False)[0],
            processor.post_process_masks([logits], expected["original_sizes"], binarize=False)[0],
        )
