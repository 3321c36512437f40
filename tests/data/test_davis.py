"""DAVIS 2017 reader on a small generated copy of the layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from pytest_segrobust.core.errors import DatasetError, DatasetWarning
from pytest_segrobust.data import clip_folders
from pytest_segrobust.data.base import check_dataset
from pytest_segrobust.data.clips import ClipFrames, ClipObjects
from pytest_segrobust.data.davis import Davis2017, davis
from tests.data.vos_layouts import HEIGHT, VOID, WIDTH, blank, frame_level, moving_objects, write_davis, write_mask

# bear: objects 1 and 2 from frame 0, object 3 enters at frame 3 (not a DAVIS object: not in frame 0,
# which reading bear warns about; tests/data/test_davis_objects.py tests the warning).
BEAR = moving_objects(7, {1: 0, 2: 0, 3: 3})
pytestmark = pytest.mark.filterwarnings("ignore::pytest_segrobust.core.errors.DatasetWarning")
CAMEL = moving_objects(5, {1: 0})
DOG = moving_objects(6, {2: 0})


def _layout(root: Path) -> Path:
    return write_davis(root, {"camel": CAMEL, "bear": BEAR, "dog": DOG}, {"val": ["camel", "bear"], "train": ["dog"]})


@pytest.fixture(scope="module")
def davis_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _layout(tmp_path_factory.mktemp("davis") / "DAVIS")


def test_one_sample_per_sequence_in_split_file_order(davis_root: Path) -> None:
    dataset = check_dataset(davis(davis_root))
    assert len(dataset) == 2
    assert dataset.sample_ids == ("camel", "bear")
    assert [dataset[i].sample_id for i in range(2)] == ["camel", "bear"]
    assert davis(davis_root, split="train").sample_ids == ("dog",)
    assert dataset.name == "davis2017-val"


def test_frames_play_in_name_order_as_uint8_rgb(davis_root: Path) -> None:
    sample = davis(davis_root)[1]  # bear, the second clip written
    video = sample.field("video")
    assert isinstance(video, ClipFrames)
    assert video.frames.dtype == torch.uint8 and tuple(video.frames.shape) == (7, 3, HEIGHT, WIDTH)
    assert video.names == tuple(f"{t:05d}" for t in range(7))
    levels = video.frames.float().mean(dim=(1, 2, 3))
    expected = torch.tensor([frame_level(1, t) for t in range(7)], dtype=torch.float32)
    assert torch.allclose(levels, expected, atol=2.0)


def test_masks_objects_of_the_first_frame_and_void(davis_root: Path) -> None:
    with pytest.warns(DatasetWarning, match="sequence bear: object 3 first appears"):
        objects = davis(davis_root)[1].field("objects")
    assert isinstance(objects, ClipObjects)
    assert objects.object_ids == (1, 2)  # object 3 enters later: DAVIS gives every object in frame 0
    assert objects.first_frames == (0, 0) and objects.unseen == (False, False)
    assert objects.annotated.tolist() == [True] * 7
    assert torch.equal(objects.masks, torch.from_numpy(np.stack(BEAR)).long())
    assert int(objects.masks[1, 0, 0]) == VOID == objects.ignore_index


def test_sequences_stride_and_max_frames(davis_root: Path) -> None:
    dataset = davis(davis_root, sequences=["bear"], stride=2, max_frames=3)
    assert dataset.sample_ids == ("bear",)
    sample = dataset[0]
    assert sample.field("video").names == ("00000", "00002", "00004")
    assert torch.equal(sample.field("objects").masks, torch.from_numpy(np.stack(BEAR[0:6:2])).long())
    assert dataset[-1].sample_id == "bear"
    with pytest.raises(IndexError):
        dataset[1]


def test_len_lists_only_and_getitem_decodes_one_clip(davis_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[Path] = []
    read_rgb = clip_folders.read_rgb

    def counting(path: Path) -> np.ndarray:
        decoded.append(path)
        return read_rgb(path)

    monkeypatch.setattr(clip_folders, "read_rgb", counting)
    dataset = davis(davis_root)
    assert len(dataset) == 2 and decoded == []
    dataset[0]
    assert [path.parent.name for path in decoded] == ["camel"] * 5


def test_fingerprint_follows_files_and_options(tmp_path: Path) -> None:
    root = _layout(tmp_path / "DAVIS")
    before = davis(root).fingerprint()
    assert davis(root).fingerprint() == before
    assert davis(root, max_frames=2).fingerprint() != before
    (root / "JPEGImages" / "480p" / "bear" / "00002.jpg").write_bytes(b"x" * 10)
    changed_frame = davis(root).fingerprint()
    assert changed_frame != before
    (root / "ImageSets" / "2017" / "val.txt").write_text("camel\nbear\n\n")
    assert davis(root).fingerprint() != changed_frame


def test_sparse_reads_sets_annotated_at_the_first_frame_only(tmp_path: Path) -> None:
    root = write_davis(tmp_path / "DAVIS", {"bear": [BEAR[0], None, BEAR[2], None]}, {"test-dev": ["bear"]})
    objects = davis(root, split="test-dev", sparse=True)[0].field("objects")
    assert objects.annotated.tolist() == [True, False, True, False]
    assert bool((objects.masks[1] == VOID).all()) and bool((objects.masks[3] == VOID).all())
    with pytest.raises(DatasetError, match=r"00001\.png: mask of frame .*00001\.jpg does not exist"):
        davis(root, split="test-dev")[0]
    first_missing = write_davis(tmp_path / "D2", {"bear": [None, BEAR[1]]}, {"test-dev": ["bear"]})
    with pytest.raises(DatasetError, match=r"bear/00000\.png: mask of frame"):
        davis(first_missing, split="test-dev", sparse=True)[0]


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    return _layout(tmp_path / "DAVIS")


def test_missing_folders_and_split_files(fresh: Path, tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"JPEGImages/480p: DAVIS frames folder does not exist"):
        davis(tmp_path / "nowhere")
    with pytest.raises(DatasetError, match=r"JPEGImages/Full-Resolution: DAVIS frames folder"):
        davis(fresh, resolution="Full-Resolution")
    with pytest.raises(
        DatasetError, match=r"2017/test\.txt: split file of split 'test' does not exist \(splits there: train, val\)"
    ):
        davis(fresh, split="test")
    with pytest.raises(DatasetError, match=r"val\.txt: sequences dog are not in split 'val'"):
        davis(fresh, sequences=["dog"])
    with pytest.raises(TypeError, match="list of names"):
        davis(fresh, sequences="bear")  # type: ignore[arg-type]
    (fresh / "ImageSets" / "2017" / "val.txt").write_text("camel\nbear\nbear\n")
    with pytest.raises(DatasetError, match=r"val\.txt: sequences bear are listed more than once"):
        davis(fresh)
    (fresh / "ImageSets" / "2017" / "val.txt").write_text("camel\nbison\n")
    with pytest.raises(
        DatasetError, match=r"480p/bison: frames folder of sequence bison \(listed in .*val\.txt\) does not exist"
    ):
        davis(fresh)


def test_a_frame_without_its_mask(fresh: Path) -> None:
    (fresh / "Annotations" / "480p" / "bear" / "00004.png").unlink()
    dataset = davis(fresh)
    dataset[0]  # camel is whole
    with pytest.raises(DatasetError, match=r"bear/00004\.png: mask of frame .*bear/00004\.jpg does not exist"):
        dataset[1]
    assert davis(fresh, max_frames=4)[1].field("objects").annotated.all()  # frame 4 is not read


def test_a_mask_without_its_frame(fresh: Path) -> None:
    write_mask(fresh / "Annotations" / "480p" / "camel" / "00009.png", blank())
    with pytest.raises(DatasetError, match=r"camel/00009\.png: mask has no frame 00009"):
        davis(fresh)[0]


def test_a_mask_of_another_size(fresh: Path) -> None:
    write_mask(fresh / "Annotations" / "480p" / "camel" / "00002.png", np.zeros((HEIGHT, WIDTH + 1), np.uint8))
    with pytest.raises(
        DatasetError, match=r"camel/00002\.png: mask is 33x24 \(width x height\) but its frame .*00002\.jpg is 32x24"
    ):
        davis(fresh)[0]


def test_a_frame_of_another_size(fresh: Path) -> None:
    path = fresh / "JPEGImages" / "480p" / "camel" / "00003.jpg"
    Image.fromarray(np.zeros((HEIGHT + 2, WIDTH, 3), np.uint8)).save(path)
    with pytest.raises(DatasetError, match=r"camel/00003\.jpg: frame is 32x26 .* first frame .*00000\.jpg is 32x24"):
        davis(fresh)[0]


@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_a_mask_that_is_not_a_palette_png(fresh: Path, mode: str) -> None:
    path = fresh / "Annotations" / "480p" / "camel" / "00001.png"
    Image.fromarray(CAMEL[1]).convert(mode).save(path)
    with pytest.raises(DatasetError, match=rf"camel/00001\.png: mask has mode {mode}; expected a palette PNG"):
        davis(fresh)[0]


def test_an_unreadable_frame(fresh: Path) -> None:
    (fresh / "JPEGImages" / "480p" / "camel" / "00001.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(DatasetError, match=r"camel/00001\.jpg: cannot read image"):
        davis(fresh)[0]


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="stride must be at least 1"):
        Davis2017("anywhere", stride=0)
    with pytest.raises(ValueError, match="max_frames must be at least 1"):
        Davis2017("anywhere", max_frames=0)
