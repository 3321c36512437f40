"""The statistical gate end to end: per-image statistics stored beside the baseline, paired
intervals against the suite's margin, three outcomes, and a gate that neither cries wolf when
only the execution changes nor misses a real drop."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from pytest_segrobust.core.errors import BaselineError, SuiteError
from pytest_segrobust.core.statistics import Change, resample_weights
from pytest_segrobust.gate.release import cell_level, family_size
from pytest_segrobust.metrics.miou import MeanIoU
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.store.sidecar import (
    Sidecar,
    SidecarEntry,
    pack,
    read_sidecar,
    sidecar_path,
    unpack,
    write_sidecar,
)
from pytest_segrobust.suite.schema import load_suite
from tests.plugin_project import NO_FIGURES, cached_run

# One xdist worker (`pytest -n 2 --dist loadgroup`) records the demo project once for the module.
pytestmark = pytest.mark.xdist_group("statistical_gate")

# The demo network as a release might change it: executed differently, perturbed at float16
# level, or made fragile under glare (which only the brightness corruption causes here).
VARIANTS = '''
import torch

from pytest_segrobust.models.demo import tiny_unet


class GlareFragile(torch.nn.Module):
    """Predicts background on the top rows of any image with glare (saturated pixels)."""

    def __init__(self, rows):
        super().__init__()
        self.net, self.rows = tiny_unet(), rows

    def forward(self, images):
        logits = self.net(images)
        glare = (images >= 0.999).float().mean(dim=(1, 2, 3)) >= 1e-3
        logits[glare, 0, : self.rows] += 1e4
        return logits


def demo(half_roundtrip=False, glare_rows=0):
    if glare_rows:
        return GlareFragile(glare_rows).eval()
    model = tiny_unet()
    if half_roundtrip:
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.half().float())
    return model
'''

SUITE = """\
name: glare
dataset: {{factory: pytest_segrobust.data.demo:demo_dataset, kwargs: {{split: val}}}}
models:
  - {{name: net, factory: variants:demo, kwargs: {kwargs}}}
corruptions: [brightness, rotate]
severities: [3]
limit: 32
gate:
  margin: {{gamma_r: 0.01, score: 1.0}}
  inconclusive: {inconclusive}
