"""Bad datasets and failing models: each fails its cells in one line naming the suite file, the
field at fault and the cause; the traceback of the cause follows only under ``-v`` or ``--tb=long``."""

from __future__ import annotations

import pytest

from tests.plugin_project import run

BAD_PARTS = """\
from segrobust_fakes import BandScenes, RedBinner


def as_list():
    scenes = BandScenes(size=4)
    return [scenes[i] for i in range(len(scenes))]


class DictScenes(BandScenes):
    def __getitem__(self, index):
        sample = super().__getitem__(index)
        return {"sample_id": sample.sample_id, "image": sample.image, "target": sample.target}


def as_dicts():
    return DictScenes(size=4)


class FailsOnOneBatch(RedBinner):
    def forward(self, images):
        if images.shape[0] == 2:  # only the last batch: 8 images in batches of 3
            raise RuntimeError("CUDA error: device-side assert triggered")
        return super().forward(images)


def fails_on_one_batch():
    return FailsOnOneBatch()
"""

SUITE = """\
name: bad
dataset: {{factory: {dataset}}}
models:
  - {{name: other, factory: segrobust_fakes:red_binner}}
  - {{name: binner, factory: {model}}}
corruptions: [rotate]
severities: [1]
batch_size: 3
"""


def write(project: pytest.Pytester, dataset: str = "segrobust_fakes:band_scenes", model: str = "segrobust_fakes:red_binner") -> None:
    (project.path / "bad_parts.py").write_text(BAD_PARTS)
    (project.path / "suites" / "bands.yaml").write_text(SUITE.format(dataset=dataset, model=model))


def failure_lines(result: pytest.RunResult) -> list[str]:
    """The text of the failures section, between its banner and the next section's (warnings, the plugin's summary)."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "FAILURES" in line)
    end = next(i for i, line in enumerate(lines) if i > start and line.startswith("=") and line.endswith("="))
    return [line for line in lines[start + 1 : end] if line.strip()]


@pytest.mark.parametrize(
    ("dataset", "expected"),
    [
        (
            "bad_parts:as_list",
            (
                "suites/bands.yaml: field 'dataset': factory bad_parts:as_list returned a list, which is not a dataset: "
                "it has no fingerprint()*"
            ),
        ),
        (
            "bad_parts:as_dicts",
            "suites/bands.yaml: field 'dataset': evaluating clean: bands-4-32x32-0: dataset[[]0[]] is a dict, not a Sample*",
        ),
    ],
    ids=["list", "dict-samples"],
)
def test_a_bad_dataset_fails_each_cell_in_one_line(project: pytest.Pytester, dataset: str, expected: str) -> None:
    write(project, dataset=dataset)
    result = run(project, "--segrobust")
    result.assert_outcomes(failed=4)
    lines = failure_lines(result)
    # Each failure is its header and one line: no traceback through the harness.
    assert len(lines) == 8, "\n".join(lines)
    result.stdout.fnmatch_lines([expected])
    assert "Traceback" not in result.stdout.str()


def test_a_model_that_raises_in_one_batch_names_cell_batch_and_exception_in_one_line(project: pytest.Pytester) -> None:
    write(project, model="bad_parts:fails_on_one_batch")
    result = run(project, "--segrobust-update-baselines")
    result.assert_outcomes(passed=2, failed=2)
    lines = failure_lines(result)
    assert len(lines) == 4, "\n".join(lines)
    assert lines[1] == (
        "suites/bands.yaml: field 'models[1]' (binner): evaluating clean: the model raised on the "
        "batch of samples bands/6, bands/7: RuntimeError: CUDA error: device-side assert triggered"
    )


@pytest.mark.parametrize("flag", ["-v", "--tb=long"])
def test_the_cause_s_traceback_follows_under_verbose_or_long_tracebacks(project: pytest.Pytester, flag: str) -> None:
    write(project, model="bad_parts:fails_on_one_batch")
    result = run(project, "--segrobust", flag, "-k", "binner and clean")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*field 'models[[]1[]]' (binner): evaluating clean: the model raised on the batch of samples bands/6, bands/7: RuntimeError:*",
            "Traceback (most recent call last):",
            '*bad_parts.py", line *, in forward',
            "RuntimeError: CUDA error: device-side assert triggered",
        ]
    )


def test_a_module_that_fails_at_import_is_one_collection_error_and_its_traceback_under_verbose(project: pytest.Pytester) -> None:
    write(project, dataset="bad_parts:as_list")
    (project.path / "bad_parts.py").write_text("def as_list(:\n    pass\n")
    result = run(project, "--segrobust")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            (
                "*/suites/bands.yaml: field 'dataset.factory': importing module 'bad_parts' raised SyntaxError: "
                "invalid syntax (bad_parts.py, line 1)"
            )
        ]
    )
    assert "Traceback" not in result.stdout.str()
    run(project, "--segrobust", "-v").stdout.fnmatch_lines(["Traceback (most recent call last):", '*bad_parts.py", line 1'])


def test_a_metric_whose_extra_is_missing_is_one_collection_error_naming_field_and_extra(project: pytest.Pytester) -> None:
    # As without pytest-segrobust[coco]: the module cannot be found, nor imported.
    (project.path / "conftest.py").write_text("import sys\n\nsys.modules['faster_coco_eval'] = None\n")
    suite = SUITE.format(dataset="segrobust_fakes:band_scenes", model="segrobust_fakes:instance_binner")
    (project.path / "suites" / "bands.yaml").write_text(suite + "task: instance\nmetric: map\n")
    result = run(project, "--segrobust")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            (
                "*/suites/bands.yaml: field 'metric': metric 'map' needs faster_coco_eval, which is not installed: "
                'pip install "pytest-segrobust[[]coco[]]"'
            )
        ]
    )
    assert "Traceback" not in result.stdout.str()
