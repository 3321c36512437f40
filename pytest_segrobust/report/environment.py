"""Where and with what a run was made: git commit, package versions, device, allocator, threads, wall time."""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import platform
import subprocess
import time
from pathlib import Path

import torch

from pytest_segrobust.report.model import RunEnvironment
from pytest_segrobust.runtime import allocator, threads

# Distributions whose versions can change a number in the report; those not installed are left out.
DISTRIBUTIONS = ("pytest-segrobust", "torch", "torchvision", "numpy", "pillow", "pytest", "pytest-xdist", "matplotlib")
_GIT_TIMEOUT = 5.0


def run_environment(root: Path, device: torch.device, started: float) -> RunEnvironment:
    """The run's provenance; what cannot be found is ``None``, never an error.

    Args:
        root: The project's root; its git commit is the run's.
        device: The device the run evaluated on.
        started: When the run began, as :func:`time.time` gave it.
    """
    commit = _git(root, "rev-parse", "HEAD")
    status = None if commit is None else _git(root, "status", "--porcelain", "--untracked-files=no")
    return RunEnvironment(
        git_commit=commit,
        git_dirty=None if status is None else bool(status),
        started=datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(timespec="seconds"),
        wall_seconds=time.time() - started,
        device=describe_device(device),
        platform=f"Python {platform.python_version()} on {platform.system()} {platform.machine()}",
        versions=versions(),
        malloc=None if (setting := allocator.current()) is None else setting.describe(),
        threads=None if (chosen := threads.current()) is None else chosen.describe(),
    )


def versions() -> dict[str, str]:
    """The installed version of each of :data:`DISTRIBUTIONS` that is installed."""
    found = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def describe_device(device: torch.device) -> str:
    """``cuda:0 (NVIDIA H100 80GB HBM3)``, ``cpu`` (the threads have a row of their own)."""
    # A description, never a reason to fail the report: whatever CUDA raises leaves the bare name.
    with contextlib.suppress(Exception):
        if device.type == "cuda" and torch.cuda.is_available():
            index = device.index if device.index is not None else torch.cuda.current_device()
            return f"{device} ({torch.cuda.get_device_name(index)})"
    return str(device)


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=_GIT_TIMEOUT, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
