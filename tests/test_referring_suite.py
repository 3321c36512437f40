"""A referring suite from YAML: a JSON-lines dataset and a text-reading torch module, through evaluate()."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

mask_utils = pytest.importorskip("pycocotools.mask")

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.models import adapt_model
from pytest_segrobust.suite.model_sources import build_model
from pytest_segrobust.suite.schema import load_suite
from pytest_segrobust.tasks import get_task
from tests.plugin_project import run

SIZE = 16

MODEL_MODULE = '''
import torch


class ColourReader(torch.nn.Module):
    """Finds "the red square" or "the blue square": logits are that channel's excess over the others."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.tensor(-0.5))

    def forward(self, images: torch.Tensor, texts: list[str]) -> torch.Tensor:
        channel = torch.tensor([0 if "red" in text else 2 for text in texts], device=images.device)
        chosen = images[torch.arange(len(texts)), channel]
        return chosen - images.mean(dim=1) + self.bias / 2


def colour_reader() -> ColourReader:
    return ColourReader()
'''

SUITE = """
name: referring-tiny
task: referring
dataset:
  factory: pytest_segrobust.data.referring:ReferringJsonl
  kwargs: {annotation_file: scenes/refs.jsonl}
models:
  - name: colour-reader
    factory: referring_models:colour_reader
corruptions: [gaussian_noise, shear]
severities: [1, 5]
metrics: [referring_miou, referring_oiou, referring_p50]
batch_size: 3
seed: 0
"""


def _rle(mask: np.ndarray) -> dict:
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode("ascii")}


def write_project(root: Path) -> None:
    """Four scenes with a red and a blue square each, two expressions per square; the model; the suite."""
    tmp_path = root
    rng = np.random.default_rng(0)
    lines = []
    for index in range(4):
        pixels = np.zeros((SIZE, SIZE, 3), dtype=np.uint8)
        masks = {}
        for colour, channel, columns in (("red", 0, (1, 7)), ("blue", 2, (9, 15))):
            top = int(rng.integers(0, SIZE - 6))
            mask = np.zeros((SIZE, SIZE), dtype=bool)
            mask[top : top + 6, columns[0] : columns[1]] = True
            pixels[mask, channel] = 255
            masks[colour] = mask
        (tmp_path / "scenes").mkdir(exist_ok=True)
        Image.fromarray(pixels).save(tmp_path / "scenes" / f"{index}.png")
        for colour, mask in masks.items():
            expressions = [f"the {colour} square", f"{colour} one"]
            lines.append({"image": f"{index}.png", "ref": colour, "mask": _rle(mask), "expressions": expressions})
    (tmp_path / "scenes" / "refs.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (tmp_path / "referring_models.py").write_text(MODEL_MODULE)
    (tmp_path / "suites").mkdir(exist_ok=True)
    (tmp_path / "suites" / "referring.yaml").write_text(SUITE)


@pytest.fixture
def referring_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_referring_suite_runs_through_evaluate(referring_project: Path) -> None:
    suite = load_suite(referring_project / "suites" / "referring.yaml")
    assert suite.task == "referring" and suite.metrics == ("referring_miou", "referring_oiou", "referring_p50")
    dataset = suite.dataset.build()
    assert len(dataset) == 16 and dataset.sample_ids[:2] == ("0.png/red/0", "0.png/red/1")
    task = get_task(suite.task)
    model = adapt_model(build_model(suite.models[0], torch.device("cpu"), task=suite.task), task)
    clean = evaluate(
        model, dataset, settings=EvalSettings.of(task=task, metrics=suite.metrics, batch_size=suite.batch_size)
    )
    assert clean.num_images == 16
    assert clean.score == pytest.approx(100.0) and clean.metrics["referring_p50"].score == 100.0
    for name in suite.corruptions:
        corrupted = evaluate(
            model,
            dataset,
            REGISTRY.get(name),
            5,
            settings=EvalSettings.of(task=task, metrics=suite.metrics, seed=suite.seed, batch_size=5),
        )
        assert 0.0 <= corrupted.score < clean.score, name
        again = evaluate(
            model,
            dataset,
            REGISTRY.get(name),
            5,
            settings=EvalSettings.of(task=task, metrics=suite.metrics, seed=suite.seed, batch_size=16),
        )
        assert again.metrics == corrupted.metrics  # batching does not change the numbers


def test_a_referring_suite_gates_with_pytest_segrobust(pytester: pytest.Pytester) -> None:
    write_project(pytester.path)
    pytester.makeini("[pytest]\npythonpath = .\n")
    run(pytester, "--segrobust", "--segrobust-update-baselines").assert_outcomes(passed=5)
    result = run(pytester, "--segrobust")
    result.assert_outcomes(passed=5)
    report = json.loads((pytester.path / "segrobust-report.json").read_text())
    cells = report["suites"]["referring-tiny"]["models"]["colour-reader"]["cells"]
    assert cells[0]["score"] == pytest.approx(100.0)
    assert {"oiou", "p50", "p90"} <= set(cells[0]["details"])
    assert "| colour-reader | clean | 100.00 | 100.00 | 100.00 |" in (pytester.path / "segrobust-report.md").read_text()
