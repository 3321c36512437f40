"""What a run covered: the whole gate, or part of it, and why the other cells have no result.

A run that evaluated every cell of every suite writes the full report. Any other run that
evaluated something (a ``-k`` subset, ``--lf``, one suite file, a run stopped by ``-x`` or
interrupted) is partial: its report goes beside the full one, says so at its top and names
what it left out, and the full report stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from pytest_segrobust.core.formats import check_format
from pytest_segrobust.core.wording import plural
from pytest_segrobust.report.paths import report_file

# Version of RunCoverage.to_json; another version is refused, never half-read.
COVERAGE_FORMAT = 1
# How many node ids a markdown list shows before "and N more" (the JSON has them all).
SHOWN = 10


def partial_report_path(report_path: Path) -> Path:
    """Where a partial run writes its report: ``<report>-partial`` (``.md``, ``.json``, figures)."""
    return report_file(report_path, "-partial")


@dataclass(frozen=True)
class RunCoverage:
    """Which of the collected cells a run evaluated, and why it left the others out.

    Attributes:
        evaluated: Cells with a result.
        errors: Cells that failed with an error instead of a result (the report names each).
        not_run: Selected cells without a result or an error: node id -> why (``-x`` stopped
            the run, ``--sw``, an interrupt).
        deselected: Collected cells the run did not select (``-k``, ``-m``, ``--deselect``,
            ``--lf``, ``--sw``).
        selection: The options that selected cells, as typed (``-k rotate``, ``--lf``).
        narrowed_to: Command-line paths that collected less than the whole suites folder
            (``suites/demo.yaml``, a node id).
        collection_unknown: No process reported what it collected and deselected (every xdist
            worker died), so the run cannot be known to be whole.
        full_report: The full report's markdown file, which a partial run leaves as it was.
    """

    evaluated: int
    errors: int
    not_run: dict[str, str] = field(default_factory=dict)
    deselected: list[str] = field(default_factory=list)
    selection: list[str] = field(default_factory=list)
    narrowed_to: list[str] = field(default_factory=list)
    collection_unknown: bool = False
    full_report: str | None = None

    @property
    def partial(self) -> bool:
        """Whether some cell of the suites folder has neither a result nor an error."""
        return bool(self.not_run or self.deselected or self.narrowed_to or self.collection_unknown)

    @property
    def collected(self) -> int:
        return self.evaluated + self.errors + len(self.not_run) + len(self.deselected)

    def to_json(self) -> dict[str, Any]:
        """JSON-safe fields with the format version and ``partial``."""
        return {"format": COVERAGE_FORMAT, "partial": self.partial, **asdict(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunCoverage:
        """Parse :meth:`to_json`'s output.

        Raises:
            ValueError: for another format or an unknown field.
        """
        check_format(data, COVERAGE_FORMAT, "run coverage")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - {"format", "partial"})
        if unknown:
            raise ValueError(f"run coverage with unknown fields {', '.join(unknown)}")
        return cls(**{name: value for name, value in data.items() if name in known})


def headline(coverage: RunCoverage) -> str:
    """One sentence: what a partial run covers and where the full report is.

    A run narrowed to some suite files (or folders) that ran every cell it collected there is
    whole for them: it says so, and that it is partial only for the suites folder.
    """
    errors = f", {coverage.errors} of them with an error" if coverage.errors else ""
    full = f"; the full report, {coverage.full_report}, is left as it was" if coverage.full_report else ""
    ran = coverage.evaluated + coverage.errors
    if coverage.narrowed_to and ran == coverage.collected and not coverage.collection_unknown:
        where = ", ".join(coverage.narrowed_to)
        every = "its cell" if ran == 1 else f"all {plural(ran, 'cell')}"
        return f"Run of {where} only: this report covers {every}{errors}, not the rest of the suites folder{full}."
    covered = f"{ran} of the {plural(coverage.collected, 'cell')} it collected{errors}"
    narrowed = f" (collected from {', '.join(coverage.narrowed_to)} only)" if coverage.narrowed_to else ""
    return f"Partial run: this report covers {covered}{narrowed}{full}."


def left_out(coverage: RunCoverage) -> list[tuple[str, list[str]]]:
    """The groups of cells a run left out, each as (what happened to them, their node ids)."""
    groups: list[tuple[str, list[str]]] = []
    for reason in dict.fromkeys(coverage.not_run.values()):
        nodeids = [nodeid for nodeid, why in coverage.not_run.items() if why == reason]
        groups.append((f"{_cells(len(nodeids))} not run: {reason}", nodeids))
    if coverage.deselected:
        how = f" ({' '.join(coverage.selection)})" if coverage.selection else ""
        groups.append((f"{_cells(len(coverage.deselected))} deselected{how}", list(coverage.deselected)))
    if coverage.collection_unknown:
        groups.append(("which cells were deselected is unknown: no xdist worker reported its collection", []))
    return groups


def markdown_lines(coverage: RunCoverage | None, missing: Sequence[str] = ()) -> list[str]:
    """The top of the markdown report: the partial-run notice, then what was left out and why.

    Args:
        coverage: What the run covered; ``None`` where it is not known (a report built from
            cells alone), and then only the cells without a result (``missing``) are named.
        missing: Node ids of selected cells that produced neither a result nor an error.
    """
    if coverage is None:
        missing = list(missing)
        title = f"**{_cells(len(missing))} selected {_have(missing)} no result**:"
        return [title, "", *(f"- `{n}`" for n in missing), ""] if missing else []
    lines = [f"> **{headline(coverage)}**", ""] if coverage.partial else []
    for title, nodeids in left_out(coverage):
        lines += [f"**{title}**" + (":" if nodeids else ""), ""]
        if nodeids:
            lines += [*(f"- `{nodeid}`" for nodeid in nodeids[:SHOWN]), *_more(nodeids), ""]
    return lines


def terminal_lines(coverage: RunCoverage | None, missing: Sequence[str] = ()) -> list[str]:
    """The same, one line per group, for the terminal summary."""
    if coverage is None:
        missing = list(missing)
        return [f"{_cells(len(missing))} {_have(missing)} no result: {_few(missing)}"] if missing else []
    lines = [headline(coverage)] if coverage.partial else []
    return lines + [f"{title}: {_few(nodeids)}" if nodeids else title for title, nodeids in left_out(coverage)]


def _cells(count: int) -> str:
    return plural(count, "cell")


def _have(nodeids: list[str]) -> str:
    return "has" if len(nodeids) == 1 else "have"


def _few(nodeids: list[str]) -> str:
    return ", ".join(nodeids[:3]) + (", ..." if len(nodeids) > 3 else "")


def _more(nodeids: list[str]) -> list[str]:
    return [f"- and {len(nodeids) - SHOWN} more (all in the JSON report)"] if len(nodeids) > SHOWN else []
