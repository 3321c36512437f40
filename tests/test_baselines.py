from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_segrobust import __version__
from pytest_segrobust.core.errors import BaselineError
from pytest_segrobust.store.baselines import (
    BaselineFile,
    BaselineUpdate,
    CellChange,
    CellKey,
    Conditions,
    Provenance,
    prune_baseline,
    read_baseline,
    round_value,
    unused_entries,
    write_baseline,
)

CLEAN = CellKey("demo", "m", "clean", 0)
NOISE3 = CellKey("demo", "m", "gaussian_noise", 3)
ROTATE1 = CellKey("demo", "m", "rotate", 1)
CONDITIONS = Conditions(
    task="semantic",
    metric="miou",
    preset="coco-p",
    seed=0,
    limit=None,
    dataset="bands-8",
    severity_tables={"gaussian_noise": ("std=0.08",) * 5, "rotate": ("degrees=20",) * 5},
)


def test_write_then_lookup_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "b" / "demo.json"
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 90.0}), (NOISE3, {"score": 60.0, "gamma_r": 2 / 3})], False)
    stored = BaselineFile(path)
    assert stored.lookup(CLEAN, CONDITIONS) == {"score": 90.0}
    assert stored.lookup(NOISE3, CONDITIONS) == {"score": 60.0, "gamma_r": 0.666667}  # 6 significant digits
    assert stored.lookup(ROTATE1, CONDITIONS) is None
    assert sorted(p.name for p in path.parent.iterdir()) == ["demo.json"]  # no temporary left behind
    assert json.loads(path.read_text())["conditions"] == CONDITIONS.to_json()


def test_partial_write_keeps_other_cells(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 90.0}), (NOISE3, {"score": 60.0})], False)
    write_baseline(path, "demo", CONDITIONS, [(NOISE3, {"score": 61.0})], False)
    assert read_baseline(path).models == {"m": {"clean": {"score": 90.0}, "gaussian_noise": {"3": {"score": 61.0}}}}


def test_a_write_under_other_conditions_replaces_what_they_invalidate_when_it_gives_it_all(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    cells = [(CLEAN, {"score": 90.0}), (NOISE3, {"score": 60.0}), (ROTATE1, {"score": 70.0})]
    write_baseline(path, "demo", CONDITIONS, cells, False)
    # A new noise table invalidates the stored noise cells only: a write of them keeps the rest.
    tables = dict(CONDITIONS.severity_tables) | {"gaussian_noise": ("std=0.1",) * 5}
    update = write_baseline(path, "demo", replace(CONDITIONS, severity_tables=tables), [(NOISE3, {"score": 59.0})], False)
    assert read_baseline(path).models == {
        "m": {"clean": {"score": 90.0}, "gaussian_noise": {"3": {"score": 59.0}}, "rotate": {"1": {"score": 70.0}}}
    }
    assert [(c.old, c.new) for c in update.changes] == [({"score": 60.0}, {"score": 59.0})]  # changed, not new
    # A new seed invalidates every stored cell: an update of the whole suite rewrites them all.
    suite = [CLEAN, NOISE3, ROTATE1]
    write_baseline(path, "demo", replace(CONDITIONS, seed=1), [(k, {"score": 1.0}) for k in suite], False, keep_only=suite)
    stored = read_baseline(path)
    assert stored.conditions.seed == 1 and len(numbers_of(stored.models)) == 3


@pytest.mark.parametrize("replace_all", [False, True], ids=["plain", "replace-all"])  # the gate's, for a changed seed
def test_a_partial_write_under_other_conditions_refuses_to_discard_the_other_cells(tmp_path: Path, replace_all: bool) -> None:
    path = tmp_path / "demo.json"
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 90.0}), (NOISE3, {"score": 60.0}), (ROTATE1, {"score": 70.0})], False)
    before = path.read_text()
    with pytest.raises(BaselineError) as error:
        write_baseline(path, "demo", replace(CONDITIONS, seed=7), [(ROTATE1, {"score": 71.0})], replace_all)
    assert re.search(
        rf"{re.escape(str(path))}: this update writes 1 cell of suite demo under other conditions than the file's "
        r"\(seed: baseline 0, this run 7\) and would discard 2 stored cells it did not measure "
        r"\(m::clean, m::gaussian_noise::3\); update every cell of the suite at once \(without -k\): "
        r"pytest --segrobust --segrobust-update-baselines$",
        str(error.value),
    )
    # A changed severity table: a write of other cells would discard that corruption's.
    tables = dict(CONDITIONS.severity_tables) | {"gaussian_noise": ("std=0.1",) * 5}
    with pytest.raises(BaselineError, match=r"\(severity_tables.gaussian_noise: severity 1 was .*\(m::gaussian_noise::3\)"):
        write_baseline(path, "demo", replace(CONDITIONS, severity_tables=tables), [(CLEAN, {"score": 91.0})], replace_all)
    # An update of the whole suite that could not measure a cell (its result was NaN) refuses too.
    suite = [CLEAN, NOISE3, ROTATE1]
    with pytest.raises(BaselineError, match=r"would discard 1 stored cell it did not measure \(m::rotate::1\)"):
        write_baseline(path, "demo", replace(CONDITIONS, seed=7), [(CLEAN, {"score": 1.0}), (NOISE3, {"score": 1.0})], replace_all, keep_only=suite)
    assert path.read_text() == before


