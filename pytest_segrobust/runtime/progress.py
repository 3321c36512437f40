"""A progress bar for long cells, drawn at the end of pytest's current terminal line.

pytest owns the terminal: its progress dots (or, with ``-v``, the item's name) are on the
current line. The bar is written right after them with capture suspended and erased with
backspaces before pytest writes again, so pytest's line is left exactly as it was. It is
drawn only on a terminal, outside xdist workers, and only once a cell has run for a while.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol


class Writer(Protocol):
    def write(self, text: str, *, flush: bool = False) -> None: ...


class TerminalProgress:
    """Draws ``[cell ##########------ 512/5000]`` after the cursor and erases it on :meth:`close`.

    Args:
        writer: Where to draw (pytest's terminal writer).
        suspend: Context manager factory that lifts output capture while drawing.
        room: Returns the columns left on the current line; the bar never wraps.
        delay: Seconds a cell must run before the bar appears.
        interval: Minimum seconds between redraws.
    """

    width = 20

    def __init__(
        self, writer: Writer, suspend: Any, room: Callable[[], int], delay: float = 1.0, interval: float = 0.2
    ) -> None:
        self.writer, self.suspend, self.room = writer, suspend, room
        self.columns = 0
        self.delay, self.interval = delay, interval
        self.shown = 0
        self.cell = ""
        self.start = self.last = time.perf_counter()

    def begin(self, cell: str) -> None:
        self.cell = cell
        self.columns = self.room()
        self.start = self.last = time.perf_counter()

    def update(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if now - self.start < self.delay or (now - self.last < self.interval and done < total):
            return
        self.last = now
        filled = round(self.width * done / max(total, 1))
        text = f" [{self.cell} {'#' * filled}{'-' * (self.width - filled)} {done}/{total}]"
        self._draw(text[: max(self.columns - 1, 0)])

    def close(self) -> None:
        self._draw("")

    def _draw(self, text: str) -> None:
        if not text and not self.shown:
            return
        # Back over what is shown, write the new text, blank any leftover, and step back to its end.
        leftover = max(self.shown - len(text), 0)
        with self.suspend():
            self.writer.write("\b" * self.shown + text + " " * leftover + "\b" * leftover, flush=True)
        self.shown = len(text)
