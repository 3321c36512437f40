"""Zoo factories: the input convention and label mapping they add, and the zoos themselves where they import."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.models.torch_module import TorchModuleInstanceSegmenter, TorchModuleSegmenter, module_fingerprint
from pytest_segrobust.models.zoo import (
    COCO_THING_IDS,
    IMAGENET_MEAN,
    IMAGENET_STD,
    Normalized,
    Relabelled,
    smp_model,
    torchvision_mask_rcnn,
    torchvision_segmentation,
)


def importable(module: str) -> str | None:
    """Why ``module`` cannot be imported here, or ``None`` when it can."""
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - a CUDA torchvision next to a CPU torch raises RuntimeError
        return f"{module} cannot be imported here: {type(exc).__name__}: {exc}"
    return None


class Detector(torch.nn.Module):
    """Returns fixed detections labelled with COCO category ids, as torchvision's Mask R-CNN does."""

    def __init__(self, labels: list[int]) -> None:
        super().__init__()
        self.labels = labels

    def forward(self, images: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        n, (h, w) = len(self.labels), images.shape[-2:]
        masks = torch.zeros(n, 1, h, w)
        for i in range(n):
            masks[i, 0, i, :] = 0.9
        return [
            {"boxes": torch.zeros(n, 4), "labels": torch.tensor(self.labels), "scores": torch.linspace(0.9, 0.5, n), "masks": masks}
            for _ in range(images.shape[0])
        ]


def test_coco_thing_ids_are_the_80_categories() -> None:
    assert len(COCO_THING_IDS) == 80 and list(COCO_THING_IDS) == sorted(set(COCO_THING_IDS))
    assert COCO_THING_IDS[:12] == (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13) and COCO_THING_IDS[-1] == 90
    assert not {12, 26, 29, 30, 45, 66, 68, 69, 71, 83} & set(COCO_THING_IDS)  # the ids COCO left unused


def test_normalized_feeds_the_network_normalised_images() -> None:
    seen: list[torch.Tensor] = []

    class Probe(torch.nn.Module):
        def forward(self, images: torch.Tensor) -> torch.Tensor:
            seen.append(images)
            return images[:, :2]

    images = torch.rand(2, 3, 4, 4)
    TorchModuleSegmenter(Normalized(Probe())).predict(images)
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    torch.testing.assert_close(seen[0], (images - mean) / std)
    # The statistics are part of the fingerprint: other statistics, another model.
    assert module_fingerprint(Normalized(Probe())) != module_fingerprint(Normalized(Probe(), (0.5,) * 3, (0.5,) * 3))
    with pytest.raises(ValueError, match="std > 0"):
        Normalized(Probe(), (0.5,) * 3, (0.5, 0.0, 0.5))


def test_relabelled_maps_category_ids_to_contiguous_ids_and_drops_unknown_ones() -> None:
    # 13 is COCO's stop sign, the 12th thing class; 12 and 200 are no category of the dataset.
    model = TorchModuleInstanceSegmenter(Relabelled(Detector([1, 13, 12, 90, 200])))
    (predictions,) = model.predict(torch.rand(1, 3, 8, 8))
    assert predictions.labels.tolist() == [1, 12, 80]
    assert predictions.scores.tolist() == pytest.approx([0.9, 0.8, 0.6])
    assert [int(m.nonzero()[0, 0]) for m in predictions.masks] == [0, 1, 3]  # each mask stays with its detection
    custom = TorchModuleInstanceSegmenter(Relabelled(Detector([7, 3, 5]), category_ids=[3, 7]))
    assert custom.predict(torch.rand(1, 3, 8, 8))[0].labels.tolist() == [2, 1]
    with pytest.raises(ValueError, match="distinct ids >= 1"):
        Relabelled(Detector([]), category_ids=[1, 1])


def test_weights_files_are_checked(tmp_path: Path) -> None:
    from pytest_segrobust.models.zoo import _load

    net = torch.nn.Conv2d(3, 2, 1)
    with pytest.raises(SegRobustError, match=r"missing\.pt: no such weights file"):
        _load(net, tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(SegRobustError, match=r"junk\.pt: not a state dict torch can load"):
        _load(net, tmp_path / "junk.pt")
    torch.save(torch.nn.Conv2d(3, 5, 1).state_dict(), tmp_path / "other.pt")
    with pytest.raises(SegRobustError, match=r"other\.pt: the weights do not fit Conv2d"):
        _load(net, tmp_path / "other.pt")
    source = torch.nn.Conv2d(3, 2, 1)
    torch.save({"state_dict": source.state_dict(), "epoch": 3}, tmp_path / "checkpoint.pt")  # a training checkpoint
    _load(net, tmp_path / "checkpoint.pt")
    assert torch.equal(net.weight, source.weight)


@pytest.mark.skipif(bool(importable("torchvision.models.segmentation")), reason=str(importable("torchvision.models.segmentation")))
def test_torchvision_segmentation_loads_local_weights(tmp_path: Path) -> None:
    from torchvision.models import segmentation

    reference = segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=5).eval()
    torch.save(reference.state_dict(), tmp_path / "lraspp.pt")
    model = torchvision_segmentation("lraspp_mobilenet_v3_large", tmp_path / "lraspp.pt", num_classes=5)
    images = torch.rand(2, 3, 64, 64)
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    expected = TorchModuleSegmenter(reference).predict((images - mean) / std)
    assert torch.equal(TorchModuleSegmenter(model).predict(images), expected)
    with pytest.raises(SegRobustError, match="has no model builder 'deeplabv9'"):
        torchvision_segmentation("deeplabv9", tmp_path / "lraspp.pt", num_classes=5)


@pytest.mark.skipif(bool(importable("torchvision.models.detection")), reason=str(importable("torchvision.models.detection")))
def test_torchvision_mask_rcnn_loads_local_weights_and_relabels(tmp_path: Path) -> None:
    from torchvision.models import detection

    reference = detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=91)
    torch.save(reference.state_dict(), tmp_path / "maskrcnn.pt")
    model = TorchModuleInstanceSegmenter(torchvision_mask_rcnn(tmp_path / "maskrcnn.pt"))
    for predictions in model.predict(torch.rand(1, 3, 64, 64)):
        assert predictions.masks.shape[1:] == (64, 64)
        assert all(1 <= int(label) <= 80 for label in predictions.labels)


@pytest.mark.skipif(bool(importable("segmentation_models_pytorch")), reason=str(importable("segmentation_models_pytorch")))
def test_smp_model_loads_local_weights(tmp_path: Path) -> None:
    import segmentation_models_pytorch as smp

    reference = smp.create_model("Unet", encoder_name="resnet18", encoder_weights=None, classes=3).eval()
    torch.save(reference.state_dict(), tmp_path / "unet.pt")
    model = smp_model("Unet", "resnet18", tmp_path / "unet.pt", classes=3)
    assert TorchModuleSegmenter(model).predict(torch.rand(1, 3, 64, 64)).shape == (1, 64, 64)


def test_a_zoo_that_cannot_be_imported_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(name: str) -> None:
        raise RuntimeError("operator torchvision::nms does not exist")

    monkeypatch.setattr(importlib, "import_module", broken)
    with pytest.raises(SegRobustError, match=r"torchvision cannot be imported \(RuntimeError: operator torchvision::nms"):
        torchvision_segmentation("lraspp_mobilenet_v3_large", "w.pt", num_classes=5)