def test_a_whole_update_under_other_conditions_removes_the_entries_the_suite_no_longer_has(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 90.0}), (NOISE3, {"score": 60.0}), (ROTATE1, {"score": 70.0})], False)
    update = write_baseline(path, "demo", replace(CONDITIONS, seed=7), [(CLEAN, {"score": 1.0})], False, keep_only=[CLEAN])
    assert update.removed == ("m::gaussian_noise::3", "m::rotate::1")  # named in the summary, never silent
    assert read_baseline(path).models == {"m": {"clean": {"score": 1.0}}}


def numbers_of(tree: dict) -> list[float]:
    return [n for value in tree.values() for n in (numbers_of(value) if isinstance(value, dict) else [value])]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seed": 1}, "seed: baseline 0, this run 1"),
        ({"metric": "map", "task": "instance"}, "task: baseline 'semantic', this run 'instance'; metric: baseline 'miou'"),
        ({"limit": 4}, "limit: baseline None, this run 4"),
        ({"dataset": "bands-9"}, "dataset: baseline 'bands-8', this run 'bands-9'"),
        ({"preset": "imagenet-c"}, "preset: baseline 'coco-p', this run 'imagenet-c'"),
    ],
)
def test_other_conditions_are_an_error_naming_the_field(tmp_path: Path, change: dict, message: str) -> None:
    path = tmp_path / "demo.json"
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 90.0})], False)
    with pytest.raises(BaselineError, match="recorded under other conditions") as error:
        BaselineFile(path).lookup(CLEAN, replace(CONDITIONS, **change))
    assert message in str(error.value) and "--segrobust-update-baselines" in str(error.value)


def test_a_changed_severity_table_fails_only_that_corruptions_cells(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 90.0}), (NOISE3, {"score": 60.0}), (ROTATE1, {"score": 1.0})], False)
    tables = dict(CONDITIONS.severity_tables) | {"gaussian_noise": ("std=0.08", "std=0.12", "std=0.2", "std=0.26", "std=0.38")}
    now = replace(CONDITIONS, severity_tables=tables)
    stored = BaselineFile(path)
    assert stored.lookup(CLEAN, now) == {"score": 90.0}
    assert stored.lookup(ROTATE1, now) == {"score": 1.0}
    with pytest.raises(BaselineError, match=r"severity_tables.gaussian_noise: severity 2 was 'std=0.08', this run 'std=0.12'"):
        stored.lookup(NOISE3, now)


