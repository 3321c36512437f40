"""Declared metric states: a reset gives every registered metric the states of a fresh one, and
no two resets (nor a reset and the declared default) share a mutable object."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

from pytest_segrobust.core.extras import unmet
from pytest_segrobust.core.prompts import FOREGROUND, InstancePrompts, PromptedInstances
from pytest_segrobust.core.types import (
    Batch,
    Field,
    InstanceMasks,
    InstancePredictions,
    InstanceTarget,
    PanopticMap,
    PanopticPredictions,
    PanopticTarget,
    ReferringMask,
    SampleIndex,
    SemanticMask,
    VideoMasks,
)
from pytest_segrobust.metrics import METRICS, Metric, MetricContext, MetricResult, Reduction

CONTEXT = MetricContext(("background", "cat", "dog"), ignore_index=255)


def labels() -> torch.Tensor:
    """An 8x8 map of classes 0..2: two blocks on background."""
    truth = torch.zeros(8, 8, dtype=torch.int64)
    truth[1:5, 1:4] = 1
    truth[3:7, 4:8] = 2
    return truth


def semantic_example() -> tuple[Any, Batch]:
    truth = torch.stack([labels(), labels().flip(1)])
    truth[0, 0, :2] = CONTEXT.ignore_index
    predicted = torch.where(truth == CONTEXT.ignore_index, 0, truth)
    predicted[1, 2:4, 2:4] = 2
    return predicted, {"mask": SemanticMask(truth, CONTEXT.ignore_index)}


def referring_example() -> tuple[Any, Batch]:
    truth = torch.stack([labels() == 1, labels() == 2])
    return truth.roll(1, dims=2), {"target": ReferringMask(truth)}


def video_example() -> tuple[Any, Batch]:
    truth = torch.stack([labels().roll(frame, dims=1) for frame in range(4)])[None]  # (1, 4, 8, 8)
    predicted = truth.clone()
    predicted[0, 1:, 0, :] = 1
    return predicted, {"masks": VideoMasks.of(truth)}


def instance_example() -> tuple[Any, Batch]:
    masks = torch.stack([labels() == 1, labels() == 2])
    target = InstanceTarget.from_masks(masks, torch.tensor([1, 2]))
    predicted = InstancePredictions(masks.roll(1, dims=1), torch.tensor([1, 2]), torch.tensor([0.9, 0.6]))
    batch = {"instances": InstanceMasks((target,), 8, 8), "index": SampleIndex((0,), ("sample-0",))}
    return [predicted], batch


def panoptic_example() -> tuple[Any, Batch]:
    segments = labels() * 10  # segment 10 of class 1, 20 of class 2; background void
    target = PanopticTarget(segments, torch.tensor([10, 20]), torch.tensor([1, 2]), torch.tensor([False, False]))
    predicted = PanopticPredictions(segments.roll(1, dims=0), torch.tensor([10, 20]), torch.tensor([1, 2]))
    return [predicted], {"panoptic": PanopticMap((target,))}


def promptable_example() -> tuple[Any, Batch]:
    masks = torch.stack([labels() == 1, labels() == 2])
    target = InstancePrompts(
        masks,
        torch.tensor([[[2.0, 3.0]], [[5.0, 6.0]]]),
        torch.full((2, 1), FOREGROUND),
        torch.tensor([[0.0, 0.0, 8.0, 8.0], [1.0, 1.0, 7.0, 7.0]]),
        torch.ones(2, dtype=torch.bool),
        torch.ones(2, dtype=torch.bool),
        masks.flatten(1).sum(dim=1),
        "points,box",
    )
    sets = target.prompt_sets()
    predicted = torch.stack([masks[s.instance].roll(1, dims=1) for s in sets])  # one mask per prompt set
    return [predicted], {"prompted": PromptedInstances((target,), 8, 8)}


# One batch per ground-truth type: a metric reading a new type needs its example here.
EXAMPLES: dict[type[Field], Callable[[], tuple[Any, Batch]]] = {
    SemanticMask: semantic_example,
    ReferringMask: referring_example,
    VideoMasks: video_example,
    InstanceMasks: instance_example,
    PanopticMap: panoptic_example,
    PromptedInstances: promptable_example,
}
BUILT_IN = [metric.name for metric in METRICS]


def made(name: str) -> Metric:
    """A fresh ``name`` metric on :data:`CONTEXT` (the test is skipped when its extras are missing)."""
    metric = METRICS.get(name)
    why = unmet(f"metric {name!r}", metric.requires)
    if why is not None:
        pytest.skip(why)
    return metric(CONTEXT)


def updated(metric: Metric) -> Metric:
    """``metric`` after one update with the example batch of what it accepts."""
    predictions, batch = EXAMPLES[metric.accepts[0]]()
    metric.update(predictions, batch)
    return metric


def plain(value: Any) -> Any:
    """A state as comparable values: tensors and arrays with their dtype (and device), lists item by item."""
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), str(value.device), value.tolist())
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.tolist())
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def states_of(metric: Metric) -> dict[str, Any]:
    return {name: plain(getattr(metric, name)) for name in metric.states}


def test_every_built_in_metric_declares_states_and_has_an_example() -> None:
    for metric in METRICS:
        assert metric.accepts[0] in EXAMPLES, f"{metric.name} reads {metric.accepts[0].__name__}: add an example batch"
        assert made(metric.name).states, f"{metric.name} declares no state"


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_reset_after_updates_gives_the_states_of_a_fresh_metric(name: str) -> None:
    fresh = states_of(made(name))
    metric = updated(made(name))
    assert states_of(metric) != fresh, "the example batch must reach the states"
    metric.reset()
    assert states_of(metric) == fresh
    # A reset metric takes the same samples again (COCO's records refuse an image added twice).
    assert states_of(updated(metric)) == states_of(updated(made(name)))


@pytest.mark.parametrize("name", BUILT_IN)
def test_resets_share_no_mutable_state(name: str) -> None:
    metric = made(name)
    fresh = states_of(metric)
    metric.reset()
    first = {state: getattr(metric, state) for state in metric.states}
    metric.reset()
    for state in metric.states:
        assert getattr(metric, state) is not first[state], f"{name}.{state} is the same object after two resets"
    # An update writes into the states in place where it can (a matrix added to, a list appended to):
    # the first reset's objects, and a second metric, must not see it.
    other = made(name)
    updated(metric)
    assert {state: plain(value) for state, value in first.items()} == fresh
    assert states_of(other) == fresh


@pytest.mark.parametrize("name", BUILT_IN)
def test_states_go_through_json_and_come_back_as_they_were(name: str) -> None:
    metric = updated(made(name))
    restored = made(name)
    restored.load_state_dict(json.loads(json.dumps(metric.state_dict())))
    assert states_of(restored) == states_of(metric)
    assert np.array_equal(restored.image_statistics(), metric.image_statistics())


class Counts(Metric):
    """A metric with one state of each reduction, for the base class's rules."""

    name, label = "test_counts", "counts"

    def __init__(self, context: MetricContext) -> None:
        super().__init__(context)
        self.add_state("total", torch.zeros(2, dtype=torch.int64), Reduction.SUM)
        self.add_state("seen", [], Reduction.CONCAT)

    def update(self, predictions: Any, batch: Batch) -> None:
        self.total += torch.as_tensor(predictions)
        self.seen.append(torch.as_tensor(predictions))

    def compute(self) -> MetricResult:
        return MetricResult(float(self.total.sum()), ())


