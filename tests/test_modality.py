"""One model of what a perturbation acts on: every family's category is a :class:`Category`, every
perturbation's modality is what its stored cell reads back as, and the referring and audio-visual
mixtures are one implementation that draws as each did on its own."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from pytest_segrobust.core.modality import DYNAMIC_PREFIX, Category, Modality, cell_modality, modality_of_category
from pytest_segrobust.corruptions import REGISTRY, Corruption
from pytest_segrobust.corruptions.dynamic import dynamic
from pytest_segrobust.corruptions.mixture import CrossModalMixture
from pytest_segrobust.tasks.avs import AudioVisualMixture, mixture_draw
from pytest_segrobust.text import TEXT_PERTURBATIONS, r2bench_mixture
from pytest_segrobust.text.cells import CrossModalComposition, MixtureCell, TextCell, is_visual, modality


def _text(name: str = "misspelling") -> TextCell:
    return TextCell(TEXT_PERTURBATIONS.get(name), seed=0)


def _cells() -> list[tuple[Corruption[Any], Modality]]:
    noise, gain = REGISTRY.get("gaussian_noise"), REGISTRY.get("gain", "avs-acoustic")
    return [
        (noise, Modality.VISUAL),
        (REGISTRY.get("rotate"), Modality.VISUAL),
        (REGISTRY.get("frame_freeze", "video-temporal"), Modality.TEMPORAL),
        (gain, Modality.AUDIO),
        (_text(), Modality.TEXT),
        (REGISTRY.get("fog+jpeg_compression"), Modality.COMPOSITION),
        (CrossModalComposition(noise, _text()), Modality.BOTH),
        (dynamic([noise, REGISTRY.get("rotate")]), Modality.DYNAMIC),
        (MixtureCell([noise], [_text()], seed=0), Modality.MIXTURE),
        (AudioVisualMixture([noise], [gain], seed=0), Modality.MIXTURE),
    ]


@pytest.mark.parametrize(("cell", "expected"), _cells(), ids=lambda value: getattr(value, "name", str(value)))
def test_every_family_declares_its_modality_and_its_stored_cell_reads_back_the_same(
    cell: Corruption[Any], expected: Modality
) -> None:
    assert isinstance(cell.category, Category)
    assert cell.modality is expected
    # What the report reads from a record (category string and cell name) is what the class declared.
    assert cell_modality(cell.category.value, cell.name) is expected


@pytest.mark.parametrize("preset", REGISTRY.presets())
def test_every_registered_corruption_has_a_category_whose_modality_its_record_keeps(preset: str) -> None:
    for corruption in REGISTRY.available(preset):
        assert isinstance(corruption.category, Category), corruption
        assert cell_modality(corruption.category.value, corruption.name) is corruption.modality, corruption
        assert not corruption.modality.composite, corruption


def test_stored_strings_are_the_ones_reports_always_held() -> None:
    assert [c.value for c in Category] == [
        "noise", "blur", "compression", "digital", "camera", "environment", "temporal", "composed",
        "acoustic", "text", "prompt", "cross-modal", "mixture",
    ]  # fmt: skip
    assert modality_of_category("a plugin's own") is Modality.VISUAL
    assert cell_modality("composed", f"{DYNAMIC_PREFIX}fog,rotate]") is Modality.DYNAMIC
    assert cell_modality("composed", "fog+rotate") is Modality.COMPOSITION
    # R2-Bench's referring tables: text, both and mixture apart, every other modality shown as visual.
    shown = {c.value: modality(c.value) for c in Category}
    assert shown == {c.value: "visual" for c in Category} | {
        "text": "text",
        "cross-modal": "both",
        "mixture": "mixture",
    }


def test_only_cells_that_leave_the_expressions_alone_are_visual() -> None:
    assert [is_visual(cell) for cell, _ in _cells()] == [True, True, True, True, False, True, False, True, False, False]


def test_both_mixtures_are_one_implementation_that_draws_as_each_did() -> None:
    assert isinstance(MixtureCell([REGISTRY.get("fog")], [_text()], seed=0), CrossModalMixture)
    audio = [
        mixture_draw(7, f"clip{i}", ["gaussian_noise", "motion_blur"], ["gain", "low_pass", "time_mask"])
        for i in range(500)
    ]
    text = [
        r2bench_mixture(
            3, f"img{i}/0/0", ["fog", "rotate", "gaussian_noise"], ["misspelling", "grammar_error"], [1, 3, 5]
        )
        for i in range(500)
    ]
    # Digests of the draws of the two implementations before they became one.
    assert _digest([(d.modality.value, d.visual, d.audio) for d in audio]) == "efb19e887029fa37"
    assert _digest([(d.modality.value, d.visual, d.text, d.severity) for d in text]) == "e3b03bbe27b67bd8"
    assert {d.modality for d in audio} == {Modality.VISUAL, Modality.AUDIO, Modality.BOTH}
    assert all(d.text is None and d.severity is None for d in audio)
    assert all(d.audio is None for d in text)


def _digest(rows: list[tuple[Any, ...]]) -> str:
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:16]
