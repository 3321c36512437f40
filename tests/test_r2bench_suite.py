"""Referring suites with text, cross-modal and mixture cells: validation, xdist equality, RefCOCO layout, report."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

mask_utils = pytest.importorskip("pycocotools.mask")

from pytest_segrobust.core.errors import SuiteError
from pytest_segrobust.suite.schema import load_suite
from pytest_segrobust.text.cells import MIXTURE_CELL, MixtureSpec
from tests.plugin_project import run as plain_run
from tests.test_referring_suite import SUITE, write_project


# The reports compared here hold the worst expressions, which the pictures' search finds.
def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return plain_run(pytester, *args, figures=True)


TEXT_SUITE = SUITE.replace(
    "corruptions: [gaussian_noise, shear]",
    "corruptions: [gaussian_noise, misspelling, character_missing, grammar_error+rotate]\nmixture: r2bench",
)
CELLS = 1 + 5 * 2  # clean + (4 listed + the mixture) x 2 severities

SEMANTIC = """
name: bad
dataset: {factory: pytest_segrobust.data.demo:demo_dataset}
models: [{name: m, factory: pytest_segrobust.models.demo:tiny_unet}]
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _suite(root: Path, text: str, name: str = "s.yaml") -> Path:
    path = root / "suites" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_a_referring_suite_lists_text_composed_and_mixture_cells(project: Path) -> None:
    suite = load_suite(_suite(project, TEXT_SUITE))
    assert suite.corruptions == (
        "gaussian_noise",
        "misspelling",
        "character_missing",
        "rotate+grammar_error",
        MIXTURE_CELL,
    )
    # The mixture draws from the suite's own single image corruptions and text perturbations.
    assert suite.task_cells.mixture == MixtureSpec("r2bench", ("gaussian_noise",), ("misspelling", "character_missing"))
    categories = [suite.corruption(name).category.value for name in suite.corruptions]
    assert categories == ["noise", "text", "text", "cross-modal", "mixture"]


def test_a_mixture_mapping_names_its_types(project: Path) -> None:
    text = SUITE.replace(
        "corruptions: [gaussian_noise, shear]",
        "corruptions: [gaussian_noise]\nmixture: {protocol: r2bench, visual: [fog, rotate], text: [mispunctuation]}",
    )
    suite = load_suite(_suite(project, text))
    assert suite.task_cells.mixture == MixtureSpec("r2bench", ("fog", "rotate"), ("mispunctuation",))
    assert "fog" in suite.corruption(MIXTURE_CELL).table.describe()[0]


@pytest.mark.parametrize(
    ("yaml_text", "field", "message"),
    [
        (
            SEMANTIC + "corruptions: [gaussian_noise, misspelling]\n",
            "corruptions[1]",
            "'misspelling' perturbs referring expressions; task semantic has none",
        ),
        (SEMANTIC + "corruptions: [gaussian_noise+misspelling]\n", "corruptions[0]", "task semantic has none"),
        (SEMANTIC + "mixture: r2bench\n", "mixture", "task semantic has no expressions"),
        (SEMANTIC + "text_replay: r.json\n", "text_replay", "task semantic has none"),
    ],
)
def test_text_cells_in_a_suite_without_expressions_are_refused(
    project: Path, yaml_text: str, field: str, message: str
) -> None:
    path = _suite(project, yaml_text)
    with pytest.raises(SuiteError, match=rf"{re.escape(str(path))}: field '{re.escape(field)}': .*{message}"):
        load_suite(path)


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ("corruptions: [misspelling+grammar_error]", r"corruptions\[0\]", "at most one text perturbation per cell"),
        ("corruptions: [fog+rotate+misspelling]", r"corruptions\[0\]", "chains at most 2"),
        (
            "corruptions: [fog, misspelling, misspelling]",
            r"corruptions\[2\]",
            r"corruption 'misspelling' is listed twice: corruptions\[1\] names it too",
        ),
        (
            "corruptions: [misspelling+fog, fog+misspelling]",
            r"corruptions\[1\]",
            r"corruption 'fog\+misspelling' is listed twice: corruptions\[0\] 'misspelling\+fog' is the same cell",
        ),
        (
            "corruptions: [fog, mispelling]",
            r"corruptions\[1\]",
            (
                r"unknown corruption or text perturbation 'mispelling' \(did you mean 'misspelling'\?\); "
                r"image corruptions of preset '[a-z-]+': .*fog.*; text perturbations: misspelling, mispunctuation, "
            ),
        ),
        (
            "corruptions: [fog+grammar_eror]",
            r"corruptions\[0\]",
            (
                r"invalid composition 'fog\+grammar_eror': unknown corruption or text perturbation 'grammar_eror' "
                r"\(did you mean 'grammar_error'\?\);.* text perturbations: .*grammar_error"
            ),
        ),
        (f"corruptions: [{MIXTURE_CELL}]", r"corruptions\[0\]", "added by 'mixture: r2bench'"),
        ("corruptions: [fog]\nmixture: r3bench", "mixture", "expected 'r2bench'"),
        (
            "corruptions: [fog]\nmixture: {protocol: r2bench, text: [fog]}",
            r"mixture.text\[0\]",
            "expected a text perturbation",
        ),
        (
            "corruptions: [fog]\nmixture: {protocol: r2bench, visual: [misspelling]}",
            r"mixture.visual\[0\]",
            "expected an image corruption",
        ),
        (
            "corruptions: [fog]\nmixture: {protocol: r2bench, visual: [nope]}",
            r"mixture.visual\[0\]",
            "unknown corruption 'nope'",
        ),
        ("corruptions: [fog]\nmixture: {protocol: r2bench, seed: 1}", "mixture.seed", "unknown field"),
        ("corruptions: [fog]\ntext_replay: missing.json", "text_replay", r"replay file .*missing.json: cannot read it"),
        ("corruptions: [fog]\ntext_replay: bad.json", "text_replay", r"replay file .*bad.json"),
        (
            "corruptions: [replay-misspelling]",
            r"corruptions\[0\]",
            "unknown corruption or text perturbation 'replay-misspelling'",
        ),
    ],
)
def test_bad_text_fields_name_the_file_and_the_field(project: Path, change: str, field: str, message: str) -> None:
    (project / "suites").mkdir(exist_ok=True)
    (project / "suites" / "bad.json").write_text(
        json.dumps({"version": 1, "perturbations": {"misspelling": {"9": {}}}})
    )
    path = _suite(project, SUITE.replace("corruptions: [gaussian_noise, shear]", change))
    with pytest.raises(SuiteError, match=rf"{re.escape(str(path))}: field '{field}': .*{message}"):
        load_suite(path)


