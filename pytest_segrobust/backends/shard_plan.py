"""Past one machine: split a run's cells into N shards, run each anywhere, merge the results.

``pytest --segrobust --segrobust-shard K/N`` runs shard K of N: a deterministic part of the
cells, chosen by :func:`assign_cells`. It gates its cells as any run does, but instead of the
report and the baselines it writes one :class:`ShardFile`, ``<report>-shard-K-of-N.json``, with
what it measured of each cell (:class:`~pytest_segrobust.engine.runner.Measurement`) and a digest
of its content. ``segrobust merge`` reads the N files, checks that they are the N parts of one
run (:func:`check_shards`), gates every cell again from its measurement, and writes the report
(and baselines) that one run would have written (:mod:`pytest_segrobust.backends.shards`).

How cells are assigned: cells are grouped by (suite, model, split), so that a shard builds a
model and computes its clean result once per group it gets. A group costs its number of
cells. Groups larger than the ideal share (``ceil(cells / N)``) are cut into near-equal
pieces of consecutive cells (in suite order), so that one big model cannot leave the other
shards idle. The pieces go to shards longest first (ties by name); each to the least loaded
shard, the lowest-numbered among equals. Only the cells and the suites' definitions decide:
the same on every machine, whatever order pytest collected in.

This module imports nothing heavy: the plugin reads ``--segrobust-shard`` with it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.files import relative
from pytest_segrobust.core.formats import check_format
from pytest_segrobust.core.wording import plural

# Version of ShardFile.to_json; a file of another version is refused, never half-read.
SHARD_FORMAT = 3
SHARD_FLAG = "--segrobust-shard"

T = TypeVar("T")


class ShardError(SegRobustError):
    """Shard files that cannot be merged; the message names the files and what is wrong."""


class ShardDigestError(ValueError):
    """A shard file whose content is not the one its digest was taken of."""


@dataclass(frozen=True, order=True)
class ShardSpec:
    """Shard ``index`` of ``count`` (both from 1): ``--segrobust-shard 2/4``.

    ``source`` says where ``--segrobust-shard auto`` read it (``from SLURM_ARRAY_TASK_ID=3,
    ...``, :mod:`~pytest_segrobust.backends.shard_environment`); it is no part of the shard's
    identity, nor of its file.
    """

    index: int
    count: int
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise ValueError(f"shard {self.index}/{self.count}: expected 1 <= K <= N")

    @classmethod
    def parse(cls, text: str) -> ShardSpec:
        """``K/N`` with ``1 <= K <= N``; an ``argparse`` type.

        Raises:
            argparse.ArgumentTypeError: for anything else.
        """
        index, slash, count = text.strip().partition("/")
        try:
            if not slash:
                raise ValueError
            return cls(int(index), int(count))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N (e.g. 2/4), got {text!r}") from None

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def described(self) -> str:
        """``2/4``, with where it was read from: ``2/4 (from CI_NODE_INDEX=2, CI_NODE_TOTAL=4, ...)``."""
        return f"{self} ({self.source})" if self.source else str(self)

    def path(self, report_path: Path) -> Path:
        """Where the shard's file goes: beside the report, ``<report>-shard-K-of-N.json``."""
        return report_path.with_name(f"{report_path.name}-shard-{self.index}-of-{self.count}.json")  # the name: out/run.1 is a report

    def to_json(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}


# -- which cells a shard runs --------------------------------------------------------------------


@dataclass(frozen=True)
class ShardCell:
    """A cell as the assignment sees it.

    Attributes:
        nodeid: The cell's node id.
        group: (suite, model, split): the cells that share a model and a clean result.
        rank: The cell's place in its suite's list of cells (clean first): the order in which
            a group too large for one shard is cut, whatever order pytest collected in.
    """

    nodeid: str
    group: tuple[str, str, str]
    rank: int


