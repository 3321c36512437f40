"""The one way in to OpenCV, an optional dependency, for the corruptions and the metrics alike.

``opencv-python-headless`` (the ``opencv`` extra) is imported on first use; every caller
keeps a path of its own for installs without it.
"""

from __future__ import annotations

import functools
from types import ModuleType

import torch


def opencv() -> ModuleType | None:
    """The ``cv2`` module running on as many threads as torch, or None where it is not installed.

    OpenCV's own default is a thread per core. Next to torch's threads, which the plugin
    shares out between xdist workers and ``OMP_NUM_THREADS`` or the user may lower, that
    oversubscribes the CPU: N workers would each run a pool of every core. Every use of
    OpenCV goes through here, so each call matches torch's count as it is at that moment,
    whatever set it last.
    """
    cv2 = _import_opencv()
    if cv2 is not None:
        threads = torch.get_num_threads()
        if cv2.getNumThreads() != threads:
            cv2.setNumThreads(threads)
    return cv2


@functools.lru_cache(maxsize=1)
def _import_opencv() -> ModuleType | None:
    """``cv2``, imported once, or None where it is not installed."""
    try:
        import cv2
    except ImportError:
        return None
    return cv2
