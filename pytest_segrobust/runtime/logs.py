"""What a cell's failure shows of the log: the plugin's and the project's records, not those of
the libraries a model runs on.

A model built through ``transformers``, ``onnxruntime`` or ``requests`` logs warnings of its own
(weights not used, providers, retries); pytest captures every record of a failing test, so each
failed cell would repeat them under its message. While a cell runs, pytest's capture handlers
leave out records logged from a library (:func:`is_library_file`); a last record says how many
and whose, and ``-v`` keeps them all. Nothing else changes: the user's own handlers, live
logging (``--log-cli-level``) and the capture of the project's other tests see every record.
"""

from __future__ import annotations

import inspect
import logging
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pytest_segrobust.core.wording import plural

try:  # pytest's capture handler (caplog's and the failure report's); without it nothing is left out
    from _pytest.logging import LogCaptureHandler
except ImportError:  # pragma: no cover - a pytest without it
    LogCaptureHandler = None  # type: ignore[assignment,misc]

_OWN = Path(__file__).resolve().parent
_LIBRARY_FOLDERS = frozenset({"site-packages", "dist-packages"})
logger = logging.getLogger(__name__)


def is_library_file(path: str, rootpath: Path) -> bool:
    """Whether a record logged from ``path`` is a library's: a file in an installed package
    (a ``site-packages`` folder, a virtual environment inside the project included) or outside
    the project's rootdir; the plugin's own files never are."""
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError):
        return False
    if not resolved.is_file() or resolved.is_relative_to(_OWN):
        return False
    return bool(_LIBRARY_FOLDERS & set(resolved.parts)) or not resolved.is_relative_to(rootpath.resolve())


class _LibraryRecords(logging.Filter):
    """Leaves out records logged from a library, counting them by top-level logger."""

    def __init__(self, rootpath: Path) -> None:
        super().__init__()
        self.rootpath = rootpath
        self.left_out: Counter[str] = Counter()
        self._paths: dict[str, bool] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.pathname not in self._paths:
            self._paths[record.pathname] = is_library_file(record.pathname, self.rootpath)
        if self._paths[record.pathname]:
            self.left_out[record.name.split(".")[0]] += 1
            return False
        return True

    def note(self) -> str:
        total = sum(self.left_out.values())
        names = ", ".join(self.left_out)
        return (
            f"{plural(total, 'log record')} of libraries ({names}) left out of this cell's captured log; -v shows them"
        )


@contextmanager
def libraries_left_out(config: pytest.Config) -> Iterator[None]:
    """Within: pytest's capture handlers leave out library records (not under ``-v``), and a last
    record in the capture says what was left out."""
    handlers = [
        handler
        for handler in logging.getLogger().handlers
        if LogCaptureHandler is not None and isinstance(handler, LogCaptureHandler)
    ]
    if not handlers or config.get_verbosity() > 0:
        yield
        return
    kept = _LibraryRecords(config.rootpath)
    for handler in handlers:
        handler.addFilter(kept)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(kept)
        if kept.left_out:
            # Into the capture alone: the user's handlers and live logging never saw the records either way.
            here = inspect.currentframe()
            line = here.f_lineno if here is not None else 0
            note = logger.makeRecord(logger.name, logging.WARNING, __file__, line, kept.note(), None, None)
            for handler in handlers:
                if note.levelno >= handler.level:
                    handler.handle(note)
