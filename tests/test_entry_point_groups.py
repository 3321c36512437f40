"""Installed packages' text perturbations (``segrobust.text``), model adapters (``segrobust.adapters``)
and model sources (``segrobust.model_sources``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

pytest.importorskip("pycocotools.mask")

from pytest_segrobust.core.errors import SegRobustError, SuiteError
from pytest_segrobust.models import adapters
from pytest_segrobust.models.adapters import adapt_model
from pytest_segrobust.suite.model_sources import MODEL_SOURCES, build_model
from pytest_segrobust.suite.schema import load_suite
from pytest_segrobust.tasks import get_task
from pytest_segrobust.text.registry import TextPerturbationRegistry
from tests.test_referring_suite import SUITE, write_project

TEXT_MODULE = """
from pytest_segrobust.text.base import TextPerturbation


class Shout(TextPerturbation):
    def __init__(self):
        super().__init__("shout", "upper case, at every level")

    def _perturb_one(self, text, sample_id, severity, seed):
        return text if severity == 0 else text.upper()


shout = Shout()
misnamed = Shout()
"""

ADAPTER_MODULE = '''
import torch

from pytest_segrobust.models.adapters import Adapter, register_adapter


class Opaque:
    """What a factory of another framework returns: no predict, no fingerprint."""

    def __init__(self, label):
        self.label = label


class Wrapped:
    def __init__(self, opaque, device):
        self.opaque = opaque
        self.device = torch.device(device or "cpu")

    def predict(self, images):
        return torch.full((images.shape[0], *images.shape[-2:]), self.opaque.label, dtype=torch.long)

    def fingerprint(self):
        return f"opaque-{self.opaque.label}"


@register_adapter("semantic", lambda obj: isinstance(obj, Opaque) and obj.label >= 0, "opaque")
def wrap(obj, device=None, amp=False):
    return Wrapped(obj, device)


class Negative(Opaque):
    pass


negative = Adapter("semantic", "negative", lambda obj: isinstance(obj, Negative), lambda obj, device=None, amp=False: Wrapped(Opaque(0), device))
'''


def install(root: Path, monkeypatch: pytest.MonkeyPatch, package: str, module: str, entry_points: str) -> None:
    """``module`` as the installed package ``package`` with ``entry_points`` (an ``entry_points.txt``)."""
    root.mkdir(exist_ok=True)
    (root / f"{package}.py").write_text(module)
    info = root / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    monkeypatch.syspath_prepend(str(root))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    install(
        tmp_path / "site",
        monkeypatch,
        "segrobust_shout",
        TEXT_MODULE,
        "[segrobust.text]\nshout = segrobust_shout:shout\nloud = segrobust_shout:misnamed\n"
        "broken = segrobust_nowhere:shout\n",
    )
    return tmp_path


def _suite(root: Path, change: str) -> Path:
    path = root / "suites" / "s.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(SUITE.replace("corruptions: [gaussian_noise, shear]", change))
    return path


def test_an_installed_text_perturbation_is_named_in_a_suite(project: Path) -> None:
    suite = load_suite(_suite(project, "corruptions: [shout, fog+shout]\nmixture: r2bench"))
    assert suite.corruptions == ("shout", "fog+shout", "r2bench-mixture")
    assert [suite.corruption(name).category.value for name in suite.corruptions] == ["text", "cross-modal", "mixture"]
    assert suite.task_cells.mixture.text == ("shout",)  # the mixture draws from the listed text perturbations
    from pytest_segrobust.data.referring import ReferringJsonl

    dataset = ReferringJsonl(project / "scenes" / "refs.jsonl")
    batch = get_task("referring").collate([dataset[0], dataset[1]], [0, 1], dataset, torch.device("cpu"))
    shouted = suite.corruption("shout")(batch, 3, [0, 0])["expression"].texts
    assert shouted == tuple(text.upper() for text in batch["expression"].texts) and shouted != batch["expression"].texts


def test_the_built_in_registry_and_a_task_without_expressions_do_not_see_it(project: Path) -> None:
    assert "shout" not in TextPerturbationRegistry.builtin()
    assert "shout" in TextPerturbationRegistry.installed()
    path = project / "suites" / "semantic.yaml"
    path.write_text(
        "name: sem\ndataset: {factory: pytest_segrobust.data.demo:demo_dataset}\n"
        "models: [{name: m, factory: pytest_segrobust.models.demo:tiny_unet}]\ncorruptions: [shout]\n"
    )
    with pytest.raises(
        SuiteError, match=rf"{re.escape(str(path))}: field 'corruptions\[0\]': unknown corruption 'shout'"
    ):
        load_suite(path)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "broken",
            r"text perturbation plugin 'broken' \(segrobust_nowhere:shout\) failed to load: ModuleNotFoundError",
        ),
        ("loud", r"text perturbation plugin 'loud' \(segrobust_shout:misnamed\) has name 'shout'"),
    ],
)
def test_a_text_plugin_that_does_not_load_is_named(project: Path, name: str, message: str) -> None:
    path = _suite(project, f"corruptions: [{name}]")
    with pytest.raises(SuiteError, match=rf"{re.escape(str(path))}: field 'corruptions\[0\]': {message}"):
        load_suite(path)


@pytest.fixture
def installed_adapters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    """The adapter plugin installed and loaded; the process's adapters restored afterwards."""
    adapters.adapters("semantic")  # the built-ins first, so that the restored list has them
    monkeypatch.setattr(adapters, "_ADAPTERS", list(adapters._ADAPTERS))
    install(
        tmp_path,
        monkeypatch,
        "segrobust_opaque",
        ADAPTER_MODULE,
        "[segrobust.adapters]\nopaque = segrobust_opaque:wrap\nnegative = segrobust_opaque:negative\n",
    )
    monkeypatch.setattr(adapters, "_loaded", False)  # the next lookup loads the installed plugins
    adapters.adapters("semantic")
    import segrobust_opaque

    return segrobust_opaque


