"""Evaluation results kept on disk across runs, shared between processes: clean results and cells.

One mechanism serves both kinds. A clean result depends on the model's weights and code (see
:mod:`pytest_segrobust.provenance.identity`), the factory call, the dataset's content, the limit,
the metrics, the device type and the evaluator's version
(:func:`~pytest_segrobust.engine.evaluation.evaluator_version`: the package's, the task's and each
metric's); its key is a digest of all of them. A corrupted cell's key is its clean result's key
followed by what the cell adds (the corruption, its parameters at the cell's severity, the
severity, the seed), so every change that makes a clean result stale makes the cells of that
model and dataset stale too.

Each entry is one file, ``<key>.json``, written atomically as soon as its evaluation ends (a
run killed at any moment leaves whole entries or none, so the next run measures only what had
not finished). The first process to need an entry computes it under a file lock; the others
wait and read it. An entry carries a digest of its result: one that cannot be read, is cut
short or does not match its digest is never used; the result is measured again, with a
:class:`~pytest_segrobust.core.errors.CacheWarning` naming the file.

The folder's size is bounded: :func:`prune` removes the entries used longest ago until it fits
(a read refreshes an entry's modification time).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from pytest_segrobust.core.errors import CacheWarning
from pytest_segrobust.core.files import atomic_write_text
from pytest_segrobust.engine.evaluation import EvalResult, evaluator_version, is_finite

logger = logging.getLogger("pytest_segrobust")

# Version of an entry's envelope; an entry of another version is measured again, with a warning.
ENTRY_FORMAT = 1
# What an entry holds: the clean result of a model x dataset, or a corrupted cell's result.
KINDS = ("clean", "cell")


class ResultCache:
    """Results by key under ``folder``: clean results and corrupted cells alike.

    Attributes:
        hits: Results read from disk in this process, by kind (``clean``, ``cell``).
        misses: Results computed (and stored where finite) in this process, by kind.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.hits = dict.fromkeys(KINDS, 0)
        self.misses = dict.fromkeys(KINDS, 0)

    @staticmethod
    def key(task: str, metrics: Sequence[str], *parts: str) -> str:
        """Digest of the evaluator's version for ``task`` and ``metrics`` and every further part
        of an evaluation's identity (model, dataset, device...)."""
        return _digest(evaluator_version(task, metrics), *parts)

    @staticmethod
    def cell_key(clean_key: str, *parts: str) -> str:
        """The key of a corrupted cell: its clean result's key (``clean_key``), followed by what the
        cell adds (its corruption, parameters, severity, seed)."""
        return _digest(clean_key, "cell", *parts)

    def get_or_compute(self, key: str, compute: Callable[[], EvalResult], kind: str = "clean") -> EvalResult:
        """The stored result of ``key``, or ``compute()`` stored for next time."""
        return self.lookup_or_compute(key, compute, kind)[0]

    def lookup_or_compute(
        self, key: str, compute: Callable[[], EvalResult], kind: str = "clean"
    ) -> tuple[EvalResult, bool]:
        """The stored result of ``key`` and ``True``, or ``compute()`` (stored for next time) and ``False``.

        Raises:
            ValueError: for a ``kind`` not in :data:`KINDS`.
        """
        if kind not in KINDS:
            raise ValueError(f"a result cache entry is one of {', '.join(KINDS)}, not {kind!r}")
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{key}.json"
        with FileLock(str(path) + ".lock"):
            stored = read_entry(path, key)
            if stored is not None:
                self.hits[kind] += 1
                _touch(path)  # used now: the last to be pruned
                return stored, True
            result = compute()
            self.misses[kind] += 1
            if is_finite(result):  # a NaN is never reused: the next run must see it afresh
                atomic_write_text(path, json.dumps(entry_json(key, kind, result)))
            return result, False


def entry_json(key: str, kind: str, result: EvalResult) -> dict[str, Any]:
    """An entry as its file holds it: the result, with its key and a digest of its content."""
    payload = result.to_json()
    return {"format": ENTRY_FORMAT, "key": key, "kind": kind, "digest": _content_digest(payload), "result": payload}


def read_entry(path: Path, key: str) -> EvalResult | None:
    """The result stored at ``path``; ``None`` where there is none or it cannot be trusted (warned, naming the file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        _distrust(path, f"cannot be read ({exc.strerror})")
        return None
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != ENTRY_FORMAT:
            found = data.get("format") if isinstance(data, dict) else None
            raise ValueError(f"entry format {found!r}, expected {ENTRY_FORMAT}")
        if data.get("key") != key:
            raise ValueError(f"it holds the entry of {data.get('key')!r}")
        if data.get("digest") != _content_digest(data.get("result")):
            raise ValueError("its content does not match its digest")
        return EvalResult.from_json(data["result"])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        _distrust(path, str(exc) if not isinstance(exc, json.JSONDecodeError) else f"not JSON ({exc})")
        return None


@dataclass(frozen=True)
class Pruned:
    """What :func:`prune` removed and what it left.

    Attributes:
        removed: Entries deleted.
        freed: Bytes they held.
        kept: Bytes left in the folder's entries.
    """

    removed: int
    freed: int
    kept: int


def prune(folder: Path, max_bytes: int) -> Pruned:
    """Delete the entries of ``folder`` used longest ago (oldest modification time first) until
    their size is at most ``max_bytes``. An entry another process holds the lock of is kept.

    Raises:
        ValueError: for a negative bound.
    """
    if max_bytes < 0:
        raise ValueError(f"a cache bound of {max_bytes} bytes: expected 0 or more")
    entries: list[tuple[float, str, int, Path]] = []
    for path in folder.glob("*.json"):
        try:
            stat = path.stat()
        except OSError:
            continue  # removed meanwhile
        entries.append((stat.st_mtime, path.name, stat.st_size, path))
    total = sum(size for _, _, size, _ in entries)
    removed = freed = 0
    for _, _, size, path in sorted(entries):
        if total <= max_bytes:
            break
        lock = FileLock(str(path) + ".lock", timeout=0)
        try:
            with lock:
                path.unlink(missing_ok=True)
        except Timeout:
            continue  # another process reads or writes it now
        Path(str(path) + ".lock").unlink(missing_ok=True)
        total -= size
        removed += 1
        freed += size
    return Pruned(removed, freed, total)


def _digest(*parts: str) -> str:
    digest = hashlib.blake2b(digest_size=20)
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\x1f")
    return digest.hexdigest()


def _content_digest(payload: Any) -> str:
    """A digest of a result's JSON, independent of how its file spaced it."""
    return hashlib.blake2b(json.dumps(payload, sort_keys=True).encode(), digest_size=20).hexdigest()


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass  # a read-only shared cache still serves; only its pruning order suffers


def _distrust(path: Path, why: str) -> None:
    message = f"the result cache's entry {path} is not used: {why}; its result is measured again and stored anew"
    logger.warning("%s", message)
    warnings.warn(CacheWarning(message), stacklevel=3)
