"""A plain function of a numpy image and prompt dicts serves a promptable suite."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.core.prompts import PromptSet
from pytest_segrobust.data.prompt_protocol import StandardProtocol, StandardProtocolSettings
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.models import adapt_model
from pytest_segrobust.models.promptable_functions import ArrayPromptableModel
from pytest_segrobust.tasks.promptable import PromptableTask
from tests.test_tasks_promptable import Squares


@pytest.mark.parametrize("candidates", [False, True])
def test_a_function_of_arrays_is_asked_per_image_and_scored(candidates: bool) -> None:
    seen: list[tuple[np.ndarray, list[dict[str, Any]]]] = []

    def fill_the_box(image: np.ndarray, prompts: list[dict[str, Any]]) -> Any:
        """Exact for squares: each box prompt filled (the click sets get their instance's box too)."""
        seen.append((image, prompts))
        masks = np.zeros((len(prompts), *image.shape[:2]), dtype=bool)
        for mask, prompt in zip(masks, prompts):
            x0, y0, x1, y1 = (int(v) for v in prompt["box"])
            mask[y0:y1, x0:x1] = True
        if candidates:  # the right masks scored above empty ones
            return np.stack([np.zeros_like(masks), masks], axis=1), np.tile([0.2, 0.7], (len(prompts), 1))
        return masks

    task = PromptableTask(StandardProtocol(StandardProtocolSettings(0, "center", True)), seed=0)
    model = adapt_model(fill_the_box, task)
    assert isinstance(model, ArrayPromptableModel)
    scored = evaluate(model, Squares(), settings=EvalSettings(task, ("promptable_miou",), batch_size=2))
    assert scored.metrics["promptable_miou"].score == pytest.approx(100.0)
    image, prompts = seen[0]
    assert image.shape == (64, 64, 3) and image.dtype == np.uint8 and image.max() == 200
    assert [p["kind"] for p in prompts] == ["box", "box"] and prompts[0]["box"].dtype == np.float32
    assert prompts[0]["points"].shape == (0, 2) and prompts[0]["labels"].dtype == np.int64


def test_an_image_without_a_prompt_set_is_not_asked_and_a_wrong_answer_says_what_is_expected() -> None:
    asked: list[int] = []

    def refuses_no_prompts(image: np.ndarray, prompts: list[dict[str, Any]]) -> Any:
        """As a SAM predictor: no prompt is an error."""
        if not prompts:
            raise ValueError("no prompt given")
        asked.append(len(prompts))
        return None if len(prompts) == 1 else np.zeros((len(prompts), *image.shape[:2]), dtype=bool)

    model = adapt_model(refuses_no_prompts, PromptableTask())
    images = torch.zeros(2, 3, 8, 8)
    none = model.predict(images, [[], []])
    assert asked == [] and [tuple(masks.shape) for masks in none] == [(0, 8, 8), (0, 8, 8)]
    box = PromptSet(torch.zeros(0, 2), torch.zeros(0, dtype=torch.int64), torch.tensor([1.0, 1.0, 4.0, 4.0]), "box", 0)
    with pytest.raises(ModelOutputError, match=r"function returned NoneType, expected an array \(len\(prompts\), H, W\)"):
        model.predict(images, [[], [box]])
