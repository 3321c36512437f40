"""A VOS suite's prompt reference: prompts drawn in the clean clip, moved with its geometry and its frames."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.core.errors import ModelError, ModelOutputError, SuiteError
from pytest_segrobust.core.prompts import ABSENT, FOREGROUND, ClipPrompts
from pytest_segrobust.core.types import SampleIndex, Video, VideoMasks, boxes_from_masks, field_of
from pytest_segrobust.corruptions import kernels
from pytest_segrobust.corruptions.base import Corruption
from pytest_segrobust.corruptions.registry import REGISTRY
from pytest_segrobust.data.base import Sample
from pytest_segrobust.data.clip_prompts import clip_prompts
from pytest_segrobust.data.clips import ClipFrames, ClipObjects
from pytest_segrobust.data.prompt_protocol import StandardProtocol, StandardProtocolSettings
from pytest_segrobust.engine.plan import Plan
from pytest_segrobust.models.adapters import adapt_model
from pytest_segrobust.models.demo_video import TinyVOSNet
from pytest_segrobust.models.video import TorchModulePromptableVideoSegmenter
from pytest_segrobust.randomness.seeding import FrameDraws, sample_seed
from pytest_segrobust.suite.schema import load_suite
from pytest_segrobust.tasks import get_task
from pytest_segrobust.tasks.vos import VideoObjectTask, first_shown, frame_prompts
from tests.plugin_project import run
from tests.video_fakes import SOURCE, ClipScenes, colour_segmenter, prompted_colour_segmenter

CPU = torch.device("cpu")
RANDOM = StandardProtocol(StandardProtocolSettings(clicks=3, where="random", box=True))
GEOMETRIC = [(label, c) for label, c in REGISTRY.labelled() if c.geometric and c.accepts(Video)]
TEMPORAL = list(REGISTRY.preset("video-temporal"))


class Clips:
    """Clips built from given masks: frames coloured by object id, every frame annotated."""

    name = "masks"
    class_names = ("background", "object")
    ignore_index = 255

    def __init__(self, masks: list[torch.Tensor]) -> None:
        self.masks = masks

    def __len__(self) -> int:
        return len(self.masks)

    def __getitem__(self, position: int) -> Sample:
        masks = self.masks[position]
        frames = int(masks.shape[0])
        ids = tuple(int(i) for i in masks.unique().tolist() if i != 0)
        firsts = tuple(int((masks == i).flatten(1).any(dim=1).nonzero()[0]) for i in ids)
        objects = ClipObjects(masks, torch.ones(frames, dtype=torch.bool), ids, firsts, (False,) * len(ids))
        pixels = (masks * 60).clamp(max=255).to(torch.uint8)[:, None].expand(-1, 3, -1, -1).contiguous()
        video = ClipFrames(pixels, tuple(f"{t:05d}" for t in range(frames)))
        return Sample.of(f"c{position}", video=video, objects=objects)

    def fingerprint(self) -> str:
        return "masks"


@st.composite
def clip_masks(draw: st.DrawFn) -> list[torch.Tensor]:
    """One or two clips of one size: 2..4 frames, up to three rectangles that come and go."""
    frames, height, width = draw(st.integers(2, 4)), draw(st.integers(12, 28)), draw(st.integers(12, 28))
    clips = []
    for _ in range(draw(st.integers(1, 2))):
        masks = torch.zeros(frames, height, width, dtype=torch.int64)
        for object_id in range(1, draw(st.integers(1, 3)) + 1):
            for t in range(frames):
                if draw(st.booleans()) or t == frames - 1:
                    top, left = draw(st.integers(0, height - 2)), draw(st.integers(0, width - 2))
                    masks[t, top : top + draw(st.integers(1, 10)), left : left + draw(st.integers(1, 10))] = object_id
        clips.append(masks)
    return clips


def collated(task: VideoObjectTask, dataset: Any, positions: range) -> dict[str, Any]:
    samples = [dataset[i] for i in positions]
    return task.collate(samples, positions, dataset, CPU)


def corrupted(batch: dict[str, Any], corruption: Corruption[Any], severity: int, seed: int = 0) -> dict[str, Any]:
    ids = field_of(batch, SampleIndex).sample_ids
    return corruption(batch, severity, [sample_seed(seed, i, corruption.name, severity) for i in ids])


@pytest.mark.parametrize("draws", [FrameDraws.CLIP, FrameDraws.FRAME])
@pytest.mark.parametrize("corruption", [c for _, c in GEOMETRIC], ids=[label for label, _ in GEOMETRIC])
@settings(max_examples=4, deadline=None)
@given(masks=clip_masks(), severity=st.integers(1, 5))
def test_clicks_stay_in_their_objects_moved_masks(
    corruption: Corruption[Any], draws: FrameDraws, masks: list[torch.Tensor], severity: int
) -> None:
    # The rule is the image one (corruptions/prompt_kernels.py): a kept foreground click lies in its
    # object's moved mask exactly; a tight box is the moved mask's tight box.
    dataset = Clips(masks)
    batch = collated(VideoObjectTask(RANDOM), dataset, range(len(dataset)))
    moved = corrupted(batch, corruption.drawing(draws), severity)
    truth, prompts = field_of(moved, VideoMasks), field_of(moved, ClipPrompts)
    assert torch.equal(prompts.masks, truth.data)  # one map for both
    for b, clip in enumerate(prompts.clips):
        for t in range(prompts.frames()):
            for index, object_id in enumerate(clip.object_ids):
                mask = truth.data[b, t] == object_id
                for (x, y), label in zip(clip.points[t, index].long().tolist(), clip.labels[t, index].tolist()):
                    if label == FOREGROUND:
                        assert bool(mask[y, x])
                if bool(clip.box_given[t, index]):
                    assert clip.boxes[t, index].tolist() == boxes_from_masks(mask[None])[0].tolist()
                else:
                    assert not bool(mask.any())
    for b, started_here in enumerate(frame_prompts(truth, prompts)):  # given at the first frame that shows the object
        firsts = dict(zip(truth.object_ids[b], first_shown(truth)[b]))
        for started in started_here:
            assert started.frame == firsts[started.object_id]
            assert started.prompt.box is not None


def test_every_preset_has_clip_geometry_to_check() -> None:
    assert {label.split("@")[1] for label, _ in GEOMETRIC} >= {"coco-p", "imagenet-c", "cityscapes-c"}


@pytest.mark.parametrize("corruption", TEMPORAL, ids=[c.name for c in TEMPORAL])
def test_prompts_follow_their_frames_through_a_temporal_perturbation(corruption: Corruption[Any]) -> None:
    dataset = ClipScenes(count=3, frames=6)  # object 3 of odd clips appears at frame 3
    task = VideoObjectTask(RANDOM, seed=3)
    clean = [clip_prompts(RANDOM, dataset[i].fields["objects"], f"clip{i}", 3) for i in range(3)]
    for severity in (1, 3, 5):
        moved = corrupted(collated(task, dataset, range(3)), corruption, severity)
        truth, shown = field_of(moved, VideoMasks), field_of(moved, Video).frame_ids
        for b, started_here in enumerate(frame_prompts(truth, field_of(moved, ClipPrompts))):
            assert [p.object_id for p in started_here] == list(truth.object_ids[b])
            for started in started_here:
                position, index = started.frame, truth.object_ids[b].index(started.object_id)
                # The object's first frame in the clip as the model sees it, and the prompts of the
                # source frame shown there, drawn in the clean clip.
                assert not bool((truth.data[b, :position] == started.object_id).any())
                source = int(shown[b, position])
                present = clean[b].labels[source, index] != ABSENT
                assert torch.equal(started.prompt.points, clean[b].points[source, index][present])
                assert torch.equal(started.prompt.box, clean[b].boxes[source, index])


def test_a_reversed_clip_starts_each_object_in_its_last_frame() -> None:
    dataset = ClipScenes(count=2, frames=6)
    batch = collated(VideoObjectTask(RANDOM), dataset, range(2))
    clean = frame_prompts(field_of(batch, VideoMasks), field_of(batch, ClipPrompts))
    assert [[(p.object_id, p.frame) for p in clip] for clip in clean] == [[(1, 0), (2, 0)], [(1, 0), (2, 0), (3, 3)]]
    order = torch.arange(5, -1, -1).expand(2, 6)
    reversed_batch = {name: kernels.reorder(field, order) for name, field in batch.items()}
    given = frame_prompts(field_of(reversed_batch, VideoMasks), field_of(reversed_batch, ClipPrompts))
    assert [[(p.object_id, p.frame) for p in clip] for clip in given] == [[(1, 0), (2, 0)], [(1, 0), (2, 0), (3, 0)]]
    drawn = clip_prompts(RANDOM, dataset[1].fields["objects"], "clip1", 0)
    assert torch.equal(given[1][2].prompt.points, drawn.points[5, 2])  # object 3 as clean frame 5 shows it


@pytest.mark.parametrize("name", ["rotate", "jumble"])
def test_prompts_do_not_depend_on_the_batch(name: str) -> None:
    corruption = REGISTRY.get(name, "video-temporal" if name == "jumble" else "coco-p")
    dataset = ClipScenes(count=3, frames=6)

    def given(batch_size: int) -> list[Any]:
        task = VideoObjectTask(RANDOM, seed=11)  # draws anew
        out = []
        for start in range(0, 3, batch_size):
            moved = corrupted(collated(task, dataset, range(start, min(3, start + batch_size))), corruption, 4, seed=11)
            for clip in frame_prompts(field_of(moved, VideoMasks), field_of(moved, ClipPrompts)):
                out.append([(p.object_id, p.frame, p.prompt.points.tolist(), p.prompt.box.tolist()) for p in clip])
        return out

    assert given(3) == given(1) == given(2)


def test_an_object_whose_prompts_were_all_dropped_is_not_asked_for() -> None:
    points_only = StandardProtocol(StandardProtocolSettings(clicks=1, where="center", box=False))
    task = VideoObjectTask(points_only)
    batch = collated(task, ClipScenes(count=1, frames=4), range(1))
    prompts = field_of(batch, ClipPrompts)
    dropped = prompts.clips[0].labels.clone()
    dropped[:, 1] = ABSENT  # every click of object 2 gone (as a corruption drops one out of the frame)
    clip = prompts.clips[0]
    batch["prompts"] = ClipPrompts(prompts.masks, (type(clip)(clip.object_ids, clip.points, dropped, clip.boxes, clip.box_given),), prompts.kinds)
    given = frame_prompts(field_of(batch, VideoMasks), field_of(batch, ClipPrompts))
    assert [p.object_id for p in given[0]] == [1]
    truth = field_of(batch, VideoMasks).data
    assert torch.equal(task.check_predictions(torch.where(truth == 2, 0, truth), batch), torch.where(truth == 2, 0, truth))
    with pytest.raises(ModelOutputError, match=r"object ids \[2\] in clip clip0, which asks for \[1\]"):
        task.check_predictions(truth, batch)


class PromptedModule(torch.nn.Module):
    """Paints each object given with its box from its frame on: ``module(clips, prompts)``."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("version", torch.tensor(1))

    def forward(self, clips: torch.Tensor, prompts: list[list[Any]]) -> torch.Tensor:
        out = torch.zeros(clips.shape[0], clips.shape[1], *clips.shape[-2:], dtype=torch.int64)
        for b, started_here in enumerate(prompts):
            for started in started_here:
                x0, y0, x1, y1 = (int(v) for v in started.prompt.box)
                out[b, started.frame :, y0:y1, x0:x1] = started.object_id
        return out


