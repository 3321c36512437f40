"""The statistical gate resamples a task's units (a referring expression's image, an R-VOS
expression's clip), not its rows: the rows of one unit change together under a perturbation,
and drawing them as if independent narrows every interval by the design effect."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
import torch

from pytest_segrobust.core.errors import BaselineError, DatasetError
from pytest_segrobust.core.statistics import Change, Outcome, RunScores, resample_weights, unit_sums
from pytest_segrobust.core.types import ReferringMask, SampleIndex
from pytest_segrobust.data.base import ReferringTarget, Sample
from pytest_segrobust.data.demo_referring import demo_referring_dataset
from pytest_segrobust.data.demo_video import demo_rvos_dataset
from pytest_segrobust.engine.evaluation import CellResult, EvalResult, EvalSettings, evaluate, result_of
from pytest_segrobust.engine.pieces import evaluate_piece, merge_pieces
from pytest_segrobust.gate.evidence import pack_statistics, unit_rows
from pytest_segrobust.gate.verdict import PairedRuns, paired_checks
from pytest_segrobust.metrics import MetricContext, MetricResult
from pytest_segrobust.metrics.referring import ReferringMeanIoU, sample_statistics
from pytest_segrobust.store.baselines import UPDATE_FLAG
from pytest_segrobust.store.sidecar import (
    CellStatistics,
    content_digest,
    parse_sidecar,
    read_sidecar,
    sidecar_bytes,
    sidecar_path,
)
from pytest_segrobust.tasks import get_task
from tests.plugin_project import run
from tests.test_referring_suite import SUITE as REFERRING_SUITE
from tests.test_referring_suite import write_project

# -- the false-alarm rate an equally robust model meets --------------------------------------


def exchangeable_runs(
    rng: np.random.Generator, images: int, per_image: int, correlation: float
) -> tuple[list[np.ndarray], np.ndarray]:
    """Baseline clean, baseline corrupted, candidate clean and candidate corrupted statistics of
    ``per_image`` expressions on each image, drawn alike (the candidate is exactly as robust),
    each run's IoU noise sharing ``correlation`` of its variance within an image."""
    image = np.repeat(np.arange(images), per_image)
    base = rng.normal(1.0, 1.0, images)[image] + rng.normal(0.0, 0.7, image.size)
    runs = []
    for harder in (0.0, 1.0, 0.0, 1.0):
        common = rng.standard_normal(images)[image] * math.sqrt(correlation)
        own = rng.standard_normal(image.size) * math.sqrt(1.0 - correlation)
        iou = 1.0 / (1.0 + np.exp(harder - base - 0.6 * (common + own)))
        runs.append(sample_statistics(np.round(iou * 400.0), np.full(image.size, 400.0)))
    return runs, np.array([f"img{i:03d}" for i in image])


def regressed_share(images: int, per_image: int, by_image: bool, repetitions: int) -> tuple[float, float]:
    """Over ``repetitions`` suites, the share whose mIoU score the gate calls regressed at 95%
    (margin 0: the boundary an equally robust model sits on; nominal 2.5%), and the mean
    bootstrap spread of that change; the rows drawn by image (the referring task's unit) or
    one by one (the former unit)."""
    rng = np.random.Generator(np.random.PCG64(44))
    task = get_task("referring")
    units = images if by_image else images * per_image
    weights = resample_weights(units, 300, seed=5)
    failed, spreads = 0, []
    for _ in range(repetitions):
        arrays, ids = exchangeable_runs(rng, images, per_image, correlation=0.66)
        drawn = unit_rows(task, arrays, ids, images * per_image)[0] if by_image else arrays
        assert drawn[0].shape[0] == units
        scored = [RunScores.of(array, ReferringMeanIoU.resampled_scores, weights) for array in drawn]
        observed = {"score": scored[3].observed, "gamma_r": scored[3].observed / scored[2].observed}
        stored = {"score": scored[1].observed, "gamma_r": scored[1].observed / scored[0].observed}
        checks = paired_checks(observed, stored, {"": PairedRuns(*scored)}, {"score": 0.0, "gamma_r": 0.0}, 0.95)
        failed += checks[0].outcome == Outcome.FAIL
        spreads.append(np.std(scored[3].resampled - scored[1].resampled))
    return failed / repetitions, float(np.mean(spreads))


