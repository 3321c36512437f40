"""The package's import graph, read from its source (lazy imports inside functions included,
imports for annotations alone under ``if TYPE_CHECKING:`` left out).

Issue 28's rules: metrics import neither models nor data; the report imports neither models
nor corruptions; no backend imports the session, the items or the plugin; no import cycles.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

import pytest_segrobust

PACKAGE = Path(pytest_segrobust.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The package's modules that ``name`` imports, at module level or inside functions."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    # Imports for annotations alone (``if TYPE_CHECKING:``) never run: they are not edges.
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                targets.add(submodule if submodule in MODULES else module)
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
    return {t for t in targets if t in MODULES and t != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _under(name: str, packages: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _violations(importers: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        if _under(name, [importers])
        for target in targets
        if _under(target, forbidden)
    )


def test_the_graph_is_read_at_all() -> None:
    # The rules below would pass on an empty graph: make sure it holds the edges we know.
    assert "pytest_segrobust.types" in GRAPH["pytest_segrobust.metrics.coco_map"]
    assert "pytest_segrobust.errors" in GRAPH["pytest_segrobust.types"]
    assert len(GRAPH) > 80


def test_metrics_import_neither_models_nor_data() -> None:
    assert _violations("pytest_segrobust.metrics", ("pytest_segrobust.models", "pytest_segrobust.data")) == []


def test_the_neutral_modules_import_no_engine_module() -> None:
    # types, errors and wording are what every layer shares: they import nothing but each other.
    neutral = ("pytest_segrobust.types", "pytest_segrobust.errors", "pytest_segrobust.wording")
    assert sorted(t for n in neutral for t in GRAPH[n] if t not in neutral) == []


def test_the_report_imports_neither_models_nor_corruptions() -> None:
    # The report draws measured values (pytest_segrobust.pictures): it never runs a model, a
    # corruption or a task again, so it needs none of the modules that do.
    engine = ("models", "corruptions", "tasks", "evaluation", "workbench", "worst", "suite_pictures")
    assert _violations("pytest_segrobust.report", tuple(f"pytest_segrobust.{name}" for name in engine)) == []


def test_the_class_views_are_neutral() -> None:
    assert GRAPH["pytest_segrobust.views"] <= {"pytest_segrobust.types"}


def test_the_backends_import_neither_the_session_nor_the_items_nor_the_plugin() -> None:
    assert any(name.startswith("pytest_segrobust.backends.") for name in GRAPH)  # the package is read
    forbidden = ("pytest_segrobust.session", "pytest_segrobust.items", "pytest_segrobust.plugin")
    assert _violations("pytest_segrobust.backends", forbidden) == []


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(GRAPH[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for name in sorted(GRAPH):
        if name not in index:
            visit(name)
    return components


def test_the_cycle_finder_finds_a_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GRAPH, "pytest_segrobust.errors", {"pytest_segrobust.types"})
    assert ["pytest_segrobust.errors", "pytest_segrobust.types"] in _cycles()


def test_no_import_cycles() -> None:
    assert _cycles() == []


def test_the_statistics_and_the_metrics_are_in_no_cycle() -> None:
    # Metrics build their resampled scores on stats; stats knows no metric (its test-only helpers live in tests/).
    assert [c for c in _cycles() if any(_under(m, ("pytest_segrobust.stats", "pytest_segrobust.metrics")) for m in c)] == []
