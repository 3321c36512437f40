"""YouTube-VOS reader on a small generated copy of the layout (sparse and all-frames, seen / unseen)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import check_dataset
from pytest_segrobust.data.youtube_vos import YouTubeVos, youtube_vos
from tests.data.vos_layouts import (
    HEIGHT,
    WIDTH,
    blank,
    frame_level,
    meta_object,
    moving_objects,
    write_frame,
    write_json,
    write_mask,
    write_youtube_clip,
)

# a1: person (1) from the first frame, cat (2) from the third; masks on frames 0, 2, 3 only.
A1 = moving_objects(5, {1: 0, 2: 2})
A1_MASKED = [A1[0], None, A1[2], A1[3], None]
# b2: dog (1) from the first frame, cat (3) from the third, its frames not listed in meta.json.
B2 = moving_objects(4, {1: 0, 3: 2})


def _valid_meta() -> dict[str, Any]:
    return {
        "videos": {
            "b2": {"objects": {"1": meta_object("dog", ["00000", "00005"]), "3": {"category": "cat"}}},
            "a1": {
                "objects": {
                    "1": meta_object("person", ["00000", "00005", "00010"]),
                    "2": meta_object("cat", ["00015", "00010"]),  # out of order on purpose
                }
            },
        }
    }


def _layout(root: Path) -> Path:
    write_json(
        root / "train" / "meta.json",
        {"videos": {"t1": {"objects": {"1": meta_object("person", ["00000"]), "2": meta_object("dog", ["00000"])}}}},
    )
    write_youtube_clip(root / "valid", "a1", 0, A1_MASKED)
    write_youtube_clip(root / "valid", "b2", 1, B2)
    write_json(root / "valid" / "meta.json", _valid_meta())
    # Every frame of the videos (30 fps): the sparse frames are every fifth of these.
    for clip_number, (video, frames) in enumerate((("a1", 21), ("b2", 16))):
        for position in range(frames):
            write_frame(
                root / "valid_all_frames" / "JPEGImages" / video / f"{position:05d}.jpg",
                frame_level(clip_number, position % 16),
            )
    return root


@pytest.fixture(scope="module")
def ytvos_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _layout(tmp_path_factory.mktemp("ytvos"))


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    return _layout(tmp_path)


def test_one_sample_per_video_objects_appear_late(ytvos_root: Path) -> None:
    dataset = check_dataset(youtube_vos(ytvos_root))
    assert dataset.sample_ids == ("a1", "b2") and len(dataset) == 2
    a1, b2 = dataset[0], dataset[1]
    video = a1.field("video")
    assert video.names == ("00000", "00005", "00010", "00015", "00020")
    assert tuple(video.frames.shape) == (5, 3, HEIGHT, WIDTH)
    levels = video.frames.float().mean(dim=(1, 2, 3))
    assert torch.allclose(levels, torch.tensor([float(frame_level(0, t)) for t in range(5)]), atol=2.0)
    objects = a1.field("objects")
    assert objects.object_ids == (1, 2)
    assert objects.first_frames == (0, 2)  # from meta.json: the cat's earliest listed frame, 00010
    assert objects.annotated.tolist() == [True, False, True, True, False]
    for position, mask in enumerate(A1_MASKED):
        expected = torch.full((HEIGHT, WIDTH), 255) if mask is None else torch.from_numpy(mask).long()
        assert torch.equal(objects.masks[position], expected)
    assert objects.unseen == (False, False)  # no training categories given
    b2_objects = b2.field("objects")
    assert b2_objects.object_ids == (1, 3)
    assert b2_objects.first_frames == (0, 2)  # the cat's frames are not listed: its first mask showing it


def test_unseen_from_the_train_meta_or_a_list(ytvos_root: Path) -> None:
    from_train = youtube_vos(ytvos_root, train_meta=ytvos_root / "train" / "meta.json")
    assert from_train.seen_categories == {"person", "dog"}
    assert from_train[0].field("objects").unseen == (False, True)
    assert from_train[1].field("objects").unseen == (False, True)
    listed = youtube_vos(ytvos_root, seen_categories=["person", "cat"])
    assert listed[0].field("objects").unseen == (False, False)
    assert listed[1].field("objects").unseen == (True, False)
    assert listed.fingerprint() != from_train.fingerprint()
    with pytest.raises(ValueError, match="either as train_meta or as seen_categories"):
        YouTubeVos(ytvos_root, train_meta=ytvos_root / "train" / "meta.json", seen_categories=["cat"])


def test_all_frames_annotated_where_a_mask_exists(ytvos_root: Path) -> None:
    sample = youtube_vos(ytvos_root, all_frames=True, videos=["a1"])[0]
    assert sample.field("video").names == tuple(f"{t:05d}" for t in range(21))
    objects = sample.field("objects")
    assert objects.annotated.nonzero().flatten().tolist() == [0, 10, 15]
    assert objects.first_frames == (0, 10)
    assert torch.equal(objects.masks[15], torch.from_numpy(A1[3]).long())


def test_stride_and_max_frames_move_or_drop_late_objects(ytvos_root: Path) -> None:
    every_second = youtube_vos(ytvos_root, stride=2, videos=["a1"])[0]
    assert every_second.field("video").names == ("00000", "00010", "00020")
    assert every_second.field("objects").first_frames == (0, 1)
    every_third = youtube_vos(ytvos_root, stride=3, videos=["a1"])[0]  # 00010 skipped: 00015 shows the cat first
    assert every_third.field("video").names == ("00000", "00015")
    assert every_third.field("objects").first_frames == (0, 1)
    cut = youtube_vos(ytvos_root, max_frames=2, videos=["a1"])[0]  # the cat never shows on the frames read
    assert cut.field("objects").object_ids == (1,)


def _rewrite_meta(root: Path, change: Any) -> Path:
    meta = _valid_meta()
    change(meta)
    return write_json(root / "valid" / "meta.json", meta)


def test_meta_json_missing_or_without_fields(fresh: Path) -> None:
    with pytest.raises(DatasetError, match=r"test/JPEGImages: YouTube-VOS frames folder does not exist"):
        youtube_vos(fresh, split="test")
    (fresh / "valid" / "meta.json").unlink()
    with pytest.raises(DatasetError, match=r"valid/meta\.json: cannot read the meta\.json"):
        youtube_vos(fresh)
    write_json(fresh / "valid" / "meta.json", {"vids": {}})
    with pytest.raises(DatasetError, match=r"meta\.json: field \(top level\) lacks 'videos'"):
        youtube_vos(fresh)
    _rewrite_meta(fresh, lambda meta: meta["videos"]["a1"].pop("objects"))
    with pytest.raises(DatasetError, match=r"meta\.json: field videos\['a1'\] lacks 'objects'"):
        youtube_vos(fresh)
    _rewrite_meta(fresh, lambda meta: meta["videos"]["a1"]["objects"].update({"x": meta_object("cat", ["00000"])}))
    with pytest.raises(DatasetError, match=r"field videos\['a1'\]\.objects\['x'\] \(its key\) must be an object id"):
        youtube_vos(fresh)
    _rewrite_meta(fresh, lambda meta: meta["videos"]["a1"]["objects"]["2"].update(frames="00010"))
    with pytest.raises(DatasetError, match=r"field videos\['a1'\]\.objects\['2'\]\.frames must be a non-empty list"):
        youtube_vos(fresh)
    (fresh / "valid" / "meta.json").write_text("{not json")
    with pytest.raises(DatasetError, match=r"meta\.json: not valid JSON"):
        youtube_vos(fresh)


def test_categories_needed_for_seen_and_unseen(fresh: Path) -> None:
    _rewrite_meta(fresh, lambda meta: meta["videos"]["b2"]["objects"]["3"].pop("category"))
    youtube_vos(fresh)[1]  # without seen / unseen a category is not needed
    with pytest.raises(
        DatasetError, match=r"valid/meta\.json: field videos\['b2'\]\.objects\['3'\] lacks 'category', which seen"
    ):
        youtube_vos(fresh, seen_categories=["dog"])
    train_meta = write_json(
        fresh / "train" / "meta.json", {"videos": {"t1": {"objects": {"4": {"frames": ["00000"]}}}}}
    )
    with pytest.raises(DatasetError, match=r"train/meta\.json: field videos\['t1'\]\.objects\['4'\] lacks 'category'"):
        youtube_vos(fresh, train_meta=train_meta)


def test_videos_listed_and_their_folders(fresh: Path) -> None:
    with pytest.raises(DatasetError, match=r"meta\.json: videos zz are not listed under 'videos'"):
        youtube_vos(fresh, videos=["zz"])
    _rewrite_meta(fresh, lambda meta: meta["videos"].update(c3={"objects": {}}))
    with pytest.raises(
        DatasetError, match=r"JPEGImages/c3: frames folder of video c3 \(listed in .*meta\.json\) does not exist"
    ):
        youtube_vos(fresh)


def test_first_frame_without_its_mask(fresh: Path) -> None:
    (fresh / "valid" / "Annotations" / "a1" / "00010.png").unlink()
    with pytest.raises(
        DatasetError,
        match=r"a1/00010\.png: mask of frame .*a1/00010\.jpg does not exist; it is the first frame of object 2 \(.*meta\.json, field videos\['a1'\]\.objects\['2'\]\.frames\)",
    ):
        youtube_vos(fresh)[0]


def test_meta_json_and_masks_disagree(fresh: Path) -> None:
    _rewrite_meta(fresh, lambda meta: meta["videos"]["a1"]["objects"]["2"].update(frames=["00003"]))
    with pytest.raises(
        DatasetError,
        match=r"field videos\['a1'\]\.objects\['2'\]\.frames starts at frame 00003, which .*JPEGImages/a1 lacks",
    ):
        youtube_vos(fresh)[0]
    _rewrite_meta(fresh, lambda meta: meta["videos"]["a1"]["objects"]["2"].update(frames=["00000"]))
    with pytest.raises(
        DatasetError,
        match=r"a1/00000\.png: mask does not show object 2, though .*meta\.json field videos\['a1'\]\.objects\['2'\]\.frames gives 00000",
    ):
        youtube_vos(fresh)[0]
    _rewrite_meta(fresh, lambda meta: meta["videos"]["a1"]["objects"].pop("2"))
    with pytest.raises(
        DatasetError,
        match=r"a1/00010\.png: mask shows object 2, which .*meta\.json does not list under videos\['a1'\]\.objects \(listed: 1\)",
    ):
        youtube_vos(fresh)[0]


def test_masks_checked_like_davis(fresh: Path) -> None:
    write_mask(fresh / "valid" / "Annotations" / "b2" / "00001.png", blank())
    with pytest.raises(DatasetError, match=r"b2/00001\.png: mask has no frame 00001"):
        youtube_vos(fresh)[1]
    (fresh / "valid" / "Annotations" / "b2" / "00001.png").unlink()
    write_mask(fresh / "valid" / "Annotations" / "b2" / "00005.png", np.zeros((HEIGHT - 1, WIDTH), np.uint8))
    with pytest.raises(DatasetError, match=r"b2/00005\.png: mask is 32x23 \(width x height\) but its frame"):
        youtube_vos(fresh)[1]