def test_expressions_drawn_by_image_keep_the_false_regressed_rate_nominal_and_drawn_one_by_one_do_not() -> None:
    repetitions = 240
    tolerance = 3 * math.sqrt(0.025 * 0.975 / repetitions)  # three binomial standard errors at nominal
    by_image, image_spread = regressed_share(60, 7, by_image=True, repetitions=repetitions)
    by_row, row_spread = regressed_share(60, 7, by_image=False, repetitions=repetitions)
    assert by_image <= 0.025 + tolerance
    assert by_row > 0.025 + 2 * tolerance  # the former unit: far above the promise
    # The intervals of the former unit were too narrow by the design effect sqrt(1 + 6 ICC).
    assert 1.6 < image_spread / row_spread < 2.6


def test_one_expression_per_image_is_the_former_bootstrap_exactly() -> None:
    arrays, ids = exchangeable_runs(np.random.Generator(np.random.PCG64(3)), 40, 1, correlation=0.5)
    summed, drawn = unit_rows(get_task("referring"), arrays, ids, 40)
    assert drawn == 40
    for mine, theirs in zip(summed, arrays, strict=True):
        np.testing.assert_array_equal(mine, theirs)  # ids sort as the rows do: the same rows, summed alone


# -- the pieces: sums per unit, the hint -----------------------------------------------------


def test_unit_sums_add_each_units_rows_whatever_their_order() -> None:
    rows = np.arange(12, dtype=np.float64).reshape(6, 2)
    units = np.array(["b", "a", "b", "c", "a", "b"])
    summed = unit_sums(rows, units)
    np.testing.assert_array_equal(summed, [[2 + 8, 3 + 9], [0 + 4 + 10, 1 + 5 + 11], [6, 7]])  # a, b, c
    order = np.array([5, 3, 0, 4, 1, 2])
    np.testing.assert_array_equal(unit_sums(rows[order], units[order]), summed)
    with pytest.raises(ValueError, match="one unit id per row"):
        unit_sums(rows, units[:5])
    with pytest.raises(ValueError, match="row 2 has an empty unit id"):
        unit_sums(rows, np.array(["a", "b", "", "a", "b", "c"]))


def test_a_sample_size_hint_is_given_only_where_the_change_lies_a_standard_error_from_the_margin() -> None:
    resampled = np.random.Generator(np.random.PCG64(0)).normal(0.0, 1.0, 2000)
    error = Change(0.0, resampled, 12).standard_error
    # On the margin within a hair: the old estimate was millions of images (now 12).
    assert Change(-1.0 + 1e-4 * error, resampled, 12).images_to_decide(1.0, 0.95) is None
    assert Change(-1.0 + 0.9 * error, resampled, 12).images_to_decide(1.0, 0.95) is None
    hint = Change(-1.0 + 1.5 * error, resampled, 12).images_to_decide(1.0, 0.95)
    assert hint is not None and 12 < hint < 12 * 2.3**2 / 1.5**2
    assert Change(0.0, np.zeros(10), 12).images_to_decide(1.0, 0.95) is None  # no spread, nothing to scale


# -- the units from the dataset to the statistics --------------------------------------------


def referring_sample(sample_id: str, unit: str | None) -> Sample:
    image = torch.zeros(3, 4, 4, dtype=torch.uint8)
    return Sample(sample_id, image, referring=ReferringTarget("the thing", torch.zeros(4, 4, dtype=torch.bool)), unit=unit)


class _Named:
    name = "toy-refs"


