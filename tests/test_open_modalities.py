"""A new modality is new modules only: a field type, a perturbation family and a task, all defined here.

The module plays an installed plugin: ``Depth`` is a field type of its own (a depth map beside
the image, with a geometric kernel so that warps move it), ``DepthDropout`` a perturbation
family acting on it alone, and ``RgbdTask`` a task whose samples carry a ``depth`` field and
whose model reads it. The task and the perturbation are found through the entry point groups
(``segrobust.tasks``, ``segrobust.corruptions``) of a package installed in ``tmp_path``, then
run through a corruption call and :func:`pytest_segrobust.engine.evaluation.evaluate`. No file of
the package knows about any of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Protocol, runtime_checkable

import pytest
import torch

from pytest_segrobust.core.errors import DatasetError, ModelOutputError
from pytest_segrobust.core.types import Field, Image, SemanticMask, field_of
from pytest_segrobust.corruptions import REGISTRY, Corruption, CorruptionRegistry, SeverityTable, kernels
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.data.base import Sample, SegmentationDataset, SemanticTarget
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.randomness.seeding import SampleStreams, sample_seed
from pytest_segrobust.tasks import TASKS, get_task
from pytest_segrobust.tasks.base import Task

# -- the plugin: a field type, its kernel, a perturbation family, a task ---------------------------


@dataclass(frozen=True)
class Depth(Field):
    """Depth in metres per pixel; 0 where the sensor has no reading.

    Shape:
        data: ``(B, H, W)``, float32.
    """

    data: torch.Tensor

    def batch_size(self) -> int:
        return int(self.data.shape[0])

    def size(self) -> tuple[int, int]:
        return int(self.data.shape[-2]), int(self.data.shape[-1])


@kernels.warp.register
def _warp_depth(field: Depth, coords: torch.Tensor) -> Depth:
    # Depths are not mixed across an edge: nearest neighbour, no reading from outside the frame.
    return Depth(Fn.sample_nearest(field.data, coords, fill=0))


class DepthCategory(str, Enum):
    DEPTH = "depth"


@dataclass(frozen=True)
class DropoutParams:
    """Share of pixels whose reading is lost."""

    rate: float


class DepthCorruption(Corruption[DropoutParams]):
    """The family: acts on depth maps alone, each sample drawing from its depth field's own key."""

    acts_on = (Depth,)

    def _corrupt(self, batch, severity, seeds, size, device):  # type: ignore[no-untyped-def]
        params = self.table[severity]
        keys = self.keys(seeds).of_field("depth")
        return {
            name: self.corrupt_depth(f, params, SampleStreams(keys.seeds, device)) if isinstance(f, Depth) else f
            for name, f in batch.items()
        }

    def corrupt_depth(self, depth: Depth, params: DropoutParams, streams: SampleStreams) -> Depth:
        lost = streams.uniform(depth.data.shape[1:], dtype=torch.float64).to(depth.data.device) < params.rate
        return Depth(depth.data.masked_fill(lost, 0.0))


depth_dropout = DepthCorruption(
    "depth_dropout", DepthCategory.DEPTH, SeverityTable(tuple(DropoutParams(r) for r in (0.05, 0.1, 0.2, 0.3, 0.5)))
)


def register_corruptions(registry: CorruptionRegistry) -> None:
    """The plugin's ``segrobust.corruptions`` entry point."""
    registry.register(depth_dropout, presets=("rgbd",))


@runtime_checkable
class RgbdModel(Protocol):
    device: torch.device

    def predict(self, images: torch.Tensor, depth: torch.Tensor) -> torch.Tensor: ...


