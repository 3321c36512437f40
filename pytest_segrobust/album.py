"""The pictures a process owes the report, made where its models and data are warm.

While a process measures cells, its :class:`Album` keeps, per model (and split), the cell that
is the worst so far by the report's rule (lowest γr, the earliest in suite order among equals;
:func:`pytest_segrobust.report.tables.worst_cell`), and for a suite that perturbs text the
worst text cell too. The run's worst cell of a model is the worst of the processes' worst, so
each process describes only its own candidates, once, when it finishes
(:meth:`Album.develop`): the images that lost most (:mod:`pytest_segrobust.worst`) and each
measured suite's gallery and frame table (:mod:`pytest_segrobust.suite_pictures`). They travel
to the controller as a :class:`~pytest_segrobust.pictures.RunPictures`, so the report and
``segrobust merge`` never build a model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_segrobust.baselines import CellKey
from pytest_segrobust.errors import error_message
from pytest_segrobust.pictures import REPORT_TILE, RunPictures, SuitePictures
from pytest_segrobust.records import CellRecord
from pytest_segrobust.suite import Suite
from pytest_segrobust.suite_pictures import suite_pictures
from pytest_segrobust.text.cells import is_visual, modality
from pytest_segrobust.worst import CleanViews, describe_worst

if TYPE_CHECKING:
    from pytest_segrobust.workbench import Workbench

# The tracks a model's worst cell is chosen in: among all its cells, and among those that perturb text.
TRACKS: dict[str, Callable[[CellRecord], bool]] = {
    "images": lambda record: True,
    "expressions": lambda record: modality(record.category) != "visual",
}


@dataclass(frozen=True)
class _Candidate:
    rank: tuple[float, int, int]
    suite: Suite
    key: CellKey
    nodeid: str
    gamma_r: float


class Album:
    """The candidates for each model's worst cell among the cells this process measured."""

    def __init__(self) -> None:
        self._worst: dict[tuple[str, str, str | None, str], _Candidate] = {}
        self._suites: dict[str, Suite] = {}
        self._clean_views = CleanViews()
        self._developed: set[str] = set()

    def consider(self, suite: Suite, key: CellKey, record: CellRecord) -> None:
        """Keep a measured cell if it is its model's worst so far here (in any track)."""
        self._suites.setdefault(suite.name, suite)
        gamma_r = record.gamma_r
        if key.severity == 0 or gamma_r is None or not math.isfinite(gamma_r):
            return
        order = list(suite.corruptions)
        rank = (gamma_r, order.index(key.corruption) if key.corruption in order else len(order), key.severity)
        candidate = _Candidate(rank, suite, key, record.nodeid, gamma_r)
        for track, admits in TRACKS.items():
            slot = (suite.name, key.model, key.split, track)
            if admits(record) and (slot not in self._worst or rank < self._worst[slot].rank):
                self._worst[slot] = candidate

    def develop(self, bench: Workbench, bounds: Callable[[Suite, str], AbstractContextManager[None]]) -> RunPictures:
        """Describe every candidate and every measured suite once; what fails is said, never raised.

        Args:
            bench: The process's models and datasets (still built).
            bounds: Where each picture runs: in the project, within the suite's time limit for one cell.
        """
        pictures = RunPictures()
        for name, suite in self._suites.items():
            if name in self._developed:
                continue
            pictures.suites[name] = self._suite_pictures(bench, bounds, suite)
        for candidate in {c.nodeid: c for c in self._worst.values()}.values():
            if candidate.nodeid in self._developed:
                continue
            suite, key = candidate.suite, candidate.key
            try:
                with bounds(suite, f"the worst images of {candidate.nodeid}"):
                    pictures.worst[candidate.nodeid] = describe_worst(
                        bench.model(suite, key.model),
                        bench.dataset(suite, key.split),
                        suite.corruption(key.corruption, bench.registry),
                        key.severity,
                        task=suite.task,
                        metric=suite.metric,
                        seed=suite.seed,
                        limit=suite.limit,
                        gamma_r=candidate.gamma_r,
                        clean_views=self._clean_views,
                    )
            except Exception as exc:  # noqa: BLE001 - a picture must never cost the report
                pictures.failures[candidate.nodeid] = error_message(exc)
        self._developed.update([*pictures.suites, *pictures.worst, *pictures.failures])
        self._clean_views.clear()
        return pictures

    def _suite_pictures(
        self, bench: Workbench, bounds: Callable[[Suite, str], AbstractContextManager[None]], suite: Suite
    ) -> SuitePictures:
        reference = suite.shifts.reference if suite.shifts else None
        try:
            with bounds(suite, f"the first image of suite {suite.name}"):
                sample = bench.dataset(suite, reference)[0]
            # Text cells leave the image alone: pictures of images show the image corruptions.
            corruptions = [c for c in (suite.corruption(n, bench.registry) for n in suite.corruptions) if is_visual(c)]
            with bounds(suite, f"the gallery of suite {suite.name}"):
                return suite_pictures(
                    suite.name,
                    sample.image,
                    sample.sample_id,
                    corruptions,
                    severities=suite.severities,
                    seed=suite.seed,
                    tile=REPORT_TILE,
                )
        except Exception as exc:  # noqa: BLE001 - a figure must never cost the report
            reason = error_message(exc)
            return SuitePictures(
                None,
                None,
                (f"no gallery for suite {suite.name}: {reason}", f"no frame table for suite {suite.name}: {reason}"),
            )
