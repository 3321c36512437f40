"""SemanticFolder on tiny label-map folders written to tmp_path, in each layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import SegmentationDataset
from pytest_segrobust.data.semantic_folder import (
    CITYSCAPES_CLASS_NAMES,
    CITYSCAPES_LABEL_TO_TRAIN_ID,
    VOC_CLASS_NAMES,
    SemanticFolder,
)

HEIGHT, WIDTH = 6, 8
THREE_CLASSES = ("background", "road", "car")


def write_image(path: Path, seed: int, size: tuple[int, int] = (HEIGHT, WIDTH)) -> np.ndarray:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(*size, 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)
    return pixels


def write_mask(path: Path, values: np.ndarray, palette: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mask = Image.fromarray(values.astype(np.uint8))
    if palette:  # what VOC ships: indices into a colour table
        mask.putpalette([channel for index in range(256) for channel in (index, 255 - index, index // 2)])
    mask.save(path)


def mask_of(*values: int) -> np.ndarray:
    """A (HEIGHT, WIDTH) map cycling through ``values``."""
    return np.resize(np.asarray(values), HEIGHT * WIDTH).reshape(HEIGHT, WIDTH)


def generic_dataset(root: Path) -> tuple[Path, Path]:
    images, masks = root / "images", root / "masks"
    write_image(images / "a.png", 0)
    write_image(images / "sub" / "b.png", 1)
    write_mask(masks / "a.png", mask_of(0, 1, 2, 255))
    write_mask(masks / "sub" / "b.png", mask_of(2, 2, 0))
    return images, masks


def test_generic_pairs_by_relative_stem(tmp_path: Path) -> None:
    images, masks = generic_dataset(tmp_path)
    dataset = SemanticFolder(images, masks, THREE_CLASSES)
    assert isinstance(dataset, SegmentationDataset)
    assert len(dataset) == 2 and dataset.name == "images" and dataset.ignore_index == 255
    first, second = dataset[0], dataset[1]
    assert (first.sample_id, second.sample_id) == ("a", "sub/b")
    assert first.image.dtype == torch.uint8 and first.image.shape == (3, HEIGHT, WIDTH)
    with Image.open(images / "a.png") as written:
        expected_pixels = np.asarray(written)
    assert np.array_equal(first.image.permute(1, 2, 0).numpy(), expected_pixels)
    assert first.target.mask.dtype == torch.int64
    assert np.array_equal(first.target.mask.numpy(), mask_of(0, 1, 2, 255))
    assert first.instances is None
    assert len(SemanticFolder(images, masks, THREE_CLASSES, limit=1)) == 1


def test_fingerprint_follows_files_and_classes(tmp_path: Path) -> None:
    images, masks = generic_dataset(tmp_path)
    before = SemanticFolder(images, masks, THREE_CLASSES).fingerprint()
    assert SemanticFolder(images, masks, THREE_CLASSES).fingerprint() == before
    assert SemanticFolder(images, masks, ("bg", "road", "car")).fingerprint() != before
    write_mask(masks / "a.png", mask_of(0))  # compresses to another size
    assert SemanticFolder(images, masks, THREE_CLASSES).fingerprint() != before


def test_mask_size_differs_from_image(tmp_path: Path) -> None:
    images, masks = generic_dataset(tmp_path)
    write_mask(masks / "a.png", np.zeros((HEIGHT + 1, WIDTH)))
    with pytest.raises(DatasetError, match=r"a\.png: mask is 8x7 .* its image .*a\.png is 8x6"):
        SemanticFolder(images, masks, THREE_CLASSES)[0]


def test_class_ids_outside_the_declared_set(tmp_path: Path) -> None:
    images, masks = generic_dataset(tmp_path)
    write_mask(masks / "sub" / "b.png", mask_of(0, 3, 7, 255))
    with pytest.raises(DatasetError, match=r"sub/b\.png: mask values \[3, 7\] are not class ids 0..2"):
        SemanticFolder(images, masks, THREE_CLASSES)[1]


def test_missing_mask_for_an_image(tmp_path: Path) -> None:
    images, masks = generic_dataset(tmp_path)
    write_image(images / "c.jpg", 2)
    with pytest.raises(DatasetError, match=r"c\.png: mask for image .*c\.jpg does not exist"):
        SemanticFolder(images, masks, THREE_CLASSES)


@pytest.mark.parametrize("broken", ["images/a.png", "masks/a.png"])
def test_unreadable_files(tmp_path: Path, broken: str) -> None:
    images, masks = generic_dataset(tmp_path)
    (tmp_path / broken).write_bytes(b"\x89PNG but not really")
    with pytest.raises(DatasetError, match=rf"{broken}: cannot read"):
        SemanticFolder(images, masks, THREE_CLASSES)[0]


def test_colour_masks_are_refused(tmp_path: Path) -> None:
    images, masks = generic_dataset(tmp_path)
    Image.fromarray(np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8)).save(masks / "a.png")
    with pytest.raises(DatasetError, match=r"a\.png: mask has mode RGB"):
        SemanticFolder(images, masks, THREE_CLASSES)[0]


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="nowhere: dataset folder does not exist"):
        SemanticFolder(tmp_path / "nowhere", tmp_path, THREE_CLASSES)


def test_cityscapes_label_ids_become_train_ids(tmp_path: Path) -> None:
    images, masks = tmp_path / "leftImg8bit" / "val", tmp_path / "gtFine" / "val"
    name = "frankfurt/frankfurt_000000_000294"
    write_image(images / f"{name}_leftImg8bit.png", 0)
    every_label_id = np.resize(np.arange(34), HEIGHT * WIDTH).reshape(HEIGHT, WIDTH)
    write_mask(masks / f"{name}_gtFine_labelIds.png", every_label_id)
    # The other gtFine files sit next to the label ids and must not confuse the pairing.
    write_mask(masks / f"{name}_gtFine_instanceIds.png", every_label_id)
    dataset = SemanticFolder(images, masks, CITYSCAPES_CLASS_NAMES, layout="cityscapes")
    assert len(dataset) == 1
    sample = dataset[0]
    assert sample.sample_id == name
    train_ids = sample.target.mask.numpy()
    for label_id in range(34):
        expected = CITYSCAPES_LABEL_TO_TRAIN_ID.get(label_id, 255)
        assert set(np.unique(train_ids[every_label_id == label_id]).tolist()) == {expected}, label_id
    assert CITYSCAPES_LABEL_TO_TRAIN_ID[7] == 0 and CITYSCAPES_LABEL_TO_TRAIN_ID[26] == 13  # road, car
    assert sorted(CITYSCAPES_LABEL_TO_TRAIN_ID.values()) == list(range(19))

    write_mask(masks / f"{name}_gtFine_labelIds.png", mask_of(7, 40))
    with pytest.raises(DatasetError, match=r"labelIds\.png: mask values \[40\] are not Cityscapes label ids"):
        dataset[0]
    (masks / f"{name}_gtFine_labelIds.png").unlink()
    with pytest.raises(DatasetError, match=r"labelIds\.png: mask for image .*leftImg8bit\.png does not exist"):
        SemanticFolder(images, masks, CITYSCAPES_CLASS_NAMES, layout="cityscapes")


def test_ade20k_shifts_classes_and_ignores_other(tmp_path: Path) -> None:
    images, masks = tmp_path / "images" / "validation", tmp_path / "annotations" / "validation"
    write_image(images / "ADE_val_00000001.jpg", 0)
    write_mask(masks / "ADE_val_00000001.png", mask_of(0, 1, 2, 150))
    classes = tuple(f"class{k}" for k in range(150))
    dataset = SemanticFolder(images, masks, classes, layout="ade20k")
    assert np.array_equal(dataset[0].target.mask.numpy(), mask_of(255, 0, 1, 149))
    write_mask(masks / "ADE_val_00000001.png", mask_of(0, 151))
    with pytest.raises(DatasetError, match=r"ADE_val_00000001\.png: mask values \[151\] are not ADE20K classes"):
        dataset[0]


def test_voc_palette_indices_and_boundary(tmp_path: Path) -> None:
    images, masks = tmp_path / "JPEGImages", tmp_path / "SegmentationClass"
    write_image(images / "2007_000032.jpg", 0)
    write_image(images / "2007_000033.jpg", 1)
    write_image(images / "2008_000001.jpg", 2)  # a detection-only image: no mask, not in the set
    write_mask(masks / "2007_000032.png", mask_of(0, 15, 255, 20), palette=True)
    write_mask(masks / "2007_000033.png", mask_of(1), palette=True)
    with Image.open(masks / "2007_000032.png") as written:
        assert written.mode == "P"
    dataset = SemanticFolder(images, masks, VOC_CLASS_NAMES, layout="voc")
    assert [dataset[i].sample_id for i in range(len(dataset))] == ["2007_000032", "2007_000033"]
    assert np.array_equal(dataset[0].target.mask.numpy(), mask_of(0, 15, 255, 20))

    split_file = tmp_path / "val.txt"
    split_file.write_text("2007_000033\n")
    assert len(SemanticFolder(images, masks, VOC_CLASS_NAMES, layout="voc", split_file=split_file)) == 1

    write_mask(masks / "2007_000032.png", mask_of(0, 21), palette=True)
    with pytest.raises(DatasetError, match=r"2007_000032\.png: mask values \[21\] are not VOC classes 0..20"):
        dataset[0]
    (images / "2007_000033.jpg").unlink()
    with pytest.raises(DatasetError, match=r"2007_000033\.\*: image of sample 2007_000033 does not exist"):
        SemanticFolder(images, masks, VOC_CLASS_NAMES, layout="voc")


def test_bad_arguments(tmp_path: Path) -> None:
    images, masks = generic_dataset(tmp_path)
    with pytest.raises(ValueError, match="unknown layout 'kitti'"):
        SemanticFolder(images, masks, THREE_CLASSES, layout="kitti")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="19 train ids"):
        SemanticFolder(images, masks, THREE_CLASSES, layout="cityscapes")
    with pytest.raises(ValueError, match="ignore_index 2 collides"):
        SemanticFolder(images, masks, THREE_CLASSES, ignore_index=2)