def test_merge_and_state_dict_follow_the_declared_reductions() -> None:
    first, second = Counts(CONTEXT), Counts(CONTEXT)
    first.update([1, 2], {})
    second.update([10, 20], {})
    restored = Counts(CONTEXT)
    restored.load_state_dict(second.state_dict())
    first.merge(restored)
    assert first.states == {"total": Reduction.SUM, "seen": Reduction.CONCAT}
    assert first.total.tolist() == [11, 22]
    assert [part.tolist() for part in first.seen] == [[1, 2], [10, 20]]
    assert second.total.tolist() == [10, 20] and len(second.seen) == 1  # merging leaves the other as it was


def test_a_default_that_its_reduction_cannot_combine_is_refused() -> None:
    metric = Counts(CONTEXT)
    with pytest.raises(TypeError, match="'extra' concatenates: its default must be a list, got Tensor"):
        metric.add_state("extra", torch.zeros(1), Reduction.CONCAT)
    with pytest.raises(TypeError, match="'extra' sums: its default must be a tensor or a number, got list"):
        metric.add_state("extra", [], Reduction.SUM)
    with pytest.raises(ValueError, match="state 'total' is declared twice"):
        metric.add_state("total", torch.zeros(2), Reduction.SUM)


def test_a_class_level_states_table_is_refused() -> None:
    with pytest.raises(TypeError, match="declare states with self.add_state"):

        class Legacy(Counts):
            states: ClassVar[dict[str, Reduction]] = {"total": Reduction.SUM}  # type: ignore[misc]
