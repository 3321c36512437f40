"""The video tasks (vos, rvos): collation, the reference masks, the model adapters, output checks and scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pytest_segrobust.core.errors import DatasetError, ModelOutputError
from pytest_segrobust.core.types import Expressions, Video, VideoMasks
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.models import adapt_model
from pytest_segrobust.models.video import (
    ArrayReferringVideoModel,
    ArrayVideoObjectModel,
    TorchModuleOnlineVideoObjectSegmenter,
    TorchModuleReferringVideoSegmenter,
    TorchModuleVideoObjectSegmenter,
)
from pytest_segrobust.randomness.seeding import sample_seed
from pytest_segrobust.tasks import get_task
from pytest_segrobust.tasks.vos import reference_masks
from tests.video_fakes import LATE, ClipScenes, colour_reader, colour_segmenter, colour_tracker

CPU = torch.device("cpu")
METRICS = ("vos_jf", "vos_j", "vos_f", "youtube_vos_g")


@pytest.fixture(scope="module")
def scenes() -> ClipScenes:
    return ClipScenes(count=4, frames=8)


def batch_of(dataset: ClipScenes, task: str = "vos") -> dict:
    samples = [dataset[i] for i in range(len(dataset))]
    return get_task(task).collate(samples, range(len(samples)), dataset, CPU)


def test_a_clip_batch_is_collated_into_video_and_video_masks(scenes: ClipScenes) -> None:
    batch = batch_of(scenes)
    video, masks = batch["video"], batch["objects"]
    assert isinstance(video, Video) and video.data.shape == (4, 8, 3, 32, 32) and video.data.dtype == torch.float32
    assert float(video.data.max()) == 1.0
    assert isinstance(masks, VideoMasks) and masks.data.shape == (4, 8, 32, 32)
    assert masks.object_ids == ((1, 2), (1, 2, 3), (1, 2), (1, 2, 3))
    assert masks.unseen == ((False, False), (False, False, True), (False, False), (False, False, True))
    assert batch["index"].sample_ids == ("clip0", "clip1", "clip2", "clip3")
    assert get_task("vos").batch_key(scenes[0]) == (8, 32, 32)


def test_the_unseen_flags_follow_a_cut_and_a_join() -> None:
    masks = VideoMasks.of(torch.zeros(2, 3, 4, 4, dtype=torch.int64))
    assert masks.unseen == ((), ())
    flagged = VideoMasks(
        torch.zeros(2, 1, 2, 2, dtype=torch.int64), ((1,), (1, 2)), torch.ones(2, 1, dtype=torch.bool),
        torch.zeros(2, 1, dtype=torch.int64), 255, ((True,), (False, True)),
    )  # fmt: skip
    assert flagged.take([1]).unseen == ((False, True),)
    assert VideoMasks.join([flagged.take([1]), flagged.take([0])]).unseen == ((False, True), (True,))
    with pytest.raises(ValueError, match="one flag per object"):
        VideoMasks(flagged.data, ((1,), (1, 2)), flagged.annotated, flagged.frame_ids, 255, ((True,), (True,)))


def test_the_reference_is_each_object_at_the_first_frame_it_is_shown_in(scenes: ClipScenes) -> None:
    masks = batch_of(scenes)["objects"]
    reference = reference_masks(masks)
    truth = masks.data
    assert torch.equal(reference[:, 0], truth[:, 0])  # objects 1 and 2 from frame 0
    assert not bool(reference[:, 1:LATE].any())
    late = reference[1, LATE]
    assert torch.equal(late, torch.where(truth[1, LATE] == 3, 3, 0))  # object 3 where it appears
    assert not bool(reference[1, LATE + 1 :].any())


def test_under_a_temporal_perturbation_the_reference_comes_from_the_frame_shown_first(scenes: ClipScenes) -> None:
    batch = batch_of(scenes)
    corruption = REGISTRY.get("reverse_sampling", "video-temporal")
    seeds = [sample_seed(0, i, corruption.name, 1) for i in batch["index"].sample_ids]
    reversed_batch = corruption(batch, 1, seeds)
    masks = reversed_batch["objects"]
    shown = masks.frame_ids[0].tolist()
    assert shown[0] != 0  # the clip starts elsewhere than at its first frame
    reference = reference_masks(masks)
    assert torch.equal(reference[0, 0], masks.data[0, 0])  # given at the first position, from the frame shown there
    assert not torch.equal(reference[0, 0], batch["objects"].data[0, 0])
    late_position = next(t for t in range(8) if bool((masks.data[1, t] == 3).any()))
    assert bool((reference[1, late_position] == 3).any())
    assert not bool((reference[1, :late_position] == 3).any())


def test_the_oracle_returns_the_truth_and_scores_100(scenes: ClipScenes) -> None:
    task = get_task("vos")
    model = adapt_model(colour_segmenter(), task)
    assert isinstance(model, ArrayVideoObjectModel)
    batch = batch_of(scenes)
    predictions = task.check_predictions(task.predict(model, batch), batch)
    assert torch.equal(predictions, batch["objects"].data)
    result = evaluate(model, scenes, settings=EvalSettings.of(task=task, metrics=METRICS, batch_size=3))
    assert {name: m.score for name, m in result.metrics.items()} == {name: 100.0 for name in METRICS}


def test_a_degraded_model_and_a_perturbed_clip_score_lower(scenes: ClipScenes) -> None:
    task = get_task("vos")
    clean = evaluate(
        adapt_model(colour_segmenter(), task),
        scenes,
        settings=EvalSettings.of(task=task, metrics=METRICS, batch_size=4),
    )
    eroded = evaluate(
        adapt_model(colour_segmenter(erode=3), task),
        scenes,
        settings=EvalSettings.of(task=task, metrics=METRICS, batch_size=4),
    )
    for name in METRICS:
        assert eroded.metrics[name].score < clean.metrics[name].score - 5, name
    noisy = evaluate(
        adapt_model(colour_segmenter(), task),
        scenes,
        REGISTRY.get("gaussian_noise"),
        5,
        settings=EvalSettings.of(task=task, metrics=METRICS, batch_size=4),
    )
    assert noisy.score < clean.score


def test_an_online_tracker_equals_the_offline_model_that_computes_the_same(scenes: ClipScenes) -> None:
    task = get_task("vos")
    online = adapt_model(colour_tracker(erode=1), task)
    offline = adapt_model(colour_segmenter(erode=1), task)
    assert isinstance(online, TorchModuleOnlineVideoObjectSegmenter)
    for corruption, severity in ((None, 0), (REGISTRY.get("gaussian_noise"), 3), (REGISTRY.get("rotate"), 2)):
        one = evaluate(
            online, scenes, corruption, severity, settings=EvalSettings.of(task=task, metrics=("vos_jf",), batch_size=3)
        )
        other = evaluate(
            offline,
            scenes,
            corruption,
            severity,
            settings=EvalSettings.of(task=task, metrics=("vos_jf",), batch_size=2),
        )
        assert one.score < 100.0
        assert one.metrics == other.metrics


def test_a_torch_module_returning_scores_is_adapted(scenes: ClipScenes) -> None:
    class Scores(torch.nn.Module):
        def forward(self, clips: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
            ids = torch.from_numpy(colour_segmenter()(clips.numpy(), reference.numpy()))
            return torch.nn.functional.one_hot(ids, 4).permute(0, 1, 4, 2, 3).float()  # (B, T, K, H, W)

    task = get_task("vos")
    model = adapt_model(Scores(), task)
    assert isinstance(model, TorchModuleVideoObjectSegmenter)
    assert evaluate(model, scenes, settings=EvalSettings.of(task=task, batch_size=4)).score == 100.0


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (lambda t: t.float(), "float32 values, expected integer object ids"),
        (lambda t: t[:, :-1], r"shape \(4, 7, 32, 32\), expected \(4, 8, 32, 32\)"),
        (lambda t: t.numpy(), "ndarray, expected a tensor"),
        (lambda t: torch.where(t == 2, 7, t), r"object ids \[7\] in clip clip0, which asks for \[1, 2\]"),
        (lambda t: torch.where(t == 2, 3, t), r"object ids \[3\] in clip clip0"),
    ],
)
def test_wrong_predictions_raise_clear_model_output_errors(scenes: ClipScenes, returned, message: str) -> None:
    batch = batch_of(scenes)
    with pytest.raises(ModelOutputError, match=message):
        get_task("vos").check_predictions(returned(batch["objects"].data.clone()), batch)


def test_scores_with_nan_are_refused_by_the_adapter() -> None:
    model = ArrayVideoObjectModel(lambda clips, reference: np.full((*reference.shape[:2], 3, 4, 4), np.nan))
    with pytest.raises(ModelOutputError, match="NaN or infinite scores"):
        model.predict(torch.zeros(1, 2, 3, 4, 4), torch.zeros(1, 2, 4, 4, dtype=torch.int64))


def test_a_clip_without_the_fields_names_the_sample_and_field(scenes: ClipScenes) -> None:
    from pytest_segrobust.data.base import Sample

    with pytest.raises(DatasetError, match="sample lonely has no field 'objects'"):
        get_task("vos").collate([Sample.of("lonely", video=scenes[0].fields["video"])], [0], scenes, CPU)


def test_rvos_targets_the_named_object_and_scores_a_colour_reader() -> None:
    dataset = ClipScenes(count=3, frames=6, referring=True)
    task = get_task("rvos")
    batch = batch_of(dataset, "rvos")
    masks, texts = batch["objects"], batch["expression"]
    assert isinstance(texts, Expressions) and texts.texts[:2] == ("the red square", "the green square")
    assert masks.object_ids == ((1,),) * 6 and masks.unseen == ((False,),) * 6
    source = dataset[1]
    assert torch.equal(masks.data[1], (source.fields["objects"].masks == 2).long())
    model = adapt_model(colour_reader(), task)
    assert isinstance(model, TorchModuleReferringVideoSegmenter)
    clean = evaluate(model, dataset, settings=EvalSettings.of(task=task, batch_size=4))
    assert clean.score == 100.0 and tuple(clean.metrics) == ("vos_jf", "vos_j", "vos_f")
    noisy = evaluate(
        model, dataset, REGISTRY.get("gaussian_noise"), 5, settings=EvalSettings.of(task=task, batch_size=4)
    )
    assert noisy.score < clean.score
    numpy_model = adapt_model(
        lambda clips, texts: colour_reader()(torch.from_numpy(clips), texts).detach().numpy(), task
    )
    assert isinstance(numpy_model, ArrayReferringVideoModel)
    assert evaluate(numpy_model, dataset, settings=EvalSettings.of(task=task, batch_size=2)).metrics == clean.metrics
    with pytest.raises(ModelOutputError, match="dtype torch.int64"):
        task.check_predictions(masks.data, batch)


def test_a_numpy_tracker_is_driven_as_the_torch_one() -> None:
    from pytest_segrobust.models.video import ArrayOnlineVideoObjectModel
    from tests.video_fakes import by_colour

    class NumpyTracker:
        def start(self, frame: np.ndarray, reference: np.ndarray) -> None:
            assert frame.dtype == np.float32 and reference.dtype == np.int64
            self.known = [int(i) for i in np.unique(reference) if i]

        def step(self, frame: np.ndarray, reference: np.ndarray) -> np.ndarray:
            self.known += [int(i) for i in np.unique(reference) if i and int(i) not in self.known]
            return by_colour(frame, self.known, 1)

    task, scenes = get_task("vos"), ClipScenes(count=2, frames=6)
    model = adapt_model(NumpyTracker(), task)
    assert isinstance(model, ArrayOnlineVideoObjectModel)
    torch_tracker = adapt_model(colour_tracker(erode=1), task)
    noise = REGISTRY.get("gaussian_noise")
    one = evaluate(model, scenes, noise, 2, settings=EvalSettings.of(task=task, metrics=("vos_jf",), batch_size=2))
    assert (
        one.metrics
        == evaluate(
            torch_tracker, scenes, noise, 2, settings=EvalSettings.of(task=task, metrics=("vos_jf",), batch_size=1)
        ).metrics
    )


def test_an_id_between_the_asked_ones_is_refused_too() -> None:
    from pytest_segrobust.tasks.vos import checked_ids

    truth = torch.zeros(1, 2, 4, 4, dtype=torch.int64)
    truth[0, :, :2] = 1
    truth[0, :, 2:] = 3
    masks = VideoMasks(truth, ((1, 3),), torch.ones(1, 2, dtype=torch.bool), torch.zeros(1, 2, dtype=torch.int64))
    assert torch.equal(checked_ids(truth.int(), masks, {"objects": masks}), truth)
    with pytest.raises(ModelOutputError, match=r"object ids \[2\] in clip \?, which asks for \[1, 3\]"):
        checked_ids(torch.where(truth == 3, 2, truth), masks, {"objects": masks})
