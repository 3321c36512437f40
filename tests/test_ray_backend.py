"""``--segrobust-backend ray``: the cells are evaluated by Ray actors, one per suite and model; the
pytest process gates and reports, and writes what a run without Ray writes.

Every Ray test runs on one xdist worker (``pytest -n 2 --dist loadgroup``), against a local Ray
instance the module starts once; one test joins a cluster started apart, as a user's would be.
Each Ray run starts its actors afresh (a process that imports torch each), so the tests share
their runs: one run checks several things, and the local run it is compared with is the
cheapest that shows them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.fakes import WOKE
from tests.plugin_project import CELLS, run
from tests.test_rerun import ALL, cached, last_failed
from tests.test_shards import baselines, take_report
from tests.test_trust import ONE_CELL_SUITE, one_cell_suite

CI_VARIABLE = "SEGROBUST_CI"


def import_ray() -> ModuleType:
    """Ray, or a skip where it is not installed; under ``SEGROBUST_CI=1`` (set by .ci/run, whose
    test extra installs Ray) a missing Ray fails instead, so that these tests never skip there."""
    if os.environ.get(CI_VARIABLE) == "1":
        import ray as module

        return module
    return pytest.importorskip("ray", reason="the Ray backend's tests need Ray: pip install 'pytest-segrobust[ray]'")


ray = import_ray()

RAY = ("--segrobust-backend", "ray")
# One xdist worker (`pytest -n 2 --dist loadgroup`) starts the module's Ray instance once.
pytestmark = pytest.mark.xdist_group("ray")
# Ray's smallest object store (75 MiB): the cells' measurements are small.
OBJECT_STORE_BYTES = 80 * 2**20
# Quiet and small: no usage statistics (nor the notice about them), and no idle workers started
# ahead: every actor runs with the project's PYTHONPATH, which a prestarted worker lacks.
# No token either: recent Ray (2.60 here) turns token authentication on for a new local instance (writing a
# token under ~/.ray and RAY_AUTH_MODE into this process's environment), which a test's cluster
# on 127.0.0.1 does not need and a cluster started apart would then have to share.
QUIET = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A local Ray instance of two cores for the module; each run joins it (and leaves it running)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in QUIET.items():
            patch.setenv(name, value)
        ray.init(
            address="local",  # never a cluster `ray start` left running on this machine
            num_cpus=2,
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=False,
            object_store_memory=OBJECT_STORE_BYTES,
            _system_config={"prestart_worker_first_driver": False},
        )
        yield
        ray.shutdown()


# -- the report -------------------------------------------------------------------------------------

BROKEN = "  - {name: broken, factory: segrobust_fakes:crashing_model}\n"
# A statistical gate with aggregate margins and requirements: each model gets an aggregates item.
GATED = f"""\
name: bands
dataset: {{factory: segrobust_fakes:band_scenes}}
models:
  - {{name: binner, factory: segrobust_fakes:red_binner, kwargs: {{smoothing: 5}}}}
{BROKEN.rstrip()}
corruptions: [gaussian_noise, rotate]
severities: [1, 5]
batch_size: 3
gate:
  margin: {{gamma_r: 0.05, score: 5.0}}
  aggregates: {{mpc: 5.0, mean_gamma_r: 0.05}}
require:
  score: 1
  aggregates: {{mpc: 1, mean_gamma_r: 0.01}}
"""


def figures(project: pytest.Pytester) -> dict[str, bytes]:
    """The report's figures and pictures (worst images among them), by file name."""
    return {path.name: path.read_bytes() for path in sorted((project.path / "segrobust-report-figures").iterdir())}


