"""task: promptable: the prompt protocol a suite declares, the model's answers, mIoU per prompt set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pytest_segrobust.core.errors import BaselineError, DatasetError, ModelOutputError, SuiteError
from pytest_segrobust.core.prompts import PromptedInstances
from pytest_segrobust.core.types import InstanceTarget
from pytest_segrobust.data.base import Sample
from pytest_segrobust.data.prompt_protocol import StandardProtocol, StandardProtocolSettings, innermost_pixel
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.engine.plan import Plan
from pytest_segrobust.engine.workbench import Workbench
from pytest_segrobust.metrics.base import MetricContext
from pytest_segrobust.metrics.promptable import PromptableMIoU
from pytest_segrobust.runtime.options import Options
from pytest_segrobust.store.baselines import BaselineFile, CellKey, write_baseline
from pytest_segrobust.suite.schema import load_suite
from pytest_segrobust.tasks import get_task
from pytest_segrobust.tasks.promptable import PromptableTask, asked_sets


class Squares:
    """Two images of two square instances each (one small, one of 40x40 pixels: COCO 'medium')."""

    name = "squares"
    class_names = ("background", "square")
    ignore_index = 255

    def __init__(self) -> None:
        self.samples = []
        for i in range(2):
            masks = torch.zeros(2, 64, 64, dtype=torch.bool)
            masks[0, 2 + i : 10 + i, 3:11] = True
            masks[1, 20:60, 20:60] = True
            image = (masks.any(dim=0) * 200).to(torch.uint8).expand(3, 64, 64).clone()
            self.samples.append(Sample(f"img{i}", image, instances=InstanceTarget.from_masks(masks, torch.tensor([1, 1]))))

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> Sample:
        return self.samples[index]

    def fingerprint(self) -> str:
        return "squares"


class Oracle:
    """Answers each set with its box filled (exact for squares) or, for clicks, the instance under the first click."""

    task = "promptable"
    device = torch.device("cpu")

    def __init__(self, candidates: bool = False) -> None:
        self.candidates = candidates
        self.asked: list[Any] = []

    def fingerprint(self) -> str:
        return "oracle"

    def predict(self, images: torch.Tensor, prompts: Any) -> list[Any]:
        self.asked.append(prompts)
        out: list[Any] = []
        for image, sets in zip(images, prompts):
            masks = torch.zeros(len(sets), *image.shape[-2:], dtype=torch.bool)
            lit = image[0] > 0.5
            for i, s in enumerate(sets):
                if s.box is not None:
                    x0, y0, x1, y1 = (int(v) for v in s.box)
                    masks[i, y0:y1, x0:x1] = True
                else:
                    x, y = (int(v) for v in s.points[0])
                    masks[i] = _component(lit, x, y)
            if self.candidates:  # the right mask scored higher than an empty one
                out.append((torch.stack([torch.zeros_like(masks), masks], dim=1), torch.tensor([[0.1, 0.9]] * len(sets))))
            else:
                out.append(masks)
        return out


def _component(lit: torch.Tensor, x: int, y: int) -> torch.Tensor:
    region = torch.zeros_like(lit)
    region[y, x] = True
    while True:
        grown = torch.nn.functional.max_pool2d(region[None, None].float(), 3, 1, 1)[0, 0].bool() & lit
        if torch.equal(grown, region):
            return region
        region = grown


def settings_of(protocol: StandardProtocolSettings) -> EvalSettings:
    return EvalSettings(PromptableTask(StandardProtocol(protocol), seed=0), ("promptable_miou",), batch_size=2)


def test_an_oracle_scores_100_per_kind_and_size() -> None:
    result = evaluate(Oracle(), Squares(), settings=settings_of(StandardProtocolSettings(1, "center", True)))
    scored = result.metrics["promptable_miou"]
    assert scored.score == pytest.approx(100.0)
    assert scored.details["points"] == pytest.approx(100.0) and scored.details["box"] == pytest.approx(100.0)
    assert scored.details["small"] == pytest.approx(100.0) and scored.details["medium"] == pytest.approx(100.0)
    assert np.isnan(scored.details["large"])


def test_the_best_scored_candidate_is_taken() -> None:
    result = evaluate(Oracle(candidates=True), Squares(), settings=settings_of(StandardProtocolSettings(0, "center", True)))
    assert result.metrics["promptable_miou"].score == pytest.approx(100.0)


def test_rows_are_images_whose_sums_give_the_score() -> None:
    task = PromptableTask(StandardProtocol(StandardProtocolSettings(2, "random", True)), seed=3)
    dataset = Squares()
    batch = task.collate(dataset.samples, [0, 1], dataset, torch.device("cpu"))  # type: ignore[arg-type]
    half = [torch.zeros(4, 64, 64, dtype=torch.bool) for _ in range(2)]
    for masks, target in zip(half, batch["prompted"].targets):  # type: ignore[attr-defined]
        masks[0] = target.masks[0]  # the first set exact, the others empty
    metric = PromptableMIoU(MetricContext(("background", "square"), 255))
    metric.update(task.check_predictions(half, batch), batch)
    rows = metric.image_statistics()
    assert rows.shape[0] == 2
    assert metric.compute().score == pytest.approx(25.0)
    assert float(PromptableMIoU.score_of(rows.sum(axis=0))) == pytest.approx(25.0)


def test_a_set_without_prompts_is_not_asked_and_scores_zero() -> None:
    task = PromptableTask(StandardProtocol(StandardProtocolSettings(1, "center", False)), seed=0)
    dataset = Squares()
    batch = task.collate(dataset.samples[:1], [0], dataset, torch.device("cpu"))  # type: ignore[arg-type]
    target = batch["prompted"].targets[0]  # type: ignore[attr-defined]
    emptied = target.with_prompts(target.points, target.point_labels.clone().fill_(-1), target.boxes, target.box_given, target.tight)
    batch = {**batch, "prompted": PromptedInstances((emptied,), 64, 64)}
    model = Oracle()
    assert asked_sets(batch) == [[]]
    masks = task.check_predictions(task.predict(model, batch), batch)
    assert masks[0].shape == (2, 64, 64) and not bool(masks[0].any())


def test_a_wrong_number_of_masks_names_the_sample() -> None:
    task = PromptableTask()
    dataset = Squares()
    batch = task.collate(dataset.samples, [0, 1], dataset, torch.device("cpu"))  # type: ignore[arg-type]
    with pytest.raises(ModelOutputError, match="sample img0: model returned masks of shape"):
        task.check_predictions([torch.zeros(1, 64, 64, dtype=torch.bool)] * 2, batch)
    with pytest.raises(ModelOutputError, match="expected a list of 2 results"):
        task.check_predictions(torch.zeros(2, 64, 64), batch)


def test_the_centre_click_is_the_innermost_pixel() -> None:
    mask = torch.zeros(9, 20, dtype=torch.bool)
    mask[1:8, 1:8] = True  # a square whose centre is (4, 4)
    mask[4, 8:19] = True  # and a long thin arm pulling the centroid right
    assert innermost_pixel(mask) == 4 * 20 + 4


def _suite(tmp_path: Path, prompts: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(
        "name: p\ntask: promptable\npreset: coco-p-prompts\n"
        "dataset: {factory: tests.test_tasks_promptable:Squares}\n"
        "models: [{name: m, factory: tests.test_tasks_promptable:Oracle}]\n"
        f"corruptions: [rotate, box_jitter, gaussian_noise+missing_click]\n{prompts}"
    )
    return path


def test_a_suite_declares_its_protocol_and_the_plan_binds_it(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path, "prompts: {points: {count: 2, where: random}, box: tight}\nseed: 7\n"))
    task = Plan.of(suite).task
    assert isinstance(task, PromptableTask) and task.seed == 7
    assert task.protocol == StandardProtocol(StandardProtocolSettings(2, "random", True))
    assert get_task("promptable").setting != task.setting
    # What a cached clean result is keyed by is what a baseline records, and the seed the clicks are drawn with.
    recorded, seed = task.setting.rsplit("; seed ", 1)
    assert json.loads(recorded) == task.recorded_setting and seed == "7"
    assert suite.corruption("gaussian_noise+missing_click").category.value == "cross-modal"
    assert suite.corruption("box_jitter").category.value == "prompt"


@pytest.mark.parametrize(
    ("prompts", "field"),
    [
        ("prompts: {points: {count: 9}}\n", "prompts.points.count"),
        ("prompts: {points: {count: 1, where: edge}}\n", "prompts.points.where"),
        ("prompts: {box: loose}\n", "prompts.box"),
        ("prompts: {box: tight, mask: true}\n", "prompts.mask"),
        ("prompts: {protocol: clicks}\n", "prompts.protocol"),
        ("prompts: {box: none}\n", "prompts"),
    ],
)
def test_a_bad_protocol_names_the_file_and_field(tmp_path: Path, prompts: str, field: str) -> None:
    with pytest.raises(SuiteError, match=rf"p\.yaml: field '{field}'"):
        load_suite(_suite(tmp_path, prompts))


def test_a_baseline_records_the_prompt_protocol_and_refuses_a_run_under_another(tmp_path: Path) -> None:
    options = Options(True, False, tmp_path, tmp_path, tmp_path / "report.md")
    clean = CellKey("p", "m", "clean", 0)
    one_click = load_suite(_suite(tmp_path, "prompts: {points: {count: 1, where: center}, box: tight}\n"))
    conditions = Workbench(options).conditions(one_click)
    path = tmp_path / "baselines" / "p.json"
    write_baseline(path, "p", conditions, [(clean, {"score": 90.0})], False)
    protocol = {"protocol": "standard", "version": "1", "options": {"clicks": 1, "where": "center", "box": True}}
    assert json.loads(path.read_text())["conditions"]["task_setting"] == {"prompts": protocol}
    assert BaselineFile(path).lookup(clean, conditions) == {"score": 90.0}
    two_clicks = load_suite(_suite(tmp_path, "prompts: {points: {count: 2, where: center}, box: tight}\n"))
    with pytest.raises(BaselineError, match="recorded under other conditions") as error:
        BaselineFile(path).lookup(clean, Workbench(options).conditions(two_clicks))
    assert "task_setting: baseline {'prompts': " in str(error.value) and "'clicks': 2" in str(error.value)
    assert "--segrobust-update-baselines" in str(error.value)


def test_an_instance_with_an_empty_mask_is_refused_naming_the_sample_and_instance() -> None:
    dataset = Squares()
    first = dataset.samples[0]
    masks = torch.cat([first.instances.masks, torch.zeros(1, 64, 64, dtype=torch.bool)])
    emptied = InstanceTarget.from_masks(masks, torch.tensor([1, 1, 1]))
    dataset.samples[0] = Sample("img0", first.image, instances=emptied)
    task = PromptableTask()
    # Left in, its sets would score an empty answer as IoU 1: a perfect score for nothing.
    with pytest.raises(DatasetError, match=r"squares: sample img0: instance 2 \(label 1\) has an empty mask.*remove the annotation"):
        task.collate(dataset.samples, [0, 1], dataset, torch.device("cpu"))  # type: ignore[arg-type]
    crowd = InstanceTarget.from_masks(masks, torch.tensor([1, 1, 1]), torch.tensor([False, False, True]))
    dataset.samples[0] = Sample("img0", first.image, instances=crowd)  # a crowd region is not prompted
    task.collate(dataset.samples, [0, 1], dataset, torch.device("cpu"))  # type: ignore[arg-type]


def test_candidate_scores_of_another_shape_or_not_finite_are_refused() -> None:
    task = PromptableTask(StandardProtocol(StandardProtocolSettings(0, "center", True)), seed=0)
    dataset = Squares()
    batch = task.collate(dataset.samples, [0, 1], dataset, torch.device("cpu"))  # type: ignore[arg-type]
    candidates = torch.zeros(2, 3, 64, 64, dtype=torch.bool)
    with pytest.raises(ModelOutputError, match=r"sample img0: expected scores of shape \(2, 3\).*got \(2, 2\)"):
        task.check_predictions([(candidates, torch.zeros(2, 2))] * 2, batch)
    with pytest.raises(ModelOutputError, match="sample img0: model returned NaN or infinite candidate scores"):
        task.check_predictions([(candidates, torch.tensor([[0.1, float("nan"), 0.2]] * 2))] * 2, batch)
    with pytest.raises(ModelOutputError, match=r"it was given no prompt set for this image: return an empty \(0, H, W\)"):
        task.check_predictions([torch.zeros(1, 64, 64, dtype=torch.bool)] * 2, {**batch, "prompted": _unprompted(batch)})


def _unprompted(batch: Any) -> PromptedInstances:
    """The batch's instances with every prompt dropped."""
    targets = []
    for target in batch["prompted"].targets:
        labels = target.point_labels.clone().fill_(-1)
        targets.append(target.with_prompts(target.points, labels, target.boxes, target.box_given & False, target.tight))
    return PromptedInstances(tuple(targets), 64, 64)