class RgbdTask(Task):
    """Semantic segmentation from an image and its depth map."""

    name = "toy-rgbd"
    default_metrics = ("miou",)
    target_types = (SemanticMask,)
    model_protocol = RgbdModel
    model_description = "an RgbdModel (predict(images, depth) -> (B, H, W) class ids)"
    reads = ("image", "depth", "target")
    collates: ClassVar[Mapping[str, type[Field]]] = {**Task.collates, "depth": Depth, "mask": SemanticMask}

    def targets(
        self, samples: Sequence[Sample], dataset: SegmentationDataset, device: torch.device
    ) -> dict[str, Field]:
        depth = torch.stack([self.read(s, "depth", dataset) for s in samples]).to(device)
        masks = torch.stack([self.read(s, "target", dataset).mask for s in samples]).to(device)
        return {"depth": Depth(depth), "mask": SemanticMask(masks, dataset.ignore_index)}

    def predict(self, model: Any, batch: dict[str, Field]) -> Any:
        return model.predict(field_of(batch, Image).data, field_of(batch, Depth).data)

    def check_predictions(self, predictions: Any, batch: dict[str, Field]) -> torch.Tensor:
        expected = tuple(field_of(batch, Depth).data.shape)
        if not isinstance(predictions, torch.Tensor) or tuple(predictions.shape) != expected:
            raise ModelOutputError(f"expected class ids of shape {expected}")
        return predictions


# -- data and a model ---------------------------------------------------------------------------------

FAR = 0.5  # metres: class 1 ("far") beyond it


class RgbdScenes:
    """Scenes of a near floor and a far wall, their border at a different row in each."""

    name = "rgbd-scenes"
    class_names = ("near", "far")
    ignore_index = 255

    def __init__(self, count: int = 6, height: int = 16, width: int = 20) -> None:
        self.count, self.height, self.width = count, height, width

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> Sample:
        rows = torch.arange(self.height, dtype=torch.float32)[:, None].expand(self.height, self.width)
        cols = torch.arange(self.width, dtype=torch.float32)[None, :].expand(self.height, self.width)
        border = 3 + 2 * index
        depth = torch.where(rows < border, 0.9 + 0.01 * cols, 0.3 + 0.01 * rows)
        image = (depth * 255).to(torch.uint8).expand(3, -1, -1).contiguous()
        target = SemanticTarget((depth > FAR).long())
        return Sample.of(f"scene/{index}", image=image, target=target, depth=depth)

    def fingerprint(self) -> str:
        return hashlib.sha256(f"{self.count}x{self.height}x{self.width}".encode()).hexdigest()


