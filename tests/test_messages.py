"""What the plugin tells a user about a cell: named by its node id, with the narrowest command
that acts on it, which pastes back into a shell as it is printed."""

from __future__ import annotations

import re
import shlex

import pytest

from pytest_segrobust.core.wording import abbreviations
from pytest_segrobust.gate.outcomes import ModelChange
from pytest_segrobust.run.junit import classname as junit_classname
from tests.plugin_project import CELLS, SINGLE_PROCESS, run, write_suite


def suggested_command(output: str, lead: str, cell: str) -> list[str]:
    """The arguments of the ``pytest ...`` command the line starting with ``lead`` suggests for ``cell``."""
    line = next(line for line in output.splitlines() if line.strip().startswith(lead) and cell in line)
    command = shlex.split(line.strip().removeprefix(lead).strip())
    assert command[0] == "pytest"
    return command[1:]


@SINGLE_PROCESS
def test_a_regression_names_its_cell_by_node_id_and_the_command_that_updates_it_alone(
    project: pytest.Pytester, dist: list[str]
) -> None:
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    write_suite(project, smoothing=1)  # no smoothing: far less robust to noise
    result = run(project, "--segrobust", *dist)
    result.stdout.fnmatch_lines(
        [
            "suites/bands.yaml::binner::gaussian_noise[[]5[]] regressed:",
            (
                "*if the new numbers are intended: pytest --segrobust 'suites/bands.yaml::binner::gaussian_noise[[]5[]]' "
                "--segrobust-update-baselines"
            ),
        ]
    )
    assert "bands::binner::gaussian_noise::5" not in result.stdout.str()
    command = suggested_command(result.stdout.str(), "if the new numbers are intended:", "gaussian_noise[5]")
    # Pasted back as printed, it selects that one cell, and accepts its numbers.
    accepted = run(project, *command, "-v")
    accepted.assert_outcomes(passed=1)
    accepted.stdout.fnmatch_lines(["*collected 1 item*", "suites/bands.yaml::binner::gaussian_noise[[]5[]] PASSED*"])
    rerun = run(project, "--segrobust", "suites/bands.yaml::binner::gaussian_noise[5]")
    rerun.assert_outcomes(passed=1)


@SINGLE_PROCESS
def test_no_baseline_yet_names_the_cell_by_node_id_and_merge_only_in_a_shard(
    project: pytest.Pytester, dist: list[str]
) -> None:
    result = run(project, "--segrobust", *dist)
    result.assert_outcomes(failed=CELLS)
    result.stdout.fnmatch_lines(
        [
            (
                "suites/bands.yaml::binner::clean: no baseline yet in baselines/bands.json; recorded score=*; "
                "it is written at the end of the run: re-run to compare"
            )
        ]
    )
    assert "segrobust merge" not in result.stdout.str()
    (project.path / "baselines" / "bands.json").unlink()
    shard = run(project, "--segrobust", "--segrobust-shard", "1/2", *dist)
    shard.stdout.fnmatch_lines(
        ["*: no baseline yet in baselines/bands.json; *; `segrobust merge` writes it: re-run to compare"]
    )
    assert re.search(r"bands::binner::\w+(::\d)?:", shard.stdout.str()) is None


def test_abbreviations_keep_distinct_values_distinct() -> None:
    digest = "0123456789abcdef" * 4
    shown = abbreviations([digest, digest, "short-name", "x" * 60])
    assert shown == {digest: "0123456789abcdef…", "short-name": "short-name", "x" * 60: "x" * 16 + "…"}
    # Alike beyond the usual cut: cut after the word where they part.
    easy, hard = "split-folders:data/ood-easy:" + "1" * 30, "split-folders:data/ood-hard:" + "1" * 30
    assert abbreviations([easy, hard]) == {easy: "split-folders:data/ood-easy…", hard: "split-folders:data/ood-hard…"}
    # A word that would run past the whole_up_to limit is cut where they part.
    a, b = "p" * 20 + "a" * 40, "p" * 20 + "b" * 40
    assert abbreviations([a, b]) == {a: "p" * 20 + "a…", b: "p" * 20 + "b…"}


