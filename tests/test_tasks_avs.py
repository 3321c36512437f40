"""The audio-visual task (task avs): AVSBench's metrics against their definition, models with and without
ears, acoustic cells, the cross-modal mixture, the AVSBench reader and a suite run by the plugin."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

# pytester's in-process runs drop the modules a run imported, and numpy.fft's extension (which the
# acoustic filters import) cannot be loaded twice in one process: it is imported once, here.
import numpy.fft
import pytest
import torch

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.core.types import VideoMasks
from pytest_segrobust.corruptions.registry import REGISTRY
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.metrics.avs import AudioVisualF, AudioVisualIoU, SoundingMasks
from pytest_segrobust.metrics.base import MetricContext
from pytest_segrobust.models import adapt_model
from pytest_segrobust.suite.schema import load_suite
from pytest_segrobust.tasks import get_task
from pytest_segrobust.tasks.avs import MIXTURE_CELL, AudioVisualMixture, mixture_draw
from tests.av_fakes import SOURCE, audio_clips, colour_guess, listed_audio_clips, tone_reader
from tests.data.avs_layouts import write_meta, write_ms3_clip, write_s4_clip, write_s4_meta
from tests.plugin_project import run

METRICS = ("avs_miou", "avs_f")
TASK = get_task("avs")


# --- the metrics, against AVSBench's definitions written out frame by frame ----------------------------


def reference_miou(logits: torch.Tensor, truth: torch.Tensor) -> float:
    """AVSBench's mask_iou over every frame: IoU, or the true-negative share where the truth is empty."""
    values = []
    for predicted, true in zip((logits > 0).flatten(0, 1), truth.flatten(0, 1).bool()):
        if true.sum() == 0:
            values.append(float((~predicted & ~true).sum()) / true.numel())
        else:
            values.append(float((predicted & true).sum()) / float((predicted | true).sum()))
    return 100.0 * sum(values) / len(values)


def reference_f(logits: torch.Tensor, truth: torch.Tensor) -> float:
    """AVSBench's Eval_Fmeasure with every frame in one batch: the best threshold of the mean per-frame F."""
    probabilities = torch.sigmoid(logits.float()).flatten(0, 1)
    thresholds = torch.linspace(0, 1 - 1e-10, 255)
    total, frames = torch.zeros(255, dtype=torch.float64), 0
    for probability, true in zip(probabilities, truth.flatten(0, 1).float()):
        if true.sum() == 0:
            continue  # AVSBench leaves frames with an empty truth out of F
        frames += 1
        for k, threshold in enumerate(thresholds):
            predicted = (probability >= threshold).float()
            hits = float((predicted * true).sum())
            precision, recall = hits / (float(predicted.sum()) + 1e-20), hits / (float(true.sum()) + 1e-20)
            score = 1.3 * precision * recall / (0.3 * precision + recall) if precision + recall > 0 else 0.0
            total[k] += score
    return 100.0 * float((total / frames).max())


def scored(logits: torch.Tensor | None, truth: torch.Tensor, masks: torch.Tensor | None = None) -> dict[str, float]:
    batch, frames = truth.shape[:2]
    target = VideoMasks(
        truth,
        tuple((1,) for _ in range(batch)),
        torch.ones(batch, frames, dtype=torch.bool),
        torch.arange(frames).expand(batch, frames),
    )
    predicted = (logits > 0) if masks is None else masks
    predictions = SoundingMasks(
        predicted.long(),
        target.object_ids,
        target.annotated,
        target.frame_ids,
        255,
        target.unseen,
        None if logits is None else torch.sigmoid(logits),
    )
    out = {}
    for kind in (AudioVisualIoU, AudioVisualF):
        metric = kind(MetricContext(("background", "sounding"), 255))
        metric.update(predictions, {"objects": target})
        out[kind.name] = metric.compute().score
        # rows add up: the summed per-clip statistics give the score
        assert kind.score_of(metric.image_statistics().sum(axis=0)) == pytest.approx(out[kind.name])
    return out


