"""The identity of a model's code: what must change for a cached clean result to be recomputed."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import pytest
import torch

from pytest_segrobust.provenance.identity import UnknownIdentity, code_identity


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package of the user's project: a model module importing a helper module."""
    package = tmp_path / "userpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("SCALE = 1.0\n")
    (package / "unrelated.py").write_text("X = 1\n")
    (package / "model.py").write_text(
        "import torch\nfrom .helpers import SCALE\n\n"
        "class Net(torch.nn.Module):\n    def forward(self, x):\n        return x * SCALE\n\n"
        "def build():\n    return Net()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    for name in [n for n in sys.modules if n == "userpkg" or n.startswith("userpkg.")]:
        del sys.modules[name]


def identity() -> str:
    module = importlib.import_module("userpkg.model")
    return code_identity(module.build, module.build())


def test_it_is_stable(project: Path) -> None:
    assert identity() == identity()


@pytest.mark.parametrize("changed", ["model.py", "helpers.py", "__init__.py"])
def test_it_changes_with_the_models_code_and_what_it_imports(project: Path, changed: str) -> None:
    before = identity()
    path = project / changed
    path.write_text(path.read_text() + "\n# edited\n")
    assert identity() != before


def test_it_ignores_code_the_model_does_not_reach(project: Path) -> None:
    before = identity()
    (project / "unrelated.py").write_text("X = 2\n")
    assert identity() == before


def test_installed_packages_count_by_version(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_segrobust.provenance import identity as module

    before = identity()
    real = module.importlib.metadata.version
    monkeypatch.setattr(module.importlib.metadata, "version", lambda dist: "0.0.0-other" if dist == "torch" else real(dist))
    assert identity() != before


def test_a_model_defined_without_source_cannot_be_identified() -> None:
    module = types.ModuleType("made_at_run_time")
    exec("import torch\nclass Net(torch.nn.Module):\n    pass\n", module.__dict__)  # noqa: S102 - a class with no source file
    sys.modules["made_at_run_time"] = module
    try:
        with pytest.raises(UnknownIdentity, match="made_at_run_time"):
            code_identity(module.Net())
    finally:
        del sys.modules["made_at_run_time"]


def test_wrapped_networks_count_with_their_submodules(project: Path) -> None:
    from pytest_segrobust.models import TorchModuleSegmenter

    module = importlib.import_module("userpkg.model")
    wrapped = TorchModuleSegmenter(torch.nn.Sequential(module.build()))
    before = code_identity(wrapped)
    (project / "helpers.py").write_text("SCALE = 2.0\n")
    assert code_identity(wrapped) != before


def test_a_class_naming_its_packages_public_module_counts_by_the_packages_version() -> None:
    module = types.ModuleType("made_at_run_time")
    exec("import torch\nclass Net(torch.nn.Module):\n    pass\n", module.__dict__)  # noqa: S102 - a class with no source file
    module.Net.__module__ = "torch.not_a_file"  # as compiled libraries name their public module
    assert code_identity(module.Net()) == code_identity(module.Net())
