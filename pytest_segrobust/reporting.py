"""The controller's report of a run: the cells' outcomes turned into the report's data, the
pictures added, and the files written.

The report's numbers come from the outcomes alone (:func:`pytest_segrobust.report.build_report`).
Its pictures (each suite's gallery and frame table, each model's worst images) are made
here from the suites' data: each picture runs within the suite's time limit for one cell, and
one that fails or hangs is a warning of the report, never a failed run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from PIL import Image

from pytest_segrobust.corruptions import Corruption
from pytest_segrobust.errors import SegRobustError
from pytest_segrobust.evidence import aggregate_changes
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.records import CellRecord
from pytest_segrobust.release import ModelOutcome
from pytest_segrobust.report import ReportIncomplete, build_report, write_report
from pytest_segrobust.report.coverage import RunCoverage
from pytest_segrobust.report.environment import run_environment
from pytest_segrobust.report.frame import describe_frames
from pytest_segrobust.report.gallery import REPORT_TILE, render_gallery
from pytest_segrobust.report.html import write_html
from pytest_segrobust.report.overlays import describe_worst
from pytest_segrobust.report.tables import worst_cell
from pytest_segrobust.runner import CellRunner, error_message
from pytest_segrobust.suite import Suite
from pytest_segrobust.text.cells import is_visual, modality


class ReportWriter:
    """Builds and writes one run's report.

    Args:
        runner: The controller's cell runner: the suites' data for the pictures.
        started: When the run started (``time.time()``): the report's wall time counts from it.
    """

    def __init__(self, runner: CellRunner, started: float) -> None:
        self.runner = runner
        self.started = started
        self.report: dict[str, Any] | None = None
        self.written: list = []
        self.problems: list[str] = []
        self.warnings: list[str] = []
        # Worst cells described for the report, by (model row, cell node id): each evaluated once.
        self._described: dict[tuple[str, str], tuple[dict[str, Any], Image.Image | None]] = {}

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
                self.runner.rootpath,
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

    def write(self, suites: Mapping[str, Suite], base: Any, html: bool) -> None:
        """Add the pictures and the environment to the built report and write its files at ``base``."""
        assert self.report is not None
        galleries: dict[str, Image.Image] = {}
        pictures: dict[str, dict[str, Image.Image]] = {}
        try:
            galleries = self._galleries(suites)
            pictures = self._describe_run(suites)
        except KeyboardInterrupt:
            # Ctrl-C while the models run again for their pictures: the report is written without them.
            self.warnings.append("pictures left out: the run was interrupted while the report's pictures were made")
        options = self.runner.options
        self.report["environment"] = run_environment(self.runner.rootpath, options.device, self.started)
        self.report["warnings"] = list(self.warnings)
        try:
            self.written.extend(
                write_report(self.report, base, galleries, pictures, wall_seconds=lambda: time.time() - self.started)
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

    # -- pictures ----------------------------------------------------------------------------------

    def _first_sample(self, suite: Suite) -> tuple[Any, list[Corruption[Any]]]:
        """The first image of a suite's reference data, and the suite's corruptions in order."""
        with self.runner.bounds(suite, f"the first image of suite {suite.name}"):
            sample = self.runner.bench.dataset(suite, suite.shifts.reference if suite.shifts else None)[0]
        # Text cells leave the image alone: pictures of images show the image corruptions.
        corruptions = (suite.corruption(name, self.runner.registry) for name in suite.corruptions)
        return sample, [c for c in corruptions if is_visual(c)]

    def _galleries(self, suites: Mapping[str, Suite]) -> dict[str, Image.Image]:
        """The first image of each reported suite under its corruptions at severities 1, 3, 5."""
        galleries = {}
        for name in self.report["suites"] if self.report else ():
            suite = suites.get(name)
            if suite is None:
                continue
            try:
                sample, corruptions = self._first_sample(suite)
                with self.runner.bounds(suite, f"the gallery of suite {name}"):
                    galleries[name] = render_gallery(
                        sample.image, corruptions, seed=suite.seed, sample_id=sample.sample_id, tile=REPORT_TILE
                    )
            except Exception as exc:  # noqa: BLE001 - a figure must never cost the report
                self.warnings.append(f"no gallery for suite {name}: {error_message(exc)}")
        return galleries

    def _describe_run(self, suites: Mapping[str, Suite]) -> dict[str, dict[str, Image.Image]]:
        """Add each suite's frame kept by geometric corruptions and each model's worst images to
        the report; return those images, by suite and figure kind.

        Each part that fails or runs past the suite's time limit costs only itself and is named
        in :attr:`warnings`, as a figure is.
        """
        assert self.report is not None
        pictures: dict[str, dict[str, Image.Image]] = {}
        for name, entry in self.report["suites"].items():
            suite = suites.get(name)
            if suite is None:
                continue
            try:
                sample, corruptions = self._first_sample(suite)
                height, width = sample.image.shape[-2:]
                entry["frame_kept"] = describe_frames(
                    corruptions, int(height), int(width), suite.severities, suite.seed, sample.sample_id
                )
            except Exception as exc:  # noqa: BLE001 - a table of the report must never cost the report
                self.warnings.append(f"no frame table for suite {name}: {error_message(exc)}")
            pictures[name] = self._worst_images(suite, entry)
            if "r2bench" in entry:
                entry["worst_expressions"] = self._worst_expressions(suite, entry)
        return pictures

    def _describe_worst(self, suite: Suite, cell: CellRecord, row: str) -> tuple[dict[str, Any], Image.Image | None]:
        """The images (or expressions) of ``cell`` that lost most, re-evaluated in the project within
        the suite's time limit for one cell."""
        with self.runner.bounds(suite, f"the worst images of {row} in {cell.nodeid}"):
            return describe_worst(
                self.runner.bench.model(suite, cell.model),
                self.runner.bench.dataset(suite, cell.split),
                suite.corruption(cell.corruption, self.runner.registry),
                cell.severity,
                task=suite.task,
                metric=suite.metric,
                label=METRICS.get(suite.metric).label,
                seed=suite.seed,
                limit=suite.limit,
                row=row,
                gamma_r=cell.gamma_r,
            )

    def _worst_expressions(self, suite: Suite, entry: dict[str, Any]) -> dict[str, Any]:
        """For each model of a referring suite: in its worst cell that perturbs text (lowest γr), the
        samples whose score fell most, with their clean and perturbed expressions."""

        def text(records: list[CellRecord]) -> list[CellRecord]:
            return [r for r in records if modality(r.category) != "visual"]

        return {row: info for row, info, _ in self._worst_per_model(suite, entry, text, "worst expressions")}

    def _worst_images(self, suite: Suite, entry: dict[str, Any]) -> dict[str, Image.Image]:
        """For each model (row) of a reported suite: its worst cell's images that lost most."""
        worst: dict[str, Any] = {}
        pictures: dict[str, Image.Image] = {}
        for row, info, picture in self._worst_per_model(suite, entry, list, "worst images"):
            if picture is not None:
                kind = "worst-" + ("".join(c if c.isalnum() or c in "._-" else "-" for c in row).strip("-") or "model")
                info["figure"] = kind if kind not in pictures else f"{kind}-{len(pictures)}"
                pictures[info["figure"]] = picture
            worst[row] = info
        entry["worst_images"] = worst
        return pictures

    def _worst_per_model(
        self,
        suite: Suite,
        entry: dict[str, Any],
        candidates: Callable[[list[CellRecord]], list[CellRecord]],
        what: str,
    ) -> Iterator[tuple[str, dict[str, Any], Image.Image | None]]:
        """Each model's worst cell among ``candidates`` of its cells, described
        (:meth:`_describe_worst`, once per cell and model even when asked twice); a cell that
        cannot be described is a problem of the report, named with ``what``, never its failure."""
        for row, model_entry in entry["models"].items():
            cell = worst_cell(candidates([CellRecord.from_json(c) for c in model_entry["cells"]]))
            if cell is None:
                continue
            key = (row, cell.nodeid)
            try:
                if key not in self._described:
                    self._described[key] = self._describe_worst(suite, cell, row)
                info, picture = self._described[key]
            except Exception as exc:  # noqa: BLE001 - a table or figure must never cost the report
                self.warnings.append(f"no {what} for {suite.name} {row}: {error_message(exc)}")
                continue
            yield row, dict(info), picture
