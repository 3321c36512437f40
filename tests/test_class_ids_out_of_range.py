"""A ground-truth class id outside the dataset's classes is the dataset's fault: the error names the
dataset, the sample, the class id found and the number of classes, and no model."""

from __future__ import annotations

import pytest

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import Sample
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.models import adapt_model
from pytest_segrobust.tasks import get_task
from tests.fakes import CLASS_NAMES, BandScenes, RedBinner
from tests.plugin_project import run

BAD_LABELS = """\
import torch

from segrobust_fakes import BandScenes


class OneBadLabel(BandScenes):
    def __getitem__(self, index):
        sample = super().__getitem__(index)
        if index == 2:
            sample.target.mask[0, 0] = 9
        return sample


def one_bad_label():
    return OneBadLabel(size=4)
"""

SUITE = """\
name: labels
dataset: {factory: bad_labels:one_bad_label}
models:
  - {name: first, factory: segrobust_fakes:red_binner}
  - {name: second, factory: segrobust_fakes:red_binner}
corruptions: [rotate]
severities: [1]
batch_size: 3
"""


class OneBadLabel(BandScenes):
    """Band scenes whose sample ``bands/2`` holds ``label`` in one scored pixel (and 255, ignored, in another)."""

    def __init__(self, label: int) -> None:
        super().__init__(size=4)
        self.label = label

    def __getitem__(self, index: int) -> Sample:
        sample = super().__getitem__(index)
        assert sample.target is not None
        sample.target.mask[0, 1] = self.ignore_index
        if index == 2:
            sample.target.mask[0, 0] = self.label
        return sample


@pytest.mark.parametrize("label", [len(CLASS_NAMES), 40, -1])
def test_the_error_names_dataset_sample_class_id_and_classes(label: int) -> None:
    dataset = OneBadLabel(label)
    model = adapt_model(RedBinner(), get_task("semantic"))
    with pytest.raises(DatasetError) as caught:
        evaluate(model, dataset, settings=EvalSettings.of(task="semantic", metrics=("miou",), batch_size=2))
    classes = len(CLASS_NAMES)
    # Every sample has an ignored pixel (255) before the bad one: only the bad one is named.
    assert str(caught.value).startswith(
        f"{dataset.name}: sample bands/2: ground truth holds class id {label}, outside 0..{classes - 1} "
        f"(the dataset's {classes} class_names; ignore_index 255 marks pixels not scored)"
    )


def test_the_plugin_blames_the_dataset_entry_not_the_first_model(project: pytest.Pytester) -> None:
    (project.path / "bad_labels.py").write_text(BAD_LABELS)
    (project.path / "suites" / "labels.yaml").write_text(SUITE)
    result = run(project, "--segrobust", "-k", "labels")
    result.assert_outcomes(failed=4)
    expected = (
        "*suites/labels.yaml: field 'dataset': evaluating clean: bands-4-32x32-0: sample bands/2: ground truth "
        f"holds class id 9, outside 0..{len(CLASS_NAMES) - 1}*"
    )
    result.stdout.fnmatch_lines([expected])
    assert "field 'models" not in result.stdout.str()