def assign_cells(cells: Iterable[ShardCell], count: int) -> dict[str, int]:
    """Which shard (1..count) runs each cell: a pure function of the cells, not of their order.

    Groups cost one unit per cell; a group above the ideal share is cut into near-equal
    pieces; pieces go longest first to the least loaded (then lowest-numbered) shard.

    Args:
        cells: Every cell of the run, in any order (node ids unique).
        count: The number of shards, N >= 1.

    Returns:
        Node id -> shard index, for every cell.
    """
    if count < 1:
        raise ValueError(f"expected at least one shard, got {count}")
    groups: dict[tuple[str, str, str], list[ShardCell]] = {}
    for cell in cells:
        groups.setdefault(cell.group, []).append(cell)
    total = sum(len(members) for members in groups.values())
    share = max(1, math.ceil(total / count))
    pieces: list[tuple[tuple[str, str, str], int, list[str]]] = []
    for group, members in groups.items():
        ordered = [c.nodeid for c in sorted(members, key=lambda c: (c.rank, c.nodeid))]
        pieces.extend((group, part, nodeids) for part, nodeids in enumerate(cut(ordered, share)))
    pieces.sort(key=lambda piece: (-len(piece[2]), piece[0], piece[1]))
    loads = [0] * count
    assignment: dict[str, int] = {}
    for _, _, nodeids in pieces:
        shard = min(range(count), key=lambda index: (loads[index], index))
        loads[shard] += len(nodeids)
        assignment.update({nodeid: shard + 1 for nodeid in nodeids})
    return assignment


def cut(members: Sequence[T], share: int) -> list[list[T]]:
    """``members`` in the fewest runs of consecutive members of at most ``share`` each, near-equal.

    The first runs take one member more when they cannot be equal: 7 in shares of 3 is 3, 2, 2.
    How a group of cells too large for one shard (or one xdist worker) is divided.

    Args:
        members: A group's members, in the order to keep.
        share: The most members a run may have, at least 1.
    """
    if not members:
        return []
    parts = math.ceil(len(members) / share)
    size, extra = divmod(len(members), parts)
    runs: list[list[T]] = []
    start = 0
    for part in range(parts):
        end = start + size + (1 if part < extra else 0)
        runs.append(list(members[start:end]))
        start = end
    return runs


@dataclass(frozen=True)
class ShardPlan:
    """A shard's part of the run: the run's cells (every shard's, in collection order) and its own.

    Crosses from an xdist worker, which collects, to the controller, which writes the shard file.
    """

    cells: list[str]
    assigned: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"format": SHARD_FORMAT, "cells": list(self.cells), "assigned": list(self.assigned)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShardPlan:
        """Parse :meth:`to_json`'s output.

        Raises:
            ValueError: for another format.
        """
        check_format(data, SHARD_FORMAT, "shard plan")
        return cls(list(data["cells"]), list(data["assigned"]))


# -- what the files were when a shard started ---------------------------------------------------


def digest(path: Path) -> str:
    """SHA-256 of a file's bytes (``sha256:<hex>``)."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def content_digest(data: Mapping[str, Any]) -> str:
    """SHA-256 of a JSON value's canonical text (keys sorted, no spaces): ``sha256:<hex>``."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def digests(paths: Iterable[Path], root: Path) -> dict[str, str]:
    """Each readable file's :func:`digest`, by its path relative to ``root`` (POSIX; absolute outside it)."""
    found: dict[str, str] = {}
    for path in sorted(set(paths)):
        try:
            found[relative(path, root)] = digest(path)
        except OSError:
            continue  # gone or unreadable: a suite's collection or a cell's gate says so
    return found


# -- the file a shard writes ----------------------------------------------------------------------