def test_the_report_on_ray_is_the_local_runs(project: pytest.Pytester, cluster: None) -> None:
    """Markdown and JSON (timing aside), figures and worst images, baselines, each model's
    aggregates item and each failing cell's error: the same as one process's run."""
    (project.path / "suites" / "bands.yaml").write_text(GATED)
    run(project, "--segrobust").assert_outcomes(passed=CELLS + 1, failed=CELLS + 1)  # writes binner's baselines
    take_report(project)
    written = baselines(project)
    run(project, "--segrobust", "-v", figures=True).assert_outcomes(passed=CELLS + 1, failed=CELLS + 1)
    local, local_figures = figures(project), take_report(project)
    result = run(project, "--segrobust", "-v", "--junitxml", "junit.xml", *RAY, figures=True)
    result.assert_outcomes(passed=CELLS + 1, failed=CELLS + 1)
    result.stdout.fnmatch_lines(["segrobust: cells evaluated on a local Ray instance, one actor per suite and model*"])
    result.stdout.fnmatch_lines(["suites/bands.yaml::binner::aggregates PASSED*"])
    assert any(name.startswith("bands-worst-binner") for name in local)  # the worst images are among them
    assert figures(project) == local
    assert take_report(project) == local_figures
    assert baselines(project) == written
    # The actor's traceback ends where the model raised, and JUnit has each cell's numbers.
    result.stdout.fnmatch_lines(["*in forward*", "*RuntimeError: CUDA out of memory (simulated)"])
    assert (project.path / "junit.xml").read_text().count('<property name="score"') == CELLS


def test_a_cell_split_over_actors_gives_the_unsplit_result(project: pytest.Pytester, cluster: None) -> None:
    """Two actors per model, each corrupted cell's images cut in two: the same report, baselines
    and per-image statistics (the sidecar's arrays, byte for byte) as the unsplit local run.
    (tests/test_pieces.py merges pieces of every task without Ray.)"""
    (project.path / "suites" / "bands.yaml").write_text(GATED.replace(BROKEN, ""))  # a statistical gate keeps them
    args = ("--segrobust-update-baselines", "-k", "clean or gaussian_noise and 5")
    run(project, *args).assert_outcomes(passed=2, deselected=4)
    unsplit, unsplit_baselines, unsplit_statistics = take_report(project, "segrobust-report-partial"), *written(project)
    shutil.rmtree(project.path / "baselines")
    result = run(project, *args, *RAY, "--segrobust-ray-split", "2")
    result.assert_outcomes(passed=2, deselected=4)
    result.stdout.fnmatch_lines(["segrobust: --segrobust-ray-split 2: 2 actors per suite and model*"])
    assert take_report(project, "segrobust-report-partial") == unsplit
    baselines_, statistics = written(project)
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


# -- selection ------------------------------------------------------------------------------------


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
    cached(project).assert_outcomes(passed=CELLS - 1, failed=1)  # rotate[5] has no baseline: written now
    assert last_failed(project) == {failing}
    rerun = cached(project, "--lf", *RAY, "-v")
    rerun.assert_outcomes(passed=1, deselected=CELLS - 1)
    assert [line.split()[0] for line in rerun.outlines if line.startswith("suites/")] == [failing]
    assert last_failed(project) == set()
    partial = json.loads((project.path / "segrobust-report-partial.json").read_text())["run"]
    assert partial["deselected"] == [nodeid for nodeid in ALL if nodeid != failing] and partial["selection"] == ["--lf"]
    assert partial["not_run"] == {}


# -- actors that die or hang ------------------------------------------------------------------------

DYING = """\
import os

from segrobust_fakes import RedBinner


class DiesInWorkers(RedBinner):
    \"\"\"Kills its process (as a segfault would) at its Nth forward pass, never in the controller.

    \"\"\"

    def __init__(self, controller, calls):
        super().__init__(smoothing=5)
        self.controller, self.calls, self.seen = controller, calls, 0

    def forward(self, images):
        self.seen += 1
        if os.getpid() != self.controller and self.seen == self.calls:
            os._exit(1)
        return super().forward(images)


def dies_in_workers(**kwargs):
    return DiesInWorkers(**kwargs)
"""


