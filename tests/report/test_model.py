"""The report's typed leaves: each made once from what produced it, read by attribute, written back key for key."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pytest_segrobust.core.statistics import Change
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.engine.suite_pictures import describe_frames
from pytest_segrobust.gate.verdict import GatedNumber, decide_paired
from pytest_segrobust.pictures.values import ImageLoss, WorstImages
from pytest_segrobust.report import (
    AggregateChange,
    FrameKept,
    ReleaseSummary,
    SuiteReport,
    WorstEntry,
    build_report,
    render_markdown,
    tables,
)
from pytest_segrobust.store import decisions
from pytest_segrobust.store.decisions import ModelOutcome, PairedCheck, RequirementCheck, RuleSummary
from tests.report.test_report import SCORES_A, cells


def same_json(value: Any, expected: Any) -> None:
    """Equal as the JSON report writes them: every key, in the same order, with the same value."""
    assert json.dumps(value) == json.dumps(expected)


def requirement(subject: str = "m aggregates", observed: float = 41.5) -> RequirementCheck:
    return RequirementCheck(
        subject, "mPC", "require.aggregates.mpc", 31, 40.0, True, observed, 40.5, 42.5, "pass", 40.9, 16
    )


def model_outcome() -> ModelOutcome:
    change = Change(-0.004, np.linspace(-0.01, 0.002, 50), 16)
    check = decide_paired(GatedNumber("rPC", 0.52, 0.524), change, 0.01, 0.95)
    return ModelOutcome("s.yaml::m::aggregates", "s", "m", "passed", (requirement(),), (check,), ("a note",), None, 2)


def outcome_json() -> dict[str, Any]:
    return model_outcome().to_json()


def test_a_models_outcome_is_read_back_from_its_json_as_it_was_and_writes_it_key_for_key() -> None:
    data = outcome_json()
    decision = ModelOutcome.from_json(data)
    assert decision == model_outcome() and decision.model == "m" and decision.status == "passed"
    assert list(data) == ["format", *(f.name for f in dataclasses.fields(ModelOutcome))]
    (check,) = decision.checks
    assert isinstance(check, PairedCheck) and check.metric == "rPC" and check.outcome in ("pass", "inconclusive")
    assert decision.requirements == (requirement(),)
    assert decision.requirements[0].subject == "m aggregates" and decision.notes == ("a note",)
    same_json(decision.to_json(), data)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.model = "other"  # type: ignore[misc]
    # The table reads the value's attributes.
    (row,) = tables.model_gates({"s": SuiteReport("s", release=ReleaseSummary((), (decision,), "bootstrap"))}).rows
    assert row[:3] == ("s", "m", "rPC") and row[3:5] == ("0.5200", "0.5240")


def test_a_producer_that_changes_its_fields_is_refused_by_name() -> None:
    data = outcome_json()
    with pytest.raises(ValueError, match=r"missing \['measured_here'\], unknown \['cluster'\]"):
        ModelOutcome.from_json({k: v for k, v in data.items() if k != "measured_here"} | {"cluster": 3})
    with pytest.raises(ValueError, match=r"a paired check has fields .*unknown \['units_per_image'\]"):
        ModelOutcome.from_json(data | {"checks": [data["checks"][0] | {"units_per_image": 7}]})
    with pytest.raises(ValueError, match=r"an aggregate change .*missing \['cells'\]"):
        AggregateChange.from_json({"model": "m", "number": "mPC", "change": 0.1, "low": 0.0, "high": 0.2})


def test_a_requirement_rows_worst_decision_is_the_requirement_check_itself() -> None:
    worst = requirement("s.yaml::m::fog::3", 39.0)
    row = RuleSummary("require.gamma_r", 12, "mPC", 40.0, True, {"fail": 1, "pass": 2}, worst, None)
    data = row.to_json()
    assert list(data) == ["rule", "line", "number", "threshold", "at_least", "outcome", "outcomes", "worst", "confirmable", "closest"]
    assert data["outcome"] == "fail"
    same_json(data["worst"], requirement("s.yaml::m::fog::3", 39.0).to_json())
    (shown,) = tables.release_criteria({"s": SuiteReport("s", release=ReleaseSummary((row,), (), "bootstrap"))}).rows
    assert shown[3] == "3 decisions; closest: s.yaml::m::fog::3" and shown[5] == "[40.50, 42.50]"


def test_aggregate_changes_come_from_the_gates_rows_and_write_them_back() -> None:
    rows = [
        {"model": "m", "number": "mPC", "change": -0.25, "low": -0.5, "high": 0.0, "cells": 6},
        {"model": "m @ night", "number": "mean γr (noise)", "change": 0.01, "low": -0.02, "high": 0.04, "cells": 2},
    ]
    report = build_report(cells("a", 80.0, SCORES_A), {}, aggregates={"s": rows})
    changes = report.suites["s"].aggregates
    assert changes is not None and all(isinstance(change, AggregateChange) for change in changes)
    assert changes[1].number == "mean γr (noise)" and changes[1].cells == 2
    same_json(report.suites["s"].to_json()["aggregates"], rows)
    assert tables.aggregate_changes(changes, 0.95).rows[0] == ("m", "mPC", "-0.25", "[-0.50, 0.00]", "6")


def test_the_frame_table_is_typed_from_the_measured_frames() -> None:
    frames = describe_frames([REGISTRY.get("rotate"), REGISTRY.get("translate")], 32, 48, [1, 3, 5], 0, "x")
    assert frames is not None
    kept = FrameKept.from_json(frames)
    assert kept.size == (32, 48) and kept.severities == (1, 3, 5) and list(kept.corruptions) == ["rotate", "translate"]
    assert len(kept.corruptions["rotate"].kept) == 3 and isinstance(kept.corruptions["rotate"].in_pixels, bool)
    same_json(kept.to_json(), frames)
    table = tables.frame_kept(kept)
    assert [row[0] for row in table.rows] == ["rotate", "translate"] and "48×32" in table.note


def worst_found(texts: bool) -> WorstImages:
    picture = torch.zeros(3, 2, 2, dtype=torch.uint8)
    classes = torch.zeros(2, 2, dtype=torch.int64)
    text = ("the red one", "teh red one") if texts else (None, None)
    loss = ImageLoss("img/3", 81.0, 12.5, 68.5, picture, picture, classes, classes, classes, None, *text)
    return WorstImages("gaussian_noise", 5, 0.25, 16, "mIoU", ("a", "b"), (loss,))


@pytest.mark.parametrize("texts", [False, True], ids=["images", "expressions"])
def test_worst_entries_are_made_once_from_the_measured_images_and_write_their_summary(texts: bool) -> None:
    found = worst_found(texts)
    entry = WorstEntry.of(found, "worst-a")
    assert entry.images[0].sample_id == "img/3" and entry.figure == "worst-a" and entry.considered == 16
    image = {"sample_id": "img/3", "clean": 81.0, "corrupted": 12.5, "drop": 68.5}
    if texts:
        image |= {"clean_text": "the red one", "corrupted_text": "teh red one"}
    expected = {"corruption": "gaussian_noise", "severity": 5, "gamma_r": 0.25, "considered": 16, "images": [image]}
    same_json(entry.to_json(), expected | {"figure": "worst-a"})
    empty = WorstImages("fog", 1, None, 4, "mIoU", ("a",), note="no pictures: none")
    same_json(
        WorstEntry.of(empty).to_json(),
        {
            "corruption": "fog",
            "severity": 1,
            "gamma_r": None,
            "considered": 4,
            "images": [],
            "note": "no pictures: none",
        },
    )
    report = build_report(cells("a", 80.0, SCORES_A), {}).with_suite("s", worst_images={"a": entry})
    same_json(report.to_json()["suites"]["s"]["worst_images"], {"a": expected | {"figure": "worst-a"}})
    markdown = render_markdown(report)
    said = ' | "the red one" | "teh red one"' if texts else ""
    assert f"| a | gaussian_noise s5 | 0.250 | img/3{said} | 81.00 | 12.50 | -68.50 |" in markdown


def _dataclass_fields(source: str) -> dict[str, list[str]]:
    """Each module-level ``@dataclass`` class of a module's source by name: its fields as written, in their order."""
    if "dataclass" not in source:
        return {}
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and any("dataclass" in ast.unparse(d) for d in node.decorator_list):
            found[node.name] = [
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and "ClassVar" not in ast.unparse(item.annotation)
            ]
    return found


def test_the_decisions_have_one_definition_that_no_other_dataclass_copies() -> None:
    # The gate, the release criteria and the report once each declared these values, and a field
    # the gate added (the resampling unit) had to be added to the report's copy by hand, or every
    # report failed to build. A dataclass elsewhere in the package with every field of one of them
    # is such a copy: read, import or extend the one in store/decisions.py instead.
    package = Path(decisions.__file__).parents[1]
    home = Path(decisions.__file__)
    originals = _dataclass_fields(home.read_text(encoding="utf-8"))
    assert {"RequirementCheck", "RuleSummary", "PairedCheck", "ModelOutcome"} <= set(originals)
    copies = [
        f"{path.relative_to(package)}::{name} has every field of {original}"
        for path in sorted(package.rglob("*.py"))
        if path != home
        for name, fields in _dataclass_fields(path.read_text(encoding="utf-8")).items()
        for original, wanted in originals.items()
        if set(wanted) <= set(fields)
    ]
    assert copies == []
