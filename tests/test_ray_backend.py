"""``--segrobust-backend ray``: the cells are evaluated by Ray actors, one per suite and model; the
pytest process gates and reports, and writes what a run without Ray writes."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.fakes import WOKE
from tests.plugin_project import CELLS, run
from tests.test_rerun import ALL, cached, last_failed
from tests.test_shards import baselines, take_report
from tests.test_trust import one_cell_suite

ray = pytest.importorskip("ray", reason="the Ray backend's tests need Ray: pip install 'pytest-segrobust[ray]'")

RAY = ("--segrobust-backend", "ray")
REPO = Path(__file__).resolve().parents[1]
# One xdist worker (`pytest -n 2 --dist loadgroup`) starts the module's Ray instance once.
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A local Ray instance of two cores for the module; each run joins it (and leaves it running)."""
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


def test_a_demo_suite_reports_on_ray_as_without_it(pytester: pytest.Pytester, cluster: None) -> None:
    """The embedded instance demo, compared with its committed baselines: two of its cells."""
    (pytester.path / "suites").mkdir()
    shutil.copy(REPO / "suites" / "demo-instance.yaml", pytester.path / "suites")
    shutil.copytree(REPO / "baselines", pytester.path / "baselines")
    args = ("--segrobust", "-k", "clean or rotate and 3")
    run(pytester, *args).assert_outcomes(passed=2, deselected=29)
    local = take_report(pytester, "segrobust-report-partial")
    run(pytester, *args, *RAY).assert_outcomes(passed=2, deselected=29)
    assert take_report(pytester, "segrobust-report-partial") == local


@pytest.mark.parametrize(
    ("suite", "keyword", "cells", "deselected"),
    [("demo.yaml", "clean or gaussian_noise and 3", 4, 60), ("demo-instance.yaml", "clean or rotate and 3", 2, 29)],
    ids=["semantic-miou", "instance-map"],
)
def test_a_cell_split_over_actors_gives_the_unsplit_result(
    pytester: pytest.Pytester, cluster: None, suite: str, keyword: str, cells: int, deselected: int
) -> None:
    """Two actors per model, each corrupted cell's 64 images cut in two: the same report, baselines
    and per-image statistics (the sidecar's arrays, byte for byte) as the unsplit local run."""
    (pytester.path / "suites").mkdir()
    shutil.copy(REPO / "suites" / suite, pytester.path / "suites")
    args = ("--segrobust-update-baselines", "-k", keyword)
    run(pytester, *args).assert_outcomes(passed=cells, deselected=deselected)
    unsplit, unsplit_baselines, unsplit_statistics = take_report(pytester, "segrobust-report-partial"), *written(pytester)
    shutil.rmtree(pytester.path / "baselines")
    result = run(pytester, *args, *RAY, "--segrobust-ray-split", "2")
    result.assert_outcomes(passed=cells, deselected=deselected)
    result.stdout.fnmatch_lines(["segrobust: --segrobust-ray-split 2: 2 actors per suite and model*"])
    assert take_report(pytester, "segrobust-report-partial") == unsplit
    baselines_, statistics = written(pytester)
    assert baselines_ == unsplit_baselines
    assert statistics.keys() == unsplit_statistics.keys() and statistics
    for name, array in unsplit_statistics.items():
        assert (statistics[name].dtype, statistics[name].tobytes()) == (array.dtype, array.tobytes()), name


def written(project: pytest.Pytester) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """The baseline files, and the arrays of their per-image statistics (.stats.npz) by file and name."""
    arrays = {}
    for path in sorted((project.path / "baselines").glob("*.npz")):
        with np.load(path) as stored:
            arrays |= {f"{path.name}:{name}": stored[name] for name in stored.files}
    return baselines(project), arrays


def test_the_ray_backend_writes_what_a_local_run_writes(project: pytest.Pytester, cluster: None) -> None:
    # No baselines yet: every cell fails as new and its baseline is written, as without Ray.
    run(project, "--segrobust").assert_outcomes(failed=CELLS)
    local_new, local_baselines = take_report(project), baselines(project)
    shutil.rmtree(project.path / "baselines")
    result = run(project, "--segrobust", *RAY)
    result.assert_outcomes(failed=CELLS)
    result.stdout.fnmatch_lines(["segrobust: cells evaluated on a local Ray instance, one actor per suite and model*"])
    assert take_report(project) == local_new
    assert baselines(project) == local_baselines

    # With baselines, every cell passes; JUnit shows each cell's numbers, as without Ray.
    run(project, "--segrobust").assert_outcomes(passed=CELLS)
    local = take_report(project)
    run(project, "--segrobust", *RAY, "--junitxml", "junit.xml").assert_outcomes(passed=CELLS)
    assert take_report(project) == local
    assert (project.path / "junit.xml").read_text().count('<property name="score"') == CELLS
    assert baselines(project) == local_baselines