def test_a_dead_actor_is_restarted_once_and_a_second_death_fails_its_cell_alone(
    project: pytest.Pytester, cluster: None
) -> None:
    """The model dies at its 8th batch in every process (3 batches a cell, clean first): in
    gaussian_noise[5], then again in its restarted actor (which evaluates the clean images again).
    The first death costs nothing (the cells are evaluated again); the second fails the cells it
    took with it, each naming itself and the actor, and the others pass.

    The same run has a second suite whose model hangs: the time limit holds in its actor (which
    starts beside the dying one, on the instance's other core: a Ray run of its own would start
    an actor, importing torch, for it alone)."""
    project.makepyfile(dying=DYING)
    suite = project.path / "suites" / "bands.yaml"
    arguments = json.dumps({"controller": os.getpid(), "calls": 8})
    model = f"  - {{name: binner, factory: dying:dies_in_workers, kwargs: {arguments}}}\n"
    suite.write_text("".join(model if "name: binner" in line else line for line in suite.read_text().splitlines(True)))
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)  # no death in this process
    take_report(project)
    hanging = ONE_CELL_SUITE.format(model="sleepy_binner", extra="timeout: 0.5\n", dataset_kwargs="")
    (project.path / "suites" / "sleepy.yaml").write_text(hanging)
    result = run(project, "--segrobust", "-v", *RAY)
    passed = {line.split()[0] for line in result.outlines if line.startswith("suites/bands.yaml") and " PASSED " in line}
    failing = [line.split()[1] for line in result.outlines if line.startswith("FAILED suites/")]  # not a bare "FAILED [ 60%]" that Ray's log output split off its line
    failed = [nodeid for nodeid in failing if nodeid.startswith("suites/bands.yaml")]
    # The hanging model's cells: each stopped by the time limit, which interrupted the model's sleep of 60 s.
    assert sorted(set(failing) - set(failed)) == ["suites/sleepy.yaml::m::clean", "suites/sleepy.yaml::m::gaussian_noise[5]"]
    assert not (project.path / WOKE).exists()
    result.stdout.fnmatch_lines(["suites/sleepy.yaml::m::clean: stopped after the time limit of 0.5 s*"])
    assert len(passed) + len(failed) == CELLS  # none dropped
    assert set(ALL[:2]) <= passed  # measured before the first death
    assert passed & set(ALL[2:])  # measured by the restarted actor: the first died in gaussian_noise[5]
    assert failed and set(failed) <= set(ALL[2:])  # which of them depends on the order Ray retries them in
    for nodeid in failed:
        shown = nodeid.replace("[", "[[]")  # named by its node id (fnmatch reads '[' as a set)
        result.stdout.fnmatch_lines([f"{shown}: the Ray actor of this model gave no result for the cell: *ActorDiedError*"])
    report = json.loads((project.path / "segrobust-report.json").read_text())
    assert sorted(report["errors"]) == sorted(failing)
    assert report["run"]["not_run"] == {}


# -- a cluster of its own ---------------------------------------------------------------------------

