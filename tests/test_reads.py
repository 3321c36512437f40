"""What a model's build reads keys its cached results (clean and cells): files under the project, modules imported by name."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from pytest_segrobust.provenance import reads
from tests.plugin_project import CELLS, SUITE, cached_run

CONFIGURED = """\
import importlib
import json
from pathlib import Path

from segrobust_fakes import RedBinner


def from_config():
    # The smoothing is a plain attribute, not a weight: the model's fingerprint does not see it.
    return RedBinner(smoothing=json.loads(Path("model.json").read_text())["smoothing"])


def from_helper():
    return RedBinner(smoothing=importlib.import_module("smoothing_helper").SMOOTHING)
"""


def _configured_project(pytester: pytest.Pytester) -> None:
    """The bands suite with two models: one reads a JSON file, one imports a module by name."""
    pytester.makepyfile(configured=CONFIGURED, smoothing_helper="SMOOTHING = 5\n")
    (pytester.path / "model.json").write_text(json.dumps({"smoothing": 5}))
    suite = SUITE.format(smoothing=5)
    one_model = "  - {name: binner, factory: segrobust_fakes:red_binner, kwargs: {smoothing: 5}}\n"
    two_models = (
        "  - {name: config, factory: configured:from_config}\n  - {name: helper, factory: configured:from_helper}\n"
    )
    assert one_model in suite
    (pytester.path / "suites" / "bands.yaml").write_text(suite.replace(one_model, two_models))


def _outcomes(result: pytest.RunResult) -> dict[str, int]:
    return {k: v for k, v in result.parseoutcomes().items() if k in ("passed", "failed")}


def _failed_models(result: pytest.RunResult) -> set[str]:
    return {line.split("::")[1] for line in result.outlines if line.startswith("FAILED suites/bands.yaml::")}


EDITS = {  # model: what an edit of its input looks like
    "config": ("model.json", json.dumps({"smoothing": 1, "edited": True})),
    "helper": ("smoothing_helper.py", "SMOOTHING = 1  # edited\n"),
}


XDIST = ("-n", "2")


def test_an_input_the_factory_reads_keys_its_models_cached_results(project: pytest.Pytester) -> None:
    """A JSON file the factory reads, and a module it imports by name, each key the clean result
    and the corrupted cells of the model they built, and of no other, in any process.

    Each edit is checked once, the first (JSON) with the cached run under xdist and the second
    (module) in one process; a last xdist run with nothing changed takes every result from the
    cache, so a worker keys both edited inputs as one process does (and one process keys an edit
    apart from the original). The whole scenario once per kind of process (three ``-n 2`` runs, each
    starting two workers that import torch and the plugin) took 68 CPU-s; this takes 40."""
    _configured_project(project)
    corrupted = CELLS - 1  # per model
    cached_run(project, "--segrobust-update-baselines").stdout.fnmatch_lines(
        ["clean results: 2 computed, 0 from cache*", f"corrupted cells: {2 * corrupted} measured, 0 from cache"]
    )
    unchanged = cached_run(project)  # nothing changed: the stored results serve
    unchanged.assert_outcomes(passed=2 * CELLS)
    unchanged.stdout.fnmatch_lines(["clean results: 0 computed, 2 from cache*", f"corrupted cells: 0 measured, {2 * corrupted} from cache"])

    edited: set[str] = set()
    for (model, (name, text)), dist in zip(EDITS.items(), (XDIST, ()), strict=True):
        (project.path / name).write_text(text)
        edited.add(model)
        fresh = cached_run(project, "--segrobust-no-cache")  # the reference, computed afresh: one process will do
        assert _failed_models(fresh) == edited, "the edit must change what the gate sees of that model alone"
        cached = cached_run(project, *dist)
        # The other model's results still serve; after the first edit, those are the ones just computed.
        cached.stdout.fnmatch_lines(
            ["clean results: 1 computed, 1 from cache*", f"corrupted cells: {corrupted} measured, {corrupted} from cache"]
        )
        assert _outcomes(cached) == _outcomes(fresh)

    # Workers key both edited inputs as the process that stored the second model's results did.
    again = cached_run(project, *XDIST)
    again.stdout.fnmatch_lines(["clean results: 0 computed, 2 from cache*", f"corrupted cells: 0 measured, {2 * corrupted} from cache"])
    assert _outcomes(again) == _outcomes(fresh)


def test_a_read_during_a_build_is_recorded_relative_to_the_root(tmp_path: Path) -> None:
    reads.watch(tmp_path)
    (tmp_path / "labels.json").write_text("{}")
    (tmp_path / "out.txt").write_text("")
    with reads.recording() as seen:
        (tmp_path / "labels.json").read_text()
        with open(tmp_path / "out.txt", "w") as handle:  # a write is not an input
            handle.write("x")
        json.loads(Path(__file__).read_text() and "{}")  # outside the root
    assert seen.files == {"labels.json"}
    assert reads.file_digest("labels.json") != reads.file_digest("out.txt")
    assert reads.file_digest("gone.json") == "missing"


def test_a_module_imported_by_name_during_a_build_is_recorded_cached_or_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads.watch(tmp_path)
    (tmp_path / "named_helper_for_reads.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "named_helper_for_reads", raising=False)
    for _ in range(2):  # the second import is served by sys.modules: still seen
        with reads.recording() as seen:
            importlib.import_module("named_helper_for_reads")
            importlib.import_module("json")  # installed or standard library: the source identity's business
        assert seen.modules == {"named_helper_for_reads"}


def test_the_packages_own_work_inside_a_build_is_not_the_models_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading installed adapters scans sys.path (an editable install's path hook looks like a
    file under the project): the first build of a process must not key its clean result on it."""
    reads.watch(tmp_path)
    (tmp_path / "labels.json").write_text("{}")
    (tmp_path / "plugin_helper_for_reads.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "plugin_helper_for_reads", raising=False)
    with reads.recording() as seen:
        with reads.unrecorded():
            (tmp_path / "labels.json").read_text()
            importlib.import_module("plugin_helper_for_reads")
        (tmp_path / "labels.json").read_text()  # the model's own read, after: kept
    assert seen.files == {"labels.json"} and seen.modules == set()

    monkeypatch.setattr("pytest_segrobust.models.adapters._loaded", False)
    monkeypatch.chdir(tmp_path)  # where the editable finder's hook name resolves
    with reads.recording() as first_build:
        from pytest_segrobust.models.adapters import adapters

        adapters("semantic")
    assert first_build.files == set() and first_build.modules == set()