def test_broken_file_is_an_error_that_names_it(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text("{ not json")
    with pytest.raises(BaselineError, match=rf"{path}: broken baseline file .*--segrobust-update-baselines"):
        BaselineFile(path).lookup(CLEAN, CONDITIONS)
    path.write_text('{"models": {}}')
    with pytest.raises(BaselineError, match="baseline of format None, expected 2"):
        read_baseline(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 200_000 + "]" * 200_000, "broken baseline file (RecursionError"),
        ('{"format": 2, "models": {"m": {"clean": {"score": ' + "9" * 5000 + "}}}}", "broken baseline file (ValueError"),
    ],
    ids=["nested-200000-deep", "5000-digit-integer"],
)
def test_json_that_python_cannot_parse_is_a_broken_file_naming_it(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "demo.json"
    path.write_text(text)
    with pytest.raises(BaselineError) as error:
        read_baseline(path)
    assert str(error.value).startswith(f"{path}: {message}") and "--segrobust-update-baselines" in str(error.value)


def valid_document() -> dict:
    return {
        "format": 2,
        "suite": "demo",
        "conditions": CONDITIONS.to_json(),
        "models": {"m": {"clean": {"score": 90.0}, "gaussian_noise": {"3": {"score": 60.0, "gamma_r": 0.66}}}},
    }


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(format=1), "format 1, expected 2 (format 1 recorded no conditions"),
        (lambda d: d["models"]["m"]["clean"].update(score="91.2"), "models.m.clean.score: expected a number, got '91.2'"),
        (lambda d: d["models"]["m"]["clean"].update(score=True), "models.m.clean.score: expected a number, got True"),
        (lambda d: d["models"]["m"]["gaussian_noise"]["3"].update(gamma_r=math.nan), "models.m.gaussian_noise.3.gamma_r is nan"),
        (lambda d: d["models"]["m"]["clean"].update(score=math.inf), "models.m.clean.score is inf"),
        (lambda d: d["models"].update(m=[]), "models.m: expected a mapping of corruptions"),
        (lambda d: d["models"]["m"].update(gaussian_noise=[1]), "models.m.gaussian_noise: expected a mapping of severities"),
        (lambda d: d["models"]["m"]["gaussian_noise"].update({"7": {"score": 1.0}}), "expected severities '1'..'5', got '7'"),
        (lambda d: d["models"]["m"]["gaussian_noise"].update({"¹": {"score": 1.0}}), "expected severities '1'..'5', got '¹'"),
        (lambda d: d["models"]["m"]["clean"].update(score=10**400), "models.m.clean.score is an integer too large"),
        (lambda d: d["models"]["m"].update(clean={}), "models.m.clean: expected a mapping with at least 'score'"),
        (lambda d: d["conditions"].update(seed="0"), "conditions.seed: expected an int, got '0'"),
        (lambda d: d.pop("conditions"), "'conditions' must be a mapping, got None"),
    ],
)
def test_a_wrongly_shaped_file_is_an_error_naming_the_entry(tmp_path: Path, edit, message: str) -> None:
    path = tmp_path / "demo.json"
    document = valid_document()
    edit(document)
    path.write_text(json.dumps(document))  # json writes NaN and Infinity, as a hand edit might
    with pytest.raises(BaselineError) as error:
        read_baseline(path)
    assert message in str(error.value) and str(path) in str(error.value)
    assert "--segrobust-update-baselines" in str(error.value)


def test_replace_all_rewrites_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text("{ not json")
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 1.0})], replace_all=True)
    assert json.loads(path.read_text())["models"] == {"m": {"clean": {"score": 1.0}}}


