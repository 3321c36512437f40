"""The controller's report of a run: the cells' outcomes turned into the report's data, the
pictures added, and the files written.

The report's numbers come from the outcomes alone (:func:`pytest_segrobust.report.build_report`);
its decisions (each statistical gate's policy and family, each suite's release criteria) from the
gate, asked here (:func:`gate_summary`, :func:`release_summaries`) and handed to the report as
values, so that the report never calls back into the gate; its pictures (each suite's gallery and frame table, each model's worst images) from what the
processes that measured the cells made of them (:class:`~pytest_segrobust.pictures.values.RunPictures`,
:mod:`pytest_segrobust.engine.report_pictures`). Nothing here builds a model or reads a dataset: a merge of
shards writes the same report on a machine without the models. A picture that is missing is a
warning of the report, never a failed run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.gate.evidence import aggregate_changes
from pytest_segrobust.gate.release import cell_level, family_size
from pytest_segrobust.pictures.values import GalleryTiles, RunPictures, WorstImages
from pytest_segrobust.report import (
    FrameKept,
    GateSummary,
    ReleaseSummary,
    Report,
    ReportIncomplete,
    SuiteReport,
    WorstEntry,
    build_report,
    pictures_left_out_by,
    shown_path,
    write_report,
)
from pytest_segrobust.report.coverage import RunCoverage
from pytest_segrobust.report.environment import run_environment
from pytest_segrobust.report.html import write_html
from pytest_segrobust.report.tables import row_name, worst_cell
from pytest_segrobust.store.decisions import ModelOutcome, RequirementCheck
from pytest_segrobust.store.records import CellRecord, Status
from pytest_segrobust.suite.requirements import summarize, unmet_lines
from pytest_segrobust.suite.schema import Suite
from pytest_segrobust.tasks import get_task
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
        self.report: Report | None = None
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
    ) -> Report | None:
        """The report, or ``None`` (named in :attr:`problems`) where it cannot be built."""
        try:
            outcomes = [o.to_json() for o in model_outcomes]
            names = dict.fromkeys([*(r.suite for r in records), *(o["suite"] for o in outcomes)])
            gated = {name: suite for name in names if (suite := suites.get(name)) is not None and suite.gate is not None}
            aggregates = self._aggregates(records, gated, errors, resampled)
            report = build_report(
                list(records),
                dict(suites),
                list(coverage.not_run),
                self.rootpath,
                errors=dict(errors),
                model_outcomes=outcomes,
                gates={name: gate_summary(suite) for name, suite in gated.items()},
                releases=release_summaries(records, suites, outcomes, self.rootpath),
                aggregates=aggregates,
                run=coverage,
            )
        except Exception as exc:  # noqa: BLE001 - the baselines must still be written
            self.problems.append(f"the report could not be built: {type(exc).__name__}: {exc}")
            return None
        self.report = report
        return report

    def _aggregates(
        self,
        records: Sequence[CellRecord],
        gated: Mapping[str, Suite],
        errors: Mapping[str, str],
        resampled: Mapping[str, dict[str, Any]],
    ) -> dict[str, list[dict[str, Any]]]:
        """Each statistically gated suite's aggregate changes, over its cells that were compared
        with their baselines: a cell with an error (a baseline cell without a gated number, say)
        has no change to add. A suite whose changes cannot be computed is left out of the
        report's aggregates, and :attr:`problems` says why; the rest of the report stands."""
        aggregates = {}
        for name, suite in gated.items():  # in suite order, not in the order cells finished:
            # the means' rounding and the categories' order must not depend on scheduling.
            assert suite.gate is not None
            cells = [r for r in records if r.suite == name and r.nodeid not in errors and r.status != Status.ERROR]
            try:
                aggregates[name] = aggregate_changes(cells, dict(resampled), suite.gate.confidence)
            except Exception as exc:  # noqa: BLE001 - one table must not cost the report
                self.problems.append(f"suite {name}: the aggregate changes could not be computed: {type(exc).__name__}: {exc}")
        return aggregates

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
        parts = dict(self.report.suites)
        for name, entry in self.report.suites.items():
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
                    entry = dataclasses.replace(entry, frame_kept=FrameKept.from_json(made.frame_kept))
            if figures:  # the worst images and expressions are pictures measured: left out otherwise
                worst_images, worst[name] = self._worst_images(suite, entry, pictures)
                entry = dataclasses.replace(entry, worst_images=worst_images)
                if entry.r2bench is not None:
                    expressions = self._worst_per_model(suite, entry, _perturbs_text, pictures, "worst expressions")
                    entry = dataclasses.replace(
                        entry, worst_expressions={row: WorstEntry.of(found) for row, found in expressions}
                    )
            parts[name] = entry
        report = dataclasses.replace(
            self.report,
            suites=parts,
            environment=run_environment(self.rootpath, device, self.started),
            warnings=tuple(self.warnings),
        )
        self.report = report
        shards_without = list(dict.fromkeys(pictures.left_out.values()))
        try:
            written = write_report(
                report,
                base,
                galleries,
                worst,
                wall_seconds=lambda: time.time() - self.started,
                figures=figures,
                left_out=pictures_left_out_by(shards_without) if shards_without else None,
            )
        except ReportIncomplete as exc:
            self.written.extend(exc.written)
            self.problems.extend(exc.problems)
            if exc.report is not None:
                self.report = exc.report
        else:
            self.written.extend(written.files)
            self.report = written.report
        self.warnings = list(self.report.warnings)
        if html:  # after the figures, which it embeds
            try:
                self.written.append(write_html(self.report, base))
            except Exception as exc:  # noqa: BLE001 - the report's other files are already written
                self.problems.append(
                    str(exc)
                    if isinstance(exc, SegRobustError)
                    else f"HTML report not written: {type(exc).__name__}: {exc}"
                )

    def _worst_images(
        self, suite: Suite, entry: SuiteReport, pictures: RunPictures
    ) -> tuple[dict[str, WorstEntry], dict[str, WorstImages]]:
        """For each model (row) of a reported suite: its worst cell's images that lost most (the
        report's ``worst_images`` entry), and the pictures of those that have any, by figure kind."""
        worst: dict[str, WorstEntry] = {}
        figures: dict[str, WorstImages] = {}
        for row, found in self._worst_per_model(suite, entry, list, pictures, "worst images"):
            figure = None
            if found.images:
                kind = "worst-" + ("".join(c if c.isalnum() or c in "._-" else "-" for c in row).strip("-") or "model")
                figure = kind if kind not in figures else f"{kind}-{len(figures)}"
                figures[figure] = found
            worst[row] = WorstEntry.of(found, figure)
        return worst, figures

    def _worst_per_model(
        self,
        suite: Suite,
        entry: SuiteReport,
        candidates: Callable[[list[CellRecord]], list[CellRecord]],
        pictures: RunPictures,
        what: str,
    ) -> Iterator[tuple[str, WorstImages]]:
        """Each model's worst cell among ``candidates`` of its cells, with the images its process
        sent; a cell without them is a warning of the report, named with ``what``, never its failure."""
        for row, model in entry.models.items():
            cell = worst_cell(candidates(list(model.cells)))
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


