from __future__ import annotations

import argparse

import pytest
import torch

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.runtime.devices import DeviceChoice, parse_device, worker_index


@pytest.mark.parametrize(
    ("text", "expected"),
    [("auto", DeviceChoice("auto")), ("CPU", DeviceChoice("cpu")), ("cuda", DeviceChoice("cuda")), ("cuda:1", DeviceChoice("cuda", 1))],
)
def test_parse(text: str, expected: DeviceChoice) -> None:
    assert parse_device(text) == expected


@pytest.mark.parametrize("text", ["gpu", "cuda:x", "cpu:0", "cuda:-1", ""])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected auto, cpu, mps, cuda or cuda:N|only cuda takes an index"):
        parse_device(text)


def test_auto_is_cpu_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert DeviceChoice("auto").resolve() == torch.device("cpu")


def test_unavailable_cuda_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SegRobustError, match="--segrobust-device cuda:0: no CUDA device is available"):
        DeviceChoice("cuda", 0).resolve()


def test_workers_spread_over_visible_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    assert DeviceChoice("cuda").resolve(worker=worker_index("gw4")) == torch.device("cuda", 1)
    assert DeviceChoice("cuda").resolve(worker=None) == torch.device("cuda", 0)
    assert DeviceChoice("cuda", 2).resolve(worker=4) == torch.device("cuda", 2)
    with pytest.raises(SegRobustError, match="only 3 CUDA device"):
        DeviceChoice("cuda", 5).resolve()


def test_worker_index() -> None:
    assert worker_index("gw12") == 12
    assert worker_index(None) is None
    assert worker_index("master") is None