def test_a_baseline_never_stores_nan(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    with pytest.raises(ValueError, match="refusing to store non-finite values"):
        write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": math.nan})], False)
    assert not path.exists()


# -- lifecycle: rounding, provenance, what an update changed, unused entries --------------------

NOISE1 = CellKey("demo", "m", "gaussian_noise", 1)
SUITE_CELLS = [CLEAN, NOISE1, NOISE3]  # the suite now: model m, gaussian_noise at 1 and 3, no rotate


@pytest.mark.parametrize(
    ("value", "stored"),
    [(92.52521605349922, 92.5252), (0.6637718729, 0.663772), (1234567.8, 1234570.0), (0.0001234567, 0.000123457), (0.0, 0.0)],
)
def test_values_are_stored_to_six_significant_digits(value: float, stored: float) -> None:
    assert round_value(value) == stored


def test_a_file_records_the_tool_version_and_the_fingerprint_of_each_model(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    other = CellKey("demo", "n", "clean", 0)
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 90.0}), (other, {"score": 80.0})], False, fingerprints={"m": "aa", "n": "bb"})
    document = json.loads(path.read_text())
    assert document["made_with"] == {"tool_version": __version__, "models": {"m": "aa", "n": "bb"}}
    # A partial write records the model it wrote and keeps the others' fingerprints.
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 91.0})], False, fingerprints={"m": "cc"}, tool_version="9.9")
    assert read_baseline(path).provenance == Provenance("9.9", {"m": "cc", "n": "bb"})
    assert BaselineFile(path).fingerprint("n") == "bb" and BaselineFile(path).fingerprint("z") is None