class DepthThreshold:
    """Reads the depth map alone: far where it is beyond FAR."""

    device = torch.device("cpu")
    task = "toy-rgbd"

    def predict(self, images: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
        return (depth > FAR).long()

    def fingerprint(self) -> str:
        return "depth-threshold"


# -- the plugin, installed --------------------------------------------------------------------------


@pytest.fixture
def installed(tmp_path, monkeypatch: pytest.MonkeyPatch) -> CorruptionRegistry:
    """This module as an installed package's entry points; a run's corruption registry with them loaded."""
    info = tmp_path / "segrobust_rgbd-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: segrobust-rgbd\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[segrobust.corruptions]\nrgbd = {__name__}:register_corruptions\n\n"
        f"[segrobust.tasks]\ntoy-rgbd = {__name__}:RgbdTask\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # The task registry is the process's: what the entry point adds goes when the test does, or a
    # later test in this process (an xdist worker's) would list toy-rgbd among the known tasks.
    TASKS.names()  # the built-ins loaded first, so that the copy restored afterwards has them
    monkeypatch.setattr(TASKS, "_entries", dict(TASKS._entries))
    registry = CorruptionRegistry.builtin()
    registry.load_entry_points()
    return registry


def batch_of(samples: Sequence[Sample], dataset: RgbdScenes) -> dict[str, Field]:
    return get_task("toy-rgbd").collate(samples, range(len(samples)), dataset, torch.device("cpu"))


def seeds_of(samples: Sequence[Sample], corruption: Corruption[Any], severity: int) -> list[int]:
    return [sample_seed(0, s.sample_id, corruption.name, severity) for s in samples]


def test_the_task_and_the_perturbation_are_found_through_their_entry_points(installed: CorruptionRegistry) -> None:
    assert installed.get("depth_dropout", "rgbd") is depth_dropout
    assert "depth_dropout" not in REGISTRY.definition("coco-p").corruption_names
    task = get_task("toy-rgbd")
    assert isinstance(task, RgbdTask)
    assert task.accepts_model(DepthThreshold())


def test_the_sample_carries_the_new_field_and_the_task_collates_it(installed: CorruptionRegistry) -> None:
    dataset = RgbdScenes()
    sample = dataset[0]
    assert set(sample.fields) == {"image", "target", "depth"} and sample.extra.keys() == {"depth"}
    batch = batch_of([dataset[i] for i in range(3)], dataset)
    assert {name: type(f) for name, f in batch.items()} == dict(RgbdTask.collates)
    assert torch.equal(batch["depth"].data[2], dataset[2].field("depth"))
    with pytest.raises(DatasetError, match="sample scene/x has no field 'depth', which the toy-rgbd task reads"):
        batch_of([Sample("scene/x", sample.image, sample.target)], dataset)


def test_the_family_changes_its_field_alone_and_image_corruptions_leave_it(installed: CorruptionRegistry) -> None:
    dataset = RgbdScenes()
    samples = [dataset[i] for i in range(4)]
    batch = batch_of(samples, dataset)
    dropout = installed.get("depth_dropout", "rgbd")
    out = dropout(batch, 5, seeds_of(samples, dropout, 5))
    assert not torch.equal(out["depth"].data, batch["depth"].data)
    lost = out["depth"].data == 0
    assert 0.3 < float(lost.float().mean()) < 0.7  # severity 5 loses half the readings
    assert torch.equal(out["image"].data, batch["image"].data) and torch.equal(out["mask"].data, batch["mask"].data)
    noise = installed.get("gaussian_noise")
    noisy = noise(batch, 3, seeds_of(samples, noise, 3))
    assert noisy["depth"] is batch["depth"] and not torch.equal(noisy["image"].data, batch["image"].data)
    with pytest.raises(ValueError, match="depth_dropout: needs one Depth field, the batch has none"):
        dropout({"image": batch["image"], "index": batch["index"]}, 1, [1, 2, 3, 4])


def test_the_family_draws_per_sample_whatever_the_batch(installed: CorruptionRegistry) -> None:
    dataset = RgbdScenes()
    samples = [dataset[i] for i in range(5)]
    whole = depth_dropout(batch_of(samples, dataset), 3, seeds_of(samples, depth_dropout, 3))["depth"].data
    for i in (0, 3):
        alone = depth_dropout(batch_of([samples[i]], dataset), 3, seeds_of([samples[i]], depth_dropout, 3))
        assert torch.equal(alone["depth"].data[0], whole[i])
    reordered = [samples[4], samples[1], samples[2]]
    part = depth_dropout(batch_of(reordered, dataset), 3, seeds_of(reordered, depth_dropout, 3))["depth"].data
    assert torch.equal(part, whole[[4, 1, 2]])


def test_a_geometric_corruption_moves_the_new_field_with_the_labels(installed: CorruptionRegistry) -> None:
    dataset = RgbdScenes()
    samples = [dataset[i] for i in range(3)]
    batch = batch_of(samples, dataset)
    rotate = installed.get("rotate")
    out = rotate(batch, 5, seeds_of(samples, rotate, 5))
    assert not torch.equal(out["depth"].data, batch["depth"].data)
    scored = out["mask"].data != dataset.ignore_index
    assert torch.equal((out["depth"].data > FAR).long()[scored], out["mask"].data[scored])


def test_the_evaluation_loop_runs_the_new_task_and_perturbation(installed: CorruptionRegistry) -> None:
    dataset, model = RgbdScenes(), DepthThreshold()
    run = lambda corruption, severity, batch_size=4: (
        evaluate(
            model, dataset, corruption, severity, settings=EvalSettings.of(task="toy-rgbd", batch_size=batch_size)
        ).score
    )
    assert run(None, 0) == pytest.approx(100.0)
    dropout = installed.get("depth_dropout", "rgbd")
    mild, strong = run(dropout, 1), run(dropout, 5)
    assert strong < mild < 100.0
    assert run(dropout, 5, batch_size=1) == strong  # the batch does not change a draw
    assert run(installed.get("gaussian_noise"), 5) == pytest.approx(100.0)  # the model reads depth alone
    assert run(installed.get("rotate"), 5) == pytest.approx(100.0)  # depth and labels move together
