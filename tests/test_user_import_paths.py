"""Every import path a user writes still imports: those README.md and the docs/ pages name, the factories of the
shipped suites, and the flat module names the package had before its folders.

A path is ``pytest_segrobust.a.b`` (a module, or a name in one) or ``pytest_segrobust.a.b:name``
(a suite's factory).
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

import pytest_segrobust

PROJECT = Path(pytest_segrobust.__file__).parent.parent
PATH = re.compile(r"pytest_segrobust(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")
# Modules users imported by their flat names, kept as the same module objects.
FLAT_NAMES = {
    "pytest_segrobust.types": "pytest_segrobust.core.types",
    "pytest_segrobust.errors": "pytest_segrobust.core.errors",
    "pytest_segrobust.seeding": "pytest_segrobust.randomness.seeding",
    "pytest_segrobust.scores": "pytest_segrobust.metrics.robustness",
    "pytest_segrobust.strategies": "pytest_segrobust.testing.strategies",
}


def _resolve(path: str) -> object:
    """The module or object that ``path`` names (raises ImportError or AttributeError)."""
    dotted, _, factory = path.partition(":")
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in [*parts[cut:], *([factory] if factory else [])]:
            found = getattr(found, name)
        return found
    raise ImportError(path)


def _documented() -> list[str]:
    texts = [PROJECT / "README.md", *sorted((PROJECT / "docs").rglob("*.md")), *sorted((PROJECT / "suites").glob("*.yaml"))]
    return sorted({match for text in texts for match in PATH.findall(text.read_text(encoding="utf-8"))})


def test_the_documents_name_paths() -> None:
    documented = _documented()
    assert "pytest_segrobust.data.demo:demo_dataset" in documented and len(documented) > 20


@pytest.mark.parametrize("path", _documented())
def test_a_documented_path_imports(path: str) -> None:
    _resolve(path)


@pytest.mark.parametrize(("old", "new"), sorted(FLAT_NAMES.items()))
def test_a_flat_name_is_its_new_home(old: str, new: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(new)
    assert sys.modules[new].__spec__.name == new  # it names itself by its real name


def test_the_flat_names_are_the_packages_own_list() -> None:
    assert pytest_segrobust.MOVED_MODULES == FLAT_NAMES


def test_a_missing_path_fails() -> None:
    with pytest.raises((ImportError, AttributeError)):
        _resolve("pytest_segrobust.data.demo:no_such_factory")
    with pytest.raises((ImportError, AttributeError)):
        _resolve("pytest_segrobust.no_such_module")
