"""Referring datasets on tiny files written to tmp_path: RefCOCO layout (pickle and JSON refs), JSON lines."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

mask_utils = pytest.importorskip("pycocotools.mask")

from pytest_segrobust.cli import main
from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import SegmentationDataset
from pytest_segrobust.data.referring import RefCoco, ReferringJsonl, load_refs

HEIGHT, WIDTH = 12, 16


def _rle(mask: np.ndarray) -> dict[str, Any]:
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode("ascii")}


def _box(y0: int, y1: int, x0: int, x1: int, height: int = HEIGHT, width: int = WIDTH) -> np.ndarray:
    mask = np.zeros((height, width), dtype=bool)
    mask[y0:y1, x0:x1] = True
    return mask


def _write_image(path: Path, value: int, height: int = HEIGHT, width: int = WIDTH) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((height, width, 3), value, dtype=np.uint8)).save(path)


def _refs() -> list[dict[str, Any]]:
    def ref(ref_id: int, ann_id: int, image_id: int, split: str, texts: list[str]) -> dict[str, Any]:
        sentences = [
            {"sent_id": 10 * ref_id + k, "raw": text, "sent": text.lower(), "tokens": text.split()}
            for k, text in enumerate(texts)
        ]
        return {
            "ref_id": ref_id, "ann_id": ann_id, "image_id": image_id, "split": split, "sentences": sentences,
            "sent_ids": [s["sent_id"] for s in sentences], "category_id": 1, "file_name": f"x_{ref_id}.jpg",
        }  # fmt: skip

    # Out of ref id order on purpose: samples follow ref ids.
    return [
        ref(7, 101, 1, "testA", ["The left box", "box on the left"]),
        ref(3, 102, 1, "testA", ["right box"]),
        ref(5, 103, 2, "val", ["the polygon"]),
        ref(9, 101, 1, "train", ["train only"]),
    ]


@pytest.fixture
def refcoco(tmp_path: Path) -> Path:
    """``refcoco/refs(unc).p`` + ``instances.json`` + ``images/``: RLE, uncompressed RLE and a polygon."""
    root = tmp_path / "refcoco"
    _write_image(root / "images" / "a.png", 10)
    _write_image(root / "images" / "b.png", 200)
    instances = {
        "images": [
            {"id": 1, "file_name": "a.png", "height": HEIGHT, "width": WIDTH},
            {"id": 2, "file_name": "b.png", "height": HEIGHT, "width": WIDTH},
        ],
        "annotations": [
            {"id": 101, "image_id": 1, "category_id": 1, "segmentation": _rle(_box(0, 12, 0, 8))},
            {"id": 102, "image_id": 1, "category_id": 1, "segmentation": _rle(_box(2, 6, 10, 16))},
            {"id": 103, "image_id": 2, "category_id": 1, "segmentation": [[2, 2, 10, 2, 10, 8, 2, 8]]},
        ],
        "categories": [{"id": 1, "name": "box"}],
    }
    (root / "instances.json").write_text(json.dumps(instances))
    (root / "refs(unc).p").write_bytes(pickle.dumps(_refs(), protocol=2))
    return root


def _refcoco(root: Path, split: str = "testA", refs: str = "refs(unc).p", **kwargs: Any) -> RefCoco:
    return RefCoco(root / refs, root / "instances.json", root / "images", split=split, **kwargs)


def test_refcoco_gives_one_sample_per_expression_with_stable_ids(refcoco: Path) -> None:
    dataset = _refcoco(refcoco)
    assert isinstance(dataset, SegmentationDataset)
    assert dataset.name == "refcoco-testA"
    assert dataset.sample_ids == ("1/3/30", "1/7/70", "1/7/71")
    first = dataset[0]
    assert first.sample_id == "1/3/30" and first.referring is not None and first.target is None
    assert first.referring.expression == "right box"  # the raw text
    assert first.image.shape == (3, HEIGHT, WIDTH) and first.image.dtype == torch.uint8
    assert torch.equal(first.referring.mask, torch.from_numpy(_box(2, 6, 10, 16)))
    assert dataset[1].referring.expression == "The left box"
    assert torch.equal(dataset[2].referring.mask, dataset[1].referring.mask)
    assert len(_refcoco(refcoco, limit=2)) == 2


def test_refcoco_polygons_and_splits(refcoco: Path) -> None:
    val = _refcoco(refcoco, split="val")
    assert val.sample_ids == ("2/5/50",)
    mask = val[0].referring.mask
    assert mask.dtype == torch.bool and 40 <= int(mask.sum()) <= 80  # the 8x6 polygon, rasterised
    assert _refcoco(refcoco, split="train").sample_ids == ("1/9/90",)


def test_an_unknown_split_names_the_file_and_the_splits(refcoco: Path) -> None:
    with pytest.raises(DatasetError, match=r"refs\(unc\).p: split 'test' is not one of its splits \(train, val, testA, testB\)"):
        _refcoco(refcoco, split="test")


def test_the_json_conversion_reads_the_same(refcoco: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = refcoco / "refs(unc).json"
    assert main(["convert-refs", str(refcoco / "refs(unc).p"), str(target)]) == 0
    assert f"wrote {target}: 4 refs" in capsys.readouterr().out
    assert json.loads(target.read_text()) == _refs()
    from_json, from_pickle = _refcoco(refcoco, refs="refs(unc).json"), _refcoco(refcoco)
    assert from_json.sample_ids == from_pickle.sample_ids
    assert all(torch.equal(a.referring.mask, b.referring.mask) for a, b in zip(from_json, from_pickle))


class _RunsACommand:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_run_code_is_refused_without_running_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "ran"
    hostile = tmp_path / "refs(unc).p"
    hostile.write_bytes(pickle.dumps([{"ref_id": 1, "payload": _RunsACommand(marker)}], protocol=2))
    with pytest.raises(DatasetError, match=r"refs\(unc\).p: the pickle asks for (posix|nt|os)\.system; .* refused"):
        load_refs(hostile)
    assert main(["convert-refs", str(hostile), str(tmp_path / "out.json")]) == 2
    assert "asks for" in capsys.readouterr().err
    assert not marker.exists() and not (tmp_path / "out.json").exists()


def test_any_class_is_refused_even_a_harmless_one(tmp_path: Path) -> None:
    path = tmp_path / "refs.p"
    path.write_bytes(pickle.dumps([{"ids": {1, 2}}], protocol=2))  # a set needs builtins.set
    with pytest.raises(DatasetError, match=r"asks for (__builtin__|builtins)\.set"):
        load_refs(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a pickle", "not a readable pickle of refs"),
        (pickle.dumps({"a": 1}, protocol=2), "expected a list of refs"),
    ],
)
def test_unreadable_refs_files_are_named(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "refs(umd).p"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=message):
        load_refs(path)


def test_a_missing_refs_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"nowhere.p: cannot read the refs file"):
        load_refs(tmp_path / "nowhere.p")


def _rewrite_refs(root: Path, change: Any) -> None:
    refs = _refs()
    change(refs)
    (root / "refs(unc).p").write_bytes(pickle.dumps(refs, protocol=2))


def test_an_ann_id_missing_from_the_instances_is_named(refcoco: Path) -> None:
    _rewrite_refs(refcoco, lambda refs: refs[1].update(ann_id=999))
    with pytest.raises(DatasetError, match=r"refs\[1\] \(ref_id 3\): ann_id 999 is not in the annotations of .*instances.json"):
        _refcoco(refcoco)


def test_an_empty_expression_is_named(refcoco: Path) -> None:
    _rewrite_refs(refcoco, lambda refs: refs[0]["sentences"][1].update(raw="  "))
    with pytest.raises(DatasetError, match=r"refs\[0\] \(ref_id 7\)\.sentences\[1\]: expected a non-empty expression"):
        _refcoco(refcoco)


def test_a_ref_without_a_field_is_named(refcoco: Path) -> None:
    _rewrite_refs(refcoco, lambda refs: refs[2].pop("sentences"))
    with pytest.raises(DatasetError, match=r"refs\[2\] lacks sentences"):
        _refcoco(refcoco, split="val")


def test_a_mask_of_another_size_than_the_image_is_named(refcoco: Path) -> None:
    instances = json.loads((refcoco / "instances.json").read_text())
    instances["annotations"][1]["segmentation"] = _rle(_box(0, 2, 0, 2, height=HEIGHT + 1))
    (refcoco / "instances.json").write_text(json.dumps(instances))
    dataset = _refcoco(refcoco)
    with pytest.raises(DatasetError, match=r"annotations\[1\] \(id 102, refs\[1\] .*: RLE size \[13, 16\] differs"):
        dataset[0]


def test_a_missing_image_is_named(refcoco: Path) -> None:
    (refcoco / "images" / "a.png").unlink()
    dataset = _refcoco(refcoco)
    with pytest.raises(DatasetError, match=r"a.png: image file of .* does not exist"):
        dataset[0]
    with pytest.raises(DatasetError, match=r"a.png: image listed in"):
        dataset.fingerprint()


def test_the_fingerprint_follows_the_refs(refcoco: Path) -> None:
    before = _refcoco(refcoco).fingerprint()
    assert before == _refcoco(refcoco).fingerprint()
    _rewrite_refs(refcoco, lambda refs: refs[1]["sentences"][0].update(raw="the right box"))
    assert _refcoco(refcoco).fingerprint() != before


@pytest.fixture
def jsonl(tmp_path: Path) -> Path:
    _write_image(tmp_path / "scenes" / "a.png", 10)
    _write_image(tmp_path / "scenes" / "b.png", 90)
    lines = [
        {"image": "scenes/a.png", "mask": _rle(_box(0, 6, 0, 16)), "expressions": ["the top", "upper half"]},
        {"image": "scenes/a.png", "mask": [[0, 6, 16, 6, 16, 12, 0, 12]], "expressions": ["the bottom"]},
        {"image": "scenes/b.png", "ref": "sky", "mask": _rle(_box(0, 0, 0, 0)), "expressions": ["nothing here"]},
    ]
    path = tmp_path / "refs.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    return path


def test_jsonl_gives_one_sample_per_expression(jsonl: Path) -> None:
    dataset = ReferringJsonl(jsonl)
    assert dataset.name == "refs"
    assert dataset.sample_ids == ("scenes/a.png/0/0", "scenes/a.png/0/1", "scenes/a.png/1/0", "scenes/b.png/sky/0")
    top, bottom, empty = dataset[0], dataset[2], dataset[3]
    assert top.referring.expression == "the top"
    assert torch.equal(top.referring.mask, torch.from_numpy(_box(0, 6, 0, 16)))
    assert int(bottom.referring.mask[7:].sum()) > 0 and not bool(bottom.referring.mask[:5].any())
    assert not bool(empty.referring.mask.any())
    assert dataset.fingerprint() == ReferringJsonl(jsonl).fingerprint()


def _jsonl_with(tmp_path: Path, line: Any) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"image": "a.png", "mask": [[0, 0, 1, 0, 1, 1]], "expressions": ["x"]}) + "\n" + line + "\n")
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{nope", "line 2: not valid JSON"),
        ("[1]", "line 2: expected a JSON object"),
        (json.dumps({"image": "a.png", "mask": []}), "line 2: lacks expressions"),
        (json.dumps({"image": "a.png", "mask": [], "expressions": []}), "line 2: field 'expressions' must be a non-empty list"),
        (json.dumps({"image": "a.png", "mask": [], "expressions": ["ok", ""]}), r"line 2: expressions\[1\] must be a non-empty string"),
        (json.dumps({"image": "a.png", "mask": 3, "expressions": ["x"]}), "line 2: field 'mask' must be"),
        (json.dumps({"image": "a.png", "ref": "0", "mask": [], "expressions": ["x"]}), "line 2: field 'ref' '0' must be unique"),
    ],
)
def test_bad_jsonl_lines_name_the_file_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(DatasetError, match=message) as raised:
        ReferringJsonl(_jsonl_with(tmp_path, line))
    assert "bad.jsonl: line 2" in str(raised.value)


def test_a_jsonl_mask_of_another_size_is_named(jsonl: Path, tmp_path: Path) -> None:
    path = tmp_path / "wrong.jsonl"
    path.write_text(json.dumps({"image": "scenes/a.png", "mask": _rle(_box(0, 1, 0, 1, width=WIDTH + 2)), "expressions": ["x"]}))
    with pytest.raises(DatasetError, match=r"wrong.jsonl: line 1: RLE size \[12, 18\] differs from the image's"):
        ReferringJsonl(path)[0]


def test_a_missing_jsonl_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"missing.jsonl: cannot read the annotation file"):
        ReferringJsonl(tmp_path / "missing.jsonl")
