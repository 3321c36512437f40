"""A plain function of a numpy image and prompt dicts serves a promptable suite."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

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
