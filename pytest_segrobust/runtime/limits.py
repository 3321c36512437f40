"""A wall-clock limit on one cell, so that a model that hangs fails its cell instead of the run."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from pytest_segrobust.core.errors import SegRobustError

logger = logging.getLogger("pytest_segrobust")


class CellTimeout(SegRobustError):
    """A cell ran past its time limit."""


@contextmanager
def time_limit(seconds: float | None, what: str) -> Iterator[None]:
    """Raise :class:`CellTimeout` in the body once ``seconds`` have passed (``None``: no limit).

    The limit is a ``SIGALRM`` timer, as in pytest-timeout's signal method: it interrupts
    Python code and interruptible waits, and takes effect when a long C call (one kernel)
    returns. Without POSIX timers or off the main thread there is no limit, and a warning says so.
    """
    if not seconds:
        yield
        return
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        logger.warning("%s: the time limit of %g s is not enforced here (it needs POSIX timers on the main thread)", what, seconds)
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise CellTimeout(
            f"{what}: stopped after the time limit of {seconds:g} s (suite field 'timeout' or --segrobust-timeout); "
            "the model or the dataset did not finish"
        )

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
