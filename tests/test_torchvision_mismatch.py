"""A torchvision built for another torch breaks the import of a model source: the error says the fix."""

from __future__ import annotations

import importlib
import sys
from importlib.abc import MetaPathFinder
from types import ModuleType

import pytest
import torch

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.extras import TRANSFORMERS, import_failure, torchvision_mismatch

# What torch raises (from torchvision's _meta_registrations) when torchvision was built for another torch.
BROKEN = "operator torchvision::nms does not exist"


def broken_import() -> BaseException:
    try:
        try:
            raise RuntimeError(BROKEN)
        except RuntimeError as inner:
            raise ImportError("cannot import name 'AutoConfig' from 'transformers'") from inner
    except ImportError as exc:
        return exc


def test_the_mismatch_is_found_through_the_chain_and_its_fix_said() -> None:
    text = import_failure(broken_import(), TRANSFORMERS)
    assert BROKEN in text
    assert "install torchvision from the same index as torch" in text and "pip uninstall torchvision" in text
    assert torchvision_mismatch(ImportError("No module named 'scipy'")) is None
    assert "torchvision" not in import_failure(RuntimeError("CUDA driver too old"), TRANSFORMERS)


class _Broken(MetaPathFinder):
    """Makes importing ``transformers`` fail as a mismatched torchvision makes it fail."""

    def find_spec(self, name: str, path: object = None, target: ModuleType | None = None) -> None:
        if name == "transformers":
            raise RuntimeError(BROKEN)


def test_a_transformers_model_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_segrobust.models.transformers import load_transformers

    monkeypatch.delitem(sys.modules, "transformers", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_Broken(), *sys.meta_path])
    with pytest.raises(SegRobustError, match=r"nms does not exist.*same index as torch"):
        load_transformers(
            "ckpt", task="semantic", device=torch.device("cpu"), class_names=("a",), label_map=None, allow_download=False
        )


def test_a_torchvision_model_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_segrobust.models import zoo

    def fails(name: str) -> ModuleType:
        raise RuntimeError(BROKEN)

    monkeypatch.setattr(importlib, "import_module", fails)
    with pytest.raises(SegRobustError, match=r"torchvision cannot be imported .*nms does not exist.*same index as torch"):
        zoo.torchvision_segmentation("fcn_resnet50", "weights.pt", 21, device=torch.device("cpu"))
