"""The referring tasks' own suite keys (``text_replay``, ``mixture``) through the task-key hook, and the hook itself."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_segrobust.core.errors import SuiteError
from pytest_segrobust.suite.schema import load_suite
from pytest_segrobust.tasks import TASKS, register_task
from pytest_segrobust.tasks.base import SuiteKeyError, SuiteNames
from pytest_segrobust.tasks.referring import ReferringTask
from pytest_segrobust.tasks.referring_cells import TextBeneath, TextCells
from pytest_segrobust.text.base import TextPerturbation
from pytest_segrobust.text.cells import MIXTURE_CELL, MixtureCell, MixtureSpec, TextCell
from pytest_segrobust.text.registry import TextPerturbationRegistry
from tests.test_vos_suite import RVOS_SUITE, write

RVOS_TEXT = RVOS_SUITE.replace(
    "corruptions: [gaussian_noise, misspelling, gaussian_noise+misspelling]",
    "corruptions: [gaussian_noise, replay-misspelling]\ntext_replay: llm.json\nmixture: r2bench\n"
    "temporal: [frame_freeze]",
)


@pytest.fixture
def project_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "suites").mkdir()
    replay = {"version": 1, "perturbations": {"misspelling": {"low": {"clip-0/0": "the rde disk"}}}}
    (tmp_path / "suites" / "llm.json").write_text(json.dumps(replay))
    return tmp_path


def test_rvos_takes_the_text_keys_beneath_its_clip_keys(project_dir: Path) -> None:
    suite = load_suite(write(project_dir, RVOS_TEXT))
    # the text keys' cells first, the clip keys' after them: the order the cells had before the keys moved
    assert suite.corruptions == (
        "gaussian_noise",
        "replay-misspelling",
        MIXTURE_CELL,
        "dynamic[gaussian_noise,rotate;types=per_clip;levels=1,3,5]",
        "frame_freeze",
    )
    cells = suite.task_cells
    assert isinstance(cells, TextBeneath) and cells.text == TextCells("llm.json", cells.text.mixture)
    assert cells.text.mixture == MixtureSpec("r2bench", ("gaussian_noise",), ("replay-misspelling",))
    mixture = suite.corruption(MIXTURE_CELL)
    assert isinstance(mixture, MixtureCell) and mixture.seed == suite.seed
    assert isinstance(suite.corruption("replay-misspelling"), TextCell)
    assert suite.cell_severities(suite.corruptions[3]) == (3,) and suite.corruption("frame_freeze").temporal


@pytest.mark.parametrize(
    ("task", "key", "message"),
    [
        ("vos", "text_replay: llm.json", "replayed texts perturb referring expressions; task vos has none"),
        (
            "vos",
            "mixture: r2bench",
            (
                "the r2bench mixture perturbs images and a second input (referring expressions, sound or prompts); "
                "task vos has no expressions and takes no mixture"
            ),
        ),
        ("avs", "text_replay: llm.json", "replayed texts perturb referring expressions; task avs has none"),
    ],
)
def test_a_task_without_expressions_refuses_the_text_keys_saying_why(
    project_dir: Path, task: str, key: str, message: str
) -> None:
    text = RVOS_SUITE.replace("task: rvos", f"task: {task}").replace(
        "corruptions: [gaussian_noise, misspelling, gaussian_noise+misspelling]",
        f"corruptions: [gaussian_noise]\n{key}",
    )
    path = write(project_dir, text)
    field = key.partition(":")[0]
    with pytest.raises(SuiteError, match=rf"{re.escape(str(path))}: field '{field}': {re.escape(message)}"):
        load_suite(path)


class Echo(TextPerturbation):
    def __init__(self, name: str) -> None:
        super().__init__(name, "the text twice")

    def _perturb_one(self, text: str, sample_id: str, severity: int, seed: int) -> str:
        return f"{text} {text}"


class EchoingTask(ReferringTask):
    """A referring task whose own key ``echoes`` names text perturbations its suites may then list."""

    name = "toy-echoing"
    suite_keys = ("echoes",)

    def suite_names(self, options: Mapping[str, Any], folder: Path) -> SuiteNames:
        names = options.get("echoes", [])
        if not isinstance(names, list):
            raise SuiteKeyError("echoes", f"expected a list of names, got {names!r}")
        return SuiteNames(TextPerturbationRegistry(Echo(n) for n in names), {"echo-all": "echoes"})


@pytest.fixture
def echoing() -> Any:
    TASKS.names()  # the built-ins loaded first, so that the restored copy has them
    saved = dict(TASKS._entries)
    register_task(EchoingTask)
    yield
    TASKS._entries = saved


SUITE = """\
name: echo
task: toy-echoing
dataset: {factory: pytest_segrobust.data.demo_referring:demo_referring_dataset}
models: [{name: m, factory: pytest_segrobust.models.demo_referring:tiny_referring}]
"""


def test_a_task_key_names_perturbations_before_the_list_is_read(project_dir: Path, echoing: None) -> None:
    path = project_dir / "suites" / "echo.yaml"
    path.write_text(SUITE + "echoes: [echo, echo_again]\ncorruptions: [fog, echo_again, fog+echo]\n")
    suite = load_suite(path)
    assert suite.corruptions == ("fog", "echo_again", "fog+echo")
    assert [suite.corruption(c).category.value for c in suite.corruptions] == ["environment", "text", "cross-modal"]
    path.write_text(SUITE + "echoes: [echo]\ncorruptions: [misspelling]\n")  # the task's names, not the built-in ones
    with pytest.raises(
        SuiteError, match=r"field 'corruptions\[0\]': unknown corruption or text perturbation 'misspelling'"
    ):
        load_suite(path)
    path.write_text(SUITE + "echoes: [echo]\ncorruptions: [fog, echo-all]\n")
    with pytest.raises(SuiteError, match=r"field 'corruptions\[1\]': echo-all is added by 'echoes', not listed"):
        load_suite(path)
    path.write_text(SUITE + "echoes: echo\ncorruptions: [fog]\n")
    with pytest.raises(
        SuiteError, match=rf"{re.escape(str(path))}: field 'echoes': expected a list of names, got 'echo'"
    ):
        load_suite(path)
