"""Every tutorial runs as written: its files (titled code blocks) are written into an empty folder, its
commands (the ``$`` lines of its console blocks) run there in-process, and each output line the page
shows is printed by the command it follows (``...`` stands for lines the page leaves out)."""

from __future__ import annotations

import importlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

TUTORIALS = Path(__file__).resolve().parent.parent / "docs" / "tutorials"
# A fenced block: its info string (language and attributes) and its body.
FENCE = re.compile(r"^```(?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.DOTALL | re.MULTILINE)
# The verdict line a run ends with.
VERDICT_PASS, VERDICT_FAIL = "PASS ·", "FAIL ·"
# A factory a suite names, ``package.module:callable``: its module.
FACTORY = re.compile(r"\b(pytest_segrobust(?:\.\w+)+):\w+")
TITLE = re.compile(r'title="(?P<path>[^"]+)"')


@dataclass(frozen=True)
class Command:
    """One ``$`` line of a console block and the output lines the page shows after it."""

    line: str
    shown: tuple[str, ...]


@dataclass(frozen=True)
class Tutorial:
    """What a tutorial page asks the reader to write and run, in page order."""

    files: dict[str, str]
    commands: tuple[Command, ...]


def read_tutorial(text: str) -> Tutorial:
    """The files and commands of a tutorial page's markdown."""
    files: dict[str, str] = {}
    commands: list[Command] = []
    for block in FENCE.finditer(text):
        info, body = block["info"], block["body"]
        title = TITLE.search(info)
        if title:
            files[title["path"]] = body
        elif info.split()[:1] == ["console"]:
            for chunk in re.split(r"^\$ ", body, flags=re.MULTILINE)[1:]:
                line, *shown = chunk.rstrip("\n").split("\n")
                commands.append(Command(line, tuple(s for s in shown if s.strip() and s.strip() != "...")))
    return Tutorial(files, tuple(commands))


def _pages() -> list[Path]:
    return sorted(page for page in TUTORIALS.glob("*.md") if page.name != "index.md")


# An in-process run gives sys.modules back as it found it (tests/conftest.py): a factory module
# the first run imported would be imported afresh by the second, whose samples' classes would then
# differ from those the first run's decoded-sample cache holds. Imported here, they stay.
for _module in sorted({m for page in _pages() for m in FACTORY.findall(page.read_text(encoding="utf-8"))}):
    importlib.import_module(_module)


def test_every_task_has_a_tutorial_that_records_then_passes() -> None:
    read = {page.stem: read_tutorial(page.read_text(encoding="utf-8")) for page in _pages()}
    wanted = {"semantic", "instance", "panoptic", "referring", "natural-shift", "vos", "rvos", "avs", "promptable"}
    assert wanted <= set(read)
    for name in wanted:
        shown = [line for command in read[name].commands for line in command.shown]
        assert read[name].files and any(VERDICT_FAIL in s and "new (no baseline)" in s for s in shown), name
        assert shown and VERDICT_PASS in shown[-1], name


def test_the_reader_sees_a_page_shape_it_cannot_run() -> None:
    page = '```yaml title="suites/a.yaml"\nx: 1\n```\n\n```console\n$ pytest -q\n...\nPASS · 1 cells\n```\n'
    tutorial = read_tutorial(page)
    assert tutorial.files == {"suites/a.yaml": "x: 1\n"}
    assert tutorial.commands == (Command("pytest -q", ("PASS · 1 cells",)),)


@pytest.mark.parametrize("page", _pages(), ids=lambda page: page.stem)
def test_a_tutorial_runs_as_written(page: Path, pytester: pytest.Pytester) -> None:
    tutorial = read_tutorial(page.read_text(encoding="utf-8"))
    for path, content in tutorial.files.items():
        target = pytester.path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    for command in tutorial.commands:
        program, *arguments = shlex.split(command.line)
        assert program == "pytest", f"{page.name}: the test runs pytest commands only, not {command.line!r}"
        result = pytester.runpytest_inprocess(*arguments)
        printed = result.stdout.lines
        missing = [line for line in command.shown if not any(line in out for out in printed)]
        assert not missing, f"{page.name}: `{command.line}` did not print {missing}:\n" + "\n".join(printed[-30:])
        passed = any(VERDICT_PASS in line for line in command.shown)
        assert result.ret == (0 if passed else 1), f"{page.name}: `{command.line}` exited {result.ret}"
