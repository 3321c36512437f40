"""Every ``--segrobust-...`` flag the package names to its users (in a message, a help text, a
docstring) is one pytest or the ``segrobust`` command accepts."""

from __future__ import annotations

import ast
import functools
import importlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest_segrobust

PACKAGE = Path(pytest_segrobust.__file__).parent
FLAG = re.compile(r"--segrobust(?:-[a-z0-9]+)*")


class OptionRecorder:
    """Stands in for pytest's parser and its option groups: records each option's flags."""

    def __init__(self) -> None:
        self.flags: set[str] = set()

    def getgroup(self, *args: Any, **kwargs: Any) -> OptionRecorder:
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.flags.update(names)

    def addini(self, *args: Any, **kwargs: Any) -> None:
        pass


# Parsing and walking the whole package took about 2 CPU-s a pass, four passes for two tests:
# each answer below is computed once per process (the package does not change during a run).
@functools.cache
def sources() -> tuple[tuple[Path, ast.Module], ...]:
    return tuple(
        (path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
    )


@functools.cache
def named_flags() -> Mapping[str, list[str]]:
    """Each flag in a string literal of the package (f-strings' literal parts included) -> where."""
    found: dict[str, list[str]] = {}
    for path, tree in sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for flag in FLAG.findall(node.value):
                    found.setdefault(flag, []).append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


@functools.cache
def pytest_flags() -> frozenset[str]:
    """The flags of every ``pytest_addoption`` hook in the package (the plugin's calls the backends')."""
    recorder = OptionRecorder()
    for path, tree in sources():
        if any(isinstance(node, ast.FunctionDef) and node.name == "pytest_addoption" for node in tree.body):
            module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
            importlib.import_module(module).pytest_addoption(recorder)
    return frozenset(recorder.flags)


def cli_flags() -> set[str]:
    """The option strings of every ``add_argument`` call of the ``segrobust`` command."""
    tree = ast.parse((PACKAGE / "cli.py").read_text(encoding="utf-8"))
    return {
        argument.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
        for argument in node.args
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str) and argument.value.startswith("-")
    }


def test_the_recorders_see_the_known_flags() -> None:
    assert {
        "--segrobust",
        "--segrobust-update-baselines",
        "--segrobust-prune",
        "--segrobust-ray-split",
    } <= pytest_flags()
    assert {"--update-baselines", "--rootdir"} <= cli_flags()
    assert "--segrobust-update-baselines" in named_flags()


def test_every_flag_the_package_names_exists() -> None:
    known = pytest_flags() | cli_flags()
    unknown = {flag: where for flag, where in named_flags().items() if flag not in known}
    assert not unknown, f"flags named but accepted by neither pytest nor segrobust: {unknown}"