def test_a_replay_file_gates_on_frozen_texts(project: Path) -> None:
    from pytest_segrobust.data.referring import ReferringJsonl
    from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
    from tests.text.test_cells import ColourReader

    dataset = ReferringJsonl(project / "scenes" / "refs.jsonl")
    frozen = {sample_id: "the green square" for sample_id in dataset.sample_ids}
    replay = {"version": 1, "perturbations": {"misspelling": {"low": frozen, "high": frozen}}}
    (project / "suites").mkdir(exist_ok=True)
    (project / "suites" / "llm.json").write_text(json.dumps(replay))
    text = SUITE.replace(
        "corruptions: [gaussian_noise, shear]",
        "corruptions: [replay-misspelling, fog+replay-misspelling]\ntext_replay: llm.json",
    )
    suite = load_suite(_suite(project, text))
    assert (
        suite.corruptions == ("replay-misspelling", "fog+replay-misspelling")
        and suite.task_cells.text_replay == "llm.json"
    )
    cell = suite.corruption("replay-misspelling")
    assert cell.category.value == "text"
    assert "16 texts, digest" in cell.table.describe()[0] and "0 texts" in cell.table.describe()[2]
    from pytest_segrobust.tasks import get_task

    task = get_task("referring")
    batch = task.collate([dataset[0], dataset[1]], [0, 1], dataset, torch.device("cpu"))
    assert cell(batch, 1, [0, 0])["expression"].texts == ("the green square", "the green square")
    # "green" reads as blue: every red expression is lost, every blue one kept.
    assert evaluate(ColourReader(), dataset, cell, 5, settings=EvalSettings.of(task=task)).score == pytest.approx(50.0)
    with pytest.raises(Exception, match="no level 3"):
        evaluate(ColourReader(), dataset, cell, 3, settings=EvalSettings.of(task=task))


def _normalised(report: dict[str, Any]) -> dict[str, Any]:
    """The report without what a run's timing, machine or process layout may change."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in {"seconds", "environment"}}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(report)


@pytest.mark.slow
def test_text_visual_and_composed_cells_give_identical_reports_under_xdist(pytester: pytest.Pytester) -> None:
    write_project(pytester.path)
    (pytester.path / "suites" / "referring.yaml").write_text(TEXT_SUITE)
    pytester.makeini("[pytest]\npythonpath = .\n")
    run(pytester, "--segrobust", "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    reports = {}
    for label, args in (("n0", ["-n", "0"]), ("n2", ["-n", "2"])):
        result = run(pytester, "--segrobust", *args)
        result.assert_outcomes(passed=CELLS)
        reports[label] = json.loads((pytester.path / "segrobust-report.json").read_text())
        reports[label + "-md"] = (pytester.path / "segrobust-report.md").read_text()
    assert _normalised(reports["n0"]) == _normalised(reports["n2"])
    suite = reports["n0"]["suites"]["referring-tiny"]
    r2 = suite["r2bench"]["models"]["colour-reader"]
    assert {row["modality"] for row in r2["modalities"]} == {"visual", "text", "both", "mixture"}
    assert {row["level"] for row in r2["modalities"]} == {"low", "high"}
    assert list(suite["r2bench"]["columns"].values()) == ["mIoU", "P@50", "P@60", "P@70", "P@80", "P@90", "oIoU"]
    worst = suite["worst_expressions"]["colour-reader"]
    assert worst["corruption"] != "gaussian_noise" and any(
        i["clean_text"] != i["corrupted_text"] for i in worst["images"]
    )
    markdown = reports["n0-md"]
    assert "### R2-Bench: referring segmentation per modality and level" in markdown
    assert "| model | modality | level | mIoU | P@50 | P@60 | P@70 | P@80 | P@90 | oIoU |" in markdown
    assert "worst text cell" in markdown and "| clean text | perturbed text |" in markdown


# -- RefCOCO layout --------------------------------------------------------------------------

HEIGHT, WIDTH = 16, 24

REFCOCO_MODEL = '''
import torch


class SideReader(torch.nn.Module):
    """Reads "left" or "right" in the expression and marks the bright pixels of that half."""

    def forward(self, images: torch.Tensor, texts: list[str]) -> torch.Tensor:
        width = images.shape[-1]
        columns = torch.arange(width, device=images.device)
        left = torch.tensor(["left" in t for t in texts], device=images.device)[:, None, None]
        side = torch.where(left, columns < width // 2, columns >= width // 2)
        bright = images.mean(dim=1) - 0.5
        return torch.where(side.expand_as(bright), bright, torch.full_like(bright, -1.0))


def side_reader() -> SideReader:
    return SideReader()
'''

REFCOCO_SUITE = """
name: refcoco-tiny
task: referring
dataset:
  factory: pytest_segrobust.data.referring:RefCoco
  kwargs: {refs_file: "refcoco/refs(unc).p", instances_file: refcoco/instances.json, images_dir: refcoco/images, split: testA}