batch_size: 16
"""


def write(pytester: pytest.Pytester, kwargs: str = "{}", inconclusive: str = "fail") -> None:
    (pytester.path / "suites").mkdir(exist_ok=True)
    (pytester.path / "suites" / "glare.yaml").write_text(SUITE.format(kwargs=kwargs, inconclusive=inconclusive))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unchanged demo model's baselines and cached clean results, recorded once."""
    folder = tmp_path_factory.mktemp("recorded")
    (folder / "variants.py").write_text(VARIANTS)
    (folder / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (folder / "suites").mkdir()
    (folder / "suites" / "glare.yaml").write_text(SUITE.format(kwargs="{}", inconclusive="fail"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--segrobust", "--segrobust-update-baselines", NO_FIGURES, "-q"],
        cwd=folder, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return folder


@pytest.fixture
def demo_project(pytester: pytest.Pytester, recorded: Path) -> pytest.Pytester:
    pytester.makepyfile(variants=VARIANTS)
    pytester.makeini("[pytest]\npythonpath = .\n")
    write(pytester)
    for folder in ("baselines", ".pytest_cache"):
        shutil.copytree(recorded / folder, pytester.path / folder)
    return pytester


def gate_checks(pytester: pytest.Pytester, partial: bool = False) -> dict[str, dict[str, dict]]:
    name = "segrobust-report-partial.json" if partial else "segrobust-report.json"
    report = json.loads((pytester.path / name).read_text())
    cells = report["suites"]["glare"]["models"]["net"]["cells"]
    return {f"{c['corruption']}{c['severity']}": {k["metric"]: k for k in c["checks"]} for c in cells}


# -- end to end on the demo model -------------------------------------------------------------

# How the unchanged model may be executed: batch size, loader processes, and weights that went
# through float16 and back. (xdist workers, one thread each: the unchanged cells of
# test_a_true_drop_on_one_corruption_fails_and_leaves_the_others_alone, run with -n 2.) An
# execution moves the numbers the same way at every run: what a false alarm would show is a kind
# of execution the pairing mishandles, not a rate, so each kind is here once: one image per
# batch, sizes with a short last batch (3, 13), a size that divides the 32 images but is not the
# recorded 16 (8), all of them in one batch, two loader processes, and float16-rounded weights
# (a change of the clean cell too, so not from the cache) at 1, 7 and 32 images per batch.
EXECUTIONS = [
    *(["--segrobust-batch-size", str(b)] for b in (1, 3, 8, 13, 32)),
    ["--segrobust-loader-workers", "2"],
    *(["--segrobust-batch-size", str(b), "--half"] for b in (1, 7, 32)),
]


@pytest.mark.slow
def test_executions_of_the_unchanged_model_raise_no_false_alarm(demo_project: pytest.Pytester) -> None:
    """Each execution re-evaluates the clean and brightness cells: without the result cache, which
    would serve the first execution's numbers to the others (batch size and loader workers key no
    result, since they are not to change its numbers; this test is what holds them to that)."""
    assert len(EXECUTIONS) == 9
    failures = []
    for args in EXECUTIONS:
        half = "--half" in args
        write(demo_project, "{half_roundtrip: true}" if half else "{}")
        result = cached_run(
            demo_project, "-q", "--segrobust-no-cache", "-k", "clean or brightness", *(a for a in args if a != "--half")
        )
        if result.ret != 0:
            failures.append((args, result.stdout.str()[-2000:]))
            continue
        checks = gate_checks(demo_project, partial=True)
        assert sorted(checks) == ["brightness3", "clean0"], args
        for cell, by_number in checks.items():
            assert {c["outcome"] for c in by_number.values()} == {"pass"}, (args, cell, by_number)
    assert not failures, failures


def test_a_true_drop_on_one_corruption_fails_and_leaves_the_others_alone(demo_project: pytest.Pytester) -> None:
    """With two workers: the controller gates what they measured (one process gates inconclusive
    and passing cells in the tests around), and the report gives each model's aggregate changes.
    One run of the glare-fragile model for both (each had its own: 9 CPU-s more)."""
    write(demo_project, "{glare_rows: 12}")
    result = cached_run(demo_project, "-n", "2")
    result.assert_outcomes(failed=1, passed=2)  # in xdist workers too, the unchanged cells raise no false alarm
    result.stdout.fnmatch_lines(["*::net::brightness[[]3[]] regressed:*", "*gamma_r: *entirely below the margin -0.0100*"])
    checks = gate_checks(demo_project)
    drop = checks["brightness3"]["gamma_r"]
    assert drop["outcome"] == "fail" and drop["high"] < -0.01 < 0 and drop["observed"] - drop["baseline"] < -0.02
    assert {c["outcome"] for cell in ("clean0", "rotate3") for c in checks[cell].values()} == {"pass"}
    # The report gives each model's aggregate changes with intervals.
    rows = {row["number"]: row for row in json.loads((demo_project.path / "segrobust-report.json").read_text())
            ["suites"]["glare"]["aggregates"]}
    assert sorted(rows) == ["mPC", "mean γr", "mean γr (camera)", "mean γr (environment)", "rPC"]
    # Only brightness (environment) lost: its category's change is the whole loss, twice the two-cell mean's.
    environment, overall = rows["mean γr (environment)"], rows["mean γr"]
    assert environment["cells"] == 1 and overall["cells"] == 2
    assert environment["change"] == pytest.approx(2 * overall["change"], rel=1e-4)  # baselines store 6 digits
    assert environment["high"] < 0 and rows["mean γr (camera)"]["change"] == pytest.approx(0, abs=1e-5)
    assert rows["mPC"]["low"] < rows["mPC"]["change"] < rows["mPC"]["high"] < 0


def test_a_drop_the_images_cannot_decide_is_inconclusive_and_the_policy_decides(demo_project: pytest.Pytester) -> None:
    write(demo_project, "{glare_rows: 6}")  # about 1.8 points of gamma_r: within reach of the margin at 32 images
    failing = cached_run(demo_project, "-k", "brightness")
    failing.assert_outcomes(failed=1)
    failing.stdout.fnmatch_lines(["*images (now 32) would decide it*", "*FAIL · 1 cell: 1 inconclusive*"])  # the verdict last
    write(demo_project, "{glare_rows: 6}", inconclusive="warn")
    warned = cached_run(demo_project, "-k", "brightness")
    warned.assert_outcomes(passed=1)  # other warnings (e.g. assertion rewriting) depend on the environment
    warned.stdout.fnmatch_lines(["*InconclusiveWarning*", "*PASS · 1 cell: 1 inconclusive (allowed by the suite)*"])
    report = (demo_project.path / "segrobust-report-partial.md").read_text()
    assert "### Statistical gate" in report and "Δγr interval" in report and "? inconclusive (allowed)" in report


def test_the_statistics_file_must_agree_with_the_baseline_json(demo_project: pytest.Pytester) -> None:
    stored = demo_project.path / "baselines" / "glare.json"
    data = json.loads(stored.read_text())
    data["models"]["net"]["rotate"]["3"]["score"] += 0.5  # edited by hand, the statistics left as they were
    stored.write_text(json.dumps(data))
    result = cached_run(demo_project, "-k", "rotate")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*glare.stats.npz: cells.net::rotate::3.miou: the statistics give score*one file changed*"])


def test_a_statistical_gate_without_stored_statistics_fails_and_says_how_to_record_them(
    demo_project: pytest.Pytester,
) -> None:
    sidecar_path(demo_project.path / "baselines" / "glare.json").unlink()
    result = cached_run(demo_project, "-k", "rotate")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*has no per-image statistics of miou for it*--segrobust-update-baselines*"])


def test_statistics_kept_in_the_cache_gate_on_the_machine_that_recorded_them_and_nowhere_else(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(variants=VARIANTS)
    pytester.makeini("[pytest]\npythonpath = .\n")
    write(pytester)
    suite = pytester.path / "suites" / "glare.yaml"
    # Where the statistics are kept is the check, not how many images they have: 8 of them.
    text = suite.read_text().replace("  inconclusive: fail\n", "  inconclusive: fail\n  statistics: cache\n")
    suite.write_text(text.replace("limit: 32\n", "limit: 8\n"))
    rotate = ("-k", "rotate", "--segrobust-no-cache")  # no clean-result cache: the statistics' store stays on
    pytester.runpytest("--segrobust", "--segrobust-update-baselines", "-k", "rotate").assert_outcomes(passed=1)
    stored = pytester.path / ".pytest_cache" / "d" / "segrobust-statistics" / "glare.stats.npz"
    assert stored.is_file() and not sidecar_path(pytester.path / "baselines" / "glare.json").exists()
    assert sorted(read_sidecar(stored)) == ["net::rotate::3"]

    pytester.runpytest("--segrobust", "-k", "rotate").assert_outcomes(passed=1)
    # Without pytest's cache the run cannot find them, and says which field put them there.
    result = pytester.runpytest("--segrobust", "-k", "rotate", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*glare.yaml: gate.statistics: cache keeps the baseline's per-image statistics*"])
    stored.unlink()  # a machine that did not record them
    result = pytester.runpytest("--segrobust", *rotate)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*statistics file {stored} has no per-image statistics of miou*"])


# -- the sidecar ------------------------------------------------------------------------------


def counts(rng: np.random.Generator, images: int = 6, classes: int = 4) -> np.ndarray:
    return rng.integers(0, 50, size=(images, classes, 3))


def test_the_sidecar_round_trips_and_stores_a_shared_clean_array_once(tmp_path) -> None:
    rng = np.random.default_rng(0)
    clean = counts(rng)
    entries = [SidecarEntry(f"m::c::{s}", "miou", counts(rng), clean, 6) for s in (1, 2, 3)]
    write_sidecar(tmp_path / "s.stats.npz", "s", entries)
    read = read_sidecar(tmp_path / "s.stats.npz")
    assert sorted(read) == ["m::c::1", "m::c::2", "m::c::3"]
    assert all(np.array_equal(read[e.cell]["miou"].corrupted, e.corrupted) for e in entries)
    with zipfile.ZipFile(tmp_path / "s.stats.npz") as archive:
        assert len(archive.namelist()) == 1 + 3 + 1  # the index, three corrupted arrays, one clean


def test_keep_only_drops_cells_the_json_no_longer_has_and_an_empty_sidecar_is_removed(tmp_path) -> None:
    rng = np.random.default_rng(1)
    path = tmp_path / "s.stats.npz"
    write_sidecar(path, "s", [SidecarEntry(f"m::c::{s}", "miou", counts(rng), counts(rng), 6) for s in (1, 2)])
    write_sidecar(path, "s", [], keep_only={"m::c::2"})
    assert list(read_sidecar(path)) == ["m::c::2"]
    write_sidecar(path, "s", [], keep_only=set())
    assert not path.exists()


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda p: p.write_bytes(b"not a zip"), "not a readable statistics file"),
        (lambda p: np.savez(p, other=np.zeros(2)), "no index member"),
        (lambda p: np.savez(p, index=np.frombuffer(b'{"format": 9}', dtype=np.uint8)), "index.format is 9"),
        (
            lambda p: np.savez(
                p, index=np.frombuffer(b'{"format": 1, "cells": {"m::clean": {"miou": {"corrupted": "a9"}}}}', dtype=np.uint8)
            ),
            "index.cells.m::clean.miou: missing or broken field",
        ),
    ],
)
def test_a_broken_sidecar_is_refused_naming_the_file_and_the_field(tmp_path, damage, message) -> None:
    path = tmp_path / "s.stats.npz"
    damage(path)
    with pytest.raises(BaselineError, match=message) as info:
        read_sidecar(path)
    assert str(path) in str(info.value)


def test_a_lookup_recomputes_the_stored_numbers_from_the_statistics(tmp_path) -> None:
    rng = np.random.default_rng(2)
    corrupted, clean = counts(rng), counts(rng)
    write_sidecar(sidecar_path(tmp_path / "s.json"), "s", [SidecarEntry("m::c::1", "miou", corrupted, clean, 6)])
    score = float(MeanIoU.score_of(corrupted.sum(0)))
    gamma_r = score / float(MeanIoU.score_of(clean.sum(0)))
    sidecar = Sidecar(tmp_path / "s.json")
    found = sidecar.lookup("m::c::1", "miou", MeanIoU.resampled_scores, {"score": round(score, 4), "gamma_r": gamma_r})
    assert found is not None and np.array_equal(found.clean, clean)
    assert sidecar.lookup("m::c::2", "miou", MeanIoU.resampled_scores, {"score": score}) is None
    with pytest.raises(BaselineError, match="gives gamma_r|give gamma_r"):
        sidecar.lookup("m::c::1", "miou", MeanIoU.resampled_scores, {"score": score, "gamma_r": gamma_r + 0.01})


def test_packed_arrays_survive_json_and_nothing_else_unpacks() -> None:
    array = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    assert np.array_equal(unpack(json.loads(json.dumps(pack(array)))), array)
    with pytest.raises(ValueError, match="not a packed array"):
        unpack("bm90IGFuIGFycmF5")


# -- the suite's gate and its family ----------------------------------------------------------

GATED = """\
name: g
dataset: {factory: pytest_segrobust.data.demo:demo_dataset}
models: [{name: a, factory: pytest_segrobust.models.demo:tiny_unet}, {name: b, factory: pytest_segrobust.models.demo:tiny_unet}]
corruptions: [brightness, rotate, gaussian_noise]
severities: [1, 3]
"""


@pytest.mark.parametrize(
    "extra, message",
    [
        ("gate: {margin: {gamma_r: 0.01}}\ntolerance: {score: 1}\n", "field 'gate': a suite gates by tolerance"),
        ("gate: {margin: {gamma_r: .nan}}\n", "field 'gate.margin.gamma_r': expected a number >= 0"),
        ("gate: {margin: {gamma_r: 0}}\n", "field 'gate.margin.gamma_r': expected a non-inferiority margin > 0, got 0"),
        ("gate: {margin: {score: 0.0}}\n", "field 'gate.margin.score': expected a non-inferiority margin > 0, got 0"),
        ("gate: {confidence: 1.0}\n", "field 'gate.confidence'"),
        ("gate: {inconclusive: maybe}\n", "field 'gate.inconclusive': expected one of fail, warn, pass"),
        ("gate: {resamples: 10}\n", "field 'gate.resamples'"),
        ("gate: {alpha: 0.05}\n", "field 'gate.alpha': unknown field"),
        ("gate: {statistics: git}\n", "field 'gate.statistics': expected one of baselines, cache"),
        ("metric: boundary_iou\ngate: {}\n", "metric boundary_iou keeps no per-image statistics"),
    ],
)
def test_a_bad_gate_is_refused_naming_the_field(tmp_path, extra: str, message: str) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(GATED + extra)
    with pytest.raises(SuiteError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_suite(path)


def test_bonferroni_splits_the_level_over_every_gated_number(tmp_path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(GATED + "gate: {confidence: 0.9}\n")
    suite = load_suite(path)
    # per model: clean score, and score and gamma_r of 3 corruptions x 2 severities
    assert family_size(suite) == 2 * (1 + 2 * 3 * 2) == 26
    assert cell_level(suite) == pytest.approx(1 - 0.1 / 26)
    path.write_text(GATED + "gate: {confidence: 0.9, multiplicity: none}\n")
    assert cell_level(load_suite(path)) == 0.9


# -- the false-alarm rate under the null, across a whole suite ------------------------------


def test_a_family_of_cells_at_the_margin_raises_a_false_alarm_in_at_most_the_nominal_share_of_runs() -> None:
    """Thousands of A/A comparisons whose true change sits exactly on the margin (the hardest
    null): with Bonferroni over 40 numbers at 90% family confidence, at most 10% of suite runs
    may see any cell fail."""
    rng, margin, runs, cells, images = np.random.default_rng(21), 1.0, 300, 40, 64
    weights = resample_weights(images, 400, seed=5)
    level = 1 - 0.10 / cells
    alarms = 0
    for _ in range(runs):
        base = rng.normal(60, 15, size=(cells, images))
        cand = base - margin + rng.normal(0, 3, size=(cells, images))
        diff = cand - base
        observed = diff.mean(axis=1)
        resampled = (weights @ diff.T).T / images  # (cells, resamples) of the mean change
        highs = [Change(float(o), r, images).interval(level)[1] for o, r in zip(observed, resampled, strict=True)]
        alarms += any(high < -margin for high in highs)
    assert alarms / runs <= 0.10 + 3 * math.sqrt(0.10 * 0.90 / runs)


def test_cell_keys_of_the_sidecar_are_the_baselines_key_paths() -> None:
    from pytest_segrobust.store.baselines import key_path

    assert key_path(CellKey("s", "m", "rotate", 3)) == "m::rotate::3"
    assert key_path(CellKey("s", "m", "clean", 0, "night")) == "m::night::clean"


def test_evidence_scores_each_distinct_run_once_per_weights() -> None:
    from pytest_segrobust.gate.evidence import Evidence

    evidence, rng = Evidence(), np.random.default_rng(3)
    clean = counts(rng)
    weights, other = resample_weights(6, 20, seed=1), resample_weights(6, 20, seed=2)
    first = evidence.scores("miou", clean, weights)
    assert evidence.scores("miou", clean.copy(), weights) is first  # the same numbers: scored once
    assert evidence.scores("miou", clean, other) is not first
    changed = clean.copy()
    changed[0, 0, 0] += 1
    assert evidence.scores("miou", changed, weights).observed != first.observed
    np.testing.assert_array_equal(first.resampled, MeanIoU.resampled_scores(clean, weights))
