"""CocoPanopticSemantic and CocoPanoptic on a tiny dataset written to tmp_path: targets, bad input, evaluation."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.core.types import VOID
from pytest_segrobust.data.base import SegmentationDataset
from pytest_segrobust.data.coco_panoptic import CocoPanoptic, CocoPanopticSemantic, decode_segment_ids
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.metrics.base import MetricContext
from pytest_segrobust.metrics.panoptic_quality import PanopticQuality, thing_classes
from pytest_segrobust.models.base import PanopticPredictions
from pytest_segrobust.tasks import get_task

HEIGHT, WIDTH = 6, 8
# Ids out of order and not contiguous: labels follow the id order (person=0, cat=1, grass=2, sky=3).
CATEGORIES = [
    {"id": 184, "name": "sky-other-merged", "supercategory": "sky", "isthing": 0},
    {"id": 17, "name": "cat", "supercategory": "animal", "isthing": 1},
    {"id": 1, "name": "person", "supercategory": "person", "isthing": 1},
    {"id": 125, "name": "grass-merged", "supercategory": "plant", "isthing": 0},
]
PERSON, CAT, SKY, IGNORE = 0, 1, 3, 255
READERS = [CocoPanopticSemantic, CocoPanoptic]

# Image 7: sky on top; below it two people, a crowd of cats and an unlabeled strip.
# Segment ids use all three channels: 0x030201 needs blue, 5000 needs green.
SKY_7, PERSON_A, PERSON_B, CAT_CROWD = 5000, 0x030201, 7, 9
SEGMENTS_7 = np.zeros((HEIGHT, WIDTH), dtype=np.int64)
SEGMENTS_7[:2] = SKY_7
SEGMENTS_7[2:, 0:2] = PERSON_A
SEGMENTS_7[2:, 2:4] = PERSON_B
SEGMENTS_7[2:, 4:6] = CAT_CROWD  # columns 6..7 stay 0: void
LABELS_7 = np.full((HEIGHT, WIDTH), IGNORE, dtype=np.int64)
LABELS_7[:2] = SKY
LABELS_7[2:, 0:4] = PERSON  # both people merge into one region
LABELS_7[2:, 4:6] = CAT  # the crowd keeps its class

# Image 3: sky over a cat.
SKY_3, CAT_3 = 42, 2 * 256 * 256
SEGMENTS_3 = np.where(np.arange(HEIGHT)[:, None] < 3, SKY_3, CAT_3) * np.ones((1, WIDTH), dtype=np.int64)
LABELS_3 = np.where(np.arange(HEIGHT)[:, None] < 3, SKY, CAT) * np.ones((1, WIDTH), dtype=np.int64)


def encode_segment_ids(segment_ids: np.ndarray) -> np.ndarray:
    """The panoptic PNG colours of a segment-id map (the inverse of ``decode_segment_ids``)."""
    channels = [(segment_ids // 256**power) % 256 for power in range(3)]
    return np.stack(channels, axis=-1).astype(np.uint8)


def write_image(path: Path, image_id: int, size: tuple[int, int] = (HEIGHT, WIDTH)) -> None:
    """An RGB gradient whose blue channel is the image id."""
    pixels = np.zeros((*size, 3), dtype=np.uint8)
    pixels[..., 0] = np.arange(size[1], dtype=np.uint8)[None, :] * 10
    pixels[..., 1] = np.arange(size[0], dtype=np.uint8)[:, None] * 10
    pixels[..., 2] = image_id
    Image.fromarray(pixels).save(path)


def write_panoptic_png(path: Path, segment_ids: np.ndarray) -> None:
    Image.fromarray(encode_segment_ids(segment_ids)).save(path)


def panoptic_document() -> dict[str, Any]:
    def segment(segment_id: int, category_id: int, iscrowd: int = 0) -> dict[str, Any]:
        return {"id": segment_id, "category_id": category_id, "iscrowd": iscrowd, "area": 1, "bbox": [0, 0, 1, 1]}

    return {
        "images": [
            {"id": image_id, "file_name": f"{image_id:012d}.png", "height": HEIGHT, "width": WIDTH}
            for image_id in (7, 3)
        ],
        "annotations": [
            {
                "image_id": 7,
                "file_name": "000000000007_panoptic.png",
                "segments_info": [
                    segment(SKY_7, 184),
                    segment(PERSON_A, 1),
                    segment(PERSON_B, 1),
                    segment(CAT_CROWD, 17, iscrowd=1),
                ],
            },
            {
                "image_id": 3,
                "file_name": "000000000003_panoptic.png",
                "segments_info": [segment(SKY_3, 184), segment(CAT_3, 17)],
            },
        ],
        "categories": [dict(category) for category in CATEGORIES],  # tests edit the document
    }


def write_dataset(root: Path, document: dict[str, Any] | None = None) -> tuple[Path, Path, Path]:
    """Images 7 and 3 with their panoptic PNGs; ``document`` replaces the json."""
    images_dir, panoptic_dir = root / "images", root / "panoptic"
    images_dir.mkdir(parents=True, exist_ok=True)
    panoptic_dir.mkdir(parents=True, exist_ok=True)
    for image_id, segment_ids in ((7, SEGMENTS_7), (3, SEGMENTS_3)):
        write_image(images_dir / f"{image_id:012d}.png", image_id)
        write_panoptic_png(panoptic_dir / f"{image_id:012d}_panoptic.png", segment_ids)
    annotation_file = root / "panoptic_val.json"
    annotation_file.write_text(json.dumps(document if document is not None else panoptic_document()))
    return images_dir, annotation_file, panoptic_dir


def test_samples_hold_semantic_maps_of_merged_segments(tmp_path: Path) -> None:
    images_dir, annotation_file, panoptic_dir = write_dataset(tmp_path)
    dataset = CocoPanopticSemantic(images_dir, annotation_file, panoptic_dir)
    assert isinstance(dataset, SegmentationDataset)
    assert dataset.name == "panoptic_val" and dataset.ignore_index == IGNORE and len(dataset) == 2
    assert dataset.image_ids == (3, 7)  # id order, not json order
    assert [sample.sample_id for sample in (dataset[0], dataset[1])] == ["000000000003.png", "000000000007.png"]

    sample = dataset[1]
    assert sample.image.dtype == torch.uint8 and sample.image.shape == (3, HEIGHT, WIDTH)
    assert sample.image[0, 0].tolist() == [10 * x for x in range(WIDTH)]
    assert bool((sample.image[2] == 7).all())
    assert sample.target.mask.dtype == torch.int64
    assert np.array_equal(sample.target.mask.numpy(), LABELS_7)
    assert sample.instances is None
    assert np.array_equal(dataset[0].target.mask.numpy(), LABELS_3)
    assert np.array_equal(dataset[-1].target.mask.numpy(), LABELS_7)
    with pytest.raises(IndexError, match="out of range for panoptic_val of size 2"):
        dataset[2]


def test_class_names_follow_categories_in_id_order(tmp_path: Path) -> None:
    dataset = CocoPanopticSemantic(*write_dataset(tmp_path))
    assert dataset.class_names == ("person", "cat", "grass-merged", "sky-other-merged")
    assert [category["id"] for category in dataset.categories] == [1, 17, 125, 184]
    assert all(name == category["name"] for name, category in zip(dataset.class_names, dataset.categories))
    assert [(c["supercategory"], c["isthing"]) for c in dataset.categories] == [
        ("person", 1),
        ("animal", 1),
        ("plant", 0),
        ("sky", 0),
    ]
    assert dataset.label_to_category_id == {0: 1, 1: 17, 2: 125, 3: 184}


def test_decode_segment_ids_reads_all_three_channels() -> None:
    segment_ids = np.array([[0, 1, 255, 256], [5000, 0x030201, 16_777_215, 65536]], dtype=np.int64)
    assert np.array_equal(decode_segment_ids(encode_segment_ids(segment_ids)), segment_ids)
    assert decode_segment_ids(np.array([[[1, 2, 3]]], dtype=np.uint8)).tolist() == [[1 + 2 * 256 + 3 * 65536]]


def test_limit_and_name(tmp_path: Path) -> None:
    images_dir, annotation_file, panoptic_dir = write_dataset(tmp_path)
    limited = CocoPanopticSemantic(images_dir, annotation_file, panoptic_dir, name="tiny", limit=1)
    assert limited.name == "tiny" and len(limited) == 1 and limited.image_ids == (3,)
    assert limited[0].sample_id == "000000000003.png"
    assert len(CocoPanopticSemantic(images_dir, annotation_file, panoptic_dir, limit=0)) == 0
    assert len(CocoPanopticSemantic(images_dir, annotation_file, panoptic_dir, limit=5)) == 2


def test_fingerprint_follows_json_and_files(tmp_path: Path) -> None:
    images_dir, annotation_file, panoptic_dir = write_dataset(tmp_path)

    def fingerprint(limit: int | None = None) -> str:
        return CocoPanopticSemantic(images_dir, annotation_file, panoptic_dir, limit=limit).fingerprint()

    before = fingerprint()
    assert fingerprint() == before
    assert fingerprint(limit=1) != before
    document = panoptic_document()
    document["annotations"][0]["segments_info"][3]["iscrowd"] = 0
    annotation_file.write_text(json.dumps(document))
    changed_json = fingerprint()
    assert changed_json != before
    write_panoptic_png(panoptic_dir / "000000000007_panoptic.png", np.zeros((HEIGHT, WIDTH), dtype=np.int64))
    assert fingerprint() != changed_json  # the PNG compresses to another size
    (panoptic_dir / "000000000003_panoptic.png").unlink()
    with pytest.raises(DatasetError, match=r"000000000003_panoptic\.png: panoptic PNG listed in .*panoptic_val\.json"):
        fingerprint()


class TruthForImageSeven:
    """Predicts the ground truth of image 7 (void as person) and sky everywhere on any other image.

    Images are told apart by their blue channel, which :func:`write_image` sets to the image id.
    """

    device = torch.device("cpu")

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        image_seven = torch.from_numpy(np.where(LABELS_7 == IGNORE, PERSON, LABELS_7))
        predictions = [
            image_seven if round(float(image[2, 0, 0]) * 255) == 7 else torch.full((HEIGHT, WIDTH), SKY)
            for image in images
        ]
        return torch.stack(predictions).long()

    def fingerprint(self) -> str:
        return "truth-for-image-seven"


@pytest.mark.parametrize("batch_size", [1, 2])
def test_evaluate_end_to_end(tmp_path: Path, batch_size: int) -> None:
    dataset = CocoPanopticSemantic(*write_dataset(tmp_path))
    result = evaluate(TruthForImageSeven(), dataset, settings=EvalSettings.of(batch_size=batch_size))
    # Image 7 is exact (void is not scored); image 3's 24 cat pixels are predicted sky.
    # person 16/16, cat 8/(8 + 24), sky 40/(40 + 24); grass never occurs.
    assert result.num_images == 2
    assert result.per_class[0] == pytest.approx(100.0)
    assert result.per_class[1] == pytest.approx(25.0)
    assert result.per_class[2] is None
    assert result.per_class[3] == pytest.approx(62.5)
    assert result.score == pytest.approx((100.0 + 25.0 + 62.5) / 3)
    assert not math.isnan(result.score)


def _edit(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    document = panoptic_document()
    edit(document)
    return document


def _drop(entry: dict[str, Any], key: str) -> None:
    del entry[key]


JSON_ERRORS = {
    "missing segments_info": (
        lambda d: _drop(d["annotations"][1], "segments_info"),
        r"panoptic_val\.json: annotations\[1\] lacks segments_info",
    ),
    "missing panoptic file_name": (
        lambda d: _drop(d["annotations"][0], "file_name"),
        r"panoptic_val\.json: annotations\[0\] lacks file_name",
    ),
    "missing image height": (
        lambda d: _drop(d["images"][1], "height"),
        r"panoptic_val\.json: images\[1\] lacks height",
    ),
    "missing category name": (
        lambda d: _drop(d["categories"][2], "name"),
        r"panoptic_val\.json: categories\[2\] lacks name",
    ),
    "missing segment category": (
        lambda d: _drop(d["annotations"][0]["segments_info"][2], "category_id"),
        r"panoptic_val\.json: annotations\[0\]\.segments_info\[2\] lacks category_id",
    ),
    "segments_info not a list": (
        lambda d: d["annotations"][0].update(segments_info={"id": 1}),
        r"panoptic_val\.json: annotations\[0\]\.segments_info must be a list of objects",
    ),
    "categories not a list": (
        lambda d: d.update(categories=None),
        r"panoptic_val\.json: field 'categories' must be a list of objects",
    ),
    "image without annotation": (
        lambda d: d["annotations"].pop(1),
        r"panoptic_val\.json: image 3 \(000000000003\.png\) has no panoptic annotation",
    ),
    "annotation of unknown image": (
        lambda d: d["annotations"][1].update(image_id=99),
        r"panoptic_val\.json: annotations\[1\]: image_id 99 is not in images",
    ),
    "image annotated twice": (
        lambda d: d["annotations"].append(dict(d["annotations"][0])),
        r"panoptic_val\.json: annotations\[2\]: image 7 is already annotated by annotations\[0\]",
    ),
    "unknown category": (
        lambda d: d["annotations"][0]["segments_info"][1].update(category_id=999),
        r"panoptic_val\.json: annotations\[0\]\.segments_info\[1\]: category_id 999 is not in categories",
    ),
    "duplicate segment id": (
        lambda d: d["annotations"][0]["segments_info"][2].update(id=PERSON_A),
        rf"panoptic_val\.json: annotations\[0\]\.segments_info\[2\]: segment id {PERSON_A} appears twice",
    ),
    "void segment id": (
        lambda d: d["annotations"][1]["segments_info"][0].update(id=0),
        r"panoptic_val\.json: annotations\[1\]\.segments_info\[0\]: segment id 0 is not an integer in 1\.\.16777215",
    ),
    "duplicate image id": (
        lambda d: d["images"][1].update(id=7),
        r"panoptic_val\.json: image id 7 appears twice in images",
    ),
    "duplicate category id": (
        lambda d: d["categories"][3].update(id=17),
        r"panoptic_val\.json: category id 17 appears twice in categories",
    ),
    "iscrowd not 0 or 1": (
        lambda d: d["annotations"][1]["segments_info"][1].update(iscrowd=2),
        r"panoptic_val\.json: annotations\[1\]\.segments_info\[1\]: iscrowd 2 is not 0 or 1",
    ),
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("edit, message", JSON_ERRORS.values(), ids=JSON_ERRORS.keys())
def test_json_errors_name_file_and_entry(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None], message: str, reader: type[CocoPanopticSemantic]
) -> None:
    with pytest.raises(DatasetError, match=message):
        reader(*write_dataset(tmp_path, _edit(edit)))


def test_unreadable_or_invalid_json(tmp_path: Path) -> None:
    images_dir, annotation_file, panoptic_dir = write_dataset(tmp_path)
    with pytest.raises(DatasetError, match=r"missing\.json: cannot read the annotation file"):
        CocoPanopticSemantic(images_dir, tmp_path / "missing.json", panoptic_dir)
    annotation_file.write_text("{not json")
    with pytest.raises(DatasetError, match=r"panoptic_val\.json: not valid JSON"):
        CocoPanopticSemantic(images_dir, annotation_file, panoptic_dir)
    annotation_file.write_text("[]")
    with pytest.raises(DatasetError, match=r"panoptic_val\.json: expected a JSON object"):
        CocoPanopticSemantic(images_dir, annotation_file, panoptic_dir)


def test_missing_image_and_png_files(tmp_path: Path) -> None:
    images_dir, annotation_file, panoptic_dir = write_dataset(tmp_path)
    dataset = CocoPanopticSemantic(images_dir, annotation_file, panoptic_dir)
    (images_dir / "000000000003.png").unlink()
    with pytest.raises(DatasetError, match=r"000000000003\.png: image file listed in .*panoptic_val\.json does not"):
        dataset[0]
    (panoptic_dir / "000000000007_panoptic.png").unlink()
    with pytest.raises(
        DatasetError,
        match=r"000000000007_panoptic\.png: panoptic PNG of image 000000000007\.png \(annotations\[0\] in "
        r".*panoptic_val\.json\) does not exist",
    ):
        dataset[1]


def test_image_size_differs_from_json(tmp_path: Path) -> None:
    images_dir, annotation_file, panoptic_dir = write_dataset(tmp_path)
    write_image(images_dir / "000000000007.png", 7, size=(HEIGHT, WIDTH + 1))
    dataset = CocoPanopticSemantic(images_dir, annotation_file, panoptic_dir)
    with pytest.raises(DatasetError, match=r"000000000007\.png: image is 9x6 \(width x height\) but .*json says 8x6"):
        dataset[1]


def test_png_size_differs_from_image(tmp_path: Path) -> None:
    images_dir, annotation_file, panoptic_dir = write_dataset(tmp_path)
    write_panoptic_png(panoptic_dir / "000000000003_panoptic.png", SEGMENTS_3[:-1])
    dataset = CocoPanopticSemantic(images_dir, annotation_file, panoptic_dir)
    with pytest.raises(
        DatasetError,
        match=r"000000000003_panoptic\.png: panoptic PNG is 8x5 \(width x height\) but its image "
        r"000000000003\.png is 8x6",
    ):
        dataset[0]


@pytest.mark.parametrize("reader", READERS)
def test_png_segment_missing_from_segments_info(tmp_path: Path, reader: type[CocoPanopticSemantic]) -> None:
    images_dir, annotation_file, panoptic_dir = write_dataset(tmp_path)
    segment_ids = SEGMENTS_7.copy()
    segment_ids[0, :7] = [11, 12, 13, 14, 15, 16, 70000]  # seven ids the json does not know
    write_panoptic_png(panoptic_dir / "000000000007_panoptic.png", segment_ids)
    dataset = reader(images_dir, annotation_file, panoptic_dir)
    with pytest.raises(
        DatasetError,
        match=r"000000000007_panoptic\.png: segment ids 11, 12, 13, 14, 15 and 2 more are not in the "
        r"segments_info of annotations\[0\] in .*panoptic_val\.json",
    ):
        dataset[1]
    assert np.array_equal(dataset[0].target.mask.numpy(), LABELS_3)  # one bad PNG spoils only its sample


def test_png_that_is_not_rgb(tmp_path: Path) -> None:
    images_dir, annotation_file, panoptic_dir = write_dataset(tmp_path)
    Image.fromarray(np.zeros((HEIGHT, WIDTH), dtype=np.uint8)).save(panoptic_dir / "000000000003_panoptic.png")
    dataset = CocoPanopticSemantic(images_dir, annotation_file, panoptic_dir)
    with pytest.raises(DatasetError, match=r"000000000003_panoptic\.png: panoptic PNG has mode L; expected RGB"):
        dataset[0]


# CocoPanoptic: the same files read as segments.


def test_panoptic_samples_hold_segments_labels_crowd_and_void(tmp_path: Path) -> None:
    dataset = CocoPanoptic(*write_dataset(tmp_path))
    assert isinstance(dataset, SegmentationDataset) and len(dataset) == 2
    sample = dataset[1]  # image 7
    target = sample.panoptic
    assert target is not None and sample.instances is None
    assert target.segments.dtype == torch.int64 and np.array_equal(target.segments.numpy(), SEGMENTS_7)
    assert bool((target.segments[2:, 6:] == VOID).all())  # unlabeled pixels are void
    assert target.ids.tolist() == [PERSON_B, CAT_CROWD, SKY_7, PERSON_A]  # id order
    assert target.labels.tolist() == [PERSON, CAT, SKY, PERSON]
    assert target.iscrowd.tolist() == [False, True, False, False]
    assert np.array_equal(sample.target.mask.numpy(), LABELS_7)  # the semantic target is still there

    other = dataset[0]  # image 3
    assert other.panoptic is not None and np.array_equal(other.panoptic.segments.numpy(), SEGMENTS_3)
    assert other.panoptic.ids.tolist() == [SKY_3, CAT_3] and other.panoptic.labels.tolist() == [SKY, CAT]
    assert not other.panoptic.iscrowd.any()


def test_panoptic_reader_shares_images_classes_and_fingerprint_with_the_semantic_one(tmp_path: Path) -> None:
    files = write_dataset(tmp_path)
    panoptic, semantic = CocoPanoptic(*files, limit=1), CocoPanopticSemantic(*files, limit=1)
    assert panoptic.class_names == semantic.class_names and panoptic.categories == semantic.categories
    assert panoptic.image_ids == semantic.image_ids == (3,)
    assert panoptic.fingerprint() == semantic.fingerprint()
    assert torch.equal(panoptic[0].image, semantic[0].image)
    assert torch.equal(panoptic[0].target.mask, semantic[0].target.mask) and semantic[0].panoptic is None
    # Panoptic quality sees label k as class_names[k], a thing or stuff by its category's isthing.
    assert thing_classes(MetricContext.of(panoptic, torch.device("cpu"))) == (True, True, False, False)


def test_missing_iscrowd_is_not_crowd_and_segments_without_pixels_stay_listed(tmp_path: Path) -> None:
    document = panoptic_document()
    del document["annotations"][0]["segments_info"][3]["iscrowd"]  # the cat crowd
    document["annotations"][1]["segments_info"].append({"id": 77, "category_id": 125})  # grass, no pixel
    target = CocoPanoptic(*write_dataset(tmp_path, document))[0].panoptic
    assert target is not None
    assert target.ids.tolist() == [42, 77, CAT_3] and target.labels.tolist() == [SKY, 2, CAT]
    assert not target.iscrowd.any()
    assert target.present().ids.tolist() == [42, CAT_3]
    crowd = CocoPanoptic(*write_dataset(tmp_path / "again", document))[1].panoptic
    assert crowd is not None and not crowd.iscrowd.any()


def test_ground_truth_as_prediction_scores_pq_100(tmp_path: Path) -> None:
    dataset = CocoPanoptic(*write_dataset(tmp_path))
    task = get_task("panoptic")
    cpu = torch.device("cpu")
    metric = PanopticQuality(MetricContext.of(dataset, cpu))
    samples = [dataset[0], dataset[1]]
    batch = task.collate(samples, [0, 1], dataset, cpu)
    targets = [s.panoptic for s in samples if s.panoptic is not None]
    # The crowd of cats is predicted as one cat: it lies on a crowd of its own class, so it is no FP.
    truth = [PanopticPredictions(t.segments, t.ids, t.labels) for t in targets]
    metric.update(task.check_predictions(truth, batch), batch)
    result = metric.compute()
    assert result.score == pytest.approx(100.0)
    assert result.per_class == pytest.approx((100.0, 100.0, None, 100.0))  # no grass anywhere
    assert result.details["pq_things"] == pytest.approx(100.0) and result.details["pq_stuff"] == pytest.approx(100.0)


def test_categories_must_fit_below_the_ignore_index(tmp_path: Path) -> None:
    """Labels 0..254 name categories (panoptic has no background class); 255 is the ignore index."""
    extra = [{"id": 1000 + i, "name": f"class {i}", "isthing": 0} for i in range(255 - len(CATEGORIES))]
    images_dir, annotation_file, panoptic_dir = write_dataset(tmp_path, _edit(lambda d: d["categories"].extend(extra)))
    dataset = CocoPanoptic(images_dir, annotation_file, panoptic_dir)
    assert dataset.label_to_category_id[254] == extra[-1]["id"] and dataset.class_names[254] == extra[-1]["name"]
    one_more = {"id": 5000, "name": "one more", "isthing": 0}
    write_dataset(tmp_path, _edit(lambda d: d["categories"].extend([*extra, one_more])))
    with pytest.raises(DatasetError, match=r"panoptic_val\.json: 256 categories do not fit below ignore index 255$"):
        CocoPanoptic(images_dir, annotation_file, panoptic_dir)