def test_the_task_takes_prompt_models_under_a_prompt_reference_only() -> None:
    prompted, masked = VideoObjectTask(RANDOM), get_task("vos")
    module = adapt_model(PromptedModule(), prompted)
    assert isinstance(module, TorchModulePromptableVideoSegmenter)
    batch = collated(prompted, ClipScenes(count=2, frames=4), range(2))
    ids = prompted.check_predictions(prompted.predict(module, batch), batch)
    assert torch.equal(ids[:, 0] != 0, field_of(batch, VideoMasks).data[:, 0] != 0)  # the squares, by their boxes
    scores = torch.nn.functional.one_hot(ids, 4).permute(0, 1, 4, 2, 3).float()  # (B, T, K, H, W), as the protocol allows
    assert torch.equal(prompted.check_predictions(scores, batch), ids)
    assert adapt_model(prompted_colour_segmenter(), prompted).reference == "prompts"
    with pytest.raises(TypeError, match="PromptableVideoObjectModel"):
        adapt_model(adapt_model(colour_segmenter(), masked), prompted)  # a mask model, as it is
    with pytest.raises(TypeError, match="VideoObjectModel"):
        adapt_model(module, masked)


SUITE = """\
name: pvos-tiny
task: vos
reference: {points: {count: 1, where: center}, box: tight}
dataset: {factory: video_fakes:clip_scenes, kwargs: {count: 2, frames: 6}}
models:
  - {name: colour, factory: video_fakes:prompted_colour_segmenter, kwargs: {erode: 0}}
corruptions: [rotate]
temporal: [jumble]
severities: [3]
metrics: [vos_jf]
batch_size: 2
"""