def gate_summary(suite: Suite) -> GateSummary:
    """The statistical gate of ``suite`` as its report shows it: the policy, the size of the
    family of gated numbers and the level of each (which the gate decides)."""
    policy = suite.gate
    assert policy is not None
    return GateSummary(
        margin_gamma_r=policy.margin.gamma_r,
        margin_score=policy.margin.score,
        confidence=policy.confidence,
        multiplicity=policy.multiplicity,
        numbers=family_size(suite),
        level=cell_level(suite),
        inconclusive=policy.inconclusive,
        resamples=policy.resamples,
        unit=get_task(suite.task).resampling_unit,
    )


def release_summaries(
    records: Sequence[CellRecord], suites: Mapping[str, Suite], outcomes: Sequence[Mapping[str, Any]], root: Path
) -> dict[str, ReleaseSummary]:
    """Each suite's release criteria as decided, by suite name: every requirement summarised over
    the cells and models it was decided for, and each model's aggregates item. A suite that
    states no requirement and decided none has no entry.

    Args:
        records: Every cell evaluated.
        suites: The suites by name.
        outcomes: Each model's aggregates item decided (``ModelOutcome.to_json()``), in report order.
        root: The project's root: the unmet requirements name the suite file relative to it.
    """
    summaries = {}
    for name in dict.fromkeys([*(r.suite for r in records), *(o["suite"] for o in outcomes)]):
        suite = suites.get(name)
        mine = [dict(o) for o in outcomes if o["suite"] == name]
        cells = [r for r in records if r.suite == name]
        checks = [RequirementCheck.from_json(c) for r in cells for c in r.requirements]
        checks += [RequirementCheck.from_json(c) for o in mine for c in o["requirements"]]
        if not checks and not mine and (suite is None or suite.requirements is None):
            continue
        # The terminal's lines read the cells as the report's rows hold them (model, then split).
        by_row = [r for row in dict.fromkeys(row_name(r) for r in cells) for r in cells if row_name(r) == row]
        unmet = [RequirementCheck.from_json(c) for r in by_row for c in r.requirements]
        unmet += [RequirementCheck.from_json(c) for o in mine for c in o["requirements"]]
        statistical = suite is not None and suite.gate is not None
        summaries[name] = ReleaseSummary(
            requirements=tuple(summarize(checks)),
            models=tuple(ModelOutcome.from_json(o) for o in mine),
            basis="bootstrap" if statistical else "point",
            unmet=tuple(unmet_lines(unmet, shown_path(suite.path, root) if suite else "")),
        )
    return summaries


# Why a picture is missing when the process that measured its cell sent none (it crashed or was stopped).
_NOT_SENT = "the process that measured it sent no pictures (it stopped before the end of the run)"


def _perturbs_text(records: list[CellRecord]) -> list[CellRecord]:
    return [r for r in records if modality(r.category) != "visual"]
