"""Replay files: frozen perturbed expressions, so a suite can gate on LLM-made perturbations.

A replay file is JSON::

    {
      "version": 1,
      "perturbations": {
        "misspelling": {
          "low":  {"000123/0/0": "the dottted circle left of the sqaure", ...},
          "3":    {...},
          "high": {...}
        },
        "grammar_error": {...}
      }
    }

Levels are ``"1"`` .. ``"5"`` or ``"low"`` / ``"medium"`` / ``"high"`` (= 1 / 3 / 5); each maps
sample ids (the referring task's ``image/ref/sentence``) to the perturbed expression, a
non-empty string. :func:`load_replay` checks all of it and names the file and the field at
fault. A :class:`ReplayPerturbation` returns the stored text of a sample and raises
:class:`MissingReplayError` for a sample or level the file lacks: it never falls back to the
clean text or to a rule-based perturbation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.wording import plural
from pytest_segrobust.corruptions.base import MAX_SEVERITY
from pytest_segrobust.text.base import LEVELS, TextPerturbation

REPLAY_VERSION = 1
"""The format version :func:`load_replay` reads and :meth:`ReplayFile.to_json` writes."""


class ReplayFileError(SegRobustError):
    """A replay file is malformed: the message names the file and the field."""


class MissingReplayError(ReplayFileError, KeyError):
    """A replay file has no text for a sample (or no such level) that a run asked for."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def _level_of(key: str) -> int | None:
    if key in LEVELS:
        return LEVELS[key]
    if key.isdigit() and str(int(key)) == key and 1 <= int(key) <= MAX_SEVERITY:
        return int(key)
    return None


def _field(*parts: str) -> str:
    return "".join(f"[{part!r}]" if i else part for i, part in enumerate(parts))


@dataclass(frozen=True)
class ReplayFile:
    """Perturbed texts by perturbation name, severity (1..5) and sample id.

    Attributes:
        source: Where it was read from, for messages (``"<memory>"`` when built in code).
        texts: ``texts[name][severity][sample_id]`` is the perturbed expression.
    """

    source: str
    texts: Mapping[str, Mapping[int, Mapping[str, str]]] = field(repr=False)

    @classmethod
    def from_json(cls, data: Any, source: str = "<memory>") -> ReplayFile:
        """Check and read parsed JSON.

        Raises:
            ReplayFileError: naming ``source`` and the field: a missing or other version,
                a non-object where an object belongs, an unknown level, two keys for one
                level (``"low"`` and ``"1"``), a text that is not a string or is blank.
        """
        def fail(where: str, what: str) -> ReplayFileError:
            return ReplayFileError(f"replay file {source}: {where}: {what}")

        if not isinstance(data, dict):
            raise fail("top level", f"expected a JSON object, got {type(data).__name__}")
        if "version" not in data:
            raise fail("version", f"missing; expected {REPLAY_VERSION}")
        if data["version"] != REPLAY_VERSION or isinstance(data["version"], bool):
            raise fail("version", f"expected {REPLAY_VERSION}, got {data['version']!r}")
        unknown = sorted(set(data) - {"version", "perturbations"})
        if unknown:
            raise fail(", ".join(unknown), "unknown field; expected only 'version' and 'perturbations'")
        perturbations = data.get("perturbations")
        if not isinstance(perturbations, dict):
            raise fail("perturbations", f"expected an object of perturbation name -> levels, got {type(perturbations).__name__}")
        texts: dict[str, Mapping[int, Mapping[str, str]]] = {}
        for name, levels in perturbations.items():
            where = _field("perturbations", name)
            if not isinstance(levels, dict):
                raise fail(where, f"expected an object of level -> samples, got {type(levels).__name__}")
            by_severity: dict[int, Mapping[str, str]] = {}
            spelled: dict[int, str] = {}
            for level, samples in levels.items():
                here = _field("perturbations", name, level)
                severity = _level_of(level)
                if severity is None:
                    raise fail(here, f"unknown level {level!r}; expected 1..{MAX_SEVERITY} or {', '.join(LEVELS)}")
                if severity in spelled:
                    raise fail(here, f"level {level!r} is severity {severity}, already given as {spelled[severity]!r}")
                spelled[severity] = level
                if not isinstance(samples, dict):
                    raise fail(here, f"expected an object of sample id -> text, got {type(samples).__name__}")
                for sample_id, text in samples.items():
                    if not isinstance(text, str):
                        raise fail(_field("perturbations", name, level, sample_id),
                                   f"expected a string, got {type(text).__name__}")
                    if not text.strip():
                        raise fail(_field("perturbations", name, level, sample_id), "the text is empty")
                by_severity[severity] = MappingProxyType(dict(samples))
            texts[name] = MappingProxyType(by_severity)
        return cls(source, MappingProxyType(texts))

    def to_json(self) -> dict[str, Any]:
        """The JSON object :meth:`from_json` reads (levels written as ``"1"`` .. ``"5"``)."""
        return {
            "version": REPLAY_VERSION,
            "perturbations": {
                name: {str(severity): dict(samples) for severity, samples in sorted(levels.items())}
                for name, levels in self.texts.items()
            },
        }

    def names(self) -> list[str]:
        """The perturbations the file holds."""
        return list(self.texts)

    def perturbation(self, name: str, registered_as: str | None = None) -> ReplayPerturbation:
        """A perturbation replaying the file's ``name`` texts, called ``registered_as`` (default ``name``).

        Raises:
            MissingReplayError: when the file has no perturbation ``name``.
        """
        if name not in self.texts:
            raise MissingReplayError(
                f"replay file {self.source}: no perturbation {name!r}; it has {', '.join(self.texts) or 'none'}"
            )
        return ReplayPerturbation(registered_as or name, self, name)


