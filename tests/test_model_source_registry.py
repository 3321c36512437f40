"""Model sources by key: a source registered in-process is what builds a suite's entry that holds
its key; an entry without exactly one source key names the file and every known key."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pytest_segrobust.core.errors import SuiteError
from pytest_segrobust.engine.workbench import Workbench
from pytest_segrobust.runtime.options import Options
from pytest_segrobust.suite.model_sources import MODEL_SOURCES, ModelSpec, register_model_source
from pytest_segrobust.suite.schema import load_suite
from tests.binner_source import Binned, BinnerSource

ROOT = Path(__file__).resolve().parents[1]
SUITE = """\
dataset: {factory: tests.fakes:band_scenes}
corruptions: [rotate]
severities: [1]
models:
"""
BUILT_IN = "'factory' (a package.module:callable), 'onnx' (a model file) and 'transformers' (a checkpoint directory)"


def write(tmp_path: Path, models: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(SUITE + models)
    return path


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """``binner`` registered in-process; the process's sources restored afterwards."""
    MODEL_SOURCES.names()  # the built-ins first, so that the restored registry has them
    monkeypatch.setattr(MODEL_SOURCES, "_entries", dict(MODEL_SOURCES._entries))
    register_model_source(BinnerSource)


def test_a_registered_source_builds_the_entries_with_its_key(tmp_path: Path, registered: None) -> None:
    path = write(
        tmp_path,
        "  - {name: plain, factory: tests.fakes:red_binner, kwargs: {smoothing: 3}}\n  - {name: binned, binner: 3}\n",
    )
    suite = load_suite(path)
    assert suite.models[1] == ModelSpec("binned", "binner", Binned(3))
    assert suite.models[1].source == "binner of window 3"
    bench = Workbench(Options(True, False, tmp_path, tmp_path, tmp_path / "report.md"))
    images = torch.rand(2, 3, 32, 32)
    binned, plain = bench.model(suite, "binned"), bench.model(suite, "plain")
    assert torch.equal(binned.predict(images), plain.predict(images))
    assert bench.clean(suite, "binned").score == bench.clean(suite, "plain").score


def test_a_registered_source_words_its_own_errors_and_is_listed(tmp_path: Path, registered: None) -> None:
    bad = write(tmp_path, "  - {name: m, binner: 0}\n")
    with pytest.raises(SuiteError) as info:
        load_suite(bad)
    assert str(info.value) == f"{bad}: field 'models[0].binner': expected a smoothing window >= 1, got 0"
    bare = write(tmp_path, "  - {name: m}\n", "bare.yaml")
    with pytest.raises(SuiteError) as info:
        load_suite(bare)
    assert (
        str(info.value)
        == f"{bare}: field 'models[0]': expected exactly one of 'binner' (a smoothing window), {BUILT_IN}"
    )


@pytest.mark.parametrize(
    "entry", ["{name: m, tflite: m.tflite}", "{name: m, factory: tests.fakes:red_binner, onnx: m.onnx}"]
)
def test_an_entry_without_exactly_one_known_source_key_names_the_file_and_the_keys(tmp_path: Path, entry: str) -> None:
    path = write(tmp_path, f"  - {entry}\n")
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert str(info.value) == f"{path}: field 'models[0]': expected exactly one of {BUILT_IN}"


def test_reading_a_suite_imports_no_optional_extra(tmp_path: Path) -> None:
    for extra in ("onnxruntime", "transformers"):  # the schema refuses an entry whose extra is missing
        if importlib.util.find_spec(extra) is None:
            pytest.skip(f"{extra} is not installed")
    path = write(tmp_path, "  - {name: a, onnx: a.onnx}\n  - {name: b, transformers: ckpt}\n")
    script = (
        "import sys; from pathlib import Path; from pytest_segrobust.suite.schema import load_suite; "
        f"load_suite(Path({str(path)!r})); print(sorted(m for m in ('onnxruntime', 'transformers') if m in sys.modules))"
    )
    # A fresh interpreter: this one may have imported either for another test.
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"
