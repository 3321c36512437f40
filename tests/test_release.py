"""Release criteria end to end: requirements gate cells and a first release, each model's
aggregates item decides aggregate requirements and margins, visible as an ordinary test
(terminal, JUnit, ``--lf``), the same with and without xdist, and from a merged shard run."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from pytest_segrobust.core.statistics import resample_weights
from pytest_segrobust.gate.release import CellEvidence, judge_model
from pytest_segrobust.store.records import CellRecord
from pytest_segrobust.suite.schema import load_suite
from tests.plugin_project import cached_run, run

SUITE = """\
name: bands
dataset: {{factory: segrobust_fakes:band_scenes, kwargs: {{size: 12}}}}
models:
  - {{name: binner, factory: segrobust_fakes:red_binner, kwargs: {{smoothing: 5}}}}
corruptions: [gaussian_noise, rotate]
severities: [1, 5]
batch_size: 4
gate:
  margin: {{gamma_r: 0.05, score: 5.0}}
  inconclusive: {inconclusive}
  aggregates: {{mpc: 5.0, mean_gamma_r: 0.05}}
require:
  score: 1
  gamma_r: 0.01
  classes: {{b: {{gamma_r: 0.01}}}}
  aggregates:
    mpc: {mpc}
    mean_gamma_r: 0.01
