"""Past one machine: ``--segrobust-shard K/N`` runs a deterministic part of the cells and writes a
shard file; ``segrobust merge`` turns the N files into the report and baselines of one run."""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_segrobust import cli
from pytest_segrobust.backends.shard_plan import ShardCell, ShardFile, ShardSpec, assign_cells, content_digest
from pytest_segrobust.report import without_timing
from tests.plugin_project import CELLS, recorded, run, write_suite
from tests.test_rerun import ALL, collected

# A merge draws the report's figures and pictures from what the shards measured: where a merged
# report is compared with a single run's, the shards and that run make them too (``figures=True``).
# Elsewhere (refusals, verdict lines, shard files) the runs leave them out, and a project that
# only needs the bands suite's baselines copies them (``recorded``) rather than running an update.


# -- the assignment, a pure function ---------------------------------------------------------------


def cells_of(groups: dict[tuple[str, str, str], int]) -> list[ShardCell]:
    return [
        ShardCell(f"{suite}.yaml::{model}::{split}::c{rank}", (suite, model, split), rank)
        for (suite, model, split), size in groups.items()
        for rank in range(size)
    ]


GROUPS = {("a", "m1", ""): 7, ("a", "m2", ""): 3, ("b", "m1", "val"): 3, ("b", "m1", "ood"): 2, ("c", "m", ""): 1}


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 16])
def test_every_cell_goes_to_one_shard_balanced_whatever_the_order(count: int) -> None:
    cells = cells_of(GROUPS)
    assignment = assign_cells(cells, count)
    assert sorted(assignment) == sorted(c.nodeid for c in cells)
    assert set(assignment.values()) <= set(range(1, count + 1))
    loads = [list(assignment.values()).count(index) for index in range(1, count + 1)]
    share = -(-len(cells) // count)
    # Longest first onto the least loaded: the shards differ by at most one piece (<= a share).
    largest_piece = max(min(size, share) for size in GROUPS.values())
    assert max(loads) - min(loads) <= largest_piece, loads
    assert max(loads) <= 2 * share - 1 if count > 1 else loads == [len(cells)]
    for seed in range(5):  # the order pytest collected in does not matter
        shuffled = list(cells)
        random.Random(seed).shuffle(shuffled)
        assert assign_cells(shuffled, count) == assignment
    # A group that fits in a share stays on one shard: its model is built once.
    for group, size in GROUPS.items():
        shards = {assignment[c.nodeid] for c in cells if c.group == group}
        assert len(shards) == 1 or size > share


def test_largest_groups_go_first_to_the_least_loaded_lowest_shard() -> None:
    groups = {("s", "big", ""): 4, ("s", "mid", ""): 3, ("s", "b", ""): 2, ("s", "a", ""): 2, ("s", "one", ""): 1}
    assignment = assign_cells(cells_of(groups), 3)  # share 4: nothing is cut
    by_group = {group: {assignment[c.nodeid] for c in cells_of(groups) if c.group == group} for group in groups}
    # big -> 1 (4); mid -> 2 (3); a -> 3 (2, "a" before "b"); b -> 3 (4); one -> 2 (4).
    assert by_group == {
        ("s", "big", ""): {1},
        ("s", "mid", ""): {2},
        ("s", "a", ""): {3},
        ("s", "b", ""): {3},
        ("s", "one", ""): {2},
    }


def test_a_group_larger_than_a_share_is_cut_in_suite_order() -> None:
    cells = cells_of({("s", "m", ""): 5})
    assignment = assign_cells(reversed(cells), 2)
    assert [assignment[c.nodeid] for c in cells] == [1, 1, 1, 2, 2]  # clean (rank 0) with the first piece
    assert [assign_cells(cells, 3)[c.nodeid] for c in cells] == [1, 1, 2, 2, 3]


@pytest.mark.parametrize("text", ["0/2", "3/2", "2", "a/b", "1/0", ""])
def test_a_shard_is_k_of_n(text: str) -> None:
    assert ShardSpec.parse(" 2/4") == ShardSpec(2, 4)
    with pytest.raises(argparse.ArgumentTypeError, match="expected K/N with 1 <= K <= N"):
        ShardSpec.parse(text)


# -- shard runs ------------------------------------------------------------------------------------


def redigested(data: dict[str, Any]) -> dict[str, Any]:
    """A shard file's content edited by hand, with the digest of its content taken again."""
    return {**data, "digest": content_digest({name: value for name, value in data.items() if name != "digest"})}


def shard_file(project: pytest.Pytester, spec: str, base: str = "segrobust-report") -> Path:
    index, count = spec.split("/")
    return project.path / f"{base}-shard-{index}-of-{count}.json"


def run_shard(project: pytest.Pytester, spec: str, *args: str, figures: bool = False) -> pytest.RunResult:
    return run(project, "--segrobust", "--segrobust-shard", spec, *args, figures=figures)


def merge(project: pytest.Pytester, capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    capsys.readouterr()
    status = cli.main(["merge", *map(str, args), "--rootdir", str(project.path)])
    out, err = capsys.readouterr()
    return status, out + err


def test_the_shards_select_disjoint_parts_that_cover_every_cell(project: pytest.Pytester) -> None:
    parts = [collected(run_shard(project, f"{k}/3", "--co", "-q")) for k in (1, 2, 3)]
    assert [len(part) for part in parts] == [2, 2, 1]
    assert sorted(itertools.chain.from_iterable(parts)) == sorted(ALL)
    assert parts[0] == collected(run_shard(project, "1/3", "--co", "-q"))  # deterministic
    assert not list(project.path.glob("*shard*"))  # --co evaluates nothing and writes nothing
    # The shards split what -k selected, and pytest reports the rest as deselected.
    result = run_shard(project, "2/2", "-k", "not clean", "--co", "-q")
    second = collected(result)
    first = collected(run_shard(project, "1/2", "-k", "not clean", "--co", "-q"))
    assert sorted(first + second) == sorted(ALL[1:]) and len(first) == len(second) == 2
    result.stdout.fnmatch_lines([f"2/{CELLS} tests collected (3 deselected)*"])
    bad = run(project, "--segrobust-shard", "3/2", "--co")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--segrobust-shard: expected K/N with 1 <= K <= N (e.g. 2/4), got '3/2'*"])


# -- merging -----------------------------------------------------------------------------------------

# What differs between two runs of the same cells: when, how long, and on what machine.


def report_json(project: pytest.Pytester, base: str = "segrobust-report") -> Any:
    return without_timing(json.loads((project.path / f"{base}.json").read_text()))


def report_markdown(project: pytest.Pytester, base: str = "segrobust-report") -> str:
    """The markdown report, less when the run started, how long it and its cells took, and its thread count."""
    lines = (project.path / f"{base}.md").read_text().splitlines()
    kept = [line for line in lines if not line.startswith(("| started |", "| wall time |", "| threads |"))]
    assert sum(line.startswith(("| started |", "| wall time |")) for line in lines) == 2  # the "Run" table is there
    return re.sub(r"\| (\d+\.\d s|\d+ min \d\d s|\d+ h \d\d min) \|", "| (time) |", "\n".join(kept))


def take_report(project: pytest.Pytester, base: str = "segrobust-report") -> tuple[Any, str]:
    """The report's JSON and markdown, then remove its files (the next run writes its own)."""
    taken = report_json(project, base), report_markdown(project, base)
    for path in (project.path / base).parent.glob(f"{Path(base).name}*"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()  # the figures' folder too
    return taken


def baselines(project: pytest.Pytester) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted((project.path / "baselines").glob("*.json"))}


def test_merged_shards_write_the_report_and_baselines_of_one_run(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    # No baselines yet: one run fails every cell as new and writes their baselines.
    run(project, "--segrobust", figures=True).assert_outcomes(failed=CELLS)
    single_new, single_baselines = take_report(project), baselines(project)
    shutil.rmtree(project.path / "baselines")
    run_shard(project, "1/2", figures=True).assert_outcomes(failed=3, deselected=2)
    run_shard(project, "2/2", figures=True).assert_outcomes(failed=2, deselected=3)
    assert not (project.path / "baselines").exists() and not (project.path / "segrobust-report.json").exists()
    status, out = merge(project, capsys, shard_file(project, "1/2"), shard_file(project, "2/2"))
    assert status == 1, out  # the merged verdict fails: every cell is new
    assert "FAIL · 5 cells: 5 new (no baseline)" in out
    assert take_report(project) == single_new
    assert baselines(project) == single_baselines

    # With baselines: the same numbers pass, over three shards.
    run(project, "--segrobust", figures=True).assert_outcomes(passed=CELLS)
    single = take_report(project)
    for k in (1, 2, 3):
        run_shard(project, f"{k}/3", figures=True).assert_outcomes(passed=2 if k < 3 else 1, deselected=3 if k < 3 else 4)
    status, out = merge(project, capsys, *(shard_file(project, f"{k}/3") for k in (3, 1, 2)))
    assert status == 0, out
    assert take_report(project) == single
    assert baselines(project) == single_baselines


def test_merged_update_writes_the_baselines_of_one_update(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    run(project, "--segrobust-update-baselines", "--segrobust-report", "out/r", figures=True).assert_outcomes(passed=CELLS)
    single, single_baselines = take_report(project, "out/r"), baselines(project)
    shutil.rmtree(project.path / "baselines")
    for k in (1, 2):
        run_shard(
            project, f"{k}/2", "--segrobust-update-baselines", "--segrobust-report", "out/r", figures=True
        ).assert_outcomes(
            passed=3 if k == 1 else 2, deselected=2 if k == 1 else 3
        )
    shards = [shard_file(project, f"{k}/2", "out/r") for k in (1, 2)]
    status, out = merge(project, capsys, *shards)
    assert status == 2 and "pass --update-baselines to write the baselines they measured" in out
    assert not (project.path / "baselines").exists()
    status, out = merge(project, capsys, *shards, "--update-baselines")
    assert status == 0, out
    assert baselines(project) == single_baselines
    assert take_report(project, "out/r") == single  # where the shards were told the report goes


def test_merge_refuses_files_that_are_not_the_shards_of_one_run(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded(project)
    run_shard(project, "1/2").assert_outcomes(passed=3, deselected=2)
    run_shard(project, "2/2").assert_outcomes(passed=2, deselected=3)
    first, second = shard_file(project, "1/2"), shard_file(project, "2/2")

    def refused(*args: str | Path) -> str:
        status, out = merge(project, capsys, *args)
        assert status == 2, out
        assert not (project.path / "segrobust-report.json").exists()
        return out

    assert f"shard 2/2 missing: got {first} (shard 1/2)" in refused(first)
    copy = project.path / "copy.json"
    shutil.copy(first, copy)
    assert f"shard 1/2 given 2 times: {first}, {copy}" in refused(first, copy, second)
    assert f"shard 1/2 given 2 times: {first}, {first}" in refused(first, first, second)
    assert "--update-baselines: the shards were not run with --segrobust-update-baselines" in refused(
        first, second, "--update-baselines"
    )

    truncated = project.path / "truncated.json"
    truncated.write_text(second.read_text()[:200])
    out = refused(first, truncated)
    assert f"{truncated}: not valid JSON" in out and "truncated or half-written: run its shard again" in out
    assert "absent.json: cannot read the shard file: No such file or directory" in refused(first, "absent.json")

    def edited(name: str, change: Any) -> Path:  # and its digest taken again: the checks below see the change
        data = json.loads(second.read_text())
        change(data)
        path = project.path / name
        path.write_text(json.dumps(redigested(data)))
        return path

    future = edited("future.json", lambda data: data.update(format=99))
    assert f"{future}: not a segrobust shard file this version can read: shard file of format 99" in refused(first, future)
    other_n = edited("other-n.json", lambda data: data["spec"].update(count=3))
    assert f"different numbers of shards N: {first} (shard 1/2), {other_n} (shard 2/3)" in refused(first, other_n)
    older = edited("older.json", lambda data: data.update(tool_version="0.0.1"))
    assert f"{older} (shard 2/2) by segrobust 0.0.1" in refused(first, older)
    odd = edited("odd-figures.json", lambda data: data.update(figures="none"))
    out = refused(first, odd)
    assert f"{odd}: not a segrobust shard file this version can read: field 'figures': expected true or false" in out
    assert "got 'none'" in out
    # A shard file from before the field: its shard made the pictures it has.
    assert ShardFile.read(edited("before-figures.json", lambda data: data.pop("figures", None))).figures is True
    assert ShardFile.read(second).figures is False  # run_shard leaves the figures out

    # A suite edited between the shards' runs: the shards measured different things.
    suite = project.path / "suites" / "bands.yaml"
    suite.write_text(suite.read_text().replace("batch_size: 3", "batch_size: 2"))
    run_shard(project, "2/2", "--segrobust-report", "edited").assert_outcomes(passed=2, deselected=3)
    out = refused(first, shard_file(project, "2/2", "edited"))
    assert f"suite file suites/bands.yaml differs between {first} (shard 1/2) and {project.path / 'edited'}" in out
    # Shards that agree, merged in a checkout where the suite has changed since.
    out = refused(first, second)
    assert "suite file suites/bands.yaml here is not the one the shards read" in out


def records(path: Path) -> list[dict[str, Any]]:
    data = ShardFile.read(path).to_json()  # each measurement with its clean result, whose timing is left out
    data["results"] = ShardFile.read(path).results
    return without_timing({key: data[key] for key in ("cells", "assigned", "results", "errors", "coverage")})


def test_a_shard_under_xdist_writes_what_it_writes_alone(project: pytest.Pytester) -> None:
    recorded(project)
    run_shard(project, "1/2", "-k", "not rotate[5]").assert_outcomes(passed=2, deselected=3)
    alone = records(shard_file(project, "1/2"))
    assert len(alone["results"]) == 2 and alone["coverage"]["deselected"] == [ALL[4]]
    shard_file(project, "1/2").unlink()
    run_shard(project, "1/2", "-k", "not rotate[5]", "-n", "2").assert_outcomes(passed=2)
    assert records(shard_file(project, "1/2")) == alone


SLOW_MODULE = """\
import time

from segrobust_fakes import RedBinner


class SlowBinner(RedBinner):
    def forward(self, images):
        time.sleep(0.15)  # its cells come back to the xdist controller after the other suite's
        return super().forward(images)


def slow_binner():
    return SlowBinner(smoothing=3)
"""
SLOW_SUITE = """\
name: a-slow
dataset: {factory: segrobust_fakes:band_scenes}
models: [{name: slow, factory: slow_fakes:slow_binner}]
corruptions: [rotate]
severities: [1]
batch_size: 2
"""


def test_merged_shards_and_xdist_write_a_single_runs_markdown_byte_for_byte(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two suites; the first collected (a-slow) finishes last under -n 2. Every report lists the
    # suites in collection order: the markdown differs only in when the run started, how long it
    # took, and each model's compute time (normalised by report_markdown: the only difference).
    project.makepyfile(slow_fakes=SLOW_MODULE)
    (project.path / "suites" / "a-slow.yaml").write_text(SLOW_SUITE)
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS + 2)
    take_report(project)
    run(project, "--segrobust", figures=True).assert_outcomes(passed=CELLS + 2)
    _, single = take_report(project)
    assert single.index("## Suite `a-slow`") < single.index("## Suite `bands`")
    run(project, "--segrobust", "-n", "2", figures=True).assert_outcomes(passed=CELLS + 2)
    assert take_report(project)[1] == single
    assert sum(run_shard(project, f"{k}/2", figures=True).parseoutcomes()["passed"] for k in (1, 2)) == CELLS + 2
    status, out = merge(project, capsys, shard_file(project, "2/2"), shard_file(project, "1/2"))
    assert status == 0, out
    assert take_report(project)[1] == single


def test_each_shard_ends_with_its_own_verdict_and_the_merge_with_the_runs(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded(project)
    # The second shard's cells fall: gaussian_noise and rotate at 5 (a smoother model scores otherwise).
    write_suite(project, smoothing=1)
    for k in (1, 2):
        result = run_shard(project, f"{k}/2")
        start = next(i for i, line in enumerate(result.outlines) if line.startswith("=") and " segrobust " in line)
        end = next(i for i, line in enumerate(result.outlines) if i > start and line.startswith("="))
        last = result.outlines[end - 1]  # the segrobust section's last line
        assert re.fullmatch(
            rf"shard {k}/2: (PASS|FAIL) · \d cells: .* \(this shard's cells only; "
            r"`segrobust merge` of every shard gives the run's verdict\)",
            last,
        ), last
        parsed = result.parseoutcomes()
        assert last.split(": ", 1)[1].startswith("FAIL" if parsed.get("failed") else "PASS")
        assert f"{parsed.get('passed', 0) + parsed.get('failed', 0)} cells" in last
    status, out = merge(project, capsys, shard_file(project, "1/2"), shard_file(project, "2/2"))
    assert out.splitlines()[-1].startswith("FAIL · 5 cells: ") and status == 1, out
    assert "warning" not in out, out  # shards without figures: the merge has none to miss


def test_merged_shards_without_figures_write_the_report_of_a_run_without_figures(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded(project)
    run(project, "--segrobust").assert_outcomes(passed=CELLS)  # --segrobust-figures=none
    single = take_report(project)
    for k in (1, 2):
        run_shard(project, f"{k}/2").assert_outcomes(passed=3 if k == 1 else 2, deselected=2 if k == 1 else 3)
        assert json.loads(shard_file(project, f"{k}/2").read_text())["figures"] is False
    status, out = merge(project, capsys, shard_file(project, "1/2"), shard_file(project, "2/2"))
    assert status == 0, out
    assert out.splitlines()[-1].startswith("PASS · 5 cells: "), out  # the verdict is the last line
    assert "warning" not in out and "stopped before the end" not in out, out
    assert not (project.path / "segrobust-report-figures").exists()
    report, markdown = take_report(project)
    assert (report, markdown) == single
    assert "--segrobust-figures=none" in report["figures_left_out"] and "warnings" not in report
    assert "stopped before the end" not in markdown and "Left out of this report" not in markdown


@pytest.mark.parametrize("without", ["1/2", "2/2"])
def test_a_merge_keeps_the_pictures_shards_made_and_names_the_shards_that_made_none(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], without: str
) -> None:
    # Both shards measure the bands suite (its 5 cells are cut 3 and 2): its gallery comes from
    # the shard with figures, whichever it is; the model's worst images only from the shard
    # that measured its worst cell, if that shard made pictures.
    recorded(project)
    run(project, "--segrobust", figures=True).assert_outcomes(passed=CELLS)
    single, _ = take_report(project)
    for spec in ("1/2", "2/2"):
        run_shard(project, spec, figures=spec != without)
    with_figures = "2/2" if without == "1/2" else "1/2"
    status, out = merge(project, capsys, shard_file(project, "1/2"), shard_file(project, "2/2"))
    assert status == 0, out
    assert out.splitlines()[-1].startswith("PASS · 5 cells: "), out
    assert "warning" not in out and "stopped before the end" not in out, out
    notes = [line for line in out.splitlines() if "--segrobust-figures=none" in line]
    assert len(notes) == 1 and f"shard {without} " in notes[0] and with_figures not in notes[0], out
    worst = single["suites"]["bands"]["worst_images"]["binner"]
    cell = f"suites/bands.yaml::binner::{worst['corruption']}[{worst['severity']}]"
    left_out = cell in json.loads(shard_file(project, without).read_text())["assigned"]
    report, markdown = take_report(project)  # the shard files too
    assert report["figures_left_out"] in notes[0] and "warnings" not in report
    assert f"_{report['figures_left_out']}_" in markdown and "stopped before the end" not in markdown
    bands, alone = report["suites"]["bands"], single["suites"]["bands"]
    assert bands["worst_images"] == ({} if left_out else alone["worst_images"])
    assert set(bands["figures"]) == set(alone["figures"]) - ({worst["figure"]} if left_out else set())
    assert "gallery" in bands["figures"] and "heatmap" in bands["figures"]
@pytest.mark.parametrize("damage", ["flipped byte", "zip version 13"])
def test_merged_shards_fail_when_both_failed_on_a_damaged_statistics_file(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    from tests.test_sidecar import GATED_SUITE, flip_member, set_central_field

    (project.path / "suites" / "bands.yaml").write_text(GATED_SUITE)
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=2)
    stats = project.path / "baselines" / "bands.stats.npz"
    broken = flip_member("index.npy") if damage == "flipped byte" else set_central_field(6, 13)
    stats.write_bytes(broken(stats.read_bytes()))
    for k in (1, 2):
        shard = run_shard(project, f"{k}/2", "--junitxml", f"shard{k}.xml")
        shard.assert_outcomes(failed=1, deselected=1)
        shard.stdout.fnmatch_lines(["*baselines/bands.stats.npz*--segrobust-update-baselines*"])
        xml = (project.path / f"shard{k}.xml").read_text()
        assert '<property name="status" value="passed"' not in xml, xml
    status, out = merge(project, capsys, shard_file(project, "1/2"), shard_file(project, "2/2"))
    assert status == 1, out
    assert re.search(r"^FAIL · 2 cells: 2 error", out, re.MULTILINE) and "PASS" not in out, out


def test_a_merge_draws_the_worst_images_without_the_models(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The shards measure, and draw, their cells; the merge runs where the model and the dataset
    # cannot even be imported (a CI matrix's merge job without weights or data).
    recorded(project)
    run(project, "--segrobust", figures=True).assert_outcomes(passed=CELLS)
    single = take_report(project)
    for k in (1, 2):
        run_shard(project, f"{k}/2", figures=True).assert_outcomes(passed=3 if k == 1 else 2, deselected=2 if k == 1 else 3)
    (project.path / "segrobust_fakes.py").write_text('raise ImportError("no model and no data on this machine")\n')
    monkeypatch.delitem(__import__("sys").modules, "segrobust_fakes", raising=False)
    status, out = merge(project, capsys, shard_file(project, "1/2"), shard_file(project, "2/2"))
    assert status == 0, out
    assert "warning" not in out
    report, markdown = take_report(project)
    assert (report, markdown) == single
    assert report["suites"]["bands"]["worst_images"]["binner"]["figure"] == "worst-binner"
    assert report["suites"]["bands"]["figures"]  # the gallery and the worst images, drawn from the shards' pictures