def test_a_changed_model_shows_fingerprints_that_differ() -> None:
    change = ModelChange("baselines/s.json", "net", recorded="selfie-model-general", current="selfie-model-landscape")
    assert change.describe().endswith("(fingerprint selfie-model-l, recorded selfie-model-g)")
    digests = ModelChange("baselines/s.json", "net", recorded="1" * 32, current="2" * 32)
    assert digests.describe().endswith(f"(fingerprint {'2' * 12}, recorded {'1' * 12})")


NOISY_MODEL = """
import logging

import somelib
import venvlib
from segrobust_fakes import RedBinner


class Noisy(RedBinner):
    def forward(self, images):
        somelib.warn()
        venvlib.warn()
        logging.getLogger("noisy_project").warning("project warning: a batch of %d", len(images))
        return super().forward(images)


def noisy():
    return Noisy()
"""
LIBRARY = """
import logging

def warn():
    logging.getLogger("{name}.sub").warning("{name} warning: some weights were not used")
"""
PROJECT_TEST = """
import somelib

def test_own():
    somelib.warn()
    assert False
"""


def test_library_log_records_stay_out_of_a_failed_cells_report(project: pytest.Pytester) -> None:
    # One library outside the rootdir, one in a virtual environment inside the project.
    outside = project.path.parent / f"{project.path.name}-libs"
    venv = project.path / ".venv" / "lib" / "python3" / "site-packages"
    for folder, name in ((outside, "somelib"), (venv, "venvlib")):
        folder.mkdir(parents=True)
        (folder / f"{name}.py").write_text(LIBRARY.format(name=name))
        project.syspathinsert(folder)
    project.makepyfile(noisy=NOISY_MODEL, test_own=PROJECT_TEST)
    (project.path / "suites" / "bands.yaml").write_text(
        "dataset: {factory: segrobust_fakes:band_scenes}\nmodels: [{name: m, factory: noisy:noisy}]\n"
        "corruptions: [gaussian_noise]\nseverities: [5]\n"
    )
    result = run(project, "--segrobust", "suites", "test_own.py")
    result.assert_outcomes(failed=3)  # two new cells, and the project's own test
    output = result.stdout.str()
    cell = output[output.index("suites/bands.yaml::m::clean: no baseline yet") : output.index("_ test_own _")]
    assert "project warning: a batch of" in cell  # the project's own records stay
    assert "somelib warning" not in cell and "venvlib warning" not in cell
    assert re.search(
        r"\d+ log records of libraries \(somelib, venvlib\) left out of this cell's captured log; -v shows them", cell
    )
    # The project's other tests capture every record, as pytest does.
    own = output[output.index("_ test_own _") :]
    assert "somelib warning: some weights were not used" in own and "left out" not in own
    (project.path / "baselines" / "bands.json").unlink()  # fail the cells again
    verbose = run(project, "--segrobust", "suites", "-v")
    verbose.assert_outcomes(failed=2)
    assert "somelib warning" in verbose.stdout.str() and "left out" not in verbose.stdout.str()


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        ("suites/demo.yaml::tiny-unet::gaussian_noise[5]", "suites.demo.tiny-unet"),
        ("suites/demo-shift.yaml::tiny-unet::ood-hard::clean", "suites.demo-shift.tiny-unet.ood-hard"),
        ("nightly/unet.v2.yml::unet.v2::aggregates", "nightly.unet.v2.unet.v2"),
    ],
)
def test_a_cells_junit_classname_is_its_suite_file_without_yaml_and_its_model(nodeid: str, expected: str) -> None:
    assert junit_classname(nodeid) == expected
    assert junit_classname(nodeid, "ci") == f"ci.{expected}"


@SINGLE_PROCESS
def test_a_failed_cells_section_is_headed_by_its_node_id(project: pytest.Pytester, dist: list[str]) -> None:
    (project.path / "suites" / "bands.yaml").write_text(
        "dataset: {factory: segrobust_fakes:band_scenes}\nmodels: [{name: unet.v2, factory: segrobust_fakes:red_binner}]\n"
        "corruptions: [gaussian_noise]\nseverities: [5]\n"
    )
    result = run(project, "--segrobust", "-v", *dist)
    result.assert_outcomes(failed=2)
    result.stdout.re_match_lines(
        [
            r"suites/bands\.yaml::unet\.v2::clean FAILED",  # -v prints the id as it pastes back
            r"_+ suites/bands\.yaml::unet\.v2::clean +_+$",
            r"_+ suites/bands\.yaml::unet\.v2::gaussian_noise\[5\] +_+$",
        ]
    )