@dataclass(frozen=True)
class ShardCoverage:
    """What a shard selected and left out, as :class:`RunCoverage` needs it once merged.

    Attributes:
        expected: The shard's cells that were still selected after ``-k``, ``--lf`` and the like.
        deselected: Cells deselected by the user's selection (never those of other shards).
        not_run: Selected cells without a result or an error: node id -> why.
        selection: The options that selected cells, as typed.
        narrowed_to: Command-line paths that collected less than the whole suites folder.
        collection_known: Some process reported what it collected and deselected.
    """

    expected: list[str] = field(default_factory=list)
    deselected: list[str] = field(default_factory=list)
    not_run: dict[str, str] = field(default_factory=dict)
    selection: list[str] = field(default_factory=list)
    narrowed_to: list[str] = field(default_factory=list)
    collection_known: bool = True


@dataclass(frozen=True)
class ShardFile:
    """Everything one shard learned, self-contained, for :command:`segrobust merge`.

    Attributes:
        spec: Which shard this is.
        tool_version: The pytest-segrobust that ran it.
        update_baselines: It ran with ``--segrobust-update-baselines``.
        prune: It ran with ``--segrobust-prune``.
        report_html: It ran with ``--segrobust-report-html``.
        report: The report path it was run with (relative to the rootdir where inside it).
        suite_digests: Every suite file's digest as read at the start, by relative path.
        baseline_digests: Every baseline file's digest as read at the start, by relative path.
        cells: The cells of the whole run (every shard's), in collection order.
        assigned: This shard's cells.
        results: The :class:`~pytest_segrobust.gate.outcomes.Outcome` of each evaluated cell and model's aggregates
            item, as its xdist payload carries it, with paths relative to the rootdir, and with
            the measurements the merge gates again. Its statuses are the shard's word, which the
            merge shows and never takes. In the file, each model's clean result is kept once
            (``clean_results``, by digest) and its cells' measurements name it.
        errors: Cells that failed with an error instead of a result: node id -> message.
        coverage: What the shard selected and left out.
        cache_counts: Clean results computed and read from the cache.
        pictures: The report's pictures of the shard's cells
            (:class:`~pytest_segrobust.pictures.values.RunPictures` as JSON), so the merge draws them
            without building a model.
        figures: ``False``: it ran with ``--segrobust-figures=none`` and made no gallery or
            worst image on purpose (its pictures hold its suites' frame tables alone). A file
            without the field is from before it: its shard made the pictures it has.
    """

    spec: ShardSpec
    tool_version: str
    update_baselines: bool
    prune: bool
    report_html: bool
    report: str
    suite_digests: dict[str, str]
    baseline_digests: dict[str, str]
    cells: list[str]
    assigned: list[str]
    results: list[dict[str, Any]]
    errors: dict[str, str]
    coverage: ShardCoverage
    cache_counts: dict[str, int] = field(default_factory=dict)
    pictures: dict[str, Any] | None = None
    figures: bool = True

    def to_json(self) -> dict[str, Any]:
        """The file's content, with ``digest``: :func:`content_digest` of the rest."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["spec"] = self.spec.to_json()
        data["coverage"] = {f.name: getattr(self.coverage, f.name) for f in fields(self.coverage)}
        data["results"], data["clean_results"] = _share_clean_results(self.results)
        content = {"format": SHARD_FORMAT, **data}
        return {**content, "digest": content_digest(content)}

    @classmethod
    def from_json(cls, data: Any) -> ShardFile:
        """Parse :meth:`to_json`'s output, records and measurements included.

        Raises:
            ValueError: for another format, content that is not its digest's (edited or
                damaged since its shard wrote it), a missing, unknown or mistyped field.
        """
        from pytest_segrobust.gate.outcomes import Outcome

        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        if data.get("format") != SHARD_FORMAT:
            raise ValueError(f"shard file of format {data.get('format')!r}, this segrobust reads format {SHARD_FORMAT}")
        content = {name: value for name, value in data.items() if name != "digest"}
        if data.get("digest") != content_digest(content):
            raise ShardDigestError(
                f"its content is not the one its shard wrote (digest {str(data.get('digest'))[:19]}, content "
                f"{content_digest(content)[:19]}): it was edited or damaged since; run its shard again"
            )
        data = dict(content)
        data["results"] = _restore_clean_results(data.get("results"), data.pop("clean_results", None))
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - {"format"})
        optional = ("cache_counts", "pictures", "figures")
        missing = sorted(f.name for f in fields(cls) if f.name not in data and f.name not in optional)
        if unknown or missing:
            raise ValueError(
                "; ".join(
                    part
                    for part in (
                        f"unknown fields {', '.join(unknown)}" if unknown else "",
                        f"missing fields {', '.join(missing)}" if missing else "",
                    )
                    if part
                )
            )
        if not isinstance(data.get("figures", True), bool):
            raise ValueError(f"field 'figures': expected true or false, got {data['figures']!r}")
        try:
            values = {name: value for name, value in data.items() if name in known}
            values["spec"] = ShardSpec(int(data["spec"]["index"]), int(data["spec"]["count"]))
            values["coverage"] = ShardCoverage(**data["coverage"])
            for entry in data["results"]:
                Outcome.from_json(entry)
            shard = cls(**values)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed field: {type(exc).__name__}: {exc}") from None
        for name, kind in (("cells", list), ("assigned", list), ("results", list), ("errors", dict)):
            if not isinstance(getattr(shard, name), kind):
                raise ValueError(f"field {name!r}: expected a JSON {'array' if kind is list else 'object'}")
        return shard

    @classmethod
    def read(cls, path: Path) -> ShardFile:
        """Read and parse a shard file.

        Raises:
            ShardError: naming the file, for an unreadable, half-written or foreign file.
        """
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ShardError(f"{path}: cannot read the shard file: {exc.strerror or exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ShardError(
                f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
                "the file is truncated or half-written: run its shard again"
            ) from None
        try:
            return cls.from_json(data)
        except ShardDigestError as exc:
            raise ShardError(f"{path}: {exc}") from None
        except ValueError as exc:
            raise ShardError(f"{path}: not a segrobust shard file this version can read: {exc}") from None


def _share_clean_results(results: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The results with each measurement's clean result replaced by its digest, and the clean
    results by digest: a model's clean result, the same for all its cells, is kept once."""
    shared: dict[str, Any] = {}
    entries = []
    for entry in results:
        measurements = []
        for measurement in entry.get("measurements", []):
            name = content_digest(measurement["clean"])
            shared[name] = measurement["clean"]
            measurements.append({**measurement, "clean": name})
        entries.append({**entry, "measurements": measurements})
    return entries, shared