models:
  - name: side-reader
    factory: refcoco_models:side_reader
corruptions: [gaussian_noise, misspelling, gaussian_noise+character_missing]
mixture: r2bench
severities: [1, 3, 5]
metrics: [referring_miou, referring_oiou, referring_p50, referring_p90]
batch_size: 2
"""


def write_refcoco(root: Path) -> None:
    """A RefCOCO copy: ``refs(unc).p`` (pickle, as shipped), COCO ``instances.json``, ``images/``; the model and suite."""
    refcoco = root / "refcoco"
    (refcoco / "images").mkdir(parents=True)
    images, annotations, refs = [], [], []
    for image_id in (1, 2, 3):
        pixels = np.full((HEIGHT, WIDTH, 3), 30, dtype=np.uint8)
        for ann, (x0, x1) in enumerate(((2, 10), (14, 22))):
            mask = np.zeros((HEIGHT, WIDTH), dtype=bool)
            mask[3 + image_id : 12, x0:x1] = True
            pixels[mask] = 220
            ann_id = 10 * image_id + ann
            rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
            annotations.append(
                {
                    "id": ann_id,
                    "image_id": image_id,
                    "category_id": 1,
                    "segmentation": {"size": [HEIGHT, WIDTH], "counts": rle["counts"].decode()},
                }
            )
            side = "left" if ann == 0 else "right"
            sentences = [
                {"sent_id": 100 * ann_id + k, "raw": raw, "sent": raw, "tokens": raw.split()}
                for k, raw in enumerate((f"the {side} box", f"box on the {side}"))
            ]
            refs.append(
                {"ref_id": ann_id, "ann_id": ann_id, "image_id": image_id, "split": "testA", "sentences": sentences,
                 "sent_ids": [s["sent_id"] for s in sentences], "category_id": 1, "file_name": f"{image_id}.png"}
            )  # fmt: skip
        Image.fromarray(pixels).save(refcoco / "images" / f"{image_id}.png")
        images.append({"id": image_id, "file_name": f"{image_id}.png", "height": HEIGHT, "width": WIDTH})
    instances = {"images": images, "annotations": annotations, "categories": [{"id": 1, "name": "box"}]}
    (refcoco / "instances.json").write_text(json.dumps(instances))
    (refcoco / "refs(unc).p").write_bytes(pickle.dumps(refs, protocol=2))
    (root / "refcoco_models.py").write_text(REFCOCO_MODEL)
    (root / "suites").mkdir(exist_ok=True)
    (root / "suites" / "refcoco.yaml").write_text(REFCOCO_SUITE)


def test_a_refcoco_layout_suite_runs_from_yaml(pytester: pytest.Pytester) -> None:
    write_refcoco(pytester.path)
    pytester.makeini("[pytest]\npythonpath = .\n")
    result = run(pytester, "--segrobust", "--segrobust-update-baselines")
    result.assert_outcomes(passed=1 + 4 * 3)
    report = json.loads((pytester.path / "segrobust-report.json").read_text())
    suite = report["suites"]["refcoco-tiny"]
    cells = suite["models"]["side-reader"]["cells"]
    assert (
        cells[0]["corruption"] == "clean" and cells[0]["score"] == pytest.approx(100.0) and cells[0]["num_images"] == 12
    )
    r2 = suite["r2bench"]["models"]["side-reader"]
    assert {(row["modality"], row["level"]) for row in r2["modalities"]} == {
        (m, level) for m in ("visual", "text", "both", "mixture") for level in ("low", "medium", "high")
    }
    text_high = next(row for row in r2["modalities"] if row["modality"] == "text" and row["level"] == "high")
    assert text_high["miou"] < 100.0  # misspelt sides are read wrong
    assert run(pytester, "--segrobust").ret == 0