"""
CELLS = 5
AGGREGATES = "suites/bands.yaml::binner::aggregates"


def write(pytester: pytest.Pytester, mpc: float = 1, inconclusive: str = "fail") -> None:
    (pytester.path / "suites").mkdir(exist_ok=True)
    (pytester.path / "suites" / "bands.yaml").write_text(SUITE.format(mpc=mpc, inconclusive=inconclusive))


def report(pytester: pytest.Pytester, partial: bool = False) -> dict:
    name = "segrobust-report-partial.json" if partial else "segrobust-report.json"
    return json.loads((pytester.path / name).read_text())


def release(data: dict) -> dict:
    return data["suites"]["bands"]["release"]


# Under xdist the aggregates item runs on the worker of its model's cells and ships its outcome
# with its report: test_the_aggregates_item_decides_the_same_under_xdist checks that once.
def test_a_first_release_passes_on_its_requirements_and_each_model_has_an_aggregates_item(
    project: pytest.Pytester,
) -> None:
    dist: list[str] = []
    write(project)
    result = run(project, "--segrobust", "-v", "--junitxml=junit.xml", *dist)
    result.assert_outcomes(passed=CELLS + 1)
    assert any(AGGREGATES in line and "PASSED" in line for line in result.outlines)
    result.stdout.fnmatch_lines(
        ["PASS · 5 cells: 5 recorded (no baseline yet; requirements met); 1 model's aggregates: 1 passed"]
    )
    data = report(project)
    assert data["verdict"]["passed"]
    rows = {row["rule"]: row for row in release(data)["requirements"]}
    assert set(rows) == {
        "require.score",
        "require.gamma_r",
        "require.classes.b.gamma_r",
        "require.aggregates.mpc",
        "require.aggregates.mean_gamma_r",
    }
    # mIoU resamples classes: a class's requirement has bootstrap bounds, as the cell's numbers do.
    assert rows["require.classes.b.gamma_r"]["worst"]["low"] is not None
    assert rows["require.classes.b.gamma_r"]["worst"]["number"] == "gamma_r of b"
    assert dict(rows["require.score"]["outcomes"]) == {"pass": CELLS}
    assert dict(rows["require.gamma_r"]["outcomes"]) == {"pass": CELLS - 1}
    assert rows["require.aggregates.mpc"]["worst"]["low"] is not None  # decided by the bootstrap
    (model,) = release(data)["models"]
    assert model["status"] == "passed" and model["measured_here"] == 0
    # No baseline yet: the aggregate margins have nothing to pair with, and say so.
    assert model["checks"] == [] and "no baseline statistics" in model["notes"][0]
    cases = {case.get("name"): case for case in ET.parse(project.path / "junit.xml").getroot().iter("testcase")}
    properties = {p.get("name"): p.get("value") for p in cases["aggregates"].iter("property")}
    assert properties["status"] == "passed"
    assert properties["requirement require.aggregates.mpc"].startswith("met: mPC ")
    cell = {p.get("name"): p.get("value") for p in cases["gaussian_noise[5]"].iter("property")}
    assert cell["requirement require.gamma_r"].startswith("met: gamma_r ")
    # Against the baselines it just recorded: the cells and the aggregate margins pass.
    again = run(project, "--segrobust", *dist)
    again.assert_outcomes(passed=CELLS + 1)
    (model,) = release(report(project))["models"]
    assert {c["metric"] for c in model["checks"]} == {"mPC", "mean γr", "mean γr (noise)", "mean γr (camera)"}
    assert all(c["outcome"] == "pass" for c in model["checks"])


def test_an_unmet_aggregate_requirement_fails_its_item_naming_the_suite_line_and_reruns_with_lf(
    project: pytest.Pytester,
) -> None:
    write(project)
    cached_run(project).assert_outcomes(passed=CELLS + 1)
    write(project, mpc=99.5)
    result = cached_run(project)
    result.assert_outcomes(passed=CELLS, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*requirement not met*",
            "*mPC *requires ≥ 99.5000 (require.aggregates.mpc, line 17)*",
            "suites/bands.yaml:17: require.aggregates.mpc ≥ 99.5000 unmet for 1 of 1 (worst: binner aggregates: mPC *",
            "FAIL · 5 cells: 5 passed; 1 model's aggregates: 1 with a requirement unmet",  # the section's last line
            f"FAILED {AGGREGATES} - *",
        ]
    )
    assert not report(project)["verdict"]["passed"]
    # --lf runs the aggregates item alone: it measures the cells it needs itself, and decides the same.
    rerun = cached_run(project, "--lf")
    rerun.assert_outcomes(failed=1)
    (model,) = release(report(project, partial=True))["models"]
    assert model["measured_here"] == CELLS and model["status"] == "unmet"


def test_the_aggregates_item_decides_the_same_under_xdist(project: pytest.Pytester) -> None:
    write(project)
    run(project, "--segrobust").assert_outcomes(passed=CELLS + 1)
    write(project, mpc=99.5)
    single = run(project, "--segrobust")
    single.assert_outcomes(passed=CELLS, failed=1)
    alone = release(report(project))
    workers = run(project, "--segrobust", "-n", "2")
    workers.assert_outcomes(passed=CELLS, failed=1)
    assert release(report(project)) == alone


def test_a_merged_shard_run_decides_the_aggregates(project: pytest.Pytester) -> None:
    write(project)
    run(project, "--segrobust").assert_outcomes(passed=CELLS + 1)
    write(project, mpc=99.5)
    for index in (1, 2):
        run(project, "--segrobust", f"--segrobust-shard={index}/2")
    from pytest_segrobust.cli import main

    shards = sorted(str(p) for p in project.path.glob("segrobust-report-shard-*-of-2.json"))
    assert len(shards) == 2, list(project.path.iterdir())
    assert main(["merge", *shards, "--rootdir", str(project.path)]) == 1
    data = report(project)
    assert not data["verdict"]["passed"]
    (model,) = release(data)["models"]
    assert model["status"] == "unmet"


def test_an_unmet_cell_requirement_fails_the_cell_whatever_its_baseline(project: pytest.Pytester) -> None:
    write(project)
    run(project, "--segrobust").assert_outcomes(passed=CELLS + 1)
    suite = project.path / "suites" / "bands.yaml"
    suite.write_text(
        suite.read_text().replace(
            "  gamma_r: 0.01\n", "  gamma_r: 0.01\n  corruptions: {gaussian_noise: {severities: {5: {gamma_r: 1.5}}}}\n"
        )
    )
    result = run(project, "--segrobust")
    result.assert_outcomes(passed=CELLS, failed=1)
    result.stdout.fnmatch_lines(
        [
            "suites/bands.yaml::binner::gaussian_noise[[]5[]]: 1 requirement not met:*",
            "*require.corruptions.gaussian_noise.severities.5.gamma_r, line 15*",
            "suites/bands.yaml:15: require.corruptions.gaussian_noise.severities.5.gamma_r ≥ 1.5000 unmet for 1 of 1*",
        ]
    )
    cells = {c["nodeid"]: c for c in report(project)["suites"]["bands"]["models"]["binner"]["cells"]}
    assert cells["suites/bands.yaml::binner::gaussian_noise[5]"]["status"] == "unmet"


# -- the aggregate gate's power: many small drops that no cell can confirm ---------------------------


def synthetic_model(
    drop: float, cells: int = 30, images: int = 64, resamples: int = 2000
) -> dict[str | None, list[CellEvidence]]:
    """A model whose every corrupted cell lost ``drop`` of gamma_r against its baseline, images noisy alike."""
    rng = np.random.default_rng(0)
    weights = resample_weights(images, resamples, seed=1)
    clean_images = rng.uniform(60, 80, images)
    evidence = []
    clean_scores = weights @ clean_images / images
    for index in range(cells):
        base_images = clean_images * rng.uniform(0.6, 0.9) + rng.normal(0, 8, images)
        noise = rng.normal(0, 9, images)  # how the candidate differs image by image: no cell sees the drop
        cand_images = base_images + noise - drop * clean_images
        base, cand = weights @ base_images / images, weights @ cand_images / images
        record = CellRecord(
            nodeid=f"s.yaml::m::c{index}[1]",
            suite="s",
            model="m",
            corruption=f"c{index}",
            category="noise",
            severity=1,
            score=float(cand_images.mean()),
            clean_score=float(clean_images.mean()),
            gamma_r=float(cand_images.mean() / clean_images.mean()),
            gamma_a=None,
            per_class=[],
            class_names=[],
            num_images=images,
            seconds=0.0,
            status="passed",  # type: ignore[arg-type]
            baseline={"score": float(base_images.mean()), "gamma_r": float(base_images.mean() / clean_images.mean())},
        )
        from pytest_segrobust.store.sidecar import pack

        paired = {
            "images": images,
            "clean": pack(np.stack([clean_scores, clean_scores]).astype(np.float32)),
            "corrupted": pack(np.stack([cand, base]).astype(np.float32)),
        }
        evidence.append(CellEvidence(record, clean_scores, cand, images, paired))
    return {None: evidence}


def test_the_aggregate_margin_catches_a_drop_too_small_for_any_cell(tmp_path) -> None:
    suite_file = tmp_path / "s.yaml"
    suite_file.write_text(
        "name: s\n"
        "dataset: {factory: pytest_segrobust.data.demo:demo_dataset}\n"
        "models: [{name: m, factory: pytest_segrobust.models.demo:tiny_unet}]\n"
        "corruptions: [gaussian_noise]\nseverities: [1]\n"
        "gate: {margin: {gamma_r: 0.01, score: 1.0}, aggregates: {mean_gamma_r: 0.01}}\n"
    )
    suite = load_suite(suite_file)
    unchanged = judge_model(suite, "m", "s.yaml::m::aggregates", synthetic_model(0.0))
    assert unchanged.passed, unchanged.message
    worse = judge_model(suite, "m", "s.yaml::m::aggregates", synthetic_model(0.025))
    assert worse.status == "regressed" and "mean γr" in worse.message
    (mean_check,) = [c for c in worse.checks if c.metric == "mean γr"]
    assert mean_check.high < -0.01
    assert mean_check.detectable is not None and mean_check.detectable < 0.025
    # Hardly any cell alone confirms its drop of 0.025 beyond the margin of 0.01: their intervals straddle it.
    from pytest_segrobust.core.statistics import Change
    from pytest_segrobust.gate.evidence import cell_level
    from pytest_segrobust.store.sidecar import unpack

    confirmed = 0
    for cell in synthetic_model(0.025)[None]:
        scores = unpack(cell.paired["corrupted"]).astype(float)
        change = Change(cell.record.gamma_r - cell.record.baseline["gamma_r"], (scores[0] - scores[1]) / cell.clean, 64)
        confirmed += change.interval(cell_level(suite))[1] < -0.01
    assert confirmed <= 3
