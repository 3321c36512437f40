"""What one item of a run produced, as it travels from the process that ran it to the controller.

A cell's :class:`Outcome` is its gated record, the baseline entries it asks to write, the
bootstrap's resamples of its headline score and how its model differs from the baseline's
(or the error that stopped it); a model's aggregates item's is its
:class:`~pytest_segrobust.store.decisions.ModelOutcome`. The xdist payload of an item and an entry of
a shard file are both :meth:`Outcome.to_json`; the controller reads them back with
:meth:`Outcome.from_json`, which refuses another format instead of half-reading it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_segrobust.core.files import relative
from pytest_segrobust.core.formats import check_format
from pytest_segrobust.core.wording import abbreviations
from pytest_segrobust.engine.runner import Measurement
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.store.decisions import ModelOutcome
from pytest_segrobust.store.records import CellRecord

# Version of Outcome.to_json; an outcome of another version is refused, never half-read.
OUTCOME_FORMAT = 1


@dataclass(frozen=True)
class PendingWrite:
    """A baseline cell to write at the end of the run, with the conditions it was measured under
    and the fingerprint of the model that produced it (``None`` where it could not be taken).

    Attributes:
        statistics: Per metric, the cell's packed per-image statistics (corrupted and clean) and
            their image count, for the statistics file of a suite with a statistical gate; empty otherwise.
        nodeid: The cell's node id, which the update's lines name it by (one can paste it).
    """

    path: str
    suite: str
    conditions: dict[str, Any]
    key: CellKey
    values: dict[str, float]
    replace_all: bool
    model_fingerprint: str | None = None
    statistics: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodeid: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PendingWrite:
        return cls(**(dict(data) | {"key": CellKey(**data["key"])}))


@dataclass(frozen=True)
class ModelChange:
    """A model whose fingerprint differs from the one its baseline was made with: shown, never gated."""

    baseline_file: str
    model: str
    recorded: str
    current: str

    def describe(self) -> str:
        shown = abbreviations((self.current, self.recorded), length=12, whole_up_to=12)
        return (
            f"model {self.model} differs from the one {self.baseline_file} was made with "
            f"(fingerprint {shown[self.current].removesuffix('…')}, recorded {shown[self.recorded].removesuffix('…')})"
        )


@dataclass(frozen=True)
class Outcome:
    """One item's result: a cell's gated record, a model's aggregates, or the error that stopped either.

    Attributes:
        nodeid: The item's node id.
        suite: The suite file's path (relative to the rootdir in a shard file).
        record: A cell's record, its status decided by the gate.
        model_gate: A model's aggregates item's outcome.
        error: Why the item has neither (what the report shows).
        pending: The baseline entries the cell asks to write at the end of the run.
        resampled: The headline score of each bootstrap resample (statistical gates).
        model_change: How the cell's model differs from the one its baseline was made with.
        measurements: What the item measured, where its run's backend keeps it for a later
            gate (a shard's, for ``segrobust merge``): a cell's own measurement, and those a
            model's aggregates item took of cells no item of its process ran.
    """

    nodeid: str
    suite: str | None = None
    record: CellRecord | None = None
    model_gate: ModelOutcome | None = None
    error: str | None = None
    pending: tuple[PendingWrite, ...] = ()
    resampled: dict[str, Any] | None = None
    model_change: ModelChange | None = None
    measurements: tuple[Measurement, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "format": OUTCOME_FORMAT,
            "nodeid": self.nodeid,
            "suite": self.suite,
            "record": None if self.record is None else self.record.to_json(),
            "model_gate": None if self.model_gate is None else self.model_gate.to_json(),
            "error": self.error,
            "pending": [p.to_json() for p in self.pending],
            "resampled": self.resampled,
            "model_change": None if self.model_change is None else asdict(self.model_change),
            "measurements": [m.to_json() for m in self.measurements],
        }

    @classmethod
    def from_json(cls, data: Any) -> Outcome:
        """Parse :meth:`to_json`'s output.

        Raises:
            ValueError: for another format, or a missing, unknown or mistyped field.
        """
        if not isinstance(data, dict):
            raise ValueError("an outcome must be a JSON object")
        check_format(data, OUTCOME_FORMAT, "outcome")
        known = {
            "format", "nodeid", "suite", "record", "model_gate", "error", "pending", "resampled", "model_change", "measurements",
        }
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"outcome with unknown fields {', '.join(unknown)}")
        try:
            outcome = cls(
                nodeid=str(data["nodeid"]),
                suite=data.get("suite"),
                record=None if data.get("record") is None else CellRecord.from_json(data["record"]),
                model_gate=None if data.get("model_gate") is None else ModelOutcome.from_json(data["model_gate"]),
                error=data.get("error"),
                pending=tuple(PendingWrite.from_json(p) for p in data.get("pending", [])),
                resampled=data.get("resampled"),
                model_change=None if data.get("model_change") is None else ModelChange(**data["model_change"]),
                measurements=tuple(Measurement.from_json(m) for m in data.get("measurements", [])),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed outcome: {type(exc).__name__}: {exc}") from None
        if sum(x is not None for x in (outcome.record, outcome.model_gate, outcome.error)) != 1:
            raise ValueError(f"outcome of {outcome.nodeid}: expected exactly one of record, model_gate and error")
        return outcome

    def moved(self, suite: Callable[[str], str]) -> Outcome:
        """The outcome with its paths (the suite file, the baseline files) mapped by ``suite``: a
        shard file keeps them relative to the rootdir, a merge makes them absolute again."""
        pending = tuple(replace(p, path=suite(p.path)) for p in self.pending)
        return replace(self, suite=None if self.suite is None else suite(self.suite), pending=pending)


def relative_to(root: Path) -> Callable[[str], str]:
    """A path mapping for :meth:`Outcome.moved`: absolute paths under ``root`` made relative."""
    return lambda path: relative(Path(path), root)


def under(root: Path) -> Callable[[str], str]:
    """A path mapping for :meth:`Outcome.moved`: relative paths taken under ``root``."""
    return lambda path: str(root / path)
