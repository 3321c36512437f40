"""The statistical gate on instance (COCO mask AP) and panoptic (PQ) suites, end to end: the
demo model's cells are recorded with their per-image statistics, pass against themselves, and
fail when the model truly gets worse."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_segrobust.store.sidecar import read_sidecar, sidecar_path
from tests.plugin_project import cached_run, run

pytest.importorskip("faster_coco_eval")

SUITE = """\
name: gated
task: {task}
dataset: {{factory: pytest_segrobust.data.demo:demo_dataset, kwargs: {{split: val}}}}
models:
  - {{name: net, factory: "pytest_segrobust.models.demo:{factory}", kwargs: {{min_area: {min_area}}}}}
corruptions: [gaussian_noise]
severities: [3]
limit: 12
metric: {metric}
gate:
  margin: {{gamma_r: 0.01, score: 1.0}}
batch_size: 8
"""
# Each task's demo model, and a min_area that drops enough of its predicted objects to lose
# far more than the margin.
TASKS = {
    "instance": {"task": "instance", "factory": "tiny_unet_instances", "metric": "map", "worse": 150},
    "panoptic": {"task": "panoptic", "factory": "tiny_unet_panoptic", "metric": "pq", "worse": 1000},
}


def write(pytester: pytest.Pytester, task: str, min_area: int) -> None:
    (pytester.path / "suites").mkdir(exist_ok=True)
    spec = TASKS[task]
    (pytester.path / "suites" / "gated.yaml").write_text(
        SUITE.format(min_area=min_area, task=spec["task"], factory=spec["factory"], metric=spec["metric"])
    )


def checks(pytester: pytest.Pytester) -> dict[str, dict[str, dict]]:
    report = json.loads((pytester.path / "segrobust-report.json").read_text())
    cells = report["suites"]["gated"]["models"]["net"]["cells"]
    return {f"{c['corruption']}{c['severity']}": {k["metric"]: k for k in c["checks"]} for c in cells}


@pytest.mark.parametrize("task", sorted(TASKS))
def test_a_gated_suite_records_statistics_passes_unchanged_and_fails_a_worse_model(
    pytester: pytest.Pytester, task: str
) -> None:
    write(pytester, task, min_area=4)  # the demo model as shipped
    run(pytester, "--segrobust", "--segrobust-update-baselines")  # without the report's figures, as every run here
    stored = read_sidecar(sidecar_path(pytester.path / "baselines" / "gated.json"))
    metric = TASKS[task]["metric"]
    assert sorted(stored) == ["net::clean", "net::gaussian_noise::3"]
    assert {cell[metric].images for cell in stored.values()} == {12}
    assert all(np.isfinite(cell[metric].corrupted).all() for cell in stored.values())

    unchanged = run(pytester, "--segrobust")
    unchanged.assert_outcomes(passed=2)
    assert {k["outcome"] for cell in checks(pytester).values() for k in cell.values()} == {"pass"}

    write(pytester, task, min_area=int(TASKS[task]["worse"]))
    worse = run(pytester, "--segrobust")
    worse.assert_outcomes(failed=2)
    worse.stdout.fnmatch_lines(["*.yaml::net::clean regressed:*"])
    drop = checks(pytester)["clean0"]["score"]
    assert drop["outcome"] == "fail" and drop["high"] < -1.0 and drop["images"] == 12


# -- COCO match rows through the cache and the sidecar ---------------------------------------


def match_rows_of(seed: int) -> tuple[np.ndarray, int]:
    from tests.metrics.test_resampled_scores import instance_scenes, mask_ap

    scenes = instance_scenes(seed)
    return mask_ap(scenes).image_statistics(), len(scenes)


def test_match_rows_survive_the_cached_result_and_the_sidecar(tmp_path) -> None:
    from pytest_segrobust.core.errors import BaselineError
    from pytest_segrobust.engine.evaluation import EvalResult
    from pytest_segrobust.metrics.base import MetricResult
    from pytest_segrobust.metrics.coco_map import MaskAP
    from pytest_segrobust.store.sidecar import Sidecar, SidecarEntry, write_sidecar

    (clean, images), (corrupted, same) = match_rows_of(1), match_rows_of(1)
    corrupted = corrupted[(corrupted[:, 5] > 0) | (corrupted[:, 2] > 0.3)]  # fewer detections: other row counts
    assert same == images and len(corrupted) < len(clean)
    cached = EvalResult({"map": MetricResult(1.0, ())}, images, 0.1, {"map": corrupted})
    np.testing.assert_array_equal(
        EvalResult.from_json(json.loads(json.dumps(cached.to_json()))).statistics["map"], corrupted
    )

    write_sidecar(sidecar_path(tmp_path / "s.json"), "s", [SidecarEntry("m::c::1", "map", corrupted, clean, images)])
    every = np.ones((1, images))
    score = float(MaskAP.resampled_scores(corrupted, every)[0])
    gamma_r = score / float(MaskAP.resampled_scores(clean, every)[0])
    found = Sidecar(tmp_path / "s.json").lookup(
        "m::c::1", "map", MaskAP.resampled_scores, {"score": score, "gamma_r": gamma_r}
    )
    assert found is not None and found.images == images and np.array_equal(found.corrupted, corrupted)

    write_sidecar(sidecar_path(tmp_path / "s.json"), "s", [SidecarEntry("m::c::1", "map", corrupted, clean, 2)])
    with pytest.raises(BaselineError, match=r"s\.stats\.npz: cells\.m::c::1\.map: statistics the metric cannot read"):
        Sidecar(tmp_path / "s.json").lookup("m::c::1", "map", MaskAP.resampled_scores, {"score": score})


# -- statistics only where a gate pairs them --------------------------------------------------


def test_per_image_statistics_are_kept_only_on_request_and_leave_the_scores_alone() -> None:
    import torch

    from pytest_segrobust.data.demo import demo_dataset
    from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
    from pytest_segrobust.models import adapt_model
    from pytest_segrobust.models.demo import tiny_unet_instances
    from pytest_segrobust.tasks import get_task

    task = get_task("instance")
    model = adapt_model(tiny_unet_instances(), task, device=torch.device("cpu"))
    dataset = demo_dataset("val", size=6)
    kept = evaluate(model, dataset, settings=EvalSettings.of(task=task, metrics=("map",)))
    left_out = evaluate(model, dataset, settings=EvalSettings.of(task=task, metrics=("map",), statistics=False))
    assert set(kept.statistics) == {"map"} and kept.statistics["map"].shape[1] == 6
    assert left_out.statistics == {}
    assert left_out.metrics == kept.metrics


def test_an_ungated_suite_keeps_no_statistics_and_a_gated_one_does_not_reuse_its_clean_cache(
    pytester: pytest.Pytester,
) -> None:
    write(pytester, "instance", min_area=4)
    gated = (pytester.path / "suites" / "gated.yaml").read_text()
    ungated = gated.replace(
        "gate:\n  margin: {gamma_r: 0.01, score: 1.0}\n", "tolerance: {gamma_r: 0.01, score: 1.0}\n"
    )
    assert ungated != gated
    (pytester.path / "suites" / "gated.yaml").write_text(ungated)
    cached_run(pytester, "--segrobust-update-baselines")  # clean results cached in .pytest_cache
    assert not sidecar_path(pytester.path / "baselines" / "gated.json").exists()
    stored = [
        json.loads(p.read_text()) for p in (pytester.path / ".pytest_cache" / "d" / "segrobust-results").glob("*.json")
    ]
    assert stored and all(entry["result"]["statistics"] == {} for entry in stored)

    # The same model and data under the statistical gate: the cached clean result holds no
    # statistics, so it is computed again with them rather than failing the cells.
    (pytester.path / "suites" / "gated.yaml").write_text(gated)
    recorded = cached_run(pytester, "--segrobust-update-baselines")
    assert "no per-image statistics" not in recorded.stdout.str()
    stored = read_sidecar(sidecar_path(pytester.path / "baselines" / "gated.json"))
    assert sorted(stored) == ["net::clean", "net::gaussian_noise::3"]
    cached_run(pytester).assert_outcomes(passed=2)