def test_an_installed_adapter_wraps_its_models(installed_adapters: object) -> None:
    semantic = get_task("semantic")
    model = adapt_model(installed_adapters.Opaque(3), semantic)  # type: ignore[attr-defined]
    assert model.fingerprint() == "opaque-3"
    assert torch.equal(model.predict(torch.zeros(2, 3, 4, 5)), torch.full((2, 4, 5), 3))
    assert adapt_model(installed_adapters.Negative(1), semantic).fingerprint() == "opaque-0"  # type: ignore[attr-defined]
    names = [a.name for a in adapters.adapters("semantic")]
    assert names.index("negative") < names.index("torch.nn.Module returning logits")  # plugins are tried first
    with pytest.raises(TypeError, match=r"or an object an adapter wraps \(negative, opaque, "):
        adapt_model(installed_adapters.Opaque(-1), semantic)  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="an object an adapter wraps"):
        adapt_model(installed_adapters.Opaque(1), get_task("instance"))  # type: ignore[attr-defined]


def test_an_adapter_plugin_that_does_not_load_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapters.adapters("semantic")
    monkeypatch.setattr(adapters, "_ADAPTERS", list(adapters._ADAPTERS))
    install(tmp_path, monkeypatch, "segrobust_gone", "", "[segrobust.adapters]\ngone = segrobust_nowhere:wrap\n")
    with pytest.raises(
        SegRobustError, match=r"adapter plugin 'gone' \(segrobust_nowhere:wrap\) failed to load: ModuleNotFoundError"
    ):
        adapters.load_entry_points()


SOURCE_SUITE = """\
dataset: {factory: tests.fakes:band_scenes}
corruptions: [rotate]
models:
  - {name: binned, %s: 3}
"""


@pytest.fixture
def installed_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tests/binner_source.py installed as a package with its source under ``binner``, a misnamed
    and a broken entry point beside it; the process's sources restored afterwards."""
    MODEL_SOURCES.names()  # the built-ins first, so that the restored registry has them
    monkeypatch.setattr(MODEL_SOURCES, "_entries", dict(MODEL_SOURCES._entries))
    install(
        tmp_path / "site",
        monkeypatch,
        "segrobust_binner",
        (Path(__file__).parent / "binner_source.py").read_text(),
        "[segrobust.model_sources]\nbinner = segrobust_binner:BinnerSource\n"
        "misnamed = segrobust_binner:BinnerSource\nbroken = segrobust_nowhere:BinnerSource\n",
    )
    return tmp_path


def test_an_installed_model_source_builds_the_entries_with_its_key(installed_source: Path) -> None:
    path = installed_source / "binned.yaml"
    path.write_text(SOURCE_SUITE % "binner")
    (spec,) = load_suite(path).models
    assert (spec.kind, spec.settings.smoothing, spec.source) == ("binner", 3, "binner of window 3")
    model = build_model(spec, torch.device("cpu"))
    assert type(model).__name__ == "RedBinner" and model.smoothing == 3


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("broken", r"model source plugin 'broken' \(segrobust_nowhere:BinnerSource\) failed to load: ModuleNotFoundError"),
        ("misnamed", r"model source plugin 'misnamed' \(segrobust_binner:BinnerSource\) has name 'binner'"),
    ],
)
def test_a_model_source_plugin_that_does_not_load_is_named(installed_source: Path, name: str, message: str) -> None:
    path = installed_source / "s.yaml"
    path.write_text(SOURCE_SUITE % name)
    with pytest.raises(SuiteError, match=rf"^{re.escape(str(path))}: field 'models\[0\].{name}': {message}"):
        load_suite(path)