def test_a_file_without_made_with_stays_valid(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text(json.dumps(valid_document()))  # as the committed baselines: no made_with block
    assert read_baseline(path).provenance == Provenance()
    assert BaselineFile(path).lookup(NOISE3, CONDITIONS) == {"score": 60.0, "gamma_r": 0.66}


@pytest.mark.parametrize(
    ("provenance", "message"),
    [
        ([], "'made_with' must be a mapping"),
        ({"tool_version": 1}, "made_with.tool_version: expected a string, got 1"),
        ({"models": {"m": 3}}, "made_with.models: expected a fingerprint (string) by model"),
    ],
)
def test_a_wrongly_shaped_provenance_is_an_error_naming_it(tmp_path: Path, provenance, message: str) -> None:
    path = tmp_path / "demo.json"
    path.write_text(json.dumps(valid_document() | {"made_with": provenance}))
    with pytest.raises(BaselineError, match=re.escape(message)):
        read_baseline(path)


def test_a_write_says_what_changed_per_cell(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text(json.dumps(valid_document() | {"models": {"m": {"clean": {"score": 90.00000001}, "gaussian_noise": {"3": {"score": 60.0, "gamma_r": 0.66}}}}}))
    observed = [
        (CLEAN, {"score": 90.0000001}),  # equal once rounded: unchanged
        (NOISE3, {"score": 58.25, "gamma_r": 0.64722, "gamma_a": 0.5}),
        (NOISE1, {"score": 70.0, "gamma_r": 0.77777777, "gamma_a": 0.8}),
    ]
    update = write_baseline(path, "demo", CONDITIONS, observed, False)
    assert [(c.key, c.old, c.changed) for c in update.changes] == [
        (CLEAN, {"score": 90.00000001}, False),
        (NOISE3, {"score": 60.0, "gamma_r": 0.66}, True),
        (NOISE1, None, True),
    ]
    assert update.summary("baselines/demo.json") == [
        "baselines/demo.json: 1 cell changed, 1 new, 1 unchanged",
        "  m::gaussian_noise::3: score 60 -> 58.25, gamma_r 0.66 -> 0.64722",
        "  m::gaussian_noise::1: new (score 70, gamma_r 0.777778)",
    ]


def test_a_change_of_a_further_metric_is_shown_by_name() -> None:
    change = CellChange(NOISE3, {"score": 60.0, "boundary_iou.score": 40.0}, {"score": 60.0, "boundary_iou.score": 38.5})
    assert change.describe() == "m::gaussian_noise::3: boundary_iou.score 40 -> 38.5"


def write_stale_file(path: Path) -> None:
    """A baseline written when the suite still had model old, corruption rotate and noise at 5."""
    cells = [
        (CLEAN, {"score": 90.0}),
        (NOISE1, {"score": 80.0}),
        (NOISE3, {"score": 60.0}),
        (CellKey("demo", "m", "gaussian_noise", 5), {"score": 40.0}),
        (ROTATE1, {"score": 70.0}),
        (CellKey("demo", "old", "clean", 0), {"score": 50.0}),
    ]
    write_baseline(path, "demo", CONDITIONS, cells, False, fingerprints={"m": "aa", "old": "bb"})


def test_unused_entries_are_named_at_the_highest_level_that_goes(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    write_stale_file(path)
    assert unused_entries(read_baseline(path), SUITE_CELLS) == ["m::gaussian_noise::5", "m::rotate", "old"]
    assert unused_entries(read_baseline(path), [CLEAN, NOISE1, NOISE3, ROTATE1, CellKey("demo", "old", "clean", 0)]) == [
        "m::gaussian_noise::5"
    ]
    assert unused_entries(None, SUITE_CELLS) == []


def test_unused_entries_of_a_suite_by_split(tmp_path: Path) -> None:
    path = tmp_path / "shift.json"
    conditions = replace(CONDITIONS, splits=("day", "night", "fog"))
    keys = [CellKey("demo", "m", "clean", 0, split) for split in ("day", "night", "fog")]
    write_baseline(path, "demo", conditions, [(key, {"score": 1.0}) for key in keys] + [(replace(NOISE3, split="day"), {"score": 1.0})], False)
    suite = [CellKey("demo", "m", "clean", 0, split) for split in ("day", "night")]
    assert unused_entries(read_baseline(path), suite) == ["m::day::gaussian_noise", "m::fog"]
    # A suite without splits against a file by split: other conditions, reported per cell, not here.
    assert unused_entries(read_baseline(path), SUITE_CELLS) == []


def test_prune_removes_unused_entries_and_keeps_everything_else_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    write_stale_file(path)
    before = json.loads(path.read_text())
    update = prune_baseline(path, SUITE_CELLS)
    assert update.removed == ("m::gaussian_noise::5", "m::rotate", "old") and update.changes == ()
    after = json.loads(path.read_text())
    assert after["models"] == {"m": {"clean": {"score": 90.0}, "gaussian_noise": {"1": {"score": 80.0}, "3": {"score": 60.0}}}}
    assert after["made_with"] == before["made_with"] | {"models": {"m": "aa"}}
    assert list(after["conditions"]["severity_tables"]) == ["gaussian_noise"]  # the table of rotate went with it
    assert update.summary("b/demo.json") == ["b/demo.json: removed 3 unused entries: m::gaussian_noise::5, m::rotate, old"]
    assert BaselineUpdate(path, removed=("old",)).summary("b/demo.json") == ["b/demo.json: removed 1 unused entry: old"]
    # Nothing left to remove: nothing is written (a write would replace the file).
    inode = path.stat().st_ino
    assert prune_baseline(path, SUITE_CELLS).removed == ()
    assert path.stat().st_ino == inode


def test_a_write_of_the_whole_suite_keeps_exactly_its_cells(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    write_stale_file(path)
    cells = [(CLEAN, {"score": 91.0}), (NOISE1, {"score": 81.0}), (NOISE3, {"score": 61.0})]
    update = write_baseline(path, "demo", CONDITIONS, cells, False, keep_only=SUITE_CELLS, fingerprints={"m": "cc"})
    assert update.removed == ("m::gaussian_noise::5", "m::rotate", "old")
    stored = read_baseline(path)
    assert stored.models == {"m": {"clean": {"score": 91.0}, "gaussian_noise": {"1": {"score": 81.0}, "3": {"score": 61.0}}}}
    assert stored.provenance.models == {"m": "cc"} and list(stored.conditions.severity_tables) == ["gaussian_noise"]
    # Without keep_only (a -k update) the other entries stay.
    write_stale_file(path)
    assert write_baseline(path, "demo", CONDITIONS, cells[:1], False).removed == ()
    assert unused_entries(read_baseline(path), SUITE_CELLS) == ["m::gaussian_noise::5", "m::rotate", "old"]
