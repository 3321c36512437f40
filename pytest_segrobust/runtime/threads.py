"""How many threads each process of a run computes on: ``--segrobust-threads N|auto``.

torch starts with a thread per core in every process. Under ``-n N`` that is N pools of every
core, and next to a model with a pool of its own (TFLite, ONNX Runtime) or other jobs on the
machine, threads that wait for a core they do not get hold back those that have one: a serial
TFLite suite on a loaded 2-core machine ran 7 times slower than on one thread. So the count is
chosen, once per process, by one rule:

* ``N``: every process that evaluates cells (the main process, each xdist worker, each Ray
  actor) computes on N threads;
* ``auto`` (the default): ``OMP_NUM_THREADS`` where the user set it, else the cores this
  process may run on (its CPU affinity) shared out between the processes that evaluate side
  by side: all of them without xdist, cores // N under ``-n N``, and a Ray actor the CPUs it
  reserved (``--segrobust-ray-cpus``); never fewer than 1.

The count goes to torch (its OpenMP and MKL pools), OpenCV (which follows torch, see
:mod:`pytest_segrobust.core.opencv`), ONNX Runtime's sessions, and numpy's BLAS through
threadpoolctl where threadpoolctl is installed (it is never a dependency). What was chosen
is recorded here (:func:`current`) for the run's header and the report's environment.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass

from pytest_segrobust.core.wording import plural
from pytest_segrobust.runtime import arguments

AUTO = "auto"
FLAG = "--segrobust-threads"


def parse(text: str) -> int | str:
    """``auto`` or a thread count >= 1 (an argparse ``type=``: a bad value is a usage error naming the flag)."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        return arguments.positive_integer(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected auto or an integer >= 1, got {text!r}") from None


@dataclass(frozen=True)
class ThreadSetting:
    """The threads a process computes on, and why.

    Attributes:
        threads: The count given to torch, OpenCV, ONNX Runtime (and BLAS via threadpoolctl).
        reason: Where the count comes from, in the user's terms.
    """

    threads: int
    reason: str

    def describe(self) -> str:
        """One line for the header and the report: ``1 thread per process (auto: 2 cores / 2 xdist workers)``."""
        return f"{plural(self.threads, 'thread')} per process ({self.reason})"


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity where the OS has one, else every core."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # macOS and Windows have no sched_getaffinity
        return os.cpu_count() or 1


def choose(choice: int | str, *, workers: int = 0, reserved_cpus: float | None = None) -> ThreadSetting:
    """The setting ``choice`` gives a process that evaluates cells.

    Args:
        choice: ``auto`` or a count, as :func:`parse` returns it.
        workers: The xdist workers of the run (0 without xdist).
        reserved_cpus: The CPUs Ray reserved for the actor this is chosen for (``None``: not a Ray actor).
    """
    if choice != AUTO:
        return ThreadSetting(int(choice), f"{FLAG} {choice}")
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    if omp.isdecimal() and int(omp) >= 1:
        return ThreadSetting(int(omp), f"auto: OMP_NUM_THREADS={int(omp)}")
    if reserved_cpus is not None:
        count = max(1, math.floor(reserved_cpus))
        return ThreadSetting(count, f"auto: the {plural(reserved_cpus, 'CPU')} Ray reserves for each actor")
    cores = available_cores()
    if workers > 1:
        return ThreadSetting(max(1, cores // workers), f"auto: {plural(cores, 'core')} / {workers} xdist workers")
    return ThreadSetting(cores, f"auto: {plural(cores, 'core')}")


_current: ThreadSetting | None = None


def current() -> ThreadSetting | None:
    """What :func:`apply` last did in this process; ``None`` if it was never called."""
    return _current


def apply(setting: ThreadSetting) -> ThreadSetting:
    """Give this process ``setting.threads`` threads (torch, then BLAS through threadpoolctl where installed)."""
    global _current
    import torch

    if torch.get_num_threads() != setting.threads:
        torch.set_num_threads(setting.threads)
    try:
        import threadpoolctl
    except ImportError:
        pass
    else:
        threadpoolctl.threadpool_limits(limits=setting.threads)  # effective at once, for the life of the process
    _current = setting
    return setting


def count() -> int:
    """The threads this process computes on now (torch's count: what :func:`apply` or the user set last)."""
    import torch

    return torch.get_num_threads()
