"""The projects in examples/: each, copied as a user would copy it, passes against its shipped
baselines, fails with a pasteable regression message once its model is degraded, and records
the very baselines it ships."""

from __future__ import annotations

import json
import runpy
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

# Imported here, before any in-process run: pytester gives each run the modules imported before
# it and drops the rest, and a class imported afresh in a later run is not the one the
# package's modules imported before it checked samples against.
import pytest_segrobust.data.avsbench
import pytest_segrobust.data.coco
import pytest_segrobust.data.davis
import pytest_segrobust.data.semantic_folder
import pytest_segrobust.models.demo_avs
import pytest_segrobust.models.demo_video
import pytest_segrobust.models.promptable_functions  # noqa: F401
from tests.plugin_project import run as run_project

# One thread: these small models wait on a second thread longer than it saves them (CPU-s counted in CI).
ONE_THREAD = ("--segrobust-threads", "1")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run_project(pytester, *ONE_THREAD, *args)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DEGRADE = "SEGROBUST_EXAMPLE_DEGRADE"


@dataclass(frozen=True)
class Example:
    folder: str
    suite: str
    model: str
    cells: int


CASES = [
    Example("image-folder", "shapes", "shapes-net", 7),
    Example("davis-vos", "davis-vos", "tracker", 7),
    Example("avsbench-avs", "avsbench-avs", "listener", 7),
    Example("promptable-coco", "promptable-coco", "grower", 6),
]


def copy_example(example: Example, target: Path) -> None:
    """The example's shipped files in ``target``, and its data where a script writes them."""
    source = EXAMPLES / example.folder
    shutil.copytree(
        source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("segrobust-report*", "__pycache__")
    )
    if not (target / "data").exists():
        runpy.run_path(str(target / "make_data.py"), run_name="__main__")


@pytest.mark.parametrize("example", CASES, ids=[case.folder for case in CASES])
def test_example_passes_catches_its_degraded_model_and_records_its_baselines(
    example: Example, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy_example(example, pytester.path)
    shipped = json.loads((EXAMPLES / example.folder / "baselines" / f"{example.suite}.json").read_text())
    monkeypatch.delenv(DEGRADE, raising=False)

    run(pytester, "--segrobust").assert_outcomes(passed=example.cells)

    monkeypatch.setenv(DEGRADE, "1")
    degraded = run(pytester, "--segrobust")
    outcomes = degraded.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1, degraded.stdout.str()
    clean_id = f"suites/{example.suite}.yaml::{example.model}::clean"
    # The message names the cell by its node id, which pytest takes back as it is printed.
    degraded.stdout.fnmatch_lines(
        [
            f"{clean_id} regressed:",
            "  score: observed *, baseline *, delta -*, tolerance 1.0000",
            f"  baseline file: baselines/{example.suite}.json",
            f"  if the new numbers are intended: pytest --segrobust {clean_id} --segrobust-update-baselines",
        ]
    )
    degraded.stdout.fnmatch_lines([f"FAILED {clean_id} - *"])

    monkeypatch.delenv(DEGRADE)
    recorded = run(pytester, "--segrobust", "--segrobust-update-baselines")
    recorded.assert_outcomes(passed=example.cells)
    recorded.stdout.fnmatch_lines(
        [f"baselines/{example.suite}.json: 0 cells changed, 0 new, {example.cells} unchanged"]
    )
    written = json.loads((pytester.path / "baselines" / f"{example.suite}.json").read_text())
    assert written["models"] == shipped["models"]
