"""The result cache serves corrupted cells as it serves clean results: an unchanged re-run reads
every cell, a run killed with kill -9 leaves whole entries of the cells it finished, a corrupt
entry is measured again, ``--segrobust-no-cache`` reads and stores nothing.

What makes an entry stale (model code, a config the build reads, a helper imported by name,
weights, the factory call) is tested with the clean results' tests, which assert the cells
too: tests/test_trust.py, tests/test_reads.py, tests/test_plugin.py.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.plugin_project import CELLS, NO_FIGURES, cached_run, recorded

CORRUPTED = CELLS - 1  # the bands suite's corrupted cells
# Stops the run the moment its third cell is reported (the clean cell and two corrupted ones), as
# a scheduler's kill -9 would: no teardown, no sessionfinish, nothing flushed.
KILLING_CONFTEST = """
import os
import signal

_finished = []


def pytest_runtest_logreport(report):
    if report.when == "call" and report.nodeid.startswith("suites/") and "KILL_AFTER_CELLS" in os.environ:
        _finished.append(report.nodeid)
        if len(_finished) == int(os.environ["KILL_AFTER_CELLS"]):
            os.kill(os.getpid(), signal.SIGKILL)
"""


def _cells_in_report(project: pytest.Pytester) -> dict[str, bool]:
    """Each cell of the JSON report (node id) with its ``cached`` field."""
    found: dict[str, bool] = {}

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "nodeid" in value and "cached" in value:
                found[value["nodeid"]] = value["cached"]
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(json.loads((project.path / "segrobust-report.json").read_text()))
    return found


def _entries(folder: Path, kind: str) -> list[Path]:
    return [path for path in sorted(folder.glob("*.json")) if json.loads(path.read_text())["kind"] == kind]


def _cached_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "(cached)" in line]


@pytest.fixture
def cache_dir(project: pytest.Pytester) -> Path:
    return project.path / ".pytest_cache" / "d" / "segrobust-results"


def test_an_unchanged_rerun_takes_every_cell_from_the_cache(project: pytest.Pytester) -> None:
    # Under xdist too: tests/test_reads.py's [n2] run reads every cell a single process stored.
    recorded(project)
    first = cached_run(project, "-v")
    first.assert_outcomes(passed=CELLS)
    first.stdout.fnmatch_lines([f"corrupted cells: {CORRUPTED} measured, 0 from cache"])
    assert not _cached_lines(first) and not any(_cells_in_report(project).values())

    again = cached_run(project, "-v")
    again.assert_outcomes(passed=CELLS)
    again.stdout.fnmatch_lines(
        ["clean results: 0 computed, 1 from cache*", f"corrupted cells: 0 measured, {CORRUPTED} from cache"]
    )
    assert len(_cached_lines(again)) == CELLS, again.outlines  # per cell: PASSED (cached)
    cells = _cells_in_report(project)
    assert len(cells) == CELLS and all(cells.values()), cells
    assert f"| {CELLS} ({CELLS} cached) |" in (project.path / "segrobust-report.md").read_text()


def test_a_run_killed_mid_way_leaves_the_cells_it_finished(
    project: pytest.Pytester, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded(project)
    project.makeconftest(KILLING_CONFTEST)
    monkeypatch.setenv("KILL_AFTER_CELLS", "3")
    killed = project.runpytest_subprocess("--segrobust", NO_FIGURES, "-p", "no:randomly", "-p", "no:xdist")
    assert killed.ret == -signal.SIGKILL, killed.outlines
    assert len(_entries(cache_dir, "cell")) == 2  # the clean cell, then two corrupted ones, finished

    monkeypatch.delenv("KILL_AFTER_CELLS")
    resumed = cached_run(project, "-v", "-p", "no:randomly")
    resumed.assert_outcomes(passed=CELLS)
    resumed.stdout.fnmatch_lines(
        ["clean results: 0 computed, 1 from cache*", "corrupted cells: 2 measured, 2 from cache"]
    )
    # The cells that had finished come from the cache; the others were measured.
    assert [line.split(" ")[0].split("::", 1)[1] for line in _cached_lines(resumed)] == [
        "binner::clean",
        "binner::gaussian_noise[1]",
        "binner::gaussian_noise[5]",
    ]
    assert "CacheWarning" not in resumed.stdout.str()


def test_a_corrupt_entry_is_measured_again_with_a_warning_naming_it(project: pytest.Pytester, cache_dir: Path) -> None:
    recorded(project)
    cached_run(project).assert_outcomes(passed=CELLS)
    cut, edited = _entries(cache_dir, "cell")[:2]
    cut.write_text(cut.read_text()[:100])  # half written
    entry = json.loads(edited.read_text())
    entry["result"]["num_images"] += 1  # valid JSON whose content is not what its digest says
    edited.write_text(json.dumps(entry))

    again = cached_run(project)
    again.assert_outcomes(passed=CELLS)
    again.stdout.fnmatch_lines([f"corrupted cells: 2 measured, {CORRUPTED - 2} from cache"])
    again.stdout.fnmatch_lines_random(
        [
            f"*CacheWarning: the result cache's entry {cut} is not used: not JSON*",
            f"*entry {edited} is not used: its content does not match its digest*",
        ]
    )
    assert json.loads(cut.read_text())["kind"] == "cell"  # stored anew
    cached_run(project).stdout.fnmatch_lines([f"corrupted cells: 0 measured, {CORRUPTED} from cache"])


def test_no_cache_reads_and_stores_nothing_and_a_named_folder_serves_without_pytests_cache(
    project: pytest.Pytester, cache_dir: Path
) -> None:
    recorded(project)
    fresh = cached_run(project, "--segrobust-no-cache", "-v")
    fresh.assert_outcomes(passed=CELLS)
    assert not cache_dir.exists() and not _cached_lines(fresh)
    assert "corrupted cells:" not in fresh.stdout.str()

    # A folder shared between CI jobs: named relative to the rootdir, used without pytest's cache.
    shared = ["-p", "no:cacheprovider", "--segrobust-cache-dir", "shared/results"]
    cached_run(project, *shared).stdout.fnmatch_lines([f"corrupted cells: {CORRUPTED} measured, 0 from cache"])
    assert len(_entries(project.path / "shared" / "results", "cell")) == CORRUPTED
    cached_run(project, *shared).stdout.fnmatch_lines([f"corrupted cells: 0 measured, {CORRUPTED} from cache"])
    assert len(_cached_lines(cached_run(project, *shared, "--segrobust-no-cache", "-v"))) == 0


def test_the_end_of_a_run_prunes_the_entries_used_longest_ago_to_the_bound(
    project: pytest.Pytester, cache_dir: Path
) -> None:
    recorded(project)
    cache_dir.mkdir(parents=True)
    stale = cache_dir / ("0" * 40 + ".json")  # an entry of an older run, larger than the bound
    stale.write_bytes(b" " * (2 << 20))
    os.utime(stale, (1_000_000_000, 1_000_000_000))
    project.makeini("[pytest]\npythonpath = .\nsegrobust_cache_size = 1\n")
    pruned = cached_run(project)
    pruned.assert_outcomes(passed=CELLS)
    pruned.stdout.fnmatch_lines(
        ["result cache: removed 1 entry used longest ago (2.0 MiB) to stay within 1 MiB (--segrobust-cache-size)"]
    )
    assert not stale.exists() and len(_entries(cache_dir, "cell")) == CORRUPTED  # this run's entries fit

    project.makeini("[pytest]\npythonpath = .\nsegrobust_cache_size = 0\n")
    refused = cached_run(project)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*ini option segrobust_cache_size: *0*"])