def test_k_and_x_select_and_stop_as_without_ray(project: pytest.Pytester, cluster: None) -> None:
    args = ("--segrobust", "-k", "not clean", "-x")
    run(project, *args).assert_outcomes(failed=1, deselected=1)  # the first cell is new: the run stops
    local = take_report(project, "segrobust-report-partial")
    shutil.rmtree(project.path / "baselines")
    run(project, *args, *RAY).assert_outcomes(failed=1, deselected=1)
    report = take_report(project, "segrobust-report-partial")
    assert report == local
    assert list(report[0]["run"]["not_run"]) == ALL[2:]


def test_lf_reruns_the_failed_cell_alone_on_ray(project: pytest.Pytester, cluster: None) -> None:
    failing = "suites/bands.yaml::binner::rotate[5]"
    run(project, "--segrobust-update-baselines", "-k", "not (rotate and 5)").assert_outcomes(passed=CELLS - 1, deselected=1)
    cached(project, *RAY).assert_outcomes(passed=CELLS - 1, failed=1)  # rotate[5] has no baseline: written now
    assert last_failed(project) == {failing}
    rerun = cached(project, "--lf", *RAY, "-v")
    rerun.assert_outcomes(passed=1, deselected=CELLS - 1)
    assert [line.split()[0] for line in rerun.outlines if line.startswith("suites/")] == [failing]
    assert last_failed(project) == set()
    partial = json.loads((project.path / "segrobust-report-partial.json").read_text())["run"]
    assert partial["deselected"] == [nodeid for nodeid in ALL if nodeid != failing] and partial["selection"] == ["--lf"]
    assert partial["not_run"] == {}


def test_a_cell_that_raises_fails_as_without_ray(project: pytest.Pytester, cluster: None) -> None:
    suite = project.path / "suites" / "bands.yaml"
    suite.write_text(suite.read_text().replace("factory: segrobust_fakes:red_binner", "factory: segrobust_fakes:crashing_model"))
    suite.write_text(suite.read_text().replace(", kwargs: {smoothing: 5}", ""))
    run(project, "--segrobust").assert_outcomes(failed=CELLS)
    local = take_report(project)
    result = run(project, "--segrobust", *RAY)
    result.assert_outcomes(failed=CELLS)
    assert take_report(project) == local  # each cell's error, as the report shows it
    # The worker's traceback ends where the model raised.
    result.stdout.fnmatch_lines(["*in forward*", "*RuntimeError: CUDA out of memory (simulated)"])


def test_the_time_limit_holds_in_the_actors(project: pytest.Pytester, cluster: None) -> None:
    one_cell_suite(project, "sleepy_binner", extra="timeout: 0.5\n")
    result = run(project, "--segrobust", *RAY)
    assert not (project.path / WOKE).exists()  # the limit interrupted the model's sleep of 60 s
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["suites/bands.yaml::m::clean: stopped after the time limit of 0.5 s*"])


DYING = """\
import os
from pathlib import Path

from segrobust_fakes import RedBinner


class DiesInWorkers(RedBinner):
    \"\"\"Kills its process (as a segfault would) at its Nth forward pass, never in the controller.

    With a marker file it dies once: the first to die writes the file, and the next ones live.
    \"\"\"

    def __init__(self, controller, calls, marker=None):
        super().__init__(smoothing=5)
        self.controller, self.calls, self.marker, self.seen = controller, calls, marker, 0

    def forward(self, images):
        self.seen += 1
        if os.getpid() != self.controller and self.seen == self.calls:
            if self.marker is None or not Path(self.marker).exists():
                if self.marker is not None:
                    Path(self.marker).write_text(str(os.getpid()))
                os._exit(1)
        return super().forward(images)


def dies_in_workers(**kwargs):
    return DiesInWorkers(**kwargs)
"""