def test_a_referring_batch_carries_each_expressions_image_and_a_sample_without_one_is_refused() -> None:
    task = get_task("referring")
    index = task.sample_index([referring_sample("a/1", "a"), referring_sample("a/2", "a")], [0, 1], _Named())
    assert index == SampleIndex((0, 1), ("a/1", "a/2"), ("a", "a"))
    with pytest.raises(DatasetError, match=r"toy-refs: sample b/1 names no image \(Sample.unit is None\)"):
        task.sample_index([referring_sample("a/1", "a"), referring_sample("b/1", None)], [0, 1], _Named())
    # An image task's sample is its own unit: its batches carry no units, as before.
    assert get_task("semantic").sample_index([referring_sample("a/1", "a")], [3], _Named()).units is None
    assert (get_task("rvos").resampling_unit, get_task("vos").resampling_unit) == ("clip", "clip")
    assert (get_task("rvos").groups_samples, get_task("vos").groups_samples) == (True, False)


def test_the_demo_datasets_name_each_expressions_scene_or_clip() -> None:
    scenes = demo_referring_dataset("val")
    units = {scenes[i].unit for i in range(len(scenes))}
    assert units == {f"demo/val/{i:05d}" for i in range(10)} and len(scenes) > 10
    clips = demo_rvos_dataset("val")
    assert [clips[i].unit for i in (0, len(clips) - 1)] == ["demo-video/val/0000", "demo-video/val/0005"]


class RedFinder:
    """A referring model that takes the reddish pixels for whatever an expression names."""

    device = torch.device("cpu")

    def predict(self, images: torch.Tensor, texts: list[str]) -> torch.Tensor:
        return images[:, 0] > images[:, 1:].mean(dim=1) + 0.1

    def fingerprint(self) -> str:
        return "red-finder"


def test_the_referring_metrics_keep_a_unit_per_row_through_pieces_and_refuse_a_row_without_one() -> None:
    model = RedFinder()
    dataset = demo_referring_dataset("val")
    settings = EvalSettings.of("referring", ["referring_miou", "referring_p50"], batch_size=3, limit=14)
    whole = evaluate(model, dataset, None, 0, settings)
    expected = np.array([dataset[i].unit for i in range(14)])
    assert len(set(expected)) == 2  # the expressions of the first two scenes
    for name in settings.metrics:
        np.testing.assert_array_equal(whole.units[name], expected)
    pieces = [evaluate_piece(model, dataset, None, 0, i, 2, settings) for i in range(2)]
    merged = merge_pieces(pieces, 14, MetricContext.of(dataset, torch.device("cpu")), statistics=True, seconds=0.0)
    np.testing.assert_array_equal(merged.units["referring_miou"], expected)
    again = EvalResult.from_json(json.loads(json.dumps(whole.to_json())))  # the clean cache's round trip
    np.testing.assert_array_equal(again.units["referring_p50"], expected)

    metric = ReferringMeanIoU(MetricContext(("object",), 255))
    target = ReferringMask(torch.zeros(2, 4, 4, dtype=torch.bool))
    metric.update(torch.zeros(2, 4, 4, dtype=torch.bool), {"referring_mask": target, "index": SampleIndex((0, 1), ("x", "y"), ("a", "a"))})
    metric.update(torch.zeros(2, 4, 4, dtype=torch.bool), {"referring_mask": target, "index": SampleIndex((2, 3), ("z", "w"))})
    with pytest.raises(ValueError, match="kept 2 unit ids for 4 rows"):
        result_of([metric], 4, 0.0, statistics=True)


