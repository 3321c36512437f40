"""The package's import graph, read from its source: every import counts, at module level,
inside functions (lazy imports) and under ``if TYPE_CHECKING:`` (an annotation that names a
module of a higher layer is a dependency on it all the same).

The folders are layers (docs/maintainers/architecture.md); a module imports its own folder and the
folders of lower layers, and the folders that share a layer with it where that layer allows
(the perturbation families; models and tasks). No import cycles.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

import pytest_segrobust

PACKAGE = Path(pytest_segrobust.__file__).parent
ROOT = "pytest_segrobust"

# Bottom to top. Folders in one tuple share a layer and may import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("randomness", "runtime", "provenance", "store"),
    ("corruptions", "text", "data", "metrics", "pictures"),
    ("models", "tasks"),
    ("suite",),
    ("engine", "testing"),
    ("gate",),
    ("report",),
    ("backends",),
    ("run",),
    ("plugin", "cli"),
)
# Within a shared layer, who may import whom (anything not listed may not).
PEERS = {
    "text": {"corruptions"},  # text perturbations compose with image corruptions (the mixture protocol)
    "models": {"tasks"},
    "tasks": {"models"},
    "cli": {"plugin"},  # `segrobust merge` and `calibrate` start a session as the plugin does
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The package's modules that ``name`` imports, wherever the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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


def _folder(name: str) -> str:
    """The layer folder of a module: its first name under the package (the root's own modules by name)."""
    return name.split(".")[1] if name != ROOT else "core"


def _layer(folder: str) -> int:
    return next(index for index, layer in enumerate(LAYERS) if folder in layer)


def _allowed(importer: str, target: str) -> bool:
    if target == ROOT:  # the root's __init__: ``__version__`` and lazy names, importing nothing eagerly
        return True
    mine, theirs = _folder(importer), _folder(target)
    if mine == theirs or _layer(theirs) < _layer(mine):
        return True
    return _layer(theirs) == _layer(mine) and theirs in PEERS.get(mine, set())


def _layering_violations(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{name} ({_folder(name)}) imports {target} ({_folder(target)})"
        for name, targets in graph.items()
        for target in targets
        if not _allowed(name, target)
    )


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
    # The rules below would pass on an empty graph: make sure it holds the edges we know,
    # a lazy import and an import for annotations alone among them.
    assert "pytest_segrobust.core.types" in GRAPH["pytest_segrobust.metrics.coco_map"]
    assert "pytest_segrobust.core.errors" in GRAPH["pytest_segrobust.core.types"]
    assert "pytest_segrobust.engine.runner" in GRAPH["pytest_segrobust.backends.ray"]  # lazy and TYPE_CHECKING
    assert "pytest_segrobust.runtime.options" in GRAPH["pytest_segrobust.engine.workbench"]  # TYPE_CHECKING
    assert len(GRAPH) > 150


def test_the_root_keeps_only_its_entry_points() -> None:
    assert sorted(path.name for path in PACKAGE.glob("*.py")) == ["__init__.py", "cli.py", "plugin.py"]


def test_every_module_sits_in_a_layer() -> None:
    folders = {_folder(name) for name in MODULES if name != ROOT}
    assert folders == {folder for layer in LAYERS for folder in layer}


def test_every_folder_states_its_layer() -> None:
    for folder in (f for layer in LAYERS for f in layer if (PACKAGE / f).is_dir()):
        docstring = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text(encoding="utf-8")))
        assert docstring and f"Layer {_layer(folder)}" in docstring, folder


def _drawn_layers(text: str) -> dict[int, set[str]]:
    """The layer table of the architecture page: ``layer N  folder/ module.py ...  words``."""
    block = text.split("<!-- layers:", 1)[1].split("```", 2)[1]
    layers: dict[int, set[str]] = {}
    for line in block.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "layer":
            names = [w for w in words[2:] if w.endswith(("/", ".py"))]
            layers[int(words[1])] = {name.removesuffix("/").removesuffix(".py") for name in names}
    return layers