def load_replay(path: str | Path) -> ReplayFile:
    """Read and check a replay file (see the module docstring for the format).

    Raises:
        ReplayFileError: naming the file and the field; also for an unreadable file, bad JSON
            (with its line and column) and a key given twice in one object.
    """
    source = str(path)
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReplayFileError(f"replay file {source}: cannot read it: {exc}") from exc

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        if repeated:
            raise ReplayFileError(f"replay file {source}: key {repeated[0]!r} appears twice in one object")
        return dict(pairs)

    try:
        data = json.loads(raw, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        raise ReplayFileError(f"replay file {source}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    return ReplayFile.from_json(data, source)


class ReplayPerturbation(TextPerturbation):
    """Replays one perturbation of a :class:`ReplayFile`; the seed and the input text are not used.

    Severity 0 returns the input unchanged; severity ``s`` returns the stored text of each
    sample at ``s``. :meth:`perturb` raises :class:`MissingReplayError` for a level or a
    sample the file lacks.
    """

    def __init__(self, name: str, replay: ReplayFile, stored_as: str) -> None:
        super().__init__(name, f"replayed from {replay.source} ({stored_as!r})")
        self.replay = replay
        self.stored_as = stored_as

    def _perturb_one(self, text: str, sample_id: str, severity: int, seed: int) -> str:
        if severity == 0:
            return text
        levels = self.replay.texts[self.stored_as]
        if severity not in levels:
            have = ", ".join(str(s) for s in sorted(levels)) or "none"
            raise MissingReplayError(
                f"replay file {self.replay.source}: perturbation {self.stored_as!r} has no level {severity} "
                f"(it has {have}); needed for sample {sample_id!r}"
            )
        samples = levels[severity]
        if sample_id not in samples:
            raise MissingReplayError(
                f"replay file {self.replay.source}: {_field('perturbations', self.stored_as, str(severity))} "
                f"has no text for sample {sample_id!r} ({plural(len(samples), 'sample')} there)"
            )
        return samples[sample_id]
