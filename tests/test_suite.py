"""Suite validation: every error names the file, the field and what was expected."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from pytest_segrobust.core.errors import SuiteError
from pytest_segrobust.core.extras import Extra
from pytest_segrobust.corruptions import PRESETS
from pytest_segrobust.suite.schema import Tolerance, load_suite

VALID = """\
dataset: {factory: tests.fakes:band_scenes, kwargs: {size: 4}}
models:
  - {name: binner, factory: tests.fakes:red_binner}
"""


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_defaults(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, VALID + "corruptions: [rotate]\n", "nightly.yaml"))
    assert suite.name == "nightly"  # from the file name
    assert suite.severities == (1, 2, 3, 4, 5)
    assert suite.tolerance == Tolerance(gamma_r=0.01, score=1.0)
    assert suite.batch_size == 16 and suite.seed == 0 and suite.limit is None
    assert suite.models[0].kind == "factory" and suite.models[0].settings.factory.kwargs == {}
    assert suite.dataset.kwargs == {"size": 4}


def test_a_tolerance_of_zero_means_exact_and_is_accepted(tmp_path: Path) -> None:
    # Unlike a statistical gate's margin (refused at 0: no interval can confirm it), a point tolerance may be 0.
    suite = load_suite(write(tmp_path, VALID + "corruptions: [rotate]\ntolerance: {gamma_r: 0, score: 0}\n"))
    assert suite.tolerance == Tolerance(gamma_r=0.0, score=0.0)


def test_a_bare_preset_means_all_its_corruptions(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, VALID))
    assert suite.preset == "coco-p"
    assert suite.corruptions == PRESETS["coco-p"].corruption_names and len(suite.corruptions) == 17


@pytest.mark.parametrize(
    ("extra", "field", "expected"),
    [
        ("corruptions: [gaussian_noise, nope]", "corruptions[1]", "unknown corruption 'nope'"),
        (
            "corruptions: [mispelling]",  # a misspelt text perturbation: named, though task semantic cannot use it
            "corruptions[0]",
            (
                "'mispelling' is close to text perturbation 'misspelling', which perturbs referring expressions: "
                "task semantic has none (text perturbations fit task referring)"
            ),
        ),
        ("corruptions: [rotate]\nseverities: [1, 6]", "severities[1]", "expected an integer 1..5, got 6"),
        ("corruptions: [rotate]\nbatch_size: 0", "batch_size", "expected an integer >= 1, got 0"),
        ("corruptions: [rotate]\ntolerance: {gamma_r: -1}", "tolerance.gamma_r", "expected a number >= 0"),
        ("corruptions: [rotate]\ntolerance: {gama_r: 1}", "tolerance.gama_r", "unknown field"),
        ("corruptions: [rotate]\nmetric: map", "metric", "metric 'map' reads InstanceMasks, which task semantic does not provide"),
        ("corruptions: [rotate]\ntask: instance\nmetric: miou", "metric", "reads SemanticMask, which task instance does not"),
        ("corruptions: [rotate]\ntask: depth", "task", "expected one of avs, instance, panoptic, promptable, referring, rvos, semantic, vos, got 'depth'"),
        ("corruptions: [rotate]\nmetrics: [miou, dice]", "metrics[1]", "unknown metric 'dice'; known: avs_f, avs_miou, boundary_iou, map, miou, pq"),
        ("corruptions: [rotate]\nmetrics: [miou, miou]", "metrics[1]", "metric 'miou' is listed twice"),
        ("corruptions: [rotate]\nmetrics: []", "metrics", "expected a non-empty list of metric names"),
        ("corruptions: [rotate]\nmetric: miou\nmetrics: [miou]", "metric", "give either 'metric' or 'metrics', not both"),
        ("corruptions: [rotate]\nshifts: {reference: a, splits: [b]}", "shifts.reference", "'a' is not one of the splits (b)"),
        ("corruptions: [rotate]\nshifts: {reference: a, splits: [a, a]}", "shifts.splits[1]", "split 'a' is listed twice"),
        ("corruptions: [rotate]\nshifts: {reference: a, splits: [a], extra: 1}", "shifts.extra", "unknown field"),
        ("corruptions: [rotate]\nshifts: {reference: a, splits: 3}", "shifts.splits", "expected a non-empty list"),
        ("corruptions: [rotate]\nseeds: 3", "seeds", "unknown field"),
        ("corruptions: [fog, rotate, rotate]", "corruptions[2]", "corruption 'rotate' is listed twice: corruptions[1] names it too"),
        (
            "corruptions: [rotate+fog, fog+rotate]",
            "corruptions[1]",
            "corruption 'fog+rotate' is listed twice: corruptions[0] 'rotate+fog' is the same cell",
        ),
        # A semantic suite reads no text: a misspelt name is an unknown image corruption, nothing else.
        ("corruptions: [rotat]", "corruptions[0]", "unknown corruption 'rotat' in preset 'coco-p' (did you mean 'rotate'?); known: "),
        ("corruptions: [rotate]\npreset: imagenet-x", "preset", "unknown preset 'imagenet-x'"),
        ("corruptions: [rotate]\nseverities: [3, 3]", "severities[1]", "severity 3 is listed twice"),
        ("corruptions: [rotate]\ncd: {reference: binner, noise_severities: [1, 1]}", "cd.noise_severities[1]", "listed twice"),
        ("corruptions: [rotate]\ntimeout: 0", "timeout", "expected a number of seconds > 0, got 0"),
        (
            "corruptions: [rotate]\ngate: {margin: {score: 1.0}, multiplicity: holm}",
            "gate.multiplicity",
            "'holm' is not offered: each cell is decided on its own as its item runs",
        ),
        (
            "corruptions: [rotate]\ngate: {margin: {score: 1.0}, multiplicity: benjamini_hochberg}",
            "gate.multiplicity",
            "decide each number from the p-values of the whole family",
        ),
        ("corruptions: [rotate]\ngate: {margin: {score: 1.0}, multiplicity: sidak}", "gate.multiplicity", "expected one of bonferroni, none, got 'sidak'"),
        ("corruptions: [rotate]\ntimeout: .inf", "timeout", "expected a number of seconds > 0, got inf"),
    ],
)
def test_bad_field_is_named(tmp_path: Path, extra: str, field: str, expected: str) -> None:
    path = write(tmp_path, VALID + extra + "\n")
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    message = str(info.value)
    assert message.startswith(f"{path}: field '{field}': ")
    assert expected in message


@pytest.mark.parametrize(
    ("text", "field", "expected"),
    [
        ("models: []\ndataset: tests.fakes:band_scenes", "models", "non-empty list"),
        ("models: [{name: a, factory: tests.fakes:red_binner}]", "dataset", "is required"),
        ("dataset: tests.fakes:band_scenes\nmodels: [{factory: tests.fakes:red_binner}]", "models[0].name", "is required"),
        ("dataset: tests.fakes:band_scenes\nmodels: [{name: 'a b', factory: x:y}]", "models[0].name", "not a valid name"),
        ("dataset: tests.fakes:nothing\nmodels: [{name: a, factory: tests.fakes:red_binner}]", "dataset.factory", "has no attribute 'nothing'"),
        ("dataset: no_such_pkg.mod:f\nmodels: [{name: a, factory: tests.fakes:red_binner}]", "dataset.factory", "cannot import module 'no_such_pkg.mod'"),
        ("dataset: tests.fakes\nmodels: [{name: a, factory: tests.fakes:red_binner}]", "dataset.factory", "not of the form 'package.module:attribute'"),
        (
            "dataset: tests.fakes:band_scenes\nmodels: [{name: a, factory: tests.fakes:red_binner}, {name: a, factory: tests.fakes:red_binner}]",
            "models[1].name",
            "duplicate model name 'a'",
        ),
    ],
)
def test_bad_structure_is_named(tmp_path: Path, text: str, field: str, expected: str) -> None:
    path = write(tmp_path, text + "\ncorruptions: [rotate]\n")
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert str(info.value).startswith(f"{path}: field '{field}': ")
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('LABELS = {}\nLABELS["road"]\n', "raised KeyError: 'road' (segrobust_broken_{kind}.py, line 2)"),
        ("def make(:\n    pass\n", "raised SyntaxError: invalid syntax (segrobust_broken_{kind}.py, line 1)"),
    ],
    ids=["key", "syntax"],
)
def test_a_module_that_fails_at_import_is_one_line_naming_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, source: str, expected: str
) -> None:
    kind = request.node.callspec.id
    (tmp_path / f"segrobust_broken_{kind}.py").write_text(source)
    monkeypatch.syspath_prepend(tmp_path)
    path = write(tmp_path, f"dataset: segrobust_broken_{kind}:make\nmodels: [{{name: a, factory: tests.fakes:red_binner}}]\n")
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    message = str(info.value)
    assert message == f"{path}: field 'dataset.factory': importing module 'segrobust_broken_{kind}' " + expected.format(kind=kind)


def missing_modules(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make ``names`` look uninstalled to the check of extras (it finds modules without importing them)."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in names else find_spec(name, *a))


@pytest.mark.parametrize(
    ("text", "missing", "field", "expected"),
    [
        (
            VALID + "task: instance\nmetric: map\n",
            "faster_coco_eval",
            "metric",
            ("metric 'map'", "coco"),
        ),
        (
            VALID + "task: instance\nmetrics: [map]\n",
            "pycocotools",
            "metrics[0]",
            ("metric 'map'", "coco"),
        ),
        (
            "dataset: tests.fakes:band_scenes\nmodels: [{name: m, onnx: m.onnx}]\n",
            "onnxruntime",
            "models[0].onnx",
            ("an ONNX model", "onnx"),
        ),
        (
            "dataset: tests.fakes:band_scenes\nmodels: [{name: m, transformers: ckpt}]\n",
            "transformers",
            "models[0].transformers",
            ("a transformers model", "transformers"),
        ),
    ],
    ids=["metric", "metrics", "onnx", "transformers"],
)
def test_a_missing_extra_is_one_error_naming_the_field_the_module_and_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, missing: str, field: str, expected: tuple[str, str]
) -> None:
    what, extra = expected
    path = write(tmp_path, text + "corruptions: [rotate]\n")
    load_suite(path)  # every extra is installed where the tests run
    missing_modules(monkeypatch, missing)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    install = f'pip install "pytest-segrobust[{extra}]"'
    assert str(info.value) == f"{path}: field '{field}': {what} needs {missing}, which is not installed: {install}"


def test_a_corruption_that_declares_an_extra_is_checked_alone_and_in_a_composition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_segrobust.corruptions import REGISTRY

    monkeypatch.setattr(type(REGISTRY.get("gaussian_noise")), "requires", (Extra("opencv", ("cv2",)),))
    missing_modules(monkeypatch, "cv2")
    for i, listed in enumerate(["rotate, gaussian_noise", "rotate, gaussian_noise+rotate"]):
        path = write(tmp_path, VALID + f"corruptions: [{listed}]\n", f"s{i}.yaml")
        with pytest.raises(SuiteError) as info:
            load_suite(path)
        name = listed.split(", ")[1]
        assert str(info.value) == (
            f"{path}: field 'corruptions[1]': corruption {name!r} needs cv2, which is not installed: "
            'pip install "pytest-segrobust[opencv]"'
        )


def test_invalid_yaml_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "models: [a,\n  b: c\n")
    with pytest.raises(SuiteError, match=rf"^{path}: invalid YAML at line \d+, column \d+"):
        load_suite(path)


def test_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="a suite is a YAML mapping, got list"):
        load_suite(write(tmp_path, "- a\n- b\n"))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="cannot read the suite"):
        load_suite(tmp_path / "absent.yaml")


def test_compositions_are_stored_under_their_stage_ordered_name(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, VALID + "corruptions: [jpeg_compression+rotate, gaussian_noise]\n"))
    assert suite.corruptions == ("rotate+jpeg_compression", "gaussian_noise")


def test_cd_settings(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, VALID + "corruptions: [rotate]\ncd: {reference: binner, noise_severities: [1, 2, 3]}\n"))
    assert suite.degradation is not None
    assert suite.degradation.reference == "binner" and suite.degradation.noise_severities == (1, 2, 3)


@pytest.mark.parametrize(
    ("cd", "field", "expected"),
    [
        ("{reference: nobody}", "cd.reference", "'nobody' is not one of the suite's models (binner)"),
        ("{reference: binner, noise_severities: [0]}", "cd.noise_severities[0]", "expected an integer 1..5"),
        ("{reference: binner, noise: [1]}", "cd.noise", "unknown field"),
        ("binner", "cd", "expected a mapping with 'reference"),
    ],
)
def test_bad_cd_settings_are_named(tmp_path: Path, cd: str, field: str, expected: str) -> None:
    path = write(tmp_path, VALID + f"corruptions: [rotate]\ncd: {cd}\n")
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert str(info.value).startswith(f"{path}: field '{field}': ") and expected in str(info.value)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (VALID.replace("kwargs: {size: 4}}", "kwarg: {size: 4}}"), "dataset.kwarg"),
        (VALID.replace("factory: tests.fakes:red_binner}", "factory: tests.fakes:red_binner, kwarg: {smoothing: 3}}"), "models[0].kwarg"),
        (VALID.replace("kwargs: {size: 4}}", "kwargs: {size: 4}, split: val}"), "dataset.split"),
    ],
)
def test_an_unknown_factory_key_is_never_dropped(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(SuiteError, match=rf"field '{re.escape(field)}': unknown field; expected "):
        load_suite(write(tmp_path, text + "corruptions: [rotate]\n"))


def test_timeout_is_read(tmp_path: Path) -> None:
    assert load_suite(write(tmp_path, VALID + "corruptions: [rotate]\ntimeout: 90\n")).timeout == 90.0
    assert load_suite(write(tmp_path, VALID + "corruptions: [rotate]\n")).timeout is None


def test_metrics_list_the_headline_first_and_metric_is_its_shorthand(tmp_path: Path) -> None:
    several = load_suite(write(tmp_path, VALID + "corruptions: [rotate]\nmetrics: [miou, boundary_iou]\n"))
    assert several.metrics == ("miou", "boundary_iou") and several.metric == "miou"
    one = load_suite(write(tmp_path, VALID + "corruptions: [rotate]\nmetric: boundary_iou\n", "one.yaml"))
    assert one.metrics == ("boundary_iou",)
    default = load_suite(write(tmp_path, VALID + "corruptions: [rotate]\ntask: panoptic\n", "pan.yaml"))
    assert default.metrics == ("pq",)


def test_shifts_call_the_dataset_factory_per_split_or_name_a_factory_each(tmp_path: Path) -> None:
    listed = load_suite(write(tmp_path, VALID + "corruptions: [rotate]\nshifts: {reference: easy, splits: [easy, hard]}\n"))
    assert listed.splits == ("easy", "hard") and listed.shifts is not None and listed.shifts.reference == "easy"
    assert listed.dataset_spec("hard").kwargs == {"size": 4, "split": "hard"}
    assert listed.dataset_spec("hard").target == listed.dataset.target
    mapped = load_suite(
        write(
            tmp_path,
            VALID + "corruptions: [rotate]\nshifts:\n  reference: a\n  splits:\n"
            "    a: {factory: tests.fakes:band_scenes, kwargs: {size: 2}}\n    b: tests.fakes:band_scenes\n",
            "mapped.yaml",
        )
    )
    assert mapped.dataset_spec("a").kwargs == {"size": 2} and mapped.dataset_spec("b").kwargs == {}
    assert load_suite(write(tmp_path, VALID + "corruptions: [rotate]\n", "plain.yaml")).splits == (None,)


MODEL_HEAD = """\
dataset: {factory: tests.fakes:band_scenes}
corruptions: [rotate]
models:
"""


@pytest.mark.parametrize(
    ("entry", "field", "expected"),
    [
        ("{name: m, factory: tests.fakes:red_binner, onnx: m.onnx}", "models[0]", "exactly one of 'factory'"),
        ("{name: m}", "models[0]", "exactly one of 'factory' (a package.module:callable), 'onnx' (a model file) and 'transformers'"),
        ("{name: m, onnx: m.onnx, transformers: d}", "models[0]", "exactly one of"),
        ("{name: m, transformers: d, input: {}}", "models[0].input", "unknown field of a transformers model"),
        ("{name: m, transformers: d, label_map: {a: 1}}", "models[0].label_map", "mapping of model label to dataset class"),
        ("{name: m, transformers: d, allow_download: 1}", "models[0].allow_download", "expected true or false"),
        ("{name: m, onnx: m.onnx, kwargs: {a: 1}}", "models[0].kwargs", "unknown field of an ONNX model"),
        ("{name: m, onnx: ''}", "models[0].onnx", "expected the path of an .onnx file"),
        ("{name: m, factory: tests.fakes:red_binner, input: {layout: NHWC}}", "models[0].output", "is required with 'input'"),
        ("{name: m, factory: tests.fakes:red_binner, output: {kind: mask}}", "models[0].output.kind", "expected one of logits"),
        ("{name: m, onnx: m.onnx, input: {layout: HWC}}", "models[0].input.layout", "expected one of NCHW, NHWC"),
        ("{name: m, onnx: m.onnx, input: [NHWC]}", "models[0].input", "expected a mapping"),
        ("{name: m, onnx: m.onnx, output: {kind: labels, treshold: 1}}", "models[0].output.treshold", "unknown field of output"),
    ],
)
def test_a_bad_model_entry_is_named(tmp_path: Path, entry: str, field: str, expected: str) -> None:
    path = write(tmp_path, MODEL_HEAD + f"  - {entry}\n")
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert str(info.value).startswith(f"{path}: field '{field}': ") and expected in str(info.value)


def test_onnx_and_array_models_are_semantic_only(tmp_path: Path) -> None:
    path = write(tmp_path, MODEL_HEAD.replace("corruptions", "task: instance\ncorruptions") + "  - {name: m, onnx: m.onnx}\n")
    with pytest.raises(SuiteError, match=r"field 'models\[0\]': an ONNX model predicts class ids per pixel: it fits task semantic, not instance"):
        load_suite(path)


def test_model_entries_keep_their_source_and_blocks(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        MODEL_HEAD
        + "  - {name: a, onnx: nets/a.onnx, input: {mean: [0.5, 0.5, 0.5], std: [0.2, 0.2, 0.2]}}\n"
        + "  - {name: b, factory: tests.fakes:red_binner, input: {layout: NHWC}, output: {kind: labels}}\n",
    )
    a, b = load_suite(path).models
    assert (a.kind, a.settings.path, a.settings.input, a.settings.output, a.source) == (
        "onnx", "nets/a.onnx", {"mean": [0.5, 0.5, 0.5], "std": [0.2, 0.2, 0.2]}, None, "onnx model nets/a.onnx"
    )
    assert (b.kind, b.settings.factory.target, b.settings.input, b.settings.output, b.source) == (
        "factory", "tests.fakes:red_binner", {"layout": "NHWC"}, {"kind": "labels"}, "factory tests.fakes:red_binner"
    )


def test_asking_a_suite_for_a_model_it_lacks_names_the_suite_and_its_models() -> None:
    suite = load_suite(Path(__file__).resolve().parents[1] / "suites" / "demo.yaml")
    assert suite.model(suite.models[0].name) is suite.models[0]
    with pytest.raises(SuiteError, match=r"demo: no model 'tiny-unett' \(models: .*tiny-unet.*\) \(did you mean 'tiny-unet'\?\)"):
        suite.model("tiny-unett")