@pytest.fixture
def project_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "video_fakes.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_suite_declares_its_reference_and_the_plan_records_it(project_dir: Path) -> None:
    path = project_dir / "s.yaml"
    path.write_text(SUITE)
    task = Plan.of(load_suite(path)).task
    assert isinstance(task, VideoObjectTask) and task.reference == StandardProtocol(StandardProtocolSettings(1, "center", True))
    assert task.recorded_setting == {"reference": {"protocol": "standard", "version": "1", "options": {"clicks": 1, "where": "center", "box": True}}}
    path.write_text(SUITE.replace("reference: {points: {count: 1, where: center}, box: tight}\n", ""))
    assert Plan.of(load_suite(path)).task.recorded_setting == {}  # the mask reference records nothing, as before


@pytest.mark.parametrize(
    ("reference", "field"),
    [
        ("{points: {count: 9}}", "reference.points.count"),
        ("{points: {count: 1, where: edge}}", "reference.points.where"),
        ("{clicks: 1}", "reference.clicks"),
        ("{box: loose}", "reference.box"),
        ("boxes", "reference"),
    ],
)
def test_a_bad_reference_names_the_file_and_field(project_dir: Path, reference: str, field: str) -> None:
    path = project_dir / "s.yaml"
    path.write_text(SUITE.replace("{points: {count: 1, where: center}, box: tight}", reference))
    with pytest.raises(SuiteError, match=rf"s\.yaml: field '{field}'"):
        load_suite(path)


