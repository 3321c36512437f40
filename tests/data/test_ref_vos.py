"""Ref-YouTube-VOS and Ref-DAVIS17 readers on small generated copies of their layouts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import check_dataset
from pytest_segrobust.data.clips import ClipExpression
from pytest_segrobust.data.ref_vos import ref_davis17, ref_youtube_vos
from pytest_segrobust.data.referring import REFERRING_CLASS_NAMES
from tests.data.vos_layouts import meta_object, moving_objects, write_davis, write_json, write_youtube_clip

A1 = moving_objects(5, {1: 0, 2: 2})
B2 = moving_objects(4, {1: 0})


def _expressions() -> dict[str, Any]:
    return {
        "videos": {
            "a1": {
                "expressions": {
                    "10": {"exp": "the person again", "obj_id": "1"},
                    "0": {"exp": " a person walking ", "obj_id": "1"},
                    "1": {"exp": "a cat jumping in", "obj_id": "2"},
                    "2": {"exp": "the cat", "obj_id": 2},
                },
                "frames": ["00020", "00000", "00010", "00005", "00015"],
            },
            "b2": {
                "expressions": {"0": {"exp": "a dog", "obj_id": "1"}},
                "frames": ["00000", "00005", "00010", "00015"],
            },
        }
    }


def _ref_youtube(root: Path, with_meta: bool) -> Path:
    write_youtube_clip(root / "valid", "a1", 0, A1)
    write_youtube_clip(root / "valid", "b2", 1, B2)
    write_json(root / "meta_expressions" / "valid" / "meta_expressions.json", _expressions())
    if with_meta:
        objects = {"1": meta_object("person", ["00000"]), "2": meta_object("cat", ["00010"])}
        write_json(
            root / "valid" / "meta.json",
            {"videos": {"a1": {"objects": objects}, "b2": {"objects": {"1": meta_object("dog", ["00000"])}}}},
        )
    return root


@pytest.fixture(scope="module")
def ref_youtube_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _ref_youtube(tmp_path_factory.mktemp("ref-ytvos"), with_meta=False)


def test_ref_youtube_vos_one_sample_per_expression(ref_youtube_root: Path) -> None:
    dataset = check_dataset(ref_youtube_vos(ref_youtube_root))
    assert dataset.class_names == REFERRING_CLASS_NAMES
    assert dataset.sample_ids == ("a1/0", "a1/1", "a1/2", "a1/10", "b2/0")
    sample = dataset[1]
    assert sample.sample_id == "a1/1"
    assert sample.field("expression") == ClipExpression("a cat jumping in", 2)
    assert dataset[0].field("expression").text == "a person walking"
    assert sample.field("video").names == ("00000", "00005", "00010", "00015", "00020")
    objects = sample.field("objects")
    assert objects.object_ids == (1, 2) and objects.first_frames == (0, 2)  # without meta.json: from the masks
    assert objects.annotated.all()
    assert torch.equal(objects.masks[3], torch.from_numpy(A1[3]).long())
    assert dataset[4].field("expression") == ClipExpression("a dog", 1)


def test_ref_youtube_vos_objects_from_meta_json(tmp_path: Path) -> None:
    root = _ref_youtube(tmp_path, with_meta=True)
    objects = ref_youtube_vos(root)[2].field("objects")
    assert objects.object_ids == (1, 2) and objects.first_frames == (0, 2)
    expressions = _expressions()
    expressions["videos"]["a1"]["expressions"]["2"]["obj_id"] = "5"
    write_json(root / "meta_expressions" / "valid" / "meta_expressions.json", expressions)
    with pytest.raises(
        DatasetError,
        match=r"meta_expressions\.json: field videos\['a1'\]\.expressions\['2'\]\.obj_id names object 5, which video a1 lacks in .*valid/meta\.json \(objects: 1, 2\)",
    ):
        ref_youtube_vos(root)


def test_ref_youtube_vos_an_expression_naming_an_object_the_clip_lacks(tmp_path: Path) -> None:
    root = _ref_youtube(tmp_path, with_meta=False)
    expressions = _expressions()
    expressions["videos"]["b2"]["expressions"]["0"]["obj_id"] = "4"
    write_json(root / "meta_expressions" / "valid" / "meta_expressions.json", expressions)
    dataset = ref_youtube_vos(root)
    with pytest.raises(
        DatasetError,
        match=r"meta_expressions\.json: field videos\['b2'\]\.expressions\['0'\]: the expression names object 4, which clip b2 lacks \(objects on the frames read: 1\)",
    ):
        dataset[4]
    with pytest.raises(DatasetError, match=r"expressions\['1'\]: the expression names object 2, which clip a1 lacks"):
        ref_youtube_vos(root, max_frames=2)[1]  # the cat enters at the third frame


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda doc: doc.pop("videos"), r"field \(top level\) lacks 'videos'"),
        (
            lambda doc: doc["videos"]["a1"]["expressions"]["0"].pop("exp"),
            r"field videos\['a1'\]\.expressions\['0'\] lacks 'exp'",
        ),
        (lambda doc: doc["videos"]["a1"]["expressions"]["0"].pop("obj_id"), r"expressions\['0'\] lacks 'obj_id'"),
        (
            lambda doc: doc["videos"]["a1"]["expressions"]["0"].update(exp="  "),
            r"expressions\['0'\]\.exp must be a non-empty",
        ),
        (
            lambda doc: doc["videos"]["a1"]["expressions"]["0"].update(obj_id="one"),
            r"expressions\['0'\]\.obj_id must be an object id",
        ),
        (lambda doc: doc["videos"]["a1"].pop("frames"), r"field videos\['a1'\] lacks 'frames'"),
        (lambda doc: doc["videos"]["a1"].update(frames=[]), r"field videos\['a1'\]\.frames must be a non-empty list"),
        (lambda doc: doc["videos"]["a1"].pop("expressions"), r"field videos\['a1'\] lacks 'expressions'"),
        (
            lambda doc: doc["videos"].update(zz={"expressions": {}, "frames": ["00000"]}),
            r"JPEGImages/zz: frames folder of video zz",
        ),
    ],
)
def test_ref_youtube_vos_expressions_file_fields(tmp_path: Path, change: Any, message: str) -> None:
    root = _ref_youtube(tmp_path, with_meta=False)
    expressions = _expressions()
    change(expressions)
    write_json(root / "meta_expressions" / "valid" / "meta_expressions.json", expressions)
    with pytest.raises(DatasetError, match=message):
        ref_youtube_vos(root)


def test_ref_youtube_vos_missing_files(tmp_path: Path) -> None:
    root = _ref_youtube(tmp_path, with_meta=False)
    (root / "valid" / "JPEGImages" / "a1" / "00005.jpg").unlink()
    with pytest.raises(
        DatasetError,
        match=r"a1/00005\.jpg: frame 00005 of video a1 does not exist \(listed in .*meta_expressions\.json, field videos\['a1'\]\.frames\)",
    ):
        ref_youtube_vos(root)[0]
    (root / "meta_expressions" / "valid" / "meta_expressions.json").unlink()
    with pytest.raises(DatasetError, match=r"meta_expressions\.json: cannot read the expressions file"):
        ref_youtube_vos(root)
    with pytest.raises(DatasetError, match=r"test/JPEGImages: Ref-YouTube-VOS frames folder does not exist"):
        ref_youtube_vos(root, split="test")


BEAR = moving_objects(6, {1: 0, 2: 0, 3: 3})
CAR = moving_objects(5, {1: 0})
DOG = moving_objects(5, {1: 0})
TEXT_FILES = {
    "Davis17_annot1.txt": (
        'bear 2 "the small bear"\nbear 1 "a brown bear"\nclasic-car 1 "an old car"\ndog 1 "a dog"\n',
        "utf-8",
    ),
    "Davis17_annot1_full_video.txt": ('bear 2 "a bear walking"\n', "utf-8"),
    "Davis17_annot2.txt": (
        'bear 3 "un ours à droite"\nbear 1 "bear on the left"\n\nbear 1 "the left bear"\n',
        "latin-1",
    ),
    "Davis17_annot2_full_video.txt": ('classic-car 1 "car driving"\n', "utf-8"),
}


def _ref_davis(root: Path, files: dict[str, tuple[str, str]] = TEXT_FILES) -> Path:
    write_davis(
        root,
        {"bear": BEAR, "classic-car": CAR, "dog": DOG},
        {"val": ["bear", "classic-car"], "train": ["dog"]},
        annotations="Annotations_unsupervised",
    )
    folder = root / "davis_text_annotations"
    folder.mkdir()
    for file_name, (text, encoding) in files.items():
        (folder / file_name).write_bytes(text.encode(encoding))
    return root


@pytest.fixture(scope="module")
def ref_davis_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _ref_davis(tmp_path_factory.mktemp("ref-davis") / "DAVIS")


def test_ref_davis17_expressions_of_the_split(ref_davis_root: Path) -> None:
    dataset = check_dataset(ref_davis17(ref_davis_root))
    assert dataset.sample_ids == (
        "bear/annot1-1",
        "bear/annot1-2",
        "bear/annot1_full_video-2",
        "bear/annot2-1",
        "bear/annot2-1-2",  # the file describes object 1 twice
        "bear/annot2-3",
        "classic-car/annot1-1",  # written "clasic-car" in the published file
        "classic-car/annot2_full_video-1",
    )
    late = dataset[5]
    assert late.field("expression") == ClipExpression("un ours à droite", 3)  # the Latin-1 file
    objects = late.field("objects")
    assert objects.object_ids == (1, 2, 3) and objects.first_frames == (0, 0, 3)
    assert objects.unseen == (False, False, False)
    assert dataset[4].field("expression").text == "the left bear"
    assert dataset[6].field("video").names == tuple(f"{t:05d}" for t in range(5))
    assert ref_davis17(ref_davis_root, split="train").sample_ids == ("dog/annot1-1",)


def test_ref_davis17_file_choice_and_masks_folder(ref_davis_root: Path) -> None:
    first_annotator = ref_davis17(
        ref_davis_root, expression_files=["Davis17_annot1.txt"], sequences=["bear"], max_frames=3
    )
    assert first_annotator.sample_ids == ("bear/annot1-1", "bear/annot1-2")
    assert first_annotator[0].field("objects").object_ids == (1, 2)  # object 3 enters after the frames read
    with pytest.raises(DatasetError, match=r"Annotations/480p: DAVIS annotations folder does not exist"):
        ref_davis17(ref_davis_root, annotations="Annotations")
    with pytest.raises(DatasetError, match=r"nowhere: Ref-DAVIS17 text annotations folder does not exist"):
        ref_davis17(ref_davis_root, text_annotations=ref_davis_root / "nowhere")
    with pytest.raises(DatasetError, match=r"Davis17_annot3\.txt: cannot read the expression file"):
        ref_davis17(ref_davis_root, expression_files=["Davis17_annot3.txt"])


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("bear 1", r"Davis17_annot1\.txt: line 2: expected <sequence> <object id> \"<expression>\", got 'bear 1'"),
        ('bear one "a bear"', r"Davis17_annot1\.txt: field line 2 \(object id\) must be an object id"),
        ('bear 1 ""', r"Davis17_annot1\.txt: line 2: the expression of object 1 in bear is empty"),
    ],
)
def test_ref_davis17_malformed_lines(tmp_path: Path, line: str, message: str) -> None:
    files = {"Davis17_annot1.txt": (f'bear 1 "a bear"\n{line}\n', "utf-8")}
    with pytest.raises(DatasetError, match=message):
        ref_davis17(_ref_davis(tmp_path / "DAVIS", files), expression_files=["Davis17_annot1.txt"])


def test_ref_davis17_an_expression_naming_an_object_the_clip_lacks(tmp_path: Path) -> None:
    files = {"Davis17_annot1.txt": ('bear 1 "a bear"\nbear 4 "a fourth bear"\n', "utf-8")}
    dataset = ref_davis17(_ref_davis(tmp_path / "DAVIS", files), expression_files=["Davis17_annot1.txt"])
    dataset[0]
    with pytest.raises(
        DatasetError,
        match=r"Davis17_annot1\.txt: line 2: the expression names object 4, which clip bear lacks \(objects on the frames read: 1, 2, 3\)",
    ):
        dataset[1]
