"""glibc's ``malloc`` tuned for a process that allocates the same large tensors over and over.

By default glibc serves every block above its mmap threshold (128 KiB, rising with the
blocks freed up to 32 MiB) with a fresh ``mmap`` and returns it with ``munmap`` on ``free``,
and it gives the top of its heap back to the system once more than twice that threshold is
free. A model's activations and the harness's batches are such blocks, allocated and freed
for every batch, so each batch faults every page of them in again and the kernel zeroes it.
``tuned`` serves blocks up to 2 GiB from the heap (32 MiB on glibc versions that cap the
threshold there) and keeps what is freed for the next batch.
Measured with ``benchmarks/malloc.py`` on a loaded 2-core machine: the demo gate's page
faults fell by 97%, its kernel time from 8-9 s to 0.5 s per 10-15 cells and its cells' time
by 40-60%; SegFormer-B0's ``predict`` at 512x512 went from 212 to 124 ms per image. The cost:
each process holds its peak memory until it ends, and peak RSS was 8-16% higher.

The allocator belongs to the process, not to a run, so what was done to it is recorded here
(:func:`current`), once per process, for the run's header and the report's environment.
Only glibc's allocator is tuned: elsewhere (macOS, musl, Windows, or another allocator such
as jemalloc preloaded over glibc's) ``tuned`` does nothing and says why.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from typing import Any

CHOICES = ("tuned", "system")
DEFAULT = "tuned"

# glibc's mallopt parameters (their numbers in malloc.h) and the values ``tuned`` gives them,
# each parameter's in order of preference with how the run's header says it.
_TUNING = (
    (
        "M_MMAP_THRESHOLD",
        -3,
        # The largest mallopt's int takes; glibc versions that cap the threshold at half their
        # largest heap (HEAP_MAX_SIZE / 2: 32 MiB on 64-bit) refuse it, and take the cap.
        ((2**31 - 1, "blocks up to 2 GiB from the heap"), (32 << 20, "blocks up to 32 MiB from the heap")),
    ),
    ("M_TRIM_THRESHOLD", -1, ((-1, "freed memory kept for reuse"),)),  # -1: glibc "disables trimming completely"
)


@dataclass(frozen=True)
class AllocatorSetting:
    """What this process's ``malloc`` runs with.

    Attributes:
        choice: What was asked for (one of :data:`CHOICES`).
        tuned: Whether glibc's allocator was tuned (``False`` for ``system`` and where
            ``tuned`` does nothing).
        detail: Why, in the user's terms.
    """

    choice: str
    tuned: bool
    detail: str

    def describe(self) -> str:
        """One line for the run's header and the report: ``tuned (glibc 2.36: ...)``."""
        return f"{self.choice} ({self.detail})"


_current: AllocatorSetting | None = None


def current() -> AllocatorSetting | None:
    """What :func:`configure` did in this process; ``None`` if it was never called."""
    return _current


def configure(choice: str) -> AllocatorSetting:
    """Apply ``choice`` to this process's allocator and record it (see :func:`current`).

    ``system`` changes nothing. Once tuned, a process stays tuned: glibc has no way back to
    its dynamic threshold, so a later ``system`` in the same process (pytester's in-process
    runs) says so rather than claiming the defaults.

    Raises:
        ValueError: ``choice`` is not one of :data:`CHOICES`.
    """
    global _current
    if choice not in CHOICES:
        raise ValueError(f"allocator setting must be one of {', '.join(CHOICES)}, not {choice!r}")
    previous = _current
    if choice == "system":
        if previous is not None and previous.tuned:
            _current = AllocatorSetting("system", True, "glibc's malloc was tuned earlier in this process and stays so")
        else:
            _current = AllocatorSetting("system", False, "malloc left as the C library set it")
        return _current
    libc = _glibc()
    if isinstance(libc, str):
        _current = AllocatorSetting("tuned", False, f"does nothing here: {libc}")
        return _current
    applied: list[str] = []
    effects: list[str] = []
    for name, parameter, values in _TUNING:
        effect = next((effect for value, effect in values if libc.mallopt(parameter, value)), None)
        if effect is None:
            done = f" ({', '.join(applied)} was set)" if applied else ""
            _current = AllocatorSetting("tuned", bool(applied), f"glibc's mallopt refused {name}{done}")
            return _current
        applied.append(name)
        effects.append(effect)
    _current = AllocatorSetting("tuned", True, f"glibc {platform.libc_ver()[1]}: {', '.join(effects)}")
    return _current


def _glibc() -> Any | str:
    """This process's glibc (a ``ctypes.CDLL``) if its ``malloc`` is glibc's, else why not."""
    if not sys.platform.startswith("linux"):
        return f"not Linux ({sys.platform}); only glibc's malloc is tuned"
    library, version = platform.libc_ver()
    if library != "glibc":
        return "the C library is not glibc (musl?); only glibc's malloc is tuned"
    import ctypes  # here, not at the top: plain pytest loads this module and needs no ctypes

    try:
        process, glibc = ctypes.CDLL(None), ctypes.CDLL("libc.so.6")
    except OSError as exc:
        return f"glibc {version} cannot be loaded ({exc})"
    if not hasattr(process, "mallopt"):
        return f"glibc {version} has no mallopt"
    # A preloaded allocator (jemalloc, tcmalloc) interposes its malloc over glibc's own.
    if ctypes.cast(process.malloc, ctypes.c_void_p).value != ctypes.cast(glibc.malloc, ctypes.c_void_p).value:
        return "another malloc (LD_PRELOAD?) replaces glibc's"
    return process
