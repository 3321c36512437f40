"""``segrobust init``: from an empty folder to recorded, then passing, baselines; refusals that name the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

# Imported before any in-process run (pytester drops the modules a run imports; see tests/test_examples.py).
import pytest_segrobust.data.avsbench
import pytest_segrobust.data.davis
import pytest_segrobust.data.semantic_folder
import pytest_segrobust.models.demo
import pytest_segrobust.models.demo_avs
import pytest_segrobust.models.demo_promptable
import pytest_segrobust.models.demo_video  # noqa: F401
from pytest_segrobust.cli import main
from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.suite.scaffold import SCAFFOLDS, init
from tests.plugin_project import run as run_project

# One thread: these small models wait on a second thread longer than it saves them (CPU-s counted in CI).
ONE_THREAD = ("--segrobust-threads", "1")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run_project(pytester, *ONE_THREAD, *args)

CELLS = {"semantic": 7, "instance": 7, "vos": 7, "avs": 7, "promptable": 7}


@pytest.mark.parametrize(("task", "layout"), list(SCAFFOLDS), ids=[f"{t}-{l}" for t, l in SCAFFOLDS])
def test_init_in_an_empty_folder_records_then_passes(
    task: str,
    layout: str,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(pytester.path)
    assert main(["init", "--task", task, "--layout", layout, "--name", "mine"]) == 0
    printed = capsys.readouterr().out
    assert "next: pytest --segrobust --segrobust-update-baselines" in printed
    assert (pytester.path / "baselines").is_dir() and not list((pytester.path / "baselines").iterdir())
    assert "YOUR MODEL GOES HERE" in (pytester.path / "model.py").read_text()
    recorded = run(pytester, "--segrobust", "--segrobust-update-baselines")
    recorded.assert_outcomes(passed=CELLS[task])
    assert (pytester.path / "baselines" / "mine.json").is_file()
    run(pytester, "--segrobust").assert_outcomes(passed=CELLS[task])


def test_init_refuses_to_overwrite_and_names_the_files(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("mine\n")
    with pytest.raises(SegRobustError, match=r"not overwriting model\.py: move them away"):
        init(tmp_path, "semantic", "image-folder", None, "mine", ask=None)
    assert (tmp_path / "model.py").read_text() == "mine\n"
    assert not (tmp_path / "suites").exists()  # nothing written


def test_init_without_a_terminal_names_the_missing_flag(tmp_path: Path) -> None:
    with pytest.raises(SegRobustError, match=r"--layout: required when stdin is not a terminal; choose from davis"):
        init(tmp_path, "vos", None, None, None, ask=None)
    with pytest.raises(
        SegRobustError, match=r"--task: no scaffold for task 'panoptic'; choose from semantic, instance, vos, avs"
    ):
        init(tmp_path, "panoptic", "coco", None, None, ask=None)
    assert not list(tmp_path.iterdir())


def test_init_asks_for_what_the_flags_leave_out_and_reads_a_given_data_folder(tmp_path: Path) -> None:
    (tmp_path / "frames").mkdir()
    answers = iter(["3", "davis", ""])  # task by number, layout by name, the default suite name
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return next(answers)

    init(tmp_path, None, None, "frames", None, ask=ask)
    assert prompts[0].startswith("task: 1) semantic  2) instance  3) vos  4) avs")
    suite = (tmp_path / "suites" / "vos.yaml").read_text()
    assert "kwargs: {root: frames, split: val}" in suite
    assert not (tmp_path / "data").exists()  # the user's data: no stub
