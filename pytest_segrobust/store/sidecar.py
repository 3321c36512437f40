"""Per-image statistics of a baseline, in a compact binary file beside its JSON.

The statistical gate (:mod:`pytest_segrobust.core.statistics`) compares a run with its baseline image
by image, so a baseline must keep each image's sufficient statistics, not just the scores.
They are too many numbers to review in git, so they live in ``<suite>.stats.npz`` next to
``<suite>.json``, which keeps the reviewable point values. For every stored cell the
sidecar holds, per metric, the corrupted run's statistics and the clean run's that its
gamma_r was computed from; identical arrays (a model's clean statistics, shared by all its
cells) are stored once.

The file is an ``.npz`` (no pickles: it is read with ``allow_pickle=False``) with an
``index`` member, a JSON document::

    {"format": 1, "suite": "demo",
     "cells": {"tiny-unet::rotate::3": {"miou": {"corrupted": "a1", "clean": "a0", "images": 64}}}}

and one array member per distinct array. ``images`` is stored, not read off an array: a
metric's statistics need not have one row per image (COCO mAP keeps one per detection).
Where the task groups samples (a referring task's expressions of one image, an R-VOS task's
of one clip), an entry also names ``units``: a string array, the unit (image, clip) of each
row of both runs, which the gate sums rows by before it resamples units; ``images`` then
counts rows. Other entries have none, as before. A
reader proves the statistics belong to the JSON's numbers by recomputing the cell's score
and gamma_r from them (the metric's ``resampled_scores`` with every image once): a sidecar
that disagrees with its baseline (one file changed without the other) is refused.

The JSON and its sidecar change together. The JSON records the SHA-256 of the sidecar it was
written with (``"statistics": {"sha256": "..."}``; ``null``: it has none), and a write of the
pair goes (:class:`SidecarWriter`, called by :func:`pytest_segrobust.store.baselines.write_baseline`):

1. write the new sidecar, complete and fsynced, as ``.<suite>.stats.npz.<sha256>.pending``
   beside the live one (itself written atomically: it exists whole or not at all);
2. write the JSON that records that SHA-256 (atomically: old or new, never half);
3. rename the pending file over the sidecar (or, where the new JSON has none, remove it).

A reader takes the sidecar whose SHA-256 the JSON records. Killed before step 2 completes,
a write leaves the old JSON, whose sidecar is the untouched old one: old and old (a pending
file left behind is ignored, and removed by the next write). Killed after it, the new JSON's
sidecar is the pending file, which the reader puts in place (rolls forward): new and new.
A JSON whose sidecar is ``null`` ignores a file still there. No other state can be reached,
so a reader sees both files old or both new. A JSON without the record (written before it
existed) takes the sidecar as found, guarded by the recomputation above.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import os
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_segrobust.core.errors import BaselineError
from pytest_segrobust.core.files import WriteError, atomic_write_bytes, why_not_written
from pytest_segrobust.store.baselines import UPDATE_FLAG, StatisticsRecord, read_baseline

SIDECAR_FORMAT = 1
SUFFIX = ".stats.npz"


def sidecar_path(baseline: Path, store: Path | None = None) -> Path:
    """Where the statistics of the baseline file ``baseline`` live: ``<suite>.stats.npz`` beside
    it, or in the folder ``store`` (a suite's ``gate: {statistics: cache}``)."""
    name = baseline.name.removesuffix(".json") + SUFFIX
    return baseline.with_name(name) if store is None else store / name


def pending_path(path: Path, sha256: str) -> Path:
    """Where a write stages the sidecar ``path`` of content ``sha256`` until its JSON records it."""
    return path.with_name(f".{path.name}.{sha256}.pending")


def content_digest(data: bytes) -> str:
    """The SHA-256 (hex) a baseline JSON records of its sidecar's content ``data``."""
    return hashlib.sha256(data).hexdigest()


def pack(array: np.ndarray) -> str:
    """``array`` as text that survives JSON (an ``.npy`` image, base64): what workers send."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def unpack(text: str) -> np.ndarray:
    """The array of :func:`pack`; raises ``ValueError`` for anything else."""
    try:
        return np.load(io.BytesIO(base64.b64decode(text.encode("ascii"), validate=True)), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"not a packed array: {exc}") from None


@dataclass(frozen=True)
class CellStatistics:
    """One metric's per-image statistics of one baseline cell: the corrupted run and its clean run.

    Attributes:
        corrupted, clean: The runs' statistics in the metric's layout
            (:meth:`~pytest_segrobust.metrics.base.Metric.image_statistics`).
        images: How many images both runs scored. It is stored, not read off an array: a
            metric's statistics need not have a row per image (COCO mAP keeps one per detection).
        units: The unit (image, clip) of each row of both runs, ``(N,)`` str, where the task
            groups samples; ``None`` where each row is its own unit.
    """

    corrupted: np.ndarray
    clean: np.ndarray
    images: int
    units: np.ndarray | None = None


class Sidecar:
    """The statistics of one baseline file, read once and kept.

    Args:
        baseline: The baseline JSON.
        store: The folder of the statistics file when it is not beside the JSON.
        shown: The statistics file as messages name it (a path relative to the rootdir);
            its full path by default.

    Attributes:
        path: The ``.stats.npz`` file.
    """

    def __init__(self, baseline: Path, store: Path | None = None, shown: str | None = None) -> None:
        self.baseline = baseline
        self.path = sidecar_path(baseline, store)
        self.shown = str(self.path) if shown is None else shown
        self._cells: dict[str, dict[str, CellStatistics]] | None = None

    def lookup(
        self,
        cell: str,
        metric: str,
        statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
        stored: dict[str, float | None],
        worst: float = 0.0,
    ) -> CellStatistics | None:
        """The statistics of ``metric`` in ``cell`` (a :func:`~pytest_segrobust.store.baselines.key_path`),
        or ``None`` where the sidecar has none.

        Args:
            statistic: The metric's score of weighted multisets of the images
                (:meth:`~pytest_segrobust.metrics.base.Metric.resampled_scores`).
            stored: The baseline JSON's ``score`` and ``gamma_r`` of the cell (``None`` where
                it has none); the statistics must reproduce them.
            worst: The metric's worst end, which gamma_r measures from
                (:meth:`~pytest_segrobust.metrics.base.Metric.worst`).

        Raises:
            BaselineError: for an unreadable sidecar or baseline JSON, a sidecar that is not the
                one the JSON records, statistics the metric cannot read, or statistics that do
                not reproduce the JSON's numbers (one of the two files was changed without the other).
        """
        if self._cells is None:
            paired = read_baseline(self.baseline)
            self._cells = read_sidecar(self.path, self.shown, None if paired is None else paired.statistics)
        found = self._cells.get(cell, {}).get(metric)
        if found is None:
            return None
        every_image = np.ones((1, found.images))
        try:
            score = float(statistic(found.corrupted, every_image)[0])
            clean = float(statistic(found.clean, every_image)[0])
            mine = {"score": score, "gamma_r": (score - worst) / (clean - worst)}
        except (ValueError, TypeError, IndexError) as exc:
            raise BaselineError(
                f"{self.shown}: cells.{cell}.{metric}: statistics the metric cannot read ({exc}); "
                f"re-record them with {UPDATE_FLAG}"
            ) from None
        for name, theirs in stored.items():
            if theirs is not None and not math.isclose(theirs, mine[name], rel_tol=1e-5, abs_tol=1e-9):
                raise BaselineError(
                    f"{self.shown}: cells.{cell}.{metric}: the statistics give {name} {mine[name]:.6g}, "
                    f"the baseline JSON stores {theirs:.6g}: one file changed without the other; "
                    f"re-record both with {UPDATE_FLAG}"
                )
        return found


def read_sidecar(
    path: Path, shown: str | None = None, recorded: StatisticsRecord | None = None
) -> dict[str, dict[str, CellStatistics]]:
    """Every cell's statistics in ``path`` (empty when there is no file).

    Args:
        shown: The file as messages name it (a path relative to the rootdir); ``path`` by default.
        recorded: The baseline JSON's record of its sidecar; ``None`` (a JSON written before
            the record existed, or none) takes the file as found.

    Raises:
        BaselineError: for any file that cannot be read or is not the one ``recorded``, naming
            it, the member or field at fault where there is one, and the flag that rewrites
            it; never another exception.
    """
    shown = str(path) if shown is None else shown
    data = _paired_content(path, shown, recorded)
    return {} if data is None else parse_sidecar(data, shown)


def _paired_content(path: Path, shown: str, recorded: StatisticsRecord | None) -> bytes | None:
    """The content of the sidecar the JSON recording ``recorded`` was written with, completing
    an interrupted write where needed; ``None`` where it has none."""
    if recorded is not None and recorded.sha256 is None:
        return None  # a file still there is the one a write was about to remove
    data = _content(path, shown)
    if recorded is None or (data is not None and content_digest(data) == recorded.sha256):
        return data
    pending = pending_path(path, recorded.sha256)
    staged = _content(pending, shown)
    if staged is None or content_digest(staged) != recorded.sha256:
        if data is None:
            return None  # not recorded on this machine (statistics kept in the cache folder)
        parse_sidecar(data, shown)  # a damaged file is named as damaged, not as the other file
        raise BaselineError(
            f"{shown}: not the statistics file the baseline JSON was written with (its SHA-256 is not the "
            f"JSON's statistics.sha256): one file changed without the other; re-record both with {UPDATE_FLAG}"
        )
    try:
        os.replace(pending, path)  # the write was killed after its JSON: complete it
    except OSError:
        pass  # another process completed it, or the folder is read-only: the content is the same
    return staged


def _content(path: Path, shown: str) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BaselineError(f"{shown}: cannot read the statistics file ({exc.strerror or exc}){_REWRITE}") from None


_REWRITE = f"; re-record it with {UPDATE_FLAG}"


def parse_sidecar(data: bytes, shown: str) -> dict[str, dict[str, CellStatistics]]:
    """Every cell's statistics in ``data``, the content of the statistics file ``shown``.

    Raises:
        BaselineError: as :func:`read_sidecar`.
    """
    members = _members(data, shown)
    index = members.pop("index", None)
    if index is None or index.dtype != np.uint8 or index.ndim != 1:
        raise BaselineError(f"{shown}: no index member{_REWRITE}")
    try:
        document = json.loads(index.tobytes().decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BaselineError(f"{shown}: index: not JSON ({type(exc).__name__}: {exc}){_REWRITE}") from None
    if not isinstance(document, dict) or document.get("format") != SIDECAR_FORMAT:
        found = document.get("format") if isinstance(document, dict) else document
        raise BaselineError(f"{shown}: index.format is {found!r}, expected {SIDECAR_FORMAT}{_REWRITE}")
    raw_cells = document.get("cells")
    if not isinstance(raw_cells, dict):
        raise BaselineError(f"{shown}: index.cells: expected a mapping{_REWRITE}")
    cells: dict[str, dict[str, CellStatistics]] = {}
    for cell, by_metric in raw_cells.items():
        if not isinstance(by_metric, dict):
            raise BaselineError(f"{shown}: index.cells.{cell}: expected a mapping of metrics{_REWRITE}")
        for metric, entry in by_metric.items():
            cells.setdefault(cell, {})[metric] = _cell_statistics(members, entry, f"{shown}: index.cells.{cell}.{metric}")
    return cells


def _members(data: bytes, shown: str) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz``, each read in full (and so checked against its CRC)."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    # A damaged archive fails anywhere in zipfile, zlib or numpy's .npy reader, with whatever
    # each raises (BadZipFile, zlib.error, NotImplementedError for an unknown zip version,
    # EOFError, struct.error, OverflowError, ...): every one is the file's fault, not a bug here.
    except Exception as exc:  # noqa: BLE001
        raise BaselineError(
            f"{shown}: not a readable statistics file ({type(exc).__name__}: {exc}){_REWRITE}"
        ) from None


def _cell_statistics(members: dict[str, np.ndarray], entry: Any, at: str) -> CellStatistics:
    try:
        corrupted, clean, images = members[entry["corrupted"]], members[entry["clean"]], int(entry["images"])
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise BaselineError(f"{at}: missing or broken field or array ({type(exc).__name__}: {exc}){_REWRITE}") from None
    if corrupted.dtype.kind not in "biuf" or clean.dtype.kind not in "biuf":
        raise BaselineError(f"{at}: arrays of {corrupted.dtype} and {clean.dtype}, expected numbers{_REWRITE}")
    # Rows may differ (detections per run), the layout of a row may not.
    if images < 1 or corrupted.ndim == 0 or clean.ndim == 0 or corrupted.shape[1:] != clean.shape[1:]:
        raise BaselineError(
            f"{at}: arrays of shapes {corrupted.shape} and {clean.shape} for {images} images{_REWRITE}"
        )
    if "units" not in entry:
        return CellStatistics(corrupted, clean, images)
    units = members.get(entry["units"]) if isinstance(entry["units"], str) else None
    if units is None or units.dtype.kind != "U" or units.shape != (corrupted.shape[0],) or clean.shape != corrupted.shape:
        found = "no array" if units is None else f"{units.dtype} {units.shape}"
        raise BaselineError(
            f"{at}.units: expected a unit id per row of {corrupted.shape} and {clean.shape}, found {found}{_REWRITE}"
        )
    return CellStatistics(corrupted, clean, images, units)


@dataclass(frozen=True)
class SidecarEntry:
    """One metric of one cell to store: the corrupted run's statistics and its clean run's, of
    ``images`` images, and the unit of each row where the task groups samples."""

    cell: str
    metric: str
    corrupted: np.ndarray
    clean: np.ndarray
    images: int
    units: np.ndarray | None = None


def write_sidecar(
    path: Path,
    suite: str,
    entries: Iterable[SidecarEntry],
    *,
    replace_all: bool = False,
    keep_only: Collection[str] | None = None,
    shown: str | None = None,
) -> None:
    """Store ``entries`` in ``path``, keeping its other cells (unless ``replace_all``) that are in ``keep_only``.

    Writes atomically; with nothing left to store, removes the file. ``shown`` names the file
    in messages (:func:`read_sidecar`). A file written with a baseline JSON is written by
    :class:`SidecarWriter`, which keeps the two in step.
    """
    cells = merged_cells({} if replace_all else read_sidecar(path, shown), entries, keep_only)
    if not cells:
        path.unlink(missing_ok=True)
        return
    atomic_write_bytes(path, sidecar_bytes(suite, cells))


def merged_cells(
    cells: dict[str, dict[str, CellStatistics]], entries: Iterable[SidecarEntry], keep_only: Collection[str] | None
) -> dict[str, dict[str, CellStatistics]]:
    """``cells`` with ``entries`` stored over them, less the cells not in ``keep_only``."""
    for e in entries:
        cells.setdefault(e.cell, {})[e.metric] = CellStatistics(e.corrupted, e.clean, e.images, e.units)
    return cells if keep_only is None else {cell: value for cell, value in cells.items() if cell in keep_only}


def sidecar_bytes(suite: str, cells: dict[str, dict[str, CellStatistics]]) -> bytes:
    """The content of a sidecar holding ``cells``: each distinct array stored once."""
    arrays: dict[str, np.ndarray] = {}
    names: dict[bytes, str] = {}

    def member(array: np.ndarray) -> str:
        digest = hashlib.blake2b(array.dtype.str.encode() + repr(array.shape).encode() + array.tobytes()).digest()
        if digest not in names:
            names[digest] = f"a{len(names)}"
            arrays[names[digest]] = array
        return names[digest]

    def entry(stats: CellStatistics) -> dict[str, Any]:
        names: dict[str, Any] = {"corrupted": member(stats.corrupted), "clean": member(stats.clean)}
        return names | {"images": stats.images} | ({} if stats.units is None else {"units": member(stats.units)})

    index: dict[str, Any] = {"format": SIDECAR_FORMAT, "suite": suite, "cells": {}}
    for cell in sorted(cells):
        index["cells"][cell] = {metric: entry(stats) for metric, stats in sorted(cells[cell].items())}
    buffer = io.BytesIO()
    index_bytes = np.frombuffer(json.dumps(index, sort_keys=True).encode(), dtype=np.uint8)
    np.savez_compressed(buffer, index=index_bytes, **arrays)
    return buffer.getvalue()


class SidecarWriter:
    """The sidecar written with a baseline JSON, in step with it (the module's write sequence):
    a :class:`~pytest_segrobust.store.baselines.StatisticsWriter`.

    Args:
        path: The ``.stats.npz`` file.
        suite: The suite's name.
        entries: This run's statistics; the file keeps its other cells the JSON still holds.
        replace_all: Start from no stored statistics (the JSON is rewritten from scratch).
        shown: The file as messages name it.
        repair: Start from no stored statistics where the stored file cannot be read (an
            update rewrites a broken sidecar as it rewrites a broken JSON); otherwise that
            is a ``BaselineError`` and nothing is written.

    Attributes:
        unreadable: Why the stored file could not be read, where ``repair`` replaced it.
        cells, measured: After :meth:`stage`, the cells of the new JSON, and those of them
            this write brought statistics for.
    """

    def __init__(
        self,
        path: Path,
        suite: str,
        entries: Iterable[SidecarEntry],
        *,
        replace_all: bool = False,
        shown: str | None = None,
        repair: bool = False,
    ) -> None:
        self.path, self.suite, self.entries = path, suite, list(entries)
        self.replace_all, self.repair = replace_all, repair
        self.shown = str(path) if shown is None else shown
        self.unreadable: str | None = None
        self.cells: set[str] = set()
        self.measured: set[str] = set()
        self._staged: StatisticsRecord | None = None

    def stage(self, cells: set[str], recorded: StatisticsRecord | None) -> StatisticsRecord:
        """Write the new sidecar under its pending name; its record for the new JSON.

        Raises:
            BaselineError: for a stored sidecar that cannot be read (unless ``repair``).
            WriteError: when the pending file cannot be written.
        """
        stored: dict[str, dict[str, CellStatistics]] = {}
        if not self.replace_all:
            try:
                stored = read_sidecar(self.path, self.shown, recorded)
            except BaselineError as exc:
                if not self.repair:
                    raise
                self.unreadable = str(exc)
        merged = merged_cells(stored, self.entries, cells)
        self.cells, self.measured = cells, {e.cell for e in self.entries} & cells
        self._remove_pending()
        if not merged:
            self._staged = StatisticsRecord(None)
            return self._staged
        data = sidecar_bytes(self.suite, merged)
        digest = content_digest(data)
        atomic_write_bytes(pending_path(self.path, digest), data)
        self._staged = StatisticsRecord(digest)
        return self._staged

    def commit(self) -> None:
        """Put the staged sidecar in place (or remove the old one where the JSON records none).

        Raises:
            WriteError: when it cannot; the JSON's reader completes the step.
        """
        assert self._staged is not None, "stage() first"
        try:
            if self._staged.sha256 is None:
                self.path.unlink(missing_ok=True)
            else:
                os.replace(pending_path(self.path, self._staged.sha256), self.path)
        except OSError as exc:
            raise WriteError(f"cannot write {self.shown}: {why_not_written(self.path, exc)}") from exc

    def _remove_pending(self) -> None:
        """Delete pending files of writes killed before their JSON: no JSON records them."""
        prefix = f".{self.path.name}."
        try:
            leftovers = [
                path for path in self.path.parent.iterdir() if path.name.startswith(prefix) and path.name.endswith(".pending")
            ]
        except OSError:
            return  # no folder yet, or one that cannot be listed: the write says what is wrong with it
        for leftover in leftovers:
            leftover.unlink(missing_ok=True)
