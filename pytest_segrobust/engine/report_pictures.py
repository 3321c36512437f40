"""The pictures a process owes the report, made where its models and data are warm.

While a process measures cells, its :class:`Album` notes each one's rank by the report's rule
for a model's worst cell (lowest γr, the earliest in suite order among equals;
:func:`pytest_segrobust.report.tables.worst_cell`), among all of a model's (and split's) cells
and, for a suite that perturbs text, among its text cells. The run's worst cell of a model is
the worst of the processes' worst, so each process describes only its own, once, when it
finishes (:meth:`Album.develop`): the images that lost most (:mod:`pytest_segrobust.engine.worst_images`,
picked from the first images' own scores that the cell's evaluations recorded, kept here) and each
measured suite's gallery and frame table (:mod:`pytest_segrobust.engine.suite_pictures`). They travel
to the controller as a :class:`~pytest_segrobust.pictures.values.RunPictures`, so the report and
``segrobust merge`` never build a model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_segrobust.core.errors import error_message
from pytest_segrobust.core.types import Image
from pytest_segrobust.engine.suite_pictures import suite_pictures
from pytest_segrobust.engine.worst_images import CleanViews, ImageScores, describe_worst, picture_of
from pytest_segrobust.pictures.values import REPORT_TILE, RunPictures, SuitePictures
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.store.records import CellRecord
from pytest_segrobust.suite.schema import Suite
from pytest_segrobust.text.cells import is_visual, modality

if TYPE_CHECKING:
    from pytest_segrobust.engine.workbench import Workbench

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
    scores: ImageScores


class Album:
    """The cells this process measured, ranked for each model's worst cell, and the suites they belong to."""

    def __init__(self) -> None:
        # Every measured cell's rank, by slot (suite, model, split, track): the worst is chosen when developed.
        self._candidates: dict[tuple[str, str, str | None, str], list[_Candidate]] = {}
        self._suites: dict[str, Suite] = {}
        self._clean_views = CleanViews()
        self._developed: set[str] = set()

    def consider(self, suite: Suite, key: CellKey, record: CellRecord, scores: ImageScores) -> None:
        """Note a measured cell: its suite, its rank in each track it belongs to, and its first
        images' own scores, clean and corrupted, which its worst images are picked from."""
        self._suites.setdefault(suite.name, suite)
        gamma_r = record.gamma_r
        if key.severity == 0 or gamma_r is None or not math.isfinite(gamma_r):
            return
        order = list(suite.corruptions)
        rank = (gamma_r, order.index(key.corruption) if key.corruption in order else len(order), key.severity)
        candidate = _Candidate(rank, suite, key, record.nodeid, gamma_r, scores)
        for track, admits in TRACKS.items():
            if admits(record):
                self._candidates.setdefault((suite.name, key.model, key.split, track), []).append(candidate)

    def develop(
        self,
        bench: Workbench,
        bounds: Callable[[Suite, str], AbstractContextManager[None]],
        only: Collection[str] | None = None,
        *,
        figures: bool = True,
    ) -> RunPictures:
        """Describe each model's worst cell and every measured suite once; what fails is said, never raised.

        Args:
            bench: The process's models and datasets (still built).
            bounds: Where each picture runs: in the project, within the suite's time limit for one cell.
            only: The cells the controller recorded, where it recorded fewer than this process
                measured (a Ray actor runs ahead of a run that then stopped); ``None``: all of them.
            figures: ``False`` (``--segrobust-figures=none``): each suite's frame table alone, a
                table of the report; no gallery, and no worst image searched.
        """
        worst = [
            min(allowed, key=lambda c: c.rank)
            for candidates in self._candidates.values()
            if (allowed := [c for c in candidates if only is None or c.nodeid in only])
        ]
        pictures = RunPictures()
        for name, suite in self._suites.items():
            if name in self._developed:
                continue
            pictures.suites[name] = self._suite_pictures(bench, bounds, suite, gallery=figures)
        for candidate in {c.nodeid: c for c in worst}.values() if figures else ():
            if candidate.nodeid in self._developed:
                continue
            suite, key = candidate.suite, candidate.key
            try:
                with bounds(suite, f"the worst images of {candidate.nodeid}"):
                    pictures.worst[candidate.nodeid] = describe_worst(
                        bench.model(suite, key.model),
                        bench.dataset(suite, key.split),
                        bench.plan(suite).corruption(key.corruption),
                        key.severity,
                        candidate.scores,
                        task=bench.plan(suite).task,
                        metric=suite.metric,
                        seed=suite.seed,
                        gamma_r=candidate.gamma_r,
                        clean_views=self._clean_views,
                    )
            except Exception as exc:  # noqa: BLE001 - a picture must never cost the report
                pictures.failures[candidate.nodeid] = error_message(exc)
        self._developed.update([*pictures.suites, *pictures.worst, *pictures.failures])
        self._clean_views.clear()
        return pictures

    def _suite_pictures(
        self,
        bench: Workbench,
        bounds: Callable[[Suite, str], AbstractContextManager[None]],
        suite: Suite,
        *,
        gallery: bool = True,
    ) -> SuitePictures:
        reference = suite.shifts.reference if suite.shifts else None
        try:
            with bounds(suite, f"the first image of suite {suite.name}"):
                dataset = bench.dataset(suite, reference)
                sample = dataset[0]
                image = picture_of(sample, bench.plan(suite).task, dataset)  # a clip shows its middle frame
            # Text cells leave the image alone, temporal ones act on clips alone, and a mixture draws
            # per sample: the pictures show the corruptions of images.
            chosen = bench.plan(suite).cells.values()
            corruptions = [
                c for c in chosen if is_visual(c) and modality(c.category.value) == "visual" and c.accepts(Image)
            ]
            with bounds(suite, f"the gallery of suite {suite.name}"):
                return suite_pictures(
                    suite.name,
                    image,
                    sample.sample_id,
                    corruptions,
                    severities=suite.severities,
                    seed=suite.seed,
                    tile=REPORT_TILE,
                    gallery=gallery,
                )
        except Exception as exc:  # noqa: BLE001 - a figure must never cost the report
            reason = error_message(exc)
            lost = (f"no gallery for suite {suite.name}: {reason}",) if gallery else ()
            return SuitePictures(None, None, (*lost, f"no frame table for suite {suite.name}: {reason}"))
