from __future__ import annotations

import contextlib

from pytest_segrobust.runtime.progress import TerminalProgress


class Screen:
    """A one-line terminal: applies backspaces like a real one."""

    def __init__(self, line: str) -> None:
        self.cells, self.cursor = list(line), len(line)

    def write(self, text: str, *, flush: bool = False) -> None:
        for char in text:
            if char == "\b":
                self.cursor = max(self.cursor - 1, 0)
                continue
            if self.cursor < len(self.cells):
                self.cells[self.cursor] = char
            else:
                self.cells.append(char)
            self.cursor += 1

    @property
    def text(self) -> str:
        return "".join(self.cells).rstrip()


def test_bar_is_drawn_after_pytest_line_and_erased_without_a_trace() -> None:
    screen = Screen("suites/demo.yaml ...")
    bar = TerminalProgress(screen, contextlib.nullcontext, room=lambda: 60, delay=0.0, interval=0.0)
    bar.begin("tiny-unet::gaussian_noise::3")
    bar.update(8, 64)
    assert screen.text == "suites/demo.yaml ... [tiny-unet::gaussian_noise::3 ##------------------ 8/64]"
    bar.update(64, 64)
    assert screen.text.endswith("#################### 64/64]")
    bar.close()
    assert screen.text == "suites/demo.yaml ..."
    assert screen.cursor == len("suites/demo.yaml ...")  # pytest continues exactly where it was


def test_bar_never_wraps_and_waits_for_slow_cells() -> None:
    screen = Screen("x")
    bar = TerminalProgress(screen, contextlib.nullcontext, room=lambda: 12, delay=0.0, interval=0.0)
    bar.begin("long-cell-name")
    bar.update(1, 2)
    assert len(screen.text) <= 1 + 11
    quiet = TerminalProgress(Screen("y"), contextlib.nullcontext, room=lambda: 80, delay=60.0)
    quiet.begin("cell")
    quiet.update(1, 2)
    assert quiet.shown == 0
