"""SplitFolders on tiny split trees written to tmp_path with Pillow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import SegmentationDataset
from pytest_segrobust.data.split_folders import SplitFolders

HEIGHT, WIDTH = 6, 8
CLASSES = ("background", "bag", "car")


def write_image(path: Path, seed: int, size: tuple[int, int] = (HEIGHT, WIDTH)) -> np.ndarray:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(*size, 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)
    return pixels


def write_mask(path: Path, values: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Uncompressed, so the file size depends on the mask's size alone, not on its labels.
    Image.fromarray(values.astype(np.uint8)).save(path, compress_level=0)


def mask_of(*values: int, size: tuple[int, int] = (HEIGHT, WIDTH)) -> np.ndarray:
    """A map of ``size`` cycling through ``values``."""
    return np.resize(np.asarray(values), size[0] * size[1]).reshape(size)


def split_tree(root: Path) -> dict[str, np.ndarray]:
    """Two splits with classes.txt; returns the pixels written for ood-easy, by sample id."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "classes.txt").write_text("\n".join(CLASSES) + "\n")
    pixels = {
        "ood-easy/n02/b": write_image(root / "ood-easy" / "images" / "n02" / "b.png", 1),
        "ood-easy/n01/a": write_image(root / "ood-easy" / "images" / "n01" / "a.png", 0),
    }
    write_mask(root / "ood-easy" / "masks" / "n01" / "a.png", mask_of(0, 1, 2, 255))
    write_mask(root / "ood-easy" / "masks" / "n02" / "b.png", mask_of(2, 0))
    write_image(root / "ood-hard" / "images" / "c.jpg", 2)
    write_mask(root / "ood-hard" / "masks" / "c.png", mask_of(1))
    return pixels


def test_reads_a_split_lazily_with_relative_path_ids(tmp_path: Path) -> None:
    pixels = split_tree(tmp_path / "sood")
    dataset = SplitFolders(tmp_path / "sood", "ood-easy")
    assert isinstance(dataset, SegmentationDataset)
    assert len(dataset) == 2 and dataset.name == "sood/ood-easy"
    assert dataset.class_names == CLASSES and dataset.ignore_index == 255
    samples = list(dataset)  # plain iteration ends on IndexError
    assert [sample.sample_id for sample in samples] == ["ood-easy/n01/a", "ood-easy/n02/b"]
    first = samples[0]
    assert first.image.dtype == torch.uint8 and first.image.shape == (3, HEIGHT, WIDTH)
    assert torch.equal(first.image.permute(1, 2, 0), torch.from_numpy(pixels["ood-easy/n01/a"]))
    assert first.target.mask.dtype == torch.int64
    assert torch.equal(first.target.mask, torch.from_numpy(mask_of(0, 1, 2, 255)).long())
    assert dataset[-1].sample_id == "ood-easy/n02/b"
    with pytest.raises(IndexError):
        dataset[2]


def test_other_split_jpeg_images_and_explicit_class_names(tmp_path: Path) -> None:
    split_tree(tmp_path)
    names = ("other", "things", "stuff")
    dataset = SplitFolders(tmp_path, "ood-hard", class_names=names, name="hard")
    assert dataset.class_names == names and dataset.name == "hard"
    (sample,) = list(dataset)
    assert sample.sample_id == "ood-hard/c" and sample.image.shape == (3, HEIGHT, WIDTH)


def test_sood_imagenet_s_naming_takes_the_samples_from_the_masks(tmp_path: Path) -> None:
    # As released: <synset>/<stem>_mask.png for a subset of the ImageNet-21K-P images.
    (tmp_path / "classes.txt").write_text("background\nbag\ncar\n")
    images, masks = tmp_path / "test-easy" / "images", tmp_path / "test-easy" / "masks"
    write_image(images / "n0001" / "n0001_7.JPEG", 0)
    write_image(images / "n0001" / "n0001_8.JPEG", 1)  # not annotated: never read
    write_image(images / "n0002" / "n0002_3.JPEG", 2)
    write_mask(masks / "n0001" / "n0001_7_mask.png", mask_of(0, 1))
    write_mask(masks / "n0002" / "n0002_3_mask.png", mask_of(0, 2))
    dataset = SplitFolders(tmp_path, "test-easy", mask_suffix="_mask", listed_by="masks")
    assert [dataset[i].sample_id for i in range(len(dataset))] == ["test-easy/n0001/n0001_7", "test-easy/n0002/n0002_3"]
    assert dataset[1].target.mask.unique().tolist() == [0, 2]
    # Listed by the images, the unannotated one has no mask.
    with pytest.raises(DatasetError, match=r"n0001_8_mask\.png: mask for image .*n0001_8\.JPEG does not exist"):
        SplitFolders(tmp_path, "test-easy", mask_suffix="_mask")


