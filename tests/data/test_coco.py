"""CocoInstances on tiny COCO datasets written to tmp_path: polygons, RLE, crowd, bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

mask_utils = pytest.importorskip("pycocotools.mask")
from pycocotools.coco import COCO

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import SegmentationDataset
from pytest_segrobust.data.coco import CocoInstances

HEIGHT, WIDTH = 16, 20
# Ids out of order and not contiguous: labels follow the id order (ant=1, zebra=2, yak=3).
CATEGORIES = [
    {"id": 5, "name": "zebra", "supercategory": "animal"},
    {"id": 2, "name": "ant", "supercategory": "insect"},
    {"id": 9, "name": "yak", "supercategory": "animal"},
]


def _compressed_rle(mask: np.ndarray) -> dict[str, Any]:
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode("ascii")}


def _uncompressed_rle(mask: np.ndarray) -> dict[str, Any]:
    flat = mask.flatten(order="F").astype(np.uint8)  # COCO runs go down the columns
    changes = np.flatnonzero(np.diff(flat)) + 1
    edges = np.concatenate([[0], changes, [flat.size]])
    counts = np.diff(edges).tolist()
    if flat[0] == 1:  # runs start with background
        counts = [0, *counts]
    return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": counts}


def _box(y0: int, y1: int, x0: int, x1: int) -> np.ndarray:
    mask = np.zeros((HEIGHT, WIDTH), dtype=bool)
    mask[y0:y1, x0:x1] = True
    return mask


CROWD_REGION = _box(0, 8, 0, 10)
RLE_OBJECT = _box(6, 12, 12, 18)
POLYGON = [2.0, 4.0, 14.0, 4.0, 14.0, 10.0, 2.0, 10.0]  # overlaps both regions above


def write_dataset(root: Path, annotations: list[dict[str, Any]] | None = None) -> tuple[Path, Path]:
    """Images 7 (annotated) and 3 (no annotations), RGB gradients that are easy to check."""
    images_dir = root / "images"
    images_dir.mkdir(parents=True, exist_ok=True)
    for image_id in (7, 3):
        pixels = np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8)
        pixels[..., 0] = np.arange(WIDTH, dtype=np.uint8)[None, :] * 10
        pixels[..., 1] = np.arange(HEIGHT, dtype=np.uint8)[:, None] * 10
        pixels[..., 2] = image_id
        Image.fromarray(pixels).save(images_dir / f"{image_id:012d}.png")
    if annotations is None:
        annotations = [
            {"id": 1, "image_id": 7, "category_id": 2, "segmentation": [POLYGON], "iscrowd": 0},
            {"id": 2, "image_id": 7, "category_id": 5, "segmentation": _uncompressed_rle(CROWD_REGION), "iscrowd": 1},
            {"id": 3, "image_id": 7, "category_id": 9, "segmentation": _compressed_rle(RLE_OBJECT), "iscrowd": 0},
        ]
    for annotation in annotations:
        annotation.setdefault("area", 1.0)
        annotation.setdefault("bbox", [0, 0, 1, 1])
    document = {
        "images": [
            {"id": image_id, "file_name": f"{image_id:012d}.png", "height": HEIGHT, "width": WIDTH}
            for image_id in (7, 3)
        ],
        "annotations": annotations,
        "categories": CATEGORIES,
    }
    annotation_file = root / "instances.json"
    annotation_file.write_text(json.dumps(document))
    return images_dir, annotation_file


# pycocotools' annToMask (the oracle) trips a NumPy 2 deprecation inside pycocotools.
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_samples_hold_image_instances_and_semantic_map(tmp_path: Path) -> None:
    images_dir, annotation_file = write_dataset(tmp_path)
    dataset = CocoInstances(images_dir, annotation_file)
    assert isinstance(dataset, SegmentationDataset)
    assert dataset.name == "instances" and len(dataset) == 2
    assert dataset.class_names == ("background", "ant", "zebra", "yak")
    assert dataset.label_to_category_id == {1: 2, 2: 5, 3: 9}
    assert [c["supercategory"] for c in dataset.categories] == ["insect", "animal", "animal"]
    assert dataset.image_ids == (3, 7)  # id order

    empty = dataset[0]
    assert empty.sample_id == "000000000003.png"
    assert len(empty.instances) == 0 and empty.instances.masks.shape == (0, HEIGHT, WIDTH)
    assert bool((empty.target.mask == 0).all())

    sample = dataset[1]
    assert sample.image.dtype == torch.uint8 and sample.image.shape == (3, HEIGHT, WIDTH)
    assert sample.image[0, 0].tolist() == [10 * x for x in range(WIDTH)]
    assert bool((sample.image[2] == 7).all())
    instances = sample.instances
    assert instances.labels.tolist() == [1, 2, 3]
    assert instances.iscrowd.tolist() == [False, True, False]
    oracle = COCO(str(annotation_file))  # pycocotools' own decoding of the three encodings
    for mask, annotation_id in zip(instances.masks, (1, 2, 3)):
        expected = oracle.annToMask(oracle.anns[annotation_id]).astype(bool)
        assert np.array_equal(mask.numpy(), expected)
    assert np.array_equal(instances.masks[1].numpy(), CROWD_REGION)
    assert np.array_equal(instances.masks[2].numpy(), RLE_OBJECT)
    assert instances.boxes[2].tolist() == [12, 6, 18, 12]

    # Painted in annotation order: crowd over the polygon, the RLE object over both.
    polygon_mask = instances.masks[0].numpy()
    expected_map = np.zeros((HEIGHT, WIDTH), dtype=np.int64)
    expected_map[polygon_mask] = 1
    expected_map[CROWD_REGION] = 255
    expected_map[RLE_OBJECT] = 3
    assert np.array_equal(sample.target.mask.numpy(), expected_map)
    assert sample.target.mask.dtype == torch.int64


def test_limit_name_and_fingerprint(tmp_path: Path) -> None:
    images_dir, annotation_file = write_dataset(tmp_path)
    limited = CocoInstances(images_dir, annotation_file, name="tiny", limit=1)
    assert limited.name == "tiny" and len(limited) == 1 and limited.image_ids == (3,)
    print_a = CocoInstances(images_dir, annotation_file).fingerprint()
    assert print_a == CocoInstances(images_dir, annotation_file).fingerprint()
    assert limited.fingerprint() != print_a
    Image.fromarray(np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8)).save(images_dir / "000000000007.png")
    assert CocoInstances(images_dir, annotation_file).fingerprint() != print_a  # the file size changed
    document = json.loads(annotation_file.read_text())
    document["annotations"][0]["iscrowd"] = 1
    annotation_file.write_text(json.dumps(document))
    assert CocoInstances(images_dir, annotation_file).fingerprint() != print_a


def _one_annotation(segmentation: Any) -> list[dict[str, Any]]:
    return [{"id": 1, "image_id": 7, "category_id": 2, "segmentation": segmentation, "iscrowd": 0}]


@pytest.mark.parametrize(
    ("segmentation", "message"),
    [
        ([[2.0, 4.0, 40.0, 4.0, 40.0, 10.0]], "outside the 20x16 image"),
        ([[2.0, 4.0, 8.0]], "polygon"),
        ([], "no polygon"),
        ("not a segmentation", "segmentation must be"),
        ({"size": [HEIGHT, WIDTH], "counts": [5, 3]}, "counts cover 8 pixels"),
        ({"size": [HEIGHT + 1, WIDTH], "counts": [HEIGHT * WIDTH]}, "RLE size"),
        ({"size": [HEIGHT, WIDTH], "counts": _compressed_rle(np.ones((4, 4), bool))["counts"]}, "counts cover 16"),
        ({"size": [HEIGHT, WIDTH], "counts": "\x7f"}, "invalid character"),
    ],
)
def test_malformed_segmentation_names_the_annotation_file(tmp_path: Path, segmentation: Any, message: str) -> None:
    images_dir, annotation_file = write_dataset(tmp_path, _one_annotation(segmentation))
    dataset = CocoInstances(images_dir, annotation_file)
    with pytest.raises(DatasetError, match=message) as caught:
        dataset[1]
    assert str(annotation_file) in str(caught.value) and "annotations[0]" in str(caught.value)


def test_missing_image_file(tmp_path: Path) -> None:
    images_dir, annotation_file = write_dataset(tmp_path)
    (images_dir / "000000000007.png").unlink()
    dataset = CocoInstances(images_dir, annotation_file)
    with pytest.raises(DatasetError, match=r"000000000007\.png.*does not exist"):
        dataset[1]
    with pytest.raises(DatasetError, match=r"000000000007\.png"):
        dataset.fingerprint()


def test_unreadable_image(tmp_path: Path) -> None:
    images_dir, annotation_file = write_dataset(tmp_path)
    (images_dir / "000000000003.png").write_bytes(b"this is no png")
    with pytest.raises(DatasetError, match=r"000000000003\.png: cannot read image"):
        CocoInstances(images_dir, annotation_file)[0]


def test_image_size_differs_from_json(tmp_path: Path) -> None:
    images_dir, annotation_file = write_dataset(tmp_path)
    Image.fromarray(np.zeros((HEIGHT, WIDTH + 2, 3), dtype=np.uint8)).save(images_dir / "000000000003.png")
    with pytest.raises(DatasetError, match=r"000000000003\.png: image is 22x16 .* says 20x16"):
        CocoInstances(images_dir, annotation_file)[0]


def test_bad_json_is_reported_at_construction(tmp_path: Path) -> None:
    images_dir, annotation_file = write_dataset(tmp_path, _one_annotation([POLYGON]))
    document = json.loads(annotation_file.read_text())
    document["annotations"][0]["category_id"] = 4
    annotation_file.write_text(json.dumps(document))
    with pytest.raises(DatasetError, match=r"instances\.json: annotations\[0\]: category_id 4"):
        CocoInstances(images_dir, annotation_file)
    annotation_file.write_text("{not json")
    with pytest.raises(DatasetError, match=r"instances\.json: not valid JSON"):
        CocoInstances(images_dir, annotation_file)
    with pytest.raises(DatasetError, match=r"missing\.json: cannot read"):
        CocoInstances(images_dir, tmp_path / "missing.json")


def test_a_repeated_category_id_is_reported(tmp_path: Path) -> None:
    """Two categories with one id would make labels ambiguous; the shared COCO reader refuses them."""
    images_dir, annotation_file = write_dataset(tmp_path)
    document = json.loads(annotation_file.read_text())
    document["categories"].append(dict(document["categories"][0], name="twin"))
    annotation_file.write_text(json.dumps(document))
    duplicated = document["categories"][0]["id"]
    with pytest.raises(DatasetError, match=rf"instances\.json: category id {duplicated} appears twice in categories"):
        CocoInstances(images_dir, annotation_file)


def test_missing_pycocotools_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    images_dir, annotation_file = write_dataset(tmp_path)
    monkeypatch.setitem(sys.modules, "pycocotools", None)
    with pytest.raises(ImportError, match=r"install pytest-segrobust\[coco\]"):
        CocoInstances(images_dir, annotation_file)


def _with_categories(annotation_file: Path, count: int) -> None:
    document = json.loads(annotation_file.read_text())
    document["categories"] = [{"id": 1000 + i, "name": f"class {i}"} for i in range(count)]
    document["annotations"] = []
    annotation_file.write_text(json.dumps(document))


def test_categories_must_fit_between_the_background_and_the_ignore_index(tmp_path: Path) -> None:
    """Labels 1..254 name categories: 0 is the background, 255 the ignore index."""
    images_dir, annotation_file = write_dataset(tmp_path)
    _with_categories(annotation_file, 254)
    dataset = CocoInstances(images_dir, annotation_file)
    assert dataset.label_to_category_id[254] == 1253 and dataset.class_names[254] == "class 253"
    _with_categories(annotation_file, 255)
    with pytest.raises(DatasetError, match=r"instances\.json: 255 categories do not fit below ignore index 255$"):
        CocoInstances(images_dir, annotation_file)


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        (
            {"id": 1, "image_id": 99, "category_id": 2, "segmentation": [POLYGON]},
            r"annotations\[0\]: image_id 99 is not in images",
        ),
        ({"id": 1, "image_id": 7, "category_id": 2}, r"annotations\[0\] lacks segmentation"),
    ],
)
def test_an_annotation_without_its_fields_or_image_is_named(
    tmp_path: Path, annotation: dict[str, Any], message: str
) -> None:
    images_dir, annotation_file = write_dataset(tmp_path, [annotation])
    with pytest.raises(DatasetError, match=rf"instances\.json: {message}"):
        CocoInstances(images_dir, annotation_file)
