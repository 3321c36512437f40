"""OpenCV runs on as many threads as torch, whatever set torch's count (xdist shares, OMP_NUM_THREADS, a user)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from pytest_segrobust.core.opencv import opencv
from pytest_segrobust.corruptions import REGISTRY

cv2 = pytest.importorskip("cv2")


@pytest.fixture
def restore_threads() -> Iterator[None]:
    torch_threads, opencv_threads = torch.get_num_threads(), cv2.getNumThreads()
    yield
    torch.set_num_threads(torch_threads)
    cv2.setNumThreads(opencv_threads)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.usefixtures("restore_threads")
def test_a_corruption_on_opencv_runs_it_on_torch_s_thread_count(threads: int) -> None:
    torch.set_num_threads(threads)
    cv2.setNumThreads(threads + 4)  # OpenCV's pool sized by something else, e.g. its default of one per core
    images = torch.rand(2, 3, 32, 32)
    REGISTRY.get("defocus_blur")(images, 3, [1, 2])
    assert cv2.getNumThreads() == threads


@pytest.mark.usefixtures("restore_threads")
def test_the_count_follows_torch_when_torch_s_changes_after_opencv_was_imported() -> None:
    torch.set_num_threads(2)
    assert opencv() is cv2 and cv2.getNumThreads() == 2
    torch.set_num_threads(1)
    assert opencv() is cv2 and cv2.getNumThreads() == 1
