"""Clean results kept on disk across runs and shared between xdist workers.

A clean result depends on the model's weights and code (see :mod:`pytest_segrobust.provenance.identity`),
the factory call, the dataset's content, the limit, the metric, the device type and the
evaluator's version (:func:`~pytest_segrobust.engine.evaluation.evaluator_version`: the package's,
the task's and each metric's); its key is a digest of all of them. The first
process to need it computes it under a file lock; the others wait and read it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from filelock import FileLock

from pytest_segrobust.core.files import atomic_write_text
from pytest_segrobust.engine.evaluation import EvalResult, evaluator_version, is_finite


class CleanCache:
    """Clean results by fingerprint under ``folder``.

    Attributes:
        hits: Results read from disk in this process.
        misses: Results computed (and stored) in this process.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(task: str, metrics: Sequence[str], *parts: str) -> str:
        """Digest of the evaluator's version for ``task`` and ``metrics`` and every further part
        of a clean evaluation's identity (model, dataset, device...)."""
        digest = hashlib.blake2b(digest_size=20)
        for part in (evaluator_version(task, metrics), *parts):
            digest.update(part.encode())
            digest.update(b"\x1f")
        return digest.hexdigest()

    def get_or_compute(self, key: str, compute: Callable[[], EvalResult]) -> EvalResult:
        """The stored result of ``key``, or ``compute()`` stored for next time."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{key}.json"
        with FileLock(str(path) + ".lock"):
            stored = self._read(path)
            if stored is not None:
                self.hits += 1
                return stored
            result = compute()
            self.misses += 1
            if is_finite(result):  # a NaN is never reused: the next run must see it afresh
                atomic_write_text(path, json.dumps(result.to_json()))
            return result

    @staticmethod
    def _read(path: Path) -> EvalResult | None:
        try:
            return EvalResult.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None  # missing or unreadable: recompute and overwrite