def use_dying_model(project: pytest.Pytester, **kwargs: object) -> None:
    """The suite's model dies at its 8th batch: in the third cell (3 batches a cell, clean first)."""
    project.makepyfile(dying=DYING)
    suite = project.path / "suites" / "bands.yaml"
    arguments = json.dumps({"controller": os.getpid(), "calls": 8, **kwargs})
    model = f"  - {{name: binner, factory: dying:dies_in_workers, kwargs: {arguments}}}\n"
    suite.write_text("".join(model if "name: binner" in line else line for line in suite.read_text().splitlines(True)))


def test_a_cell_whose_actor_died_is_retried_once(project: pytest.Pytester, cluster: None) -> None:
    marker = project.path / "died"
    use_dying_model(project, marker=str(marker))
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    take_report(project)
    run(project, "--segrobust").assert_outcomes(passed=CELLS)
    local = take_report(project)
    run(project, "--segrobust", *RAY).assert_outcomes(passed=CELLS)
    assert marker.exists()  # the actor died in gaussian_noise[5], was restarted, and the cell evaluated again
    assert take_report(project) == local


def test_cells_whose_actor_died_twice_fail_naming_them(project: pytest.Pytester, cluster: None) -> None:
    use_dying_model(project)  # dies at its 8th batch in every process: once more after the restart
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    result = run(project, "--segrobust", *RAY)
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes["failed"] == CELLS  # none dropped
    failed = [line.split()[1] for line in result.outlines if line.startswith("FAILED ")]
    assert len(failed) == outcomes["failed"] >= 1
    for nodeid in failed:  # which depends on the order Ray retries them in
        shown = nodeid.replace("[", "[[]")  # named by its node id (fnmatch reads '[' as a set)
        result.stdout.fnmatch_lines([f"{shown}: the Ray actor of this model gave no result for the cell: *ActorDiedError*"])
    report = json.loads((project.path / "segrobust-report.json").read_text())
    assert sorted(report["errors"]) == sorted(failed)
    assert report["run"]["not_run"] == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-n", "2"], "*--segrobust-backend ray spreads the cells over Ray actors itself: it cannot run under pytest-xdist (-n)*"),
        (["--segrobust-shard", "1/2"], "*--segrobust-backend ray * cannot be combined with --segrobust-shard*"),
    ],
    ids=["xdist", "shard"],
)
def test_ray_refuses_xdist_and_shards(project: pytest.Pytester, args: list[str], message: str) -> None:
    result = run(project, "--segrobust", *RAY, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_the_local_backend_never_imports_ray(project: pytest.Pytester) -> None:
    project.makepyfile(test_plain="import sys\n\ndef test_no_ray():\n    assert 'ray' not in sys.modules\n")
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--segrobust-update-baselines", "suites", "test_plain.py")
    result.assert_outcomes(passed=CELLS + 1)


RECORDING = """\
import os
from pathlib import Path

from pytest_segrobust.runtime import allocator
from segrobust_fakes import red_binner


def records_malloc(folder):
    \"\"\"The fake binner, after writing what this process's malloc runs with to folder/<pid>.\"\"\"
    setting = allocator.current()
    Path(folder, str(os.getpid())).write_text("never configured" if setting is None else setting.describe())
    return red_binner()
"""


@pytest.mark.parametrize("choice", ["tuned", "system"])
def test_each_actor_sets_its_own_malloc_as_asked(project: pytest.Pytester, cluster: None, choice: str) -> None:
    """The allocator is a process's: an actor does not inherit the controller's setting."""
    project.makepyfile(recording=RECORDING)
    folder = project.mkdir(f"malloc-{choice}")
    (project.path / "suites" / "bands.yaml").write_text(
        "dataset: {factory: segrobust_fakes:band_scenes}\n"
        f"models: [{{name: m, factory: recording:records_malloc, kwargs: {{folder: '{folder}'}}}}]\n"
        "corruptions: [gaussian_noise]\nseverities: [5]\n"
    )
    run(project, "--segrobust-update-baselines", "--segrobust-malloc", choice, *RAY).assert_outcomes(passed=2)
    seen = {int(path.name): path.read_text() for path in folder.iterdir()}
    actors = [setting for pid, setting in seen.items() if pid != os.getpid()]
    assert actors, f"no actor built the model: {seen}"
    assert all(setting.startswith(f"{choice} (") for setting in actors), seen
