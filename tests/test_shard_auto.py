"""``--segrobust-shard auto``: the shard a job scheduler's environment variables name, refused
loudly where they do not name one, and merged like shards given as K/N."""

from __future__ import annotations

import argparse

import pytest

from pytest_segrobust.backends.shard_environment import SCHEDULERS, parse_shard
from pytest_segrobust.backends.shard_plan import ShardSpec
from tests.plugin_project import CELLS, recorded, run
from tests.test_shards import baselines, merge, run_shard, shard_file, take_report


@pytest.fixture(autouse=True)
def no_scheduler(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No scheduler's variables, whatever job runs these tests (GitLab sets CI_NODE_TOTAL in all)."""
    for scheduler in SCHEDULERS:
        for name in scheduler.variables:
            monkeypatch.delenv(name, raising=False)
    return monkeypatch


def refused(text: str) -> str:
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        parse_shard(text)
    return str(raised.value)


@pytest.mark.parametrize(
    ("text", "variables", "expected"),
    [
        ("auto/4", {"JOB_COMPLETION_INDEX": "2"}, ShardSpec(3, 4)),
        (
            "auto",
            {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "3"},
            ShardSpec(3, 4),
        ),
        (
            "auto",
            {
                "SLURM_ARRAY_TASK_ID": "4",
                "SLURM_ARRAY_TASK_COUNT": "4",
                "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_STEP": "2",
            },
            ShardSpec(3, 4),
        ),
        (
            "auto/4",
            {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "1"},
            ShardSpec(1, 4),
        ),
        ("auto", {"CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "4"}, ShardSpec(2, 4)),
        (" auto ", {"CI_NODE_INDEX": "4", "CI_NODE_TOTAL": "4"}, ShardSpec(4, 4)),
        ("auto", {"CIRCLE_NODE_INDEX": "2", "CIRCLE_NODE_TOTAL": "4"}, ShardSpec(3, 4)),
        ("auto", {"CIRCLE_NODE_INDEX": "0", "CIRCLE_NODE_TOTAL": "1"}, ShardSpec(1, 1)),
    ],
)
def test_each_schedulers_variables_name_the_shard(
    no_scheduler: pytest.MonkeyPatch, text: str, variables: dict[str, str], expected: ShardSpec
) -> None:
    for name, value in variables.items():
        no_scheduler.setenv(name, value)
    spec = parse_shard(text)
    assert (spec.index, spec.count) == (expected.index, expected.count)
    assert spec.source.startswith("from " + ", ".join(f"{name}={value}" for name, value in variables.items()))
    assert spec.described() == f"{expected} ({spec.source})"


def test_k_of_n_is_read_as_before_whatever_the_environment(no_scheduler: pytest.MonkeyPatch) -> None:
    no_scheduler.setenv("CI_NODE_INDEX", "1")
    no_scheduler.setenv("CI_NODE_TOTAL", "3")
    assert parse_shard("2/4") == ShardSpec(2, 4) and parse_shard("2/4").source == ""
    assert "expected K/N with 1 <= K <= N" in refused("5/4")


def test_no_variables_set_is_refused_naming_every_schedulers() -> None:
    message = refused("auto")
    assert message.startswith("auto: no scheduler's variables are set")
    for scheduler in SCHEDULERS:
        assert f"{', '.join(scheduler.required)} ({scheduler.name})" in message
    assert "--segrobust-shard ${{ matrix.shard }}/4" in message  # GitHub Actions: give it as K/N


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({"CI_NODE_TOTAL": "1"}, "CI_NODE_TOTAL=1 set but CI_NODE_INDEX not (a GitLab CI job with parallel:)"),
        ({"CI_NODE_INDEX": "2"}, "CI_NODE_INDEX=2 set but CI_NODE_TOTAL not (a GitLab CI job with parallel:)"),
        (
            {"CIRCLE_NODE_INDEX": "0"},
            "CIRCLE_NODE_INDEX=0 set but CIRCLE_NODE_TOTAL not (a CircleCI job with parallelism)",
        ),
        (
            {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4"},
            "SLURM_ARRAY_TASK_ID=3, SLURM_ARRAY_TASK_COUNT=4 set but SLURM_ARRAY_TASK_MIN not (a Slurm job array)",
        ),
        (
            {"JOB_COMPLETION_INDEX": "1"},
            (
                "JOB_COMPLETION_INDEX=1 set (a Kubernetes Indexed Job), which gives no count of shards: "
                "give it as --segrobust-shard auto/N"
            ),
        ),
        ({"CI_NODE_INDEX": ""}, "no scheduler's variables are set"),  # empty is unset
    ],
)
def test_half_set_variables_are_refused_naming_what_is_missing(
    no_scheduler: pytest.MonkeyPatch, variables: dict[str, str], expected: str
) -> None:
    for name, value in variables.items():
        no_scheduler.setenv(name, value)
    assert expected in refused("auto")


def test_half_set_variables_beside_a_complete_schedulers_are_left_alone(no_scheduler: pytest.MonkeyPatch) -> None:
    # A Slurm job started from a GitLab job without parallel:, which sets CI_NODE_TOTAL=1 alone.
    no_scheduler.setenv("CI_NODE_TOTAL", "1")
    for name, value in {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "0"}.items():
        no_scheduler.setenv(name, value)
    spec = parse_shard("auto")
    assert spec == ShardSpec(3, 3) and "a Slurm job array" in spec.source and "CI_NODE" not in spec.source


def test_schedulers_that_disagree_are_refused_naming_both(no_scheduler: pytest.MonkeyPatch) -> None:
    no_scheduler.setenv("CI_NODE_INDEX", "2")
    no_scheduler.setenv("CI_NODE_TOTAL", "4")
    no_scheduler.setenv("CIRCLE_NODE_INDEX", "2")
    no_scheduler.setenv("CIRCLE_NODE_TOTAL", "4")
    message = refused("auto")
    assert message.startswith("auto: two schedulers name different shards: ")
    assert "2/4 (from CI_NODE_INDEX=2, CI_NODE_TOTAL=4, a GitLab CI job with parallel:)" in message
    assert "3/4 (from CIRCLE_NODE_INDEX=2, CIRCLE_NODE_TOTAL=4, a CircleCI job with parallelism)" in message
    # Agreeing, they are one shard, read from both.
    no_scheduler.setenv("CIRCLE_NODE_INDEX", "1")
    spec = parse_shard("auto")
    assert spec == ShardSpec(2, 4) and "CI_NODE_INDEX=2" in spec.source and "CIRCLE_NODE_INDEX=1" in spec.source
    # A count that is not auto/N's.
    assert "auto/3: CI_NODE_TOTAL=4 (a GitLab CI job with parallel:) says 4 shards" in refused("auto/3")


@pytest.mark.parametrize(
    ("text", "variables", "expected"),
    [
        (
            "auto",
            {"CI_NODE_INDEX": "0", "CI_NODE_TOTAL": "4"},
            "CI_NODE_INDEX is not one of the 4 shards' indices, 1 to 4",
        ),
        (
            "auto",
            {"CI_NODE_INDEX": "5", "CI_NODE_TOTAL": "4"},
            "CI_NODE_INDEX is not one of the 4 shards' indices, 1 to 4",
        ),
        (
            "auto",
            {"CIRCLE_NODE_INDEX": "4", "CIRCLE_NODE_TOTAL": "4"},
            "CIRCLE_NODE_INDEX is not one of the 4 shards' indices, 0 to 3",
        ),
        ("auto/4", {"JOB_COMPLETION_INDEX": "4"}, "JOB_COMPLETION_INDEX is not one of the 4 shards' indices, 0 to 3"),
        (
            "auto",
            {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "3"},
            "SLURM_ARRAY_TASK_ID is not one of the 4 shards' indices, 3 to 6",
        ),
        (
            "auto",
            {
                "SLURM_ARRAY_TASK_ID": "3",
                "SLURM_ARRAY_TASK_COUNT": "4",
                "SLURM_ARRAY_TASK_MIN": "1",
                "SLURM_ARRAY_TASK_STEP": "3",
            },
            "SLURM_ARRAY_TASK_ID is not one of the 4 shards' indices, 1 to 10 in steps of 3",
        ),
        (
            "auto",
            {"CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "0"},
            "CI_NODE_INDEX=1, CI_NODE_TOTAL=0 (a GitLab CI job with parallel:): expected at least one shard",
        ),
        (
            "auto",
            {"CI_NODE_INDEX": "two", "CI_NODE_TOTAL": "4"},
            "CI_NODE_INDEX='two' (a GitLab CI job with parallel:): expected an integer",
        ),
        ("auto/0", {"JOB_COMPLETION_INDEX": "0"}, "expected auto or auto/N with N >= 1 (e.g. auto/4), got 'auto/0'"),
        ("auto/x", {"JOB_COMPLETION_INDEX": "0"}, "expected auto or auto/N with N >= 1 (e.g. auto/4), got 'auto/x'"),
    ],
)
def test_an_index_out_of_range_or_a_value_not_a_count_is_refused(
    no_scheduler: pytest.MonkeyPatch, text: str, variables: dict[str, str], expected: str
) -> None:
    for name, value in variables.items():
        no_scheduler.setenv(name, value)
    assert expected in refused(text)


# -- runs ------------------------------------------------------------------------------------------


def test_auto_shards_say_where_they_come_from_and_merge_into_a_single_runs_report(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], no_scheduler: pytest.MonkeyPatch
) -> None:
    bad = run(project, "--segrobust-shard", "auto", "--co")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--segrobust-shard: auto: no scheduler's variables are set*"])

    recorded(project)
    run(project, "--segrobust", figures=True).assert_outcomes(passed=CELLS)
    single, single_baselines = take_report(project), baselines(project)
    no_scheduler.setenv("CI_NODE_TOTAL", "2")
    for index, passed in ((1, 3), (2, 2)):  # a GitLab job with parallel: 2
        no_scheduler.setenv("CI_NODE_INDEX", str(index))
        result = run_shard(project, "auto", figures=True)
        result.assert_outcomes(passed=passed, deselected=CELLS - passed)
        source = f"from CI_NODE_INDEX={index}, CI_NODE_TOTAL=2, a GitLab CI job with parallel:"
        result.stdout.fnmatch_lines([f"segrobust: shard {index}/2 ({source}): *"])
    status, out = merge(project, capsys, shard_file(project, "1/2"), shard_file(project, "2/2"))
    assert status == 0, out
    assert take_report(project) == single
    assert baselines(project) == single_baselines


def test_a_merge_refuses_auto_shards_whose_counts_differ(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], no_scheduler: pytest.MonkeyPatch
) -> None:
    recorded(project)
    for name, value in {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2", "SLURM_ARRAY_TASK_MIN": "1"}.items():
        no_scheduler.setenv(name, value)
    run_shard(project, "auto").assert_outcomes(passed=3, deselected=2)
    no_scheduler.setenv("SLURM_ARRAY_TASK_ID", "3")
    no_scheduler.setenv("SLURM_ARRAY_TASK_COUNT", "3")
    run_shard(project, "auto").assert_outcomes(passed=1, deselected=4)
    first, other = shard_file(project, "1/2"), shard_file(project, "3/3")
    status, out = merge(project, capsys, first, other)
    assert status == 2, out
    assert f"different numbers of shards N: {first} (shard 1/2), {other} (shard 3/3)" in out
    assert not (project.path / "segrobust-report.json").exists()
