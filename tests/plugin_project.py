"""A pytester project for plugin tests: the fake dataset and model, a suite of 5 cells, helpers."""

from __future__ import annotations

import json
import shutil

import pytest

# Plugin behaviour that can differ under xdist (the controller gathers, gates and writes what
# workers measured) is tested both ways. ``-n 0`` is not a third way: with no workers the
# plugin takes the plain path (tests/test_plugin.py checks that once).
DISTRIBUTIONS = {"no-xdist": [], "n2": ["-n", "2"]}
# For tests of what a worker computes the same way as a single process (a model source, a
# task's numbers, collection of suite files): one run, no xdist.
SINGLE_PROCESS = pytest.mark.parametrize("dist", [DISTRIBUTIONS["no-xdist"]], ids=["no-xdist"])

SUITE = """\
name: bands
dataset: {{factory: segrobust_fakes:band_scenes}}
models:
  - {{name: binner, factory: segrobust_fakes:red_binner, kwargs: {{smoothing: {smoothing}}}}}
corruptions: [gaussian_noise, rotate]
severities: [1, 5]
tolerance: {{gamma_r: 0.01, score: 1.0}}
batch_size: 3
"""
CELLS = 5  # clean + 2 corruptions x 2 severities
# One model, its clean cell and one corrupted cell: the smallest run that writes baselines and a report.
ONE_CELL = (
    "dataset: {factory: segrobust_fakes:band_scenes}\n"
    "models: [{name: m, factory: segrobust_fakes:red_binner}]\n"
    "corruptions: [gaussian_noise]\nseverities: [5]\n"
)


def write_suite(pytester: pytest.Pytester, smoothing: int, name: str = "bands") -> None:
    (pytester.path / "suites").mkdir(exist_ok=True)
    (pytester.path / "suites" / f"{name}.yaml").write_text(SUITE.format(smoothing=smoothing))


# A conftest corruption: ``blackout`` (coco-p) dims, and blacks the image out at severity 5.
BLACKOUT_CONFTEST = """
from dataclasses import dataclass
from pytest_segrobust.corruptions import Category, PhotometricCorruption, SeverityTable

@dataclass(frozen=True)
class Gain:
    factor: float

class Blackout(PhotometricCorruption):
    def corrupt_images(self, images, params, rngs):
        return images * params.factor

def pytest_segrobust_register_corruptions(registry):
    table = SeverityTable(tuple(Gain(f) for f in (0.9, 0.8, 0.7, 0.6, 0.0)))
    registry.register(Blackout("blackout", Category.DIGITAL, table), presets=("coco-p",))
"""

# The report's figures and pictures were two thirds of a 5-cell run's CPU: a run leaves them
# out unless its test reads them (``figures=True``); tests/report/ covers the figures themselves.
NO_FIGURES = "--segrobust-figures=none"


def run(pytester: pytest.Pytester, *args: str, figures: bool = False) -> pytest.RunResult:
    # In-process keeps torch imported once; with -n 2 xdist still starts real worker processes.
    return pytester.runpytest("-p", "no:cacheprovider", *(() if figures else (NO_FIGURES,)), *args)


def cached_run(pytester: pytest.Pytester, *args: str, figures: bool = False) -> pytest.RunResult:
    """A run with pytest's cache enabled, where clean results are stored."""
    return pytester.runpytest("--segrobust", *(() if figures else (NO_FIGURES,)), *args)


def baseline(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "baselines" / "bands.json").read_text())


# The bands suite's baselines as an update writes them, per suite text: they depend on the
# suite alone, so a process records them once and every later test starts from a copy.
_RECORDED: dict[str, dict[str, bytes]] = {}


def recorded(pytester: pytest.Pytester) -> None:
    """Give the project the baselines ``--segrobust-update-baselines`` writes for its suites,
    and nothing else (no report): the state every test that calls it starts from, whether it
    recorded them or copied them."""
    key = "".join(path.read_text() for path in sorted((pytester.path / "suites").glob("*.yaml")))
    folder = pytester.path / "baselines"
    if key not in _RECORDED:
        run(pytester, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
        for written in pytester.path.glob("segrobust-report*"):
            shutil.rmtree(written) if written.is_dir() else written.unlink()
        _RECORDED[key] = {path.name: path.read_bytes() for path in folder.iterdir()}
    else:
        folder.mkdir(exist_ok=True)
        for name, data in _RECORDED[key].items():
            (folder / name).write_bytes(data)