def random_case(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    truth = (torch.rand(3, 4, 12, 12, generator=generator) > 0.6).long()
    truth[0, 1] = 0  # an empty frame
    truth[2, 3] = 0
    logits = torch.randn(3, 4, 12, 12, generator=generator) * 3 + (truth.float() - 0.5) * 2
    return logits, truth


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_miou_and_f_are_avsbench_definitions_empty_frames_included(seed: int) -> None:
    logits, truth = random_case(seed)
    got = scored(logits, truth)
    assert got["avs_miou"] == pytest.approx(reference_miou(logits, truth), abs=1e-9)
    assert got["avs_f"] == pytest.approx(reference_f(logits, truth), abs=1e-9)


def test_bool_masks_score_f_at_their_one_threshold() -> None:
    logits, truth = random_case(4)
    masks = logits > 0
    got = scored(None, truth, masks)
    # F of the masks themselves: a logit of +-inf thresholds the same at every level but the first (t = 0)
    hard = torch.where(masks, 50.0, -50.0)
    per_frame = []
    for predicted, true in zip(masks.flatten(0, 1), truth.flatten(0, 1).bool()):
        if true.sum():
            hits = float((predicted & true).sum())
            p, r = hits / max(float(predicted.sum()), 1e-20), hits / float(true.sum())
            per_frame.append(1.3 * p * r / (0.3 * p + r) if p + r else 0.0)
    assert got["avs_f"] == pytest.approx(100 * np.mean(per_frame))
    assert got["avs_f"] <= scored(hard, truth)["avs_f"] + 1e-9  # the soft max may only pick a better threshold
    assert got["avs_miou"] == pytest.approx(reference_miou(hard, truth))


def test_f_over_the_dataset_does_not_depend_on_the_batch_size() -> None:
    dataset = listed_audio_clips(6)
    model = adapt_model(colour_guess, TASK)
    scores = {
        size: evaluate(model, dataset, settings=EvalSettings.of(task=TASK, metrics=METRICS, batch_size=size))
        .metrics["avs_f"]
        .score
        for size in (1, 4, 6)
    }
    assert len(set(scores.values())) == 1, scores


# --- models, acoustic cells ----------------------------------------------------------------------------


def test_an_audio_reading_oracle_scores_100_and_acoustic_cells_move_it_but_not_an_audio_blind_model() -> None:
    dataset = listed_audio_clips(8)
    reader, blind = adapt_model(tone_reader(), TASK), adapt_model(colour_guess, TASK)
    clean = {
        m: evaluate(m, dataset, settings=EvalSettings.of(task=TASK, metrics=METRICS, batch_size=3))
        for m in (reader, blind)
    }
    assert clean[reader].metrics["avs_miou"].score == 100.0 and clean[reader].metrics["avs_f"].score == 100.0
    assert clean[blind].score < 70.0
    low_pass, noise = REGISTRY.get("low_pass", "avs-acoustic"), REGISTRY.get("background_noise", "avs-acoustic")
    for corruption in (low_pass, noise):
        hurt = evaluate(
            reader, dataset, corruption, 5, settings=EvalSettings.of(task=TASK, metrics=METRICS, seed=0, batch_size=3)
        )
        deaf = evaluate(
            blind, dataset, corruption, 5, settings=EvalSettings.of(task=TASK, metrics=METRICS, seed=0, batch_size=3)
        )
        assert hurt.score < 100.0, corruption.name
        assert deaf.metrics == clean[blind].metrics, corruption.name


def test_the_competing_clip_is_read_alone_where_the_dataset_offers_it_and_alike_either_way() -> None:
    listed, plain = listed_audio_clips(5), audio_clips(5)
    model = adapt_model(tone_reader(), TASK)
    noise = REGISTRY.get("background_noise", "avs-acoustic")
    a = evaluate(model, listed, noise, 5, settings=EvalSettings.of(task=TASK, metrics=METRICS, seed=3, batch_size=2))
    b = evaluate(model, plain, noise, 5, settings=EvalSettings.of(task=TASK, metrics=METRICS, seed=3, batch_size=5))
    assert listed.audio_reads == 5 and a.metrics == b.metrics


# --- the cross-modal mixture ---------------------------------------------------------------------------


def test_the_mixture_draws_40_40_20_per_clip_the_same_at_every_call() -> None:
    ids = [f"clip{i}" for i in range(4000)]
    draws = [mixture_draw(7, i, ["gaussian_noise", "motion_blur"], ["gain", "low_pass", "time_mask"]) for i in ids]
    shares = Counter(d.modality.value for d in draws)
    assert abs(shares["visual"] / 4000 - 0.4) < 0.03 and abs(shares["audio"] / 4000 - 0.4) < 0.03
    assert abs(shares["both"] / 4000 - 0.2) < 0.03
    assert all((d.visual is None) == (d.modality.value == "audio") for d in draws)
    assert all((d.audio is None) == (d.modality.value == "visual") for d in draws)
    again = [mixture_draw(7, i, ["gaussian_noise", "motion_blur"], ["gain", "low_pass", "time_mask"]) for i in ids]
    assert again == draws
    other = [mixture_draw(8, i, ["gaussian_noise", "motion_blur"], ["gain", "low_pass", "time_mask"]) for i in ids]
    assert other != draws


def test_a_mixture_clip_is_perturbed_alike_in_any_batch() -> None:
    dataset = listed_audio_clips(6)
    cell = AudioVisualMixture([REGISTRY.get("gaussian_noise")], [REGISTRY.get("gain", "avs-acoustic")], seed=5)
    from pytest_segrobust.randomness.seeding import sample_seed

    samples = [dataset[i] for i in range(6)]
    whole = TASK.collate(samples, range(6), dataset, torch.device("cpu"))
    whole = cell(whole, 3, [sample_seed(0, s.sample_id, MIXTURE_CELL, 3) for s in samples])
    for start in (0, 3):
        part = samples[start : start + 3]
        batch = TASK.collate(part, range(start, start + 3), dataset, torch.device("cpu"))
        batch = cell(batch, 3, [sample_seed(0, s.sample_id, MIXTURE_CELL, 3) for s in part])
        for name in ("video", "audio"):
            assert torch.equal(batch[name].data, whole[name].data[start : start + 3]), name


# --- the AVSBench layout -------------------------------------------------------------------------------


def write_s4(root: Path, clips: dict[str, str], split: str = "test", masks: int = 5) -> None:
    """Flat frames (grey level 40 k), a 3x3 box per clip in the first ``masks`` masks, 5 s of constant sound."""
    write_s4_meta(root, clips, split)
    frames = np.stack([np.full((8, 10, 3), 40 * k, np.uint8) for k in range(1, 6)])
    for n, (clip, category) in enumerate(clips.items()):
        box = np.zeros((8, 10), bool)
        box[2:5, 1 + n : 4 + n] = True
        annotated = [box if k <= masks else None for k in range(1, 6)]
        write_s4_clip(root, split, category, clip, frames, annotated, 0.25 * np.ones(16000 * 5))


def test_the_s4_layout_reads_frames_masks_and_sound(tmp_path: Path) -> None:
    from pytest_segrobust.data.avsbench import avsbench

    write_s4(tmp_path, {"dogA": "dog_barking", "carB": "race_car"}, split="train", masks=1)
    dataset = avsbench(tmp_path, "s4", "train")
    assert dataset.sample_ids == ("dogA", "carB") and len(dataset) == 2
    sample = dataset[1]
    objects, audio = sample.fields["objects"], sample.fields["audio"]
    assert sample.fields["video"].frames.shape == (5, 3, 8, 10)
    assert objects.annotated.tolist() == [True, False, False, False, False]  # S4 train: the first frame only
    assert int(objects.masks[0].sum()) == 9 and bool((objects.masks[1] == 255).all())
    assert audio.sample_rate == 16000 and audio.waveform.shape == (1, 80000)
    assert abs(float(audio.waveform.mean()) - 0.25) < 1e-3
    assert torch.equal(dataset.read_audio("dogA").waveform, dataset[0].fields["audio"].waveform)
    batch = TASK.collate([dataset[0], dataset[1]], [0, 1], dataset, torch.device("cpu"))
    assert batch["competing"].source_ids == ("carB", "dogA")


def test_the_ms3_layout_reads_its_own_paths(tmp_path: Path) -> None:
    from pytest_segrobust.data.avsbench import avsbench

    write_meta(tmp_path, "ms3", [("msA", "test"), ("msB", "train")], ("video_id", "split"))
    eye = np.eye(6, dtype=np.uint8)
    write_ms3_clip(tmp_path, "test", "msA", np.zeros((5, 6, 6, 3), np.uint8), [eye] * 5, np.zeros(16000 * 5))
    dataset = avsbench(tmp_path, "ms3", "test")
    objects = dataset[0].fields["objects"]
    assert dataset.sample_ids == ("msA",) and objects.annotated.all() and int(objects.masks.sum()) == 30


@pytest.mark.parametrize(
    ("breaks", "message"),
    [
        (lambda root: (root / "s4_meta_data.csv").write_text("name,category\nx,dog\n"), "no column 'split'"),
        (lambda root: (root / "s4_data/audio_wav/test/dog/a.wav").unlink(), "a.wav: sound of clip a is missing"),
        (lambda root: (root / "s4_data/visual_frames/test/dog/a/a_3.png").unlink(), "a_3.png: frame of clip a"),
        (lambda root: (root / "s4_data/audio_wav/test/dog/a.wav").write_bytes(b"RIFF"), "a.wav: cannot read sound"),
    ],
)
def test_a_broken_copy_names_the_file_and_field(tmp_path: Path, breaks, message: str) -> None:
    from pytest_segrobust.data.avsbench import avsbench

    write_s4(tmp_path, {"a": "dog"})
    breaks(tmp_path)
    with pytest.raises(DatasetError, match=message.replace(".", r"\.")):
        dataset = avsbench(tmp_path, "s4", "test")
        dataset[0]


# --- a suite, gated by the plugin ------------------------------------------------------------------------

SUITE = """\
name: avs-tiny
task: avs
dataset: {factory: av_fakes:listed_audio_clips, kwargs: {count: 4}}
models:
  - {name: reader, factory: av_fakes:tone_reader}
corruptions: [gaussian_noise]
dynamic: {corruptions: [gaussian_noise, rotate], levels: [1, 3]}
acoustic: [low_pass, background_noise]
mixture: {protocol: r2bench, audio: [low_pass]}
severities: [5]
batch_size: 2
"""
CELLS = (
    "gaussian_noise",
    "dynamic[gaussian_noise,rotate;types=per_frame;levels=1,3]",
    "low_pass",
    "background_noise",
    MIXTURE_CELL,
)


def write(root: Path, text: str = SUITE) -> Path:
    (root / "av_fakes.py").write_text(SOURCE)
    (root / "suites").mkdir(exist_ok=True)
    path = root / "suites" / "avs.yaml"
    path.write_text(text)
    return path


def test_the_avs_keys_add_acoustic_and_mixture_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    suite = load_suite(write(tmp_path))
    assert suite.corruptions == CELLS and suite.metrics == METRICS
    mixture = suite.corruption(MIXTURE_CELL)
    assert isinstance(mixture, AudioVisualMixture) and mixture.seed == suite.seed
    assert list(mixture.visual) == ["gaussian_noise"] and list(mixture.other) == ["low_pass"]
    assert suite.corruption("low_pass").category.value == "acoustic"


def cells_of(root: Path) -> list[tuple]:
    report = json.loads((root / "segrobust-report.json").read_text())
    cells = report["suites"]["avs-tiny"]["models"]["reader"]["cells"]
    return [(c["corruption"], c["severity"], c["score"], c["details"], c["status"]) for c in cells]


def test_an_avs_suite_records_its_baselines_then_passes_alike_on_two_workers(pytester: pytest.Pytester) -> None:
    write(pytester.path)
    pytester.makeini("[pytest]\npythonpath = .\n")
    cells = 1 + len(CELLS)
    run(pytester, "--segrobust", "--segrobust-update-baselines").assert_outcomes(passed=cells)
    run(pytester, "--segrobust").assert_outcomes(passed=cells)
    alone = cells_of(pytester.path)
    assert [c[:2] for c in alone] == [("clean", 0)] + [(name, 5) for name in CELLS]
    assert alone[0][2] == 100.0 and any(c[2] < 100.0 for c in alone[1:])
    run(pytester, "--segrobust", "-n", "2").assert_outcomes(passed=cells)
    assert cells_of(pytester.path) == alone
