"""What the run reads is what the user wrote: a suite that repeats a key, a report path with a
dot, a suite file or a baseline that is a symbolic link."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_segrobust.backends.shard_plan import ShardSpec
from pytest_segrobust.core.errors import SuiteError
from pytest_segrobust.core.files import WriteError, atomic_write_text
from pytest_segrobust.report import figures_folder
from pytest_segrobust.report.html import html_path
from pytest_segrobust.report.paths import report_base, report_file
from pytest_segrobust.suite.schema import declared_name, load_suite
from pytest_segrobust.suite.yaml_loader import DuplicateKeyError, load_yaml
from tests.plugin_project import ONE_CELL, SINGLE_PROCESS, run

SUITE_HEAD = """\
name: demo
dataset: {factory: segrobust_fakes:band_scenes}
models:
  - {name: m, factory: segrobust_fakes:red_binner}
corruptions: [gaussian_noise]
severities: [5]
"""

# Each a way a pasted block replaced what a reviewer approved, silently: (the text after the
# suite's head, the key repeated, its first line, its second).
REPEATED = {
    "require": ("require:\n  severities: {5: {gamma_r: 0.999}}\nrequire:\n  severities: {5: {gamma_r: 0.01}}\n", "require", 7, 9),
    "gate": (
        (
            "gate: {margin: {gamma_r: 0.001, score: 0.1}, confidence: 0.95}\n"
            "gate: {margin: {gamma_r: 0.5, score: 50}, confidence: 0.5}\n"
        ),
        "gate",
        7,
        8,
    ),
    "corruptions": ("corruptions: [rotate, contrast]\n", "corruptions", 5, 7),
    "name": ("name: other\n", "name", 1, 7),
    "nested": ("tolerance:\n  gamma_r: 0.01\n  score: 1.0\n  gamma_r: 0.5\n", "gamma_r", 8, 10),
}


@pytest.mark.parametrize("case", list(REPEATED))
def test_a_suite_that_repeats_a_key_is_refused_naming_the_file_and_both_lines(tmp_path: Path, case: str) -> None:
    tail, key, first, second = REPEATED[case]
    path = tmp_path / "demo.yaml"
    path.write_text(SUITE_HEAD + tail)
    with pytest.raises(SuiteError) as caught:
        load_suite(path, import_factories=False)
    message = str(caught.value)
    assert message.startswith(f"{path}: invalid YAML at line {second}")
    assert f"duplicate key '{key}' at lines {first} and {second}" in message


def test_a_key_repeated_in_a_flow_mapping_is_refused_instead_of_renaming_the_model(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text(SUITE_HEAD.replace("{name: m, factory:", "{name: m, name: n, factory:"))
    with pytest.raises(SuiteError, match=r"duplicate key 'name' at line 4, columns 6 and 15"):
        load_suite(path, import_factories=False)


def test_a_suite_name_written_twice_names_no_baseline_file(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text(SUITE_HEAD + "name: other\n")
    assert declared_name(path) is None  # unreadable: the suite's own load says why


def test_merge_keys_keep_their_meaning_and_two_merges_in_one_mapping_are_refused() -> None:
    text = "defaults: &d {gamma_r: 0.01, score: 1.0}\ntolerance:\n  <<: *d\n  score: 2.0\n"
    assert load_yaml(text)["tolerance"] == {"gamma_r": 0.01, "score": 2.0}  # the written key overrides the merged one
    with pytest.raises(DuplicateKeyError, match="duplicate key '<<' at lines 4 and 5"):
        load_yaml("a: &a {x: 1}\nb: &b {y: 1}\nc:\n  <<: *a\n  <<: *b\n")
    # An anchor merged into several mappings is not a repeat of its keys.
    reused = load_yaml("d: &d {a: 1}\ne: {<<: *d, b: 2}\ng: {<<: *d, b: 3}\nh: *d\n")
    assert reused == {"d": {"a": 1}, "e": {"a": 1, "b": 2}, "g": {"a": 1, "b": 3}, "h": {"a": 1}}


def test_keys_repeat_by_what_they_mean() -> None:
    with pytest.raises(DuplicateKeyError, match="duplicate key 'yes'"):
        load_yaml("true: 1\nyes: 2\n")  # one boolean key, spelt two ways
    assert load_yaml("1: a\n'1': b\n") == {1: "a", "1": "b"}  # a number and a string: two keys


# -- a report path with a dot ------------------------------------------------------------------------------


def test_the_report_path_is_a_name_not_a_stem() -> None:
    assert report_base(Path("out/run.1")) == Path("out/run.1")
    assert report_file(report_base(Path("out/run.1")), ".md") == Path("out/run.1.md")
    for written in ("out/run.json", "out/run.md", "out/run.HTML"):
        assert report_base(Path(written)) == Path("out/run")  # the report's own suffix names that report
    assert report_base(Path("out/run.v2.json")) == Path("out/run.v2")
    assert ShardSpec(2, 3).path(Path("out/run.1")) == Path("out/run.1-shard-2-of-3.json")
    assert html_path(Path("out/run.1")) == Path("out/run.1.html")
    assert figures_folder(Path("out/run.1")) == Path("out/run.1-figures")


@SINGLE_PROCESS
def test_two_report_paths_that_differ_after_a_dot_write_two_reports(project: pytest.Pytester, dist: list[str]) -> None:
    (project.path / "suites" / "bands.yaml").write_text(ONE_CELL)
    for name in ("run.1", "run.2", "run.json"):
        run(project, "--segrobust-update-baselines", "--segrobust-report", f"out/{name}", *dist).assert_outcomes(passed=2)
    written = sorted(path.name for path in (project.path / "out").iterdir())
    assert written == ["run.1.json", "run.1.md", "run.2.json", "run.2.md", "run.json", "run.md"]
    assert json.loads((project.path / "out" / "run.1.json").read_text())["verdict"]["passed"]


# -- symbolic links ---------------------------------------------------------------------------------------


@SINGLE_PROCESS
def test_a_suite_linked_into_the_suites_folder_is_run_and_a_linked_baseline_stays_a_link(
    project: pytest.Pytester, dist: list[str]
) -> None:
    shared = project.path / "shared"
    shared.mkdir()
    (shared / "bands.yaml").write_text(ONE_CELL)
    (project.path / "suites" / "bands.yaml").unlink()
    (project.path / "suites" / "bands.yaml").symlink_to(shared / "bands.yaml")
    run(project, "--segrobust-update-baselines", *dist).assert_outcomes(passed=2)  # the gate did not vanish

    # The baseline moved to the shared folder and linked back: an update writes through the link.
    link = project.path / "baselines" / "bands.json"
    link.rename(shared / "bands.json")
    link.symlink_to(shared / "bands.json")
    (shared / "bands.yaml").write_text(ONE_CELL.replace("red_binner}", "red_binner, kwargs: {smoothing: 3}}"))
    result = run(project, "--segrobust-update-baselines", *dist)
    result.assert_outcomes(passed=2)
    assert link.is_symlink() and link.resolve() == shared / "bands.json"
    assert json.loads((shared / "bands.json").read_text()) == json.loads(link.read_text())
    result.stdout.fnmatch_lines(["baselines/bands.json: 2 cells changed*"])
    assert sorted(path.name for path in shared.iterdir()) == ["bands.json", "bands.yaml"]  # no temporary left


def test_a_write_through_a_link_replaces_its_target_and_says_where_it_could_not(tmp_path: Path) -> None:
    target = tmp_path / "shared" / "file.json"
    target.parent.mkdir()
    target.write_text("old")
    chain = tmp_path / "middle.json"
    chain.symlink_to(target)
    link = tmp_path / "file.json"
    link.symlink_to(chain)
    atomic_write_text(link, "new")
    assert link.is_symlink() and chain.is_symlink() and target.read_text() == "new"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "gone" / "file.json")
    with pytest.raises(WriteError, match=r"dangling.json \(a symbolic link to .*gone/file.json\): No such file"):
        atomic_write_text(dangling, "new")
    assert not (tmp_path / "gone").exists()  # a link's missing folder is not made
