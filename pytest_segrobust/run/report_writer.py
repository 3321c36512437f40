"""The controller's report of a run: the cells' outcomes turned into the report's data, the
pictures added, and the files written.

The report's numbers come from the outcomes alone (:func:`pytest_segrobust.report.build_report`);
its pictures (each suite's gallery and frame table, each model's worst images) from what the
processes that measured the cells made of them (:class:`~pytest_segrobust.pictures.values.RunPictures`,
:mod:`pytest_segrobust.engine.report_pictures`). Nothing here builds a model or reads a dataset: a merge of
shards writes the same report on a machine without the models. A picture that is missing is a
warning of the report, never a failed run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.gate.evidence import aggregate_changes
from pytest_segrobust.gate.release import ModelOutcome
from pytest_segrobust.pictures.values import GalleryTiles, RunPictures, WorstImages
from pytest_segrobust.report import ReportIncomplete, build_report, pictures_left_out_by, write_report
from pytest_segrobust.report.coverage import RunCoverage
from pytest_segrobust.report.environment import run_environment
from pytest_segrobust.report.html import write_html
from pytest_segrobust.report.tables import worst_cell
from pytest_segrobust.store.records import CellRecord
from pytest_segrobust.suite.schema import Suite
from pytest_segrobust.text.cells import modality


class ReportWriter:
    """Builds and writes one run's report.

    Args:
        rootpath: The project's rootdir: the report shows paths relative to it.
        started: When the run started (``time.time()``): the report's wall time counts from it.
    """

    def __init__(self, rootpath: Path, started: float) -> None:
        self.rootpath = rootpath
        self.started = started
        self.report: dict[str, Any] | None = None
        self.written: list[Path] = []
        self.problems: list[str] = []
        self.warnings: list[str] = []

    def build(
        self,
        records: Sequence[CellRecord],
        suites: Mapping[str, Suite],
        coverage: RunCoverage,
        errors: Mapping[str, str],
        model_outcomes: Sequence[ModelOutcome],
        resampled: Mapping[str, dict[str, Any]],
    ) -> dict[str, Any] | None:
        """The report's data, or ``None`` (named in :attr:`problems`) where it cannot be built."""
        try:
            report = build_report(
                list(records),
                dict(suites),
                list(coverage.not_run),
                self.rootpath,
                errors=dict(errors),
                model_outcomes=[o.to_json() for o in model_outcomes],
            )
            report["run"] = coverage.to_json()
            for name, entry in report["suites"].items():  # each statistical gate's aggregate changes
                suite = suites.get(name)
                if suite is not None and suite.gate is not None:
                    # In suite order, not in the order cells finished: the means' rounding and the
                    # categories' order must not depend on scheduling.
                    mine = [r for r in records if r.suite == name]
                    entry["aggregates"] = aggregate_changes(mine, dict(resampled), suite.gate.confidence)
        except Exception as exc:  # noqa: BLE001 - the baselines must still be written
            self.problems.append(f"the report could not be built: {type(exc).__name__}: {exc}")
            return None
        self.report = report
        return report

    def write(
        self, suites: Mapping[str, Suite], base: Path, html: bool, pictures: RunPictures, device: Any, *, figures: bool = True
    ) -> None:
        """Add the pictures and the environment to the built report and write its files at ``base``.

        Args:
            suites: The run's suites by name.
            base: The report's path without suffix.
            html: Also write the HTML page.
            pictures: What the processes that measured the cells made of them.
            device: The run's device, for the environment table.
            figures: ``False`` (``--segrobust-figures=none``): no figure, gallery or worst image;
                the report says they were left out and how to get them. ``True`` with some cells'
                pictures left out on purpose (``pictures.left_out``, shards run without them): the
                pictures made are shown, and one line names the shards that made none.
        """
        assert self.report is not None
        galleries: dict[str, GalleryTiles] = {}
        worst: dict[str, dict[str, WorstImages]] = {}
        for name, entry in self.report["suites"].items():
            suite = suites.get(name)
            if suite is None:
                continue
            made = pictures.suites.get(name)
            if made is None:
                if figures:
                    self.warnings.append(f"no gallery for suite {name}: {_NOT_SENT}")
            else:
                self.warnings.extend(made.warnings)
                if made.gallery is not None:
                    galleries[name] = made.gallery
                if made.frame_kept is not None:
                    entry["frame_kept"] = made.frame_kept
            if not figures:  # the worst images and expressions are pictures measured: left out too
                continue
            worst[name] = self._worst_images(suite, entry, pictures)
            if "r2bench" in entry:
                entry["worst_expressions"] = {
                    row: found.info()
                    for row, found in self._worst_per_model(suite, entry, _perturbs_text, pictures, "worst expressions")
                }
        self.report["environment"] = run_environment(self.rootpath, device, self.started)
        self.report["warnings"] = list(self.warnings)
        shards_without = list(dict.fromkeys(pictures.left_out.values()))
        try:
            self.written.extend(
                write_report(
                    self.report,
                    base,
                    galleries,
                    worst,
                    wall_seconds=lambda: time.time() - self.started,
                    figures=figures,
                    left_out=pictures_left_out_by(shards_without) if shards_without else None,
                )
            )
        except ReportIncomplete as exc:
            self.written.extend(exc.written)
            self.problems.extend(exc.problems)
        self.warnings = list(self.report.get("warnings", []))
        if html:  # after the figures, which it embeds
            try:
                self.written.append(write_html(self.report, base))
            except Exception as exc:  # noqa: BLE001 - the report's other files are already written
                self.problems.append(
                    str(exc)
                    if isinstance(exc, SegRobustError)
                    else f"HTML report not written: {type(exc).__name__}: {exc}"
                )

    def _worst_images(self, suite: Suite, entry: dict[str, Any], pictures: RunPictures) -> dict[str, WorstImages]:
        """For each model (row) of a reported suite: its worst cell's images that lost most."""
        worst: dict[str, Any] = {}
        figures: dict[str, WorstImages] = {}
        for row, found in self._worst_per_model(suite, entry, list, pictures, "worst images"):
            info = found.info()
            if found.images:
                kind = "worst-" + ("".join(c if c.isalnum() or c in "._-" else "-" for c in row).strip("-") or "model")
                info["figure"] = kind if kind not in figures else f"{kind}-{len(figures)}"
                figures[info["figure"]] = found
            worst[row] = info
        entry["worst_images"] = worst
        return figures

    def _worst_per_model(
        self,
        suite: Suite,
        entry: dict[str, Any],
        candidates: Callable[[list[CellRecord]], list[CellRecord]],
        pictures: RunPictures,
        what: str,
    ) -> Iterator[tuple[str, WorstImages]]:
        """Each model's worst cell among ``candidates`` of its cells, with the images its process
        sent; a cell without them is a warning of the report, named with ``what``, never its failure."""
        for row, model_entry in entry["models"].items():
            cell = worst_cell(candidates([CellRecord.from_json(c) for c in model_entry["cells"]]))
            if cell is None:
                continue
            found = pictures.worst.get(cell.nodeid)
            if found is None and cell.nodeid in pictures.left_out:
                continue  # its shard ran without pictures: the report names it once (pictures_left_out_by)
            if found is None:
                reason = pictures.failures.get(cell.nodeid, _NOT_SENT)
                self.warnings.append(f"no {what} for {suite.name} {row}: {reason}")
                continue
            yield row, found


# Why a picture is missing when the process that measured its cell sent none (it crashed or was stopped).
_NOT_SENT = "the process that measured it sent no pictures (it stopped before the end of the run)"


def _perturbs_text(records: list[CellRecord]) -> list[CellRecord]:
    return [r for r in records if modality(r.category) != "visual"]
