"""Errors the harness raises for bad input. Each message names the file and field at fault."""

from __future__ import annotations


class SegRobustError(Exception):
    """Base class of every error raised for bad input or bad model behaviour."""


class SuiteError(SegRobustError):
    """A suite file is malformed: the message names the file and the field."""


class FieldError(ValueError):
    """A field of what a suite declares is wrong (a model entry, a ``require:`` block, a task's
    own key); the suite's reader adds the file and the entry's place to the message.

    Args:
        field: The field at fault, as the suite spells it relative to its entry (``kwargs``,
            ``input.layout``, ``dynamic.levels[1]``); ``""`` for the entry itself.
        message: What was expected.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class UnknownCorruptionError(SegRobustError, KeyError):
    """A corruption or preset name is not in the registry."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class ModelOutputError(SegRobustError):
    """A model returned predictions of the wrong shape, dtype or with invalid values."""


class ModelError(SegRobustError):
    """A model raised while predicting a batch: the message names the batch's samples and the exception."""


class DatasetError(SegRobustError):
    """A dataset sample is malformed (size mismatch, unknown class ids, unreadable file)."""


class DuplicateSampleError(DatasetError):
    """Two samples of a dataset share one ``sample_id``: their corruptions and per-image statistics would be confused."""


class BaselineError(SegRobustError):
    """A baseline file cannot be read; it is reported and never overwritten silently."""


class UnknownNameError(SegRobustError, KeyError):
    """A suite names a metric, task or other registered thing that does not exist."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InconclusiveWarning(UserWarning):
    """A cell of a statistical gate could neither be shown within its margin nor beyond it
    (suite policy ``inconclusive: warn``): it passes, and the warning says how many images
    would decide it."""


class DatasetWarning(UserWarning):
    """A dataset's rule leaves out something its files hold (a DAVIS object first shown after the
    first frame): the warning names the file, the sample and what is left out, and the option that
    keeps it where there is one."""


class CacheWarning(UserWarning):
    """An entry of the result cache could not be trusted (unreadable, cut short, its content not
    what its digest says): the warning names the file; the result is measured again."""


def error_message(exc: BaseException) -> str:
    """How a failure is recorded (a cell's error, a picture left out): our own errors say
    everything, others are named by type."""
    return str(exc) if isinstance(exc, SegRobustError) else f"{type(exc).__name__}: {exc}"