def test_packed_statistics_carry_the_units_once_and_refuse_runs_whose_units_differ() -> None:
    rows = np.ones((3, 9))
    units = np.array(["a", "a", "b"])

    def result(units: np.ndarray | None) -> EvalResult:
        kept = {} if units is None else {"referring_miou": units}
        return EvalResult({"referring_miou": MetricResult(50.0, ())}, 3, 0.0, {"referring_miou": rows}, kept)

    class Gated:
        gate, task, metrics = object(), "referring", ("referring_miou",)

    packed = pack_statistics(Gated(), CellResult(result(units), result(units)))  # type: ignore[arg-type]
    assert set(packed["referring_miou"]) == {"corrupted", "clean", "images", "units"}
    with pytest.raises(ValueError, match=r"clean and corrupted statistics of referring_miou name different images for their rows \(row 2: 'b' and 'c'\)"):
        pack_statistics(Gated(), CellResult(result(np.array(["a", "a", "c"])), result(units)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="corrupted statistics of referring_miou name no image for their rows"):
        pack_statistics(Gated(), CellResult(result(None), result(units)))  # type: ignore[arg-type]


# -- the sidecar -----------------------------------------------------------------------------


def test_the_sidecar_keeps_units_where_given_and_image_task_entries_as_before() -> None:
    rows = np.arange(6, dtype=np.float64).reshape(3, 2)
    grouped = CellStatistics(rows, rows + 1, 3, np.array(["a", "a", "b"]))
    plain = CellStatistics(rows, rows + 1, 3)
    data = sidecar_bytes("s", {"m::c::1": {"referring_miou": grouped}, "m::clean": {"miou": plain}})
    cells = parse_sidecar(data, "s.stats.npz")
    np.testing.assert_array_equal(cells["m::c::1"]["referring_miou"].units, ["a", "a", "b"])
    assert cells["m::clean"]["miou"].units is None
    index = json.loads(np.load(io.BytesIO(data))["index"].tobytes())
    assert "units" not in index["cells"]["m::clean"]["miou"]  # an image task's entry is written as it always was
    wrong = sidecar_bytes("s", {"m::c::1": {"referring_miou": CellStatistics(rows, rows, 3, np.array(["a", "b"]))}})
    with pytest.raises(BaselineError, match=r"s.stats.npz: index.cells.m::c::1.referring_miou.units: expected a unit id per row"):
        parse_sidecar(wrong, "s.stats.npz")


# -- end to end: a gated referring suite -----------------------------------------------------


def test_a_gated_referring_suite_counts_images_and_refuses_a_baseline_recorded_without_units(
    pytester: pytest.Pytester,
) -> None:
    write_project(pytester.path)  # 4 images, 2 objects each, 2 expressions per object
    suite = pytester.path / "suites" / "referring.yaml"
    suite.write_text(REFERRING_SUITE.replace("severities: [1, 5]", "severities: [3]") + "gate: {margin: {gamma_r: 0.01, score: 1.0}}\n")
    pytester.makeini("[pytest]\npythonpath = .\n")
    run(pytester, "--segrobust", f"{UPDATE_FLAG}", "-k", "clean or gaussian").assert_outcomes(passed=2)
    baseline = pytester.path / "baselines" / "referring-tiny.json"
    stored = read_sidecar(sidecar_path(baseline))
    cell = stored["colour-reader::gaussian_noise::3"]["referring_miou"]
    assert cell.images == 16 and sorted(set(cell.units)) == ["0.png", "1.png", "2.png", "3.png"]
    run(pytester, "--segrobust", "-k", "clean or gaussian").assert_outcomes(passed=2)
    report = json.loads((pytester.path / "segrobust-report-partial.json").read_text())
    checks = [c for cell in report["suites"]["referring-tiny"]["models"]["colour-reader"]["cells"] for c in cell["checks"]]
    assert checks and {(c["images"], c["unit"]) for c in checks} == {(4, "image")}  # images, not the 16 expressions

    # The sidecar as it was written before statistics carried units: refused, never compared.
    old = {name: {metric: CellStatistics(s.corrupted, s.clean, s.images) for metric, s in by.items()} for name, by in stored.items()}
    data = sidecar_bytes("referring-tiny", old)
    sidecar_path(baseline).write_bytes(data)
    document = json.loads(baseline.read_text())
    document["statistics"] = {"sha256": content_digest(data)}
    baseline.write_text(json.dumps(document))
    refused = run(pytester, "--segrobust", "-k", "gaussian")
    refused.assert_outcomes(failed=1)
    refused.stdout.fnmatch_lines([f"*recorded before statistics carried each row's image*re-record it with*{UPDATE_FLAG}*"])