def _restore_clean_results(results: Any, shared: Any) -> Any:
    """:func:`_share_clean_results` undone.

    Raises:
        ValueError: for a measurement naming a clean result the file does not have.
    """
    if not isinstance(results, list) or not isinstance(shared, dict):
        raise ValueError("fields 'results' and 'clean_results': expected a JSON array and a JSON object")
    restored = []
    for entry in results:
        if not isinstance(entry, dict):
            restored.append(entry)  # Outcome.from_json names what is wrong with it
            continue
        measurements = []
        for measurement in entry.get("measurements", []):
            if isinstance(measurement, dict) and isinstance(measurement.get("clean"), str):
                if measurement["clean"] not in shared:
                    raise ValueError(f"a measurement of {entry.get('nodeid')} names a clean result the file has not")
                measurement = {**measurement, "clean": shared[measurement["clean"]]}
            measurements.append(measurement)
        restored.append({**entry, "measurements": measurements})
    return restored


# -- what a merge checks -------------------------------------------------------------------------


def check_shards(shards: Sequence[tuple[Path, ShardFile]], tool_version: str) -> list[tuple[Path, ShardFile]]:
    """That the files are the N shards of one run, made by this tool from the same files.

    Returns:
        The shards in order, 1 to N.

    Raises:
        ShardError: naming the files: no files, different N, duplicate or missing shards,
            another tool version, suites or baselines that differ, another mode or other cells.
    """
    if not shards:
        raise ShardError("no shard files given")
    ordered = sorted(shards, key=lambda pair: pair[1].spec)
    named = [f"{path} (shard {shard.spec})" for path, shard in ordered]
    if len({shard.spec.count for _, shard in ordered}) > 1:
        raise ShardError(f"the shards were run with different numbers of shards N: {', '.join(named)}")
    count = ordered[0][1].spec.count
    by_index: dict[int, list[str]] = {}
    for path, shard in ordered:
        by_index.setdefault(shard.spec.index, []).append(str(path))
    duplicates = {index: paths for index, paths in by_index.items() if len(paths) > 1}
    if duplicates:
        raise ShardError(
            "; ".join(
                f"shard {index}/{count} given {len(paths)} times: {', '.join(paths)}" for index, paths in duplicates.items()
            )
        )
    absent = [f"{index}/{count}" for index in range(1, count + 1) if index not in by_index]
    if absent:
        raise ShardError(f"shard{'s' if len(absent) > 1 else ''} {', '.join(absent)} missing: got {', '.join(named)}")
    if any(shard.tool_version != tool_version for _, shard in ordered):
        made = ", ".join(f"{name} by segrobust {shard.tool_version}" for name, (_, shard) in zip(named, ordered))
        raise ShardError(f"shards made by another version of segrobust than this one ({tool_version}): {made}")
    first = ordered[0][1]
    for label, attribute in (("suite file", "suite_digests"), ("baseline file", "baseline_digests")):
        for name, (_, shard) in zip(named[1:], ordered[1:]):
            _check_same_files(label, getattr(first, attribute), getattr(shard, attribute), named[0], name)
    for name, (_, shard) in zip(named[1:], ordered[1:]):
        modes = [
            flag
            for flag, attribute in (("--segrobust-update-baselines", "update_baselines"), ("--segrobust-prune", "prune"))
            if getattr(shard, attribute) != getattr(first, attribute)
        ]
        if modes:
            raise ShardError(f"{named[0]} and {name} were not both run with {' and '.join(modes)}")
        if shard.cells != first.cells:
            raise ShardError(
                f"{named[0]} and {name} collected different cells ({len(first.cells)} and {len(shard.cells)}): "
                "run every shard with the same paths, -k and -m"
            )
    runner: dict[str, str] = {}
    for name, (_, shard) in zip(named, ordered):
        for nodeid in shard.assigned:
            if nodeid in runner:
                raise ShardError(f"cell {nodeid} was run by both {runner[nodeid]} and {name}")
            runner[nodeid] = name
    unassigned = [nodeid for nodeid in first.cells if nodeid not in runner]
    if unassigned:
        were = "was" if len(unassigned) == 1 else "were"
        raise ShardError(f"{plural(len(unassigned), 'cell')} {were} run by no shard, e.g. {unassigned[0]}")
    return ordered


def _check_same_files(label: str, reference: Mapping[str, str], other: Mapping[str, str], first: str, second: str) -> None:
    for name in sorted(set(reference) | set(other)):
        if reference.get(name) != other.get(name):
            raise ShardError(
                f"{label} {name} differs between {first} and {second} "
                f"({_state(reference.get(name))} and {_state(other.get(name))}): it changed between "
                "the shards' runs; run every shard from the same checkout"
            )


def check_local_files(shard: ShardFile, path: Path, suites: Mapping[str, str], baselines: Mapping[str, str]) -> None:
    """That the suites and baselines here are those the shards read (the report and the
    baselines written are built from them).

    Raises:
        ShardError: naming the first file that differs.
    """
    for label, theirs, ours in (
        ("suite file", shard.suite_digests, suites),
        ("baseline file", shard.baseline_digests, baselines),
    ):
        for name in sorted(set(theirs) | set(ours)):
            if theirs.get(name) != ours.get(name):
                raise ShardError(
                    f"{label} {name} here is not the one the shards read ({_state(ours.get(name))} here, "
                    f"{_state(theirs.get(name))} in {path}): merge in the checkout the shards ran from"
                )


def _state(value: str | None) -> str:
    return "absent" if value is None else value[:19]