def test_a_missing_split_lists_the_splits_there_are(tmp_path: Path) -> None:
    split_tree(tmp_path)
    (tmp_path / "notes").mkdir()  # not a split: no images and masks in it
    with pytest.raises(DatasetError, match=r"no split 'ood-medium' in .*; splits there: ood-easy, ood-hard$"):
        SplitFolders(tmp_path, "ood-medium")
    with pytest.raises(DatasetError, match="dataset root does not exist"):
        SplitFolders(tmp_path / "absent", "ood-easy")
    (tmp_path / "iid" / "images").mkdir(parents=True)
    with pytest.raises(DatasetError, match=r"iid/masks: split 'iid' has no masks folder"):
        SplitFolders(tmp_path, "iid")


def test_an_image_without_mask_and_a_mask_without_image_are_named(tmp_path: Path) -> None:
    split_tree(tmp_path)
    write_image(tmp_path / "ood-easy" / "images" / "n03" / "d.png", 3)
    with pytest.raises(DatasetError, match=r"masks/n03/d\.png: mask for image .*images/n03/d\.png does not exist"):
        SplitFolders(tmp_path, "ood-easy")
    write_mask(tmp_path / "ood-hard" / "masks" / "e.png", mask_of(0))
    with pytest.raises(DatasetError, match=r"images/e\.\*: image for mask .*masks/e\.png does not exist"):
        SplitFolders(tmp_path, "ood-hard", listed_by="masks")
    with pytest.raises(DatasetError, match=r"c\.png: mask name does not end in mask_suffix '_mask'"):
        SplitFolders(tmp_path, "ood-hard", listed_by="masks", mask_suffix="_mask")


def test_bad_masks_fail_when_read_naming_the_file(tmp_path: Path) -> None:
    split_tree(tmp_path)
    masks = tmp_path / "ood-easy" / "masks"
    write_mask(masks / "n01" / "a.png", mask_of(0, 1, size=(HEIGHT + 1, WIDTH)))
    write_mask(masks / "n02" / "b.png", mask_of(0, 3, 7))
    dataset = SplitFolders(tmp_path, "ood-easy")  # listing reads no pixels
    with pytest.raises(DatasetError, match=r"n01/a\.png: mask is 8x7 \(width x height\) but its image .* is 8x6"):
        dataset[0]
    with pytest.raises(DatasetError, match=r"n02/b\.png: mask values \[3, 7\] are not class ids 0\.\.2 or the ignore"):
        dataset[1]
    Image.fromarray(np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8)).save(masks / "n02" / "b.png")
    with pytest.raises(DatasetError, match=r"b\.png: mask has mode RGB; expected a single-channel label map"):
        dataset[1]
    (masks / "n02" / "b.png").write_bytes(b"not a png")
    with pytest.raises(DatasetError, match=r"b\.png: cannot read mask"):
        dataset[1]


def test_class_names_must_be_given_or_read(tmp_path: Path) -> None:
    split_tree(tmp_path)
    (tmp_path / "classes.txt").unlink()
    with pytest.raises(DatasetError, match=r"classes\.txt: no class names; write one name a line there or pass"):
        SplitFolders(tmp_path, "ood-easy")
    (tmp_path / "classes.txt").write_text("background\n\ncar\n")
    with pytest.raises(DatasetError, match=r"classes\.txt: line 2 is blank"):
        SplitFolders(tmp_path, "ood-easy")
    (tmp_path / "classes.txt").write_text("\n")
    with pytest.raises(DatasetError, match=r"classes\.txt: no class names in the file"):
        SplitFolders(tmp_path, "ood-easy")
    with pytest.raises(ValueError, match="ignore_index 1 collides with class id of 'bag'"):
        SplitFolders(tmp_path, "ood-easy", class_names=CLASSES, ignore_index=1)
    with pytest.raises(ValueError, match="unknown listed_by 'files'"):
        SplitFolders(tmp_path, "ood-easy", class_names=CLASSES, listed_by="files")  # type: ignore[arg-type]


def test_reading_is_deterministic(tmp_path: Path) -> None:
    split_tree(tmp_path)
    first, second = SplitFolders(tmp_path, "ood-easy"), SplitFolders(tmp_path, "ood-easy")
    for a, b in zip(first, second, strict=True):
        assert a.sample_id == b.sample_id
        assert torch.equal(a.image, b.image) and torch.equal(a.target.mask, b.target.mask)
    assert first.fingerprint() == second.fingerprint()


def test_the_fingerprint_follows_the_content(tmp_path: Path) -> None:
    split_tree(tmp_path)
    before = SplitFolders(tmp_path, "ood-easy").fingerprint()
    assert SplitFolders(tmp_path, "ood-hard").fingerprint() != before
    assert SplitFolders(tmp_path, "ood-easy", class_names=("a", "b", "c")).fingerprint() != before
    # A corrected annotation: same file name and file size, other labels.
    mask = tmp_path / "ood-easy" / "masks" / "n01" / "a.png"
    size = mask.stat().st_size
    write_mask(mask, mask_of(0, 2, 1, 255))
    assert mask.stat().st_size == size
    relabelled = SplitFolders(tmp_path, "ood-easy").fingerprint()
    assert relabelled != before
    write_image(tmp_path / "ood-easy" / "images" / "n03" / "d.png", 3)
    write_mask(tmp_path / "ood-easy" / "masks" / "n03" / "d.png", mask_of(0))
    assert SplitFolders(tmp_path, "ood-easy").fingerprint() not in {before, relabelled}