ARCHITECTURE = PACKAGE.parent / "docs" / "maintainers" / "architecture.md"


def test_the_architecture_page_draws_the_layers() -> None:
    page = ARCHITECTURE.read_text(encoding="utf-8")
    assert _drawn_layers(page) == {index: set(layer) for index, layer in enumerate(LAYERS)}


def test_the_architecture_check_sees_a_wrong_layer() -> None:
    page = ARCHITECTURE.read_text(encoding="utf-8")
    wrong = page.replace("layer  6  gate/", "layer  5  gate/", 1)
    assert _drawn_layers(wrong) != {index: set(layer) for index, layer in enumerate(LAYERS)}


def test_the_layering_holds() -> None:
    assert _layering_violations(GRAPH) == []


def test_the_layering_finds_an_upward_import(monkeypatch: pytest.MonkeyPatch) -> None:
    upward = {*GRAPH["pytest_segrobust.engine.runner"], "pytest_segrobust.gate.verdict"}
    monkeypatch.setitem(GRAPH, "pytest_segrobust.engine.runner", upward)
    assert _layering_violations(GRAPH) == [
        "pytest_segrobust.engine.runner (engine) imports pytest_segrobust.gate.verdict (gate)"
    ]
    # A peer of the same layer that the layer does not allow is refused too.
    monkeypatch.setitem(GRAPH, "pytest_segrobust.engine.runner", GRAPH["pytest_segrobust.engine.runner"] - {"pytest_segrobust.gate.verdict"})
    monkeypatch.setitem(GRAPH, "pytest_segrobust.data.base", {*GRAPH["pytest_segrobust.data.base"], "pytest_segrobust.metrics"})
    assert _layering_violations(GRAPH) == ["pytest_segrobust.data.base (data) imports pytest_segrobust.metrics (metrics)"]


def test_metrics_import_neither_models_nor_data() -> None:
    assert _violations("pytest_segrobust.metrics", ("pytest_segrobust.models", "pytest_segrobust.data")) == []


def test_the_core_imports_nothing_above_it() -> None:
    # types, errors and wording are what every layer shares: they import nothing but the core.
    assert _violations("pytest_segrobust.core", tuple(f"{ROOT}.{f}" for layer in LAYERS[1:] for f in layer)) == []


def test_the_report_imports_neither_models_nor_corruptions() -> None:
    # The report draws measured values (pytest_segrobust.pictures): it never runs a model, a
    # corruption or a task again, so it needs none of the modules that do.
    engine = ("models", "corruptions", "tasks", "engine", "data")
    assert _violations("pytest_segrobust.report", tuple(f"{ROOT}.{name}" for name in engine)) == []


def test_the_report_imports_nothing_of_the_gate() -> None:
    # The report renders decisions it is handed (the controller, pytest_segrobust.run, computes the
    # release criteria and the gate's policy before it builds the report); it never decides again.
    assert _violations("pytest_segrobust.report", (f"{ROOT}.gate", f"{ROOT}.suite.requirements")) == []


def test_the_class_views_are_neutral() -> None:
    assert GRAPH["pytest_segrobust.pictures.views"] <= {"pytest_segrobust.core.types"}


def test_the_backends_import_neither_the_session_nor_the_items_nor_the_plugin() -> None:
    assert any(name.startswith("pytest_segrobust.backends.") for name in GRAPH)  # the package is read
    forbidden = ("pytest_segrobust.run", "pytest_segrobust.plugin")
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
    monkeypatch.setitem(GRAPH, "pytest_segrobust.core.errors", {"pytest_segrobust.core.types"})
    assert ["pytest_segrobust.core.errors", "pytest_segrobust.core.types"] in _cycles()


def test_no_import_cycles() -> None:
    assert _cycles() == []
