"""Under xdist (-n), a model's cells go to one worker: the units, the scheduler's bookkeeping
with stand-in workers, and real runs with two workers (grouping, the report of xdist's own
scheduler, -k, --lf, -x, a worker that crashes)."""

from __future__ import annotations

import json
import re
import shutil
from types import SimpleNamespace

import pytest
from xdist.remote import Producer

from pytest_segrobust.backends.shard_plan import cut
from pytest_segrobust.backends.xdist import ModelGroupScheduling, plan_units
from pytest_segrobust.report import without_timing
from tests.plugin_project import BLACKOUT_CONFTEST, run

# -- units ------------------------------------------------------------------------------------


def is_cell(nodeid: str) -> bool:
    return nodeid.startswith("suites/")


def test_cut_gives_the_fewest_near_equal_runs_within_the_share() -> None:
    assert cut(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert cut(list(range(4)), 4) == [[0, 1, 2, 3]]
    assert cut([], 2) == []


def test_a_models_cells_are_one_unit_and_other_tests_one_each_after_them() -> None:
    collection = [
        "test_plain.py::test_a",
        "suites/a.yaml::m::clean",
        "suites/a.yaml::m::rotate[1]",
        "suites/a.yaml::n::clean",
        "suites/shift.yaml::m::val::clean",  # a natural-shift suite: both splits build the same model
        "suites/shift.yaml::m::ood::clean",
        "suites/a.yaml::m::rotate[5]",  # not next to its model's other cells: still in their unit
        "test_plain.py::test_b",
    ]
    assert plan_units(collection, is_cell, workers=2) == [[1, 2, 6], [4, 5], [3], [0], [7]]


def test_a_model_with_more_than_a_workers_share_is_cut_into_consecutive_runs() -> None:
    collection = [f"suites/a.yaml::big::cell[{i}]" for i in range(7)] + ["suites/a.yaml::small::clean"]
    # 8 cells over 2 workers: a share of 4, so the 7 cells of `big` go in two runs.
    assert plan_units(collection, is_cell, workers=2) == [[0, 1, 2, 3], [4, 5, 6], [7]]
    assert plan_units(collection, is_cell, workers=1) == [list(range(7)), [7]]


# -- the scheduler with stand-in workers --------------------------------------------------------


class Worker:
    """What the scheduler uses of xdist's WorkerController: it records what it was sent."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[list[int]] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        assert not self.shutting_down, "work sent after the shutdown"
        self.sent.append(list(indices))

    def shutdown(self) -> None:
        self.shutting_down = True


def start(collection: list[str], workers: int = 2) -> tuple[ModelGroupScheduling, list[Worker]]:
    config = SimpleNamespace(getvalue=lambda name: ["popen"] * workers, hook=SimpleNamespace(pytest_collectreport=None))
    scheduler = ModelGroupScheduling(config, Producer("test", enabled=False), is_cell=is_cell)  # type: ignore[arg-type]
    nodes = [Worker(f"gw{i}") for i in range(workers)]
    for node in nodes:
        join(scheduler, node, collection)
    return scheduler, nodes


def join(scheduler: ModelGroupScheduling, node: Worker, collection: list[str]) -> None:
    """As xdist's controller does when a worker is ready and has collected."""
    scheduler.add_node(node)  # type: ignore[arg-type]
    scheduler.add_node_collection(node, collection)  # type: ignore[arg-type]
    if scheduler.collection_is_completed:
        scheduler.schedule()


def cells(models: int, each: int) -> list[str]:
    return [f"suites/a.yaml::m{m}::cell[{c}]" for m in range(models) for c in range(each)]


def test_workers_get_whole_units_and_more_only_when_about_to_run_out() -> None:
    scheduler, (gw0, gw1) = start(cells(models=3, each=2))
    assert gw0.sent == [[0, 1]] and gw1.sent == [[2, 3]]  # one unit each; m2 waits
    scheduler.mark_test_complete(gw0, 0)  # type: ignore[arg-type]
    assert gw0.sent == [[0, 1], [4, 5]]  # the next unit while it runs its unit's last cell
    assert gw0.shutting_down and not scheduler.tests_finished
    scheduler.mark_test_complete(gw1, 2)  # type: ignore[arg-type]
    assert gw1.sent == [[2, 3]] and gw1.shutting_down
    for index in (1, 4):
        scheduler.mark_test_complete(gw0, index)  # type: ignore[arg-type]
    assert scheduler.tests_finished  # each worker is on its last cell


def test_a_crashed_worker_gives_back_only_the_cells_that_had_not_started() -> None:
    collection = cells(models=2, each=4)
    scheduler, (gw0, gw1) = start(collection)
    assert gw0.sent == [[0, 1, 2, 3]] and gw1.sent == [[4, 5, 6, 7]]
    for index in (0, 1):
        scheduler.mark_test_complete(gw0, index)  # type: ignore[arg-type]
    assert gw0.shutting_down and gw1.shutting_down  # nothing left to send: both finish what they hold
    assert scheduler.remove_node(gw0) == collection[2]  # type: ignore[arg-type]  # xdist reports it failed
    assert scheduler.has_pending and not scheduler.tests_finished
    gw2 = Worker("gw2")  # xdist's replacement
    join(scheduler, gw2, collection)
    assert gw2.sent == [[3]] and gw2.shutting_down  # neither the finished cells nor the one that crashed
    assert gw1.sent == [[4, 5, 6, 7]]


def test_a_crash_with_the_next_unit_already_sent_gives_back_both_units_in_order() -> None:
    collection = cells(models=4, each=2)
    scheduler, (gw0, gw1) = start(collection)
    scheduler.mark_test_complete(gw0, 0)  # type: ignore[arg-type]
    assert gw0.sent == [[0, 1], [4, 5]]
    assert scheduler.remove_node(gw0) == collection[1]  # type: ignore[arg-type]
    scheduler.mark_test_complete(gw1, 2)  # type: ignore[arg-type]
    assert gw1.sent == [[2, 3], [4, 5]]  # the crashed worker's unstarted unit before m3's
    assert list(scheduler.queue) == [[6, 7]]


def test_a_replacement_that_collected_other_tests_is_shut_down_unused() -> None:
    collection = cells(models=2, each=2)
    scheduler, (gw0, _) = start(collection)
    scheduler.remove_node(gw0)  # type: ignore[arg-type]
    gw2 = Worker("gw2")
    join(scheduler, gw2, collection[:-1])
    assert gw2.sent == [] and gw2.shutting_down


# -- runs with two workers ------------------------------------------------------------------------

TWO_MODELS = """\
name: bands
dataset: {factory: segrobust_fakes:band_scenes}
models:
  - {name: sharp, factory: segrobust_fakes:red_binner, kwargs: {smoothing: 1}}
  - {name: smooth, factory: segrobust_fakes:red_binner, kwargs: {smoothing: 5}}
corruptions: [gaussian_noise, rotate]
severities: [1, 5]
tolerance: {gamma_r: 0.01, score: 1.0}
batch_size: 3
"""
# A cell read from the result cache says so after its outcome: ``PASSED (cached)``.
RESULT_LINE = re.compile(r"\[(gw\d+)\] \[\s*\d+%\] (PASSED|FAILED)(?: \(cached\))? (suites/\S+)")


@pytest.fixture
def two_models(project: pytest.Pytester) -> pytest.Pytester:
    """The plugin project with a suite of two models of five cells each."""
    (project.path / "suites" / "bands.yaml").write_text(TWO_MODELS)
    return project


def workers_by_model(result: pytest.RunResult) -> dict[str, set[str]]:
    """Which workers ran each model's cells, from ``-v`` lines such as ``[gw1] [ 10%] PASSED suites/...``."""
    found: dict[str, set[str]] = {}
    for line in result.outlines:
        if (match := RESULT_LINE.search(line)) is not None:
            found.setdefault(match.group(3).split("::")[1], set()).add(match.group(1))
    return found


def test_each_model_runs_on_one_worker_and_k_lf_and_x_select_and_stop_as_under_load(two_models: pytest.Pytester) -> None:
    # -k: baselines for all but the rotate cells, once with xdist's load and once by model; each
    # model's three cells on one worker, and the same report and baselines either way.
    path = two_models.path
    outputs = {}
    for dist in ("load", "model"):
        result = run(two_models, "--segrobust-update-baselines", "-n", "2", "-v", "-k", "not rotate", "--segrobust-dist", dist)
        result.assert_outcomes(passed=6)
        scheduler = "ModelGroupScheduling" if dist == "model" else "LoadScheduling"
        result.stdout.fnmatch_lines([f"scheduling tests via {scheduler}"])
        report = json.loads((path / "segrobust-report-partial.json").read_text())
        # -k deselects in each worker; the controller's partial report names what it left out.
        rotate = [f"suites/bands.yaml::{model}::rotate[{s}]" for model in ("sharp", "smooth") for s in (1, 5)]
        assert report["run"]["deselected"] == rotate and report["run"]["selection"] == ["-k 'not rotate'"]
        outputs[dist] = (without_timing(report), (path / "baselines" / "bands.json").read_text(), workers_by_model(result))
        if dist == "load":  # the next run starts afresh
            shutil.rmtree(path / "baselines")
            for written in path.glob("segrobust-report*"):
                shutil.rmtree(written) if written.is_dir() else written.unlink()
    grouped = outputs["model"][2]
    assert sorted(grouped) == ["sharp", "smooth"] and all(len(workers) == 1 for workers in grouped.values()), grouped
    assert grouped["sharp"] != grouped["smooth"]  # one model each: both workers busy
    assert outputs["model"][:2] == outputs["load"][:2]
    # The rotate cells fail for want of a baseline (one process records which: what --lf reads
    # does not depend on who wrote it); --lf with two workers runs them alone.
    two_models.runpytest("--segrobust").assert_outcomes(passed=6, failed=4)
    rerun = two_models.runpytest("--segrobust", "-n", "2", "-v", "--lf")
    rerun.assert_outcomes(passed=4)
    rerun_cells = [match.group(3) for line in rerun.outlines if (match := RESULT_LINE.search(line))]
    assert sorted(rerun_cells) == [f"suites/bands.yaml::{model}::rotate[{s}]" for model in ("sharp", "smooth") for s in (1, 5)]
    # -x: without baselines every cell fails; the run stops early and says which cells never ran.
    shutil.rmtree(two_models.path / "baselines")
    stopped = run(two_models, "--segrobust", "-n", "2", "-x")
    outcomes = stopped.parseoutcomes()
    assert 1 <= outcomes["failed"] < 10 and "passed" not in outcomes
    report = json.loads((two_models.path / "segrobust-report-partial.json").read_text())
    assert len(report["missing"]) == 10 - outcomes["failed"]


CRASHING = """\
dataset: {factory: segrobust_fakes:band_scenes}
models:
  - {name: fragile, factory: segrobust_fakes:exit_on_black}
  - {name: steady, factory: segrobust_fakes:red_binner}
corruptions: [blackout, rotate]
severities: [1, 2, 5]
batch_size: 3
"""


def test_a_crashed_worker_loses_only_the_cell_it_crashed_in_and_the_run_ends(project: pytest.Pytester) -> None:
    project.makeconftest(BLACKOUT_CONFTEST)
    (project.path / "suites" / "bands.yaml").write_text(CRASHING)
    # fragile's unit is clean, blackout[1], [2], [5] (the model exits the process on its black
    # images), then rotate[1], [2], [5]: those three were sent to the worker and never started.
    # In a subprocess with a time limit: a scheduler that waits for them forever fails here.
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--segrobust-update-baselines", "-n", "2", "-v", timeout=300
    )
    result.assert_outcomes(passed=13, failed=1)  # a crashed cell sent again would crash again: failed=2
    crashed = "suites/bands.yaml::fragile::blackout[5]"
    pattern = crashed.replace("[", "[[]")
    result.stdout.fnmatch_lines(
        [f"*worker 'gw*' crashed while running '{pattern}'*", f"1 cell failed with an error (no result)*{pattern}*"]
    )
    assert len([line for line in result.outlines if line.startswith("replacing crashed worker")]) == 1
    report = json.loads((project.path / "segrobust-report.json").read_text())  # every other cell ran: the full report
    assert list(report["errors"]) == [crashed] and f"crashed while running '{crashed}'" in report["errors"][crashed]
    assert report["missing"] == [] and not report["run"]["partial"]
    ran = report["suites"]["bands"]["models"]
    # Every other cell made it, including those the worker that died ran before, and was recorded.
    assert len(ran["fragile"]["cells"]) == 6 and len(ran["steady"]["cells"]) == 7
    stored = json.loads((project.path / "baselines" / "bands.json").read_text())["models"]
    assert set(stored["fragile"]["blackout"]) == {"1", "2"} and set(stored["fragile"]["rotate"]) == {"1", "2", "5"}