def test_a_prompt_reference_suite_records_passes_and_catches_a_worse_model(pytester: pytest.Pytester) -> None:
    (pytester.path / "video_fakes.py").write_text(SOURCE)
    (pytester.path / "suites").mkdir()
    suite = pytester.path / "suites" / "vos.yaml"
    suite.write_text(SUITE)
    pytester.makeini("[pytest]\npythonpath = .\n")
    run(pytester, "--segrobust", "--segrobust-update-baselines").assert_outcomes(passed=3)
    run(pytester, "--segrobust").assert_outcomes(passed=3)
    suite.write_text(SUITE.replace("erode: 0", "erode: 2"))
    cell = "suites/vos.yaml::colour::clean"
    result = run(pytester, "--segrobust", cell, "-v")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([rf"{cell} FAILED.*", r".*--segrobust-update-baselines.*"])
    suite.write_text(SUITE.replace("{points: {count: 1, where: center}, box: tight}", "{box: tight}"))
    result = run(pytester, "--segrobust", cell)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*task_setting: baseline*"])


def test_a_dynamic_cell_moves_each_frames_prompts_with_it() -> None:
    from pytest_segrobust.corruptions.dynamic import DynamicMixture, DynamicMode

    dataset = ClipScenes(count=3, frames=6)
    batch = collated(VideoObjectTask(RANDOM), dataset, range(3))
    mixture = DynamicMixture([REGISTRY.get("rotate"), REGISTRY.get("translate")], DynamicMode(levels=(5,)))
    moved = corrupted(batch, mixture, 5)
    truth, prompts = field_of(moved, VideoMasks), field_of(moved, ClipPrompts)
    assert torch.equal(prompts.masks, truth.data) and not torch.equal(truth.data, field_of(batch, VideoMasks).data)
    for b, started_here in enumerate(frame_prompts(truth, prompts)):
        for started in started_here:
            for x, y in started.prompt.points.long().tolist():
                assert int(truth.data[b, started.frame, y, x]) == started.object_id


def test_a_model_of_the_other_reference_is_refused_saying_which_reference_it_needs() -> None:
    prompted, masked = VideoObjectTask(RANDOM), get_task("vos")
    # A mask-started module (the demo tracker declares reference = 'masks') is not called with prompts.
    with pytest.raises(TypeError, match=r"got TinyVOSNet \(it declares reference = 'masks'.*remove reference:"):
        adapt_model(TinyVOSNet(), prompted)
    with pytest.raises(TypeError, match=r"\(it declares reference = 'prompts'.*give the suite a prompt reference"):
        adapt_model(adapt_model(PromptedModule(), prompted), masked)


class MaskModule(torch.nn.Module):
    """A user's mask model that declares nothing: ``forward(clips, reference)`` reads the masks' shape."""

    def forward(self, clips: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        return torch.zeros(reference.shape, dtype=torch.int64)


def test_an_undeclared_mask_module_that_raises_on_prompts_is_told_how_it_was_called() -> None:
    prompted = VideoObjectTask(RANDOM)
    module = adapt_model(MaskModule(), prompted)
    batch = collated(prompted, ClipScenes(count=1, frames=2), range(1))
    with pytest.raises(ModelError, match=r"module MaskModule raised AttributeError: .*called as module\(clips, prompts\).*remove the suite's reference:"):
        prompted.predict(module, batch)