RECORDING = """\
import os
from pathlib import Path

from pytest_segrobust.runtime import allocator
from segrobust_fakes import red_binner


def records_malloc(folder):
    \"\"\"The fake binner, after writing to folder/<pid> the Ray cluster and the session of this
    process, and what its malloc runs with.\"\"\"
    import ray

    setting = allocator.current()
    described = "never configured" if setting is None else setting.describe()
    cluster = ray.get_runtime_context().gcs_address if ray.is_initialized() else "no cluster"
    Path(folder, str(os.getpid())).write_text(f"{cluster} {os.getsid(0)} {described}")
    return red_binner()
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class HeadNode:
    """A Ray cluster started apart: its address, and the session all its processes are in."""

    address: str
    session: int


@pytest.fixture
def head_node(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeadNode]:
    """A one-core Ray cluster started apart, as ``ray start --head`` starts a user's.

    ``ray start --block`` leads a session of its own, which every process of the cluster joins
    (its GCS, raylet, agents and workers; Ray moves some to process groups of their own, never
    out of the session): the teardown ends the session's processes, by their ids, and waits
    until none is left. (``ray stop`` would end every Ray process of this user on the machine,
    the module's instance among them.) Its files go to a folder of its own, which goes too: in
    Ray's shared one (/tmp/ray), the address it leaves behind would be joined by every later
    ``ray.init()`` given no address.
    """
    port = free_port()
    # Short: Ray's sockets live under it, and a socket's path has at most 107 characters.
    folder = Path(tempfile.mkdtemp(prefix="segrobust-ray-"))
    command = [
        str(Path(sys.executable).with_name("ray")),
        "start",
        "--head",
        "--block",
        "--num-cpus",
        "1",
        "--disable-usage-stats",
        "--include-dashboard",
        "false",
        "--node-ip-address",
        "127.0.0.1",
        "--port",
        str(port),
        "--object-store-memory",
        str(OBJECT_STORE_BYTES),
        "--temp-dir",
        str(folder),
    ]
    for name, value in QUIET.items():
        monkeypatch.setenv(name, value)  # the cluster's and the run's (started after it, in this environment)
    log = folder / "ray-start.log"
    with log.open("w") as out:
        head = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log.read_text():
            assert head.poll() is None and time.monotonic() < deadline, f"ray start did not start: {log.read_text()}"
            time.sleep(0.2)
        yield HeadNode(f"127.0.0.1:{port}", head.pid)
    finally:
        end_session(head)
        shutil.rmtree(folder)


def end_session(leader: subprocess.Popen[bytes]) -> None:
    """End every process of the session ``leader`` leads (SIGTERM, then SIGKILL to what is left
    after 1 s: some of Ray's outlive a SIGTERM by far, and a longer wait only let the test wait
    for them), and wait until none is left."""
    for sig, grace in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 10.0)):
        for pid in session_members(leader.pid):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while session_members(leader.pid) and time.monotonic() < deadline:
            leader.poll()  # reaps the leader once it exits
            time.sleep(0.2)
    leader.wait(timeout=10)
    assert not session_members(leader.pid), f"processes of the Ray cluster left behind: {session_members(leader.pid)}"


def session_members(session: int) -> list[int]:
    """The live processes of a session (Linux: /proc/PID/stat's sixth field), zombies aside."""
    members = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:  # it ended meanwhile
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields and fields[0] != "Z" and int(fields[3]) == session:
            members.append(int(entry.name))
    return members


def test_a_run_joins_the_cluster_ray_address_names(
    project: pytest.Pytester, head_node: HeadNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pytest process started as a user starts it, with ``RAY_ADDRESS`` naming a running
    cluster: the cells run there (in a process of that cluster), and the actor sets its own
    malloc as the run asks (the allocator is a process's: it is not inherited)."""
    project.makepyfile(recording=RECORDING)
    folder = project.mkdir("malloc")
    (project.path / "suites" / "bands.yaml").write_text(
        "dataset: {factory: segrobust_fakes:band_scenes}\n"
        f"models: [{{name: m, factory: recording:records_malloc, kwargs: {{folder: '{folder}'}}}}]\n"
        "corruptions: [gaussian_noise]\nseverities: [5]\n"
    )
    monkeypatch.setenv("RAY_ADDRESS", head_node.address)
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--segrobust-update-baselines", "--segrobust-figures=none", "--segrobust-malloc", "system", *RAY
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"segrobust: cells evaluated on the Ray cluster at {head_node.address} (RAY_ADDRESS), *"])
    seen = [path.read_text().split(" ", 2) for path in folder.iterdir()]
    assert len(seen) == 1, seen  # one actor built the model; the controller, none
    [(cluster, session, malloc)] = seen
    port = head_node.address.rsplit(":", 1)[1]
    assert (cluster.rsplit(":", 1)[1], int(session)) == (port, head_node.session)  # a process of that cluster
    assert malloc.startswith("system ("), seen


# -- what Ray refuses, and what runs without it ---------------------------------------------------------


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


def test_the_local_backend_never_needs_ray(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run without the Ray backend passes where ``import ray`` fails (this process has Ray
    imported: None in sys.modules makes a new import of it raise ImportError)."""
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError):
        import ray as _  # noqa: F401 - the stand-in for a missing Ray holds
    one_cell_suite(project, "red_binner")
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=2)


@pytest.mark.parametrize(
    ("option", "environment", "joined", "named"),
    [
        (None, None, "local", "a local Ray instance"),
        (None, "10.0.0.5:6379", None, "the Ray cluster at 10.0.0.5:6379 (RAY_ADDRESS)"),
        ("auto", "10.0.0.5:6379", "auto", "the Ray cluster at auto (--segrobust-ray-address)"),
    ],
    ids=["neither", "environment", "option"],
)
def test_the_cluster_a_run_joins_and_the_header_names(
    monkeypatch: pytest.MonkeyPatch, option: str | None, environment: str | None, joined: str | None, named: str
) -> None:
    """The option, else RAY_ADDRESS (read by ray.init), else a new local instance: never the
    cluster whose address an earlier ``ray start`` left on this machine, which ``ray.init()``
    given no address would join."""
    from pytest_segrobust.backends.ray import RaySettings
    from pytest_segrobust.runtime.devices import DeviceChoice

    if environment is None:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("RAY_ADDRESS", environment)
    settings = RaySettings(address=option, cpus=1.0, gpus=0.0, device=DeviceChoice("cpu"))
    assert (settings.join(), settings.cluster()) == (joined, named)
