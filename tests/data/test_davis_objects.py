"""Which objects a DAVIS sequence gives: those of frame 0 (DAVIS), or each at its first appearance (YouTube-VOS).

Under DAVIS's rule an object a later mask shows is neither given nor scored, which the reader
says (a :class:`DatasetWarning` naming the sequence and the object), and a sequence whose first
frame shows no object is refused by name rather than failing in the task's output check as if
the model had raised.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from pytest_segrobust.core.errors import DatasetError, DatasetWarning
from pytest_segrobust.data.clips import ClipObjects
from pytest_segrobust.data.davis import davis
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.models import adapt_model
from pytest_segrobust.tasks import get_task
from tests.data.vos_layouts import blank, moving_objects, write_davis

# bear: objects 1 and 2 from frame 0, object 3 enters at frame 3. lynx: its only object enters at
# frame 2. fog: no object on any frame.
BEAR = moving_objects(7, {1: 0, 2: 0, 3: 3})
LYNX = moving_objects(5, {1: 2})
FOG = [blank() for _ in range(4)]


@pytest.fixture(scope="module")
def davis_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("davis-objects") / "DAVIS"
    return write_davis(root, {"bear": BEAR, "lynx": LYNX, "fog": FOG}, {"val": ["bear"], "late": ["lynx", "fog"]})


def objects_of(root: Path, split: str, position: int, **kwargs: str) -> ClipObjects:
    objects = davis(root, split=split, **kwargs)[position].field("objects")
    assert isinstance(objects, ClipObjects)
    return objects


def propagate(clips: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Each frame's objects as last given (a tracker that never moves its masks)."""
    out = reference.copy()
    for t in range(1, reference.shape[1]):
        out[:, t] = np.where(reference[:, t] > 0, reference[:, t], out[:, t - 1])
    return out


def test_an_object_absent_from_the_first_frame_is_left_out_with_a_warning_naming_it(davis_root: Path) -> None:
    with pytest.warns(DatasetWarning) as caught:
        objects = objects_of(davis_root, "val", 0)
    assert objects.object_ids == (1, 2) and objects.first_frames == (0, 0)
    (message,) = [str(w.message) for w in caught]
    mask = davis_root / "Annotations" / "480p" / "bear" / "00003.png"
    assert message.startswith(f"{mask}: davis2017-val: sequence bear: object 3 first appears in frame 00003")
    assert "neither given nor scored" in message and "given_at: first_appearance" in message


def test_youtube_vos_rule_gives_each_object_at_its_first_frame_without_a_warning(davis_root: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DatasetWarning)
        bear = objects_of(davis_root, "val", 0, given_at="first_appearance")
        lynx = objects_of(davis_root, "late", 0, given_at="first_appearance")
        fog = objects_of(davis_root, "late", 1, given_at="first_appearance")
    assert bear.object_ids == (1, 2, 3) and bear.first_frames == (0, 0, 3)
    assert lynx.object_ids == (1,) and lynx.first_frames == (2,)
    assert fog.object_ids == () and fog.first_frames == ()


def test_a_sequence_whose_first_frame_shows_no_object_is_refused_by_name(davis_root: Path) -> None:
    dataset = davis(davis_root, split="late")
    mask = davis_root / "Annotations" / "480p" / "lynx" / "00000.png"
    with pytest.raises(DatasetError, match=r"the first frame of sequence lynx shows no object") as raised:
        dataset[0]
    assert str(raised.value).startswith(f"{mask}: ") and "given_at: first_appearance" in str(raised.value)
    # Evaluating it says the same, never that the model raised.
    model = adapt_model(propagate, get_task("vos"))
    with pytest.raises(DatasetError, match="sequence lynx shows no object"):
        evaluate(model, dataset, settings=EvalSettings.of(task="vos", metrics=["vos_jf"]))


def test_under_youtube_vos_rule_late_and_empty_sequences_are_scored(davis_root: Path) -> None:
    model = adapt_model(propagate, get_task("vos"))
    late = davis(davis_root, split="late", given_at="first_appearance")
    result = evaluate(model, late, settings=EvalSettings.of(task="vos", metrics=["vos_jf"], batch_size=1))
    # lynx's object is given at frame 2 and kept where it was; fog has nothing to score.
    assert result.num_images == 2 and 0.0 < result.score < 100.0
    alone = evaluate(model, davis(davis_root, split="late", sequences=["lynx"], given_at="first_appearance"),
                     settings=EvalSettings.of(task="vos", metrics=["vos_jf"]))  # fmt: skip
    assert result.score == alone.score


def test_the_rule_is_in_the_fingerprint_and_checked(davis_root: Path) -> None:
    assert davis(davis_root).fingerprint() != davis(davis_root, given_at="first_appearance").fingerprint()
    with pytest.raises(ValueError, match=r"given_at must be 'first_frame' .* or 'first_appearance' .*'first'"):
        davis(davis_root, given_at="first")
