"""tasks.base.upload: a batch reaches the device with its values and dtype, in the narrowest integer type on the way."""

from __future__ import annotations

import pytest
import torch

from pytest_segrobust.tasks import base
from pytest_segrobust.tasks.base import _narrowest, upload


@pytest.mark.parametrize(
    ("values", "dtype", "travels_as"),
    [
        ([0, 7, 255], torch.int64, torch.uint8),
        ([-1, 0, 18], torch.int64, torch.int16),
        ([0, 256], torch.int32, torch.int16),
        ([0, 2**15], torch.int64, torch.int64),
        ([-(2**15), 2**15 - 1], torch.int64, torch.int16),
        ([0, 2**40], torch.int64, torch.int64),
        ([0, 300], torch.int16, torch.int16),
        ([1, 0], torch.uint8, torch.uint8),
    ],
)
def test_labels_travel_in_the_narrowest_type_that_holds_them(
    values: list[int], dtype: torch.dtype, travels_as: torch.dtype
) -> None:
    host = torch.tensor(values, dtype=dtype)
    narrow = _narrowest(host)
    assert narrow.dtype == travels_as
    assert torch.equal(narrow.to(dtype), host)


def test_floats_bools_and_empty_tensors_travel_as_they_are() -> None:
    for host in (torch.rand(3), torch.tensor([True, False]), torch.empty(0, dtype=torch.int64)):
        assert _narrowest(host) is host


def test_cpu_upload_keeps_values_and_dtype() -> None:
    host = torch.tensor([[0, 255], [3, 9]], dtype=torch.int64)
    moved = upload(host, torch.device("cpu"))
    assert moved.dtype == torch.int64 and torch.equal(moved, host)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool, torch.float32])
def test_cuda_upload_keeps_values_and_dtype(dtype: torch.dtype) -> None:
    host = (torch.arange(-300, 700) % 7 * 50).reshape(10, 100).to(dtype)
    moved = upload(host, torch.device("cuda"))
    assert moved.device.type == "cuda" and moved.dtype == dtype
    assert torch.equal(moved.cpu(), host)


def test_the_semantic_task_uploads_its_label_maps_through_upload(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_segrobust.data.demo import DemoScenes
    from pytest_segrobust.tasks import semantic

    seen: list[torch.dtype] = []

    def spy(host: torch.Tensor, device: torch.device) -> torch.Tensor:
        seen.append(host.dtype)
        return upload(host, device)

    monkeypatch.setattr(base, "upload", spy)
    monkeypatch.setattr(semantic, "upload", spy)
    scenes = DemoScenes("val", size=2, image_size=32)
    samples = [scenes[0], scenes[1]]
    batch = semantic.SemanticTask().collate(samples, range(2), scenes, torch.device("cpu"))
    assert seen == [torch.uint8, torch.int64]  # the images, then the label maps
    assert torch.equal(batch["mask"].data, torch.stack([s.target.mask for s in samples]))
