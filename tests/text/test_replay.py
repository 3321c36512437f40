"""Replay files: round trip, loud errors naming file and field, no silent fallback."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_segrobust.text import (
    REPLAY_VERSION,
    MissingReplayError,
    ReplayFile,
    ReplayFileError,
    TextPerturbationRegistry,
    load_replay,
)

GOOD: dict[str, Any] = {
    "version": REPLAY_VERSION,
    "perturbations": {
        "misspelling": {
            "low": {"img1/0/0": "the dottted circle", "img2/0/0": "a strped square"},
            "3": {"img1/0/0": "teh dottted cirle"},
            "high": {"img1/0/0": "th dottd crcle", "img2/0/0": "a strpd sqare"},
        },
        "grammar_error": {"medium": {"img1/0/0": "the dotting circles"}},
    },
}


def _write(tmp_path: Path, content: Any) -> Path:
    path = tmp_path / "replay.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def test_a_replay_returns_the_stored_texts_per_level(tmp_path: Path) -> None:
    replay = load_replay(_write(tmp_path, GOOD))
    assert replay.names() == ["misspelling", "grammar_error"]
    misspelling = replay.perturbation("misspelling")
    assert misspelling.family == "text" and misspelling.name == "misspelling"
    clean = ["the dotted circle", "a striped square"]
    ids = ["img1/0/0", "img2/0/0"]
    assert misspelling.perturb(clean, ids, 0, 0) == clean
    assert misspelling.perturb(clean, ids, 1, 0) == ["the dottted circle", "a strped square"]
    assert misspelling.perturb(clean, ids, 5, 123) == ["th dottd crcle", "a strpd sqare"]
    assert misspelling.perturb(clean[::-1], ids[::-1], 5, 0) == ["a strpd sqare", "th dottd crcle"]
    assert replay.perturbation("grammar_error").perturb(["x"], ["img1/0/0"], 3, 0) == ["the dotting circles"]


def test_to_json_round_trips(tmp_path: Path) -> None:
    replay = load_replay(_write(tmp_path, GOOD))
    again = ReplayFile.from_json(json.loads(json.dumps(replay.to_json())))
    assert again.texts == replay.texts
    assert sorted(replay.to_json()["perturbations"]["misspelling"]) == ["1", "3", "5"]


def test_a_missing_sample_or_level_is_an_error_never_a_fallback(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    misspelling = load_replay(path).perturbation("misspelling")
    with pytest.raises(MissingReplayError, match=rf"{path}: .*\['misspelling'\]\['3'\] has no text for sample 'img2/0/0'"):
        misspelling.perturb(["the dotted circle", "a striped square"], ["img1/0/0", "img2/0/0"], 3, 0)
    with pytest.raises(MissingReplayError, match=r"perturbation 'misspelling' has no level 2 \(it has 1, 3, 5\); needed for sample 'img1/0/0'"):
        misspelling.perturb(["the dotted circle"], ["img1/0/0"], 2, 0)
    with pytest.raises(MissingReplayError, match=r"no perturbation 'character_missing'; it has misspelling, grammar_error"):
        load_replay(path).perturbation("character_missing")


def test_a_replay_registers_under_its_own_name(tmp_path: Path) -> None:
    registry = TextPerturbationRegistry.builtin()
    replayed = registry.register(load_replay(_write(tmp_path, GOOD)).perturbation("misspelling", "misspelling_llm"))
    assert registry.get("misspelling_llm") is replayed
    assert replayed.perturb(["x"], ["img1/0/0"], 1, 0) == ["the dottted circle"]


MS = r"perturbations\['misspelling'\]"


def _with(level_key: str, samples: Any) -> dict[str, Any]:
    return {"version": REPLAY_VERSION, "perturbations": {"misspelling": {level_key: samples}}}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", r"not valid JSON: .* at line 1 column 2"),
        ("[]", r"top level: expected a JSON object, got list"),
        ({"perturbations": {}}, r"version: missing; expected 1"),
        ({"version": 2, "perturbations": {}}, r"version: expected 1, got 2"),
        ({"version": True, "perturbations": {}}, r"version: expected 1, got True"),
        ({"version": 1}, r"perturbations: expected an object of perturbation name -> levels, got NoneType"),
        ({"version": 1, "perturbations": {}, "extra": 1}, r"extra: unknown field"),
        ({"version": 1, "perturbations": {"misspelling": []}}, r"perturbations\['misspelling'\]: expected an object of level"),
        (_with("extreme", {}), r"perturbations\['misspelling'\]\['extreme'\]: unknown level 'extreme'; expected 1..5 or low, medium, high"),
        (_with("0", {}), MS + r"\['0'\]: unknown level '0'"),
        (_with("6", {}), MS + r"\['6'\]: unknown level '6'"),
        (_with("01", {}), MS + r"\['01'\]: unknown level '01'"),
        (_with("low", ["a"]), MS + r"\['low'\]: expected an object of sample id -> text, got list"),
        (_with("low", {"img/0/0": 3}), r"perturbations\['misspelling'\]\['low'\]\['img/0/0'\]: expected a string, got int"),
        (_with("low", {"img/0/0": None}), MS + r"\['low'\]\['img/0/0'\]: expected a string, got NoneType"),
        (_with("low", {"img/0/0": "  "}), MS + r"\['low'\]\['img/0/0'\]: the text is empty"),
        ({"version": 1, "perturbations": {"misspelling": {"low": {}, "1": {}}}},
         MS + r"\['1'\]: level '1' is severity 1, already given as 'low'"),
        ('{"version": 1, "version": 1, "perturbations": {}}', r"key 'version' appears twice in one object"),
    ],
)
def test_a_bad_file_names_the_file_and_the_field(tmp_path: Path, content: Any, message: str) -> None:
    path = _write(tmp_path, content)
    with pytest.raises(ReplayFileError, match=rf"replay file {re.escape(str(path))}: {message}"):
        load_replay(path)


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ReplayFileError, match=r"replay file .*absent\.json: cannot read it"):
        load_replay(tmp_path / "absent.json")
