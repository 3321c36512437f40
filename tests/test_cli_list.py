"""``segrobust list``: everything a suite may name, by family, with ``--family``, ``--preset`` and ``--names``."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest

from pytest_segrobust import cli
from pytest_segrobust.cli import main
from pytest_segrobust.corruptions import Category, CorruptionRegistry
from pytest_segrobust.corruptions.noise import GAUSSIAN_NOISE, GaussianNoise
from pytest_segrobust.corruptions.registry import PRESETS
from pytest_segrobust.corruptions.temporal import FRAME_FREEZE, FrameFreeze
from pytest_segrobust.suite.catalogue import IMAGE, family_of
from pytest_segrobust.tasks import TASKS, get_task
from pytest_segrobust.text.perturbations import CHARACTER_MISSING, CharacterMissing
from pytest_segrobust.text.registry import ENTRY_POINT_GROUP, TextPerturbationRegistry

HOMOGLYPHS = CharacterMissing("homoglyphs", "a plugin's text perturbation", CHARACTER_MISSING)
"""What the fake ``segrobust.text`` entry point below loads."""


def _listed(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main(["list", *args]) == 0
    return capsys.readouterr().out.splitlines()


def _family(name: str) -> list[str]:
    """The names of the built-in presets' perturbations of a family, computed from the registry."""
    return list(dict.fromkeys(c.name for p in PRESETS.values() for c in p.corruptions if family_of(c.category) == name))


def test_names_hold_every_text_temporal_and_acoustic_perturbation(capsys: pytest.CaptureFixture[str]) -> None:
    names = _listed(capsys, "--names")
    text = TextPerturbationRegistry.builtin().names()
    temporal, acoustic = _family(Category.TEMPORAL.value), _family(Category.ACOUSTIC.value)
    assert len(text) == 4 and len(temporal) == 5 and len(acoustic) == 13  # each family as the registries hold it
    for name in (*text, *temporal, *acoustic, *_family(IMAGE)):
        assert name in names
    assert len(names) == len(set(names))  # each once


def test_family_filters_the_listing_and_the_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert _listed(capsys, "--names", "--family", "text") == TextPerturbationRegistry.builtin().names()
    assert _listed(capsys, "--names", "--family", "temporal") == _family(Category.TEMPORAL.value)
    assert _listed(capsys, "--names", "--family", "acoustic") == _family(Category.ACOUSTIC.value)
    assert set(_listed(capsys, "--names", "--family", IMAGE)) == set(_family(IMAGE))
    out = _listed(capsys, "--family", "temporal")
    assert [line for line in out if line.startswith("family ")] == [out[0]] and out[0].startswith("family temporal")
    assert "  frame_freeze  [temporal, frame order]" in out and not any("gaussian_noise" in line for line in out)


def test_preset_text_lists_the_text_perturbations(capsys: pytest.CaptureFixture[str]) -> None:
    assert _listed(capsys, "--names", "--preset", "text") == TextPerturbationRegistry.builtin().names()
    out = _listed(capsys, "--preset", "text")
    assert "  misspelling  [text]" in out and "    s5: rate=0.25" in out  # character_missing's last row
    assert _listed(capsys, "--names", "--preset", "video-temporal") == _family(Category.TEMPORAL.value)


def test_unknown_family_is_refused_naming_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["list", "--family", "sound"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --family: invalid choice: 'sound'" in err
    for known in (IMAGE, "text", "temporal", "acoustic", "dynamic", "mixture", "replay"):
        assert repr(known) in err


def test_suite_key_families_say_what_their_key_adds(capsys: pytest.CaptureFixture[str]) -> None:
    out = "\n".join(_listed(capsys))
    takers = {key: [n for n in TASKS.names() if key in get_task(n).suite_keys] for key in ("dynamic", "mixture")}
    assert f"dynamic (tasks {', '.join(takers['dynamic'])}): adds the cell dynamic[PARTS]" in out
    assert "types: per_clip or per_frame" in out
    assert "adds the cell r2bench-mixture: per sample visual 40%, text 40%, both 20%" in out
    assert "adds the cell av-mixture: per sample visual 40%, audio 40%, both 20%" in out
    assert "mixture: r2bench (task promptable): adds the cell prompt-mixture: per sample visual 40%, prompt 40%, both 20%" in out
    assert "the cell replay-NAME" in out
    assert _listed(capsys, "--names", "--family", "mixture") == ["mixture"]
    assert _listed(capsys, "--names", "--family", "replay") == ["text_replay"]


def test_the_temporal_row_says_what_a_level_means_not_temporal_twice(capsys: pytest.CaptureFixture[str]) -> None:
    out = _listed(capsys, "--preset", "video-temporal")
    assert not any("[temporal, temporal]" in line for line in out)
    row = out.index("  frame_sampling  [temporal, frame order]")
    assert out[row + 1] == "    level: Every rate-th frame is kept and shown rate times: the clip at 1 / rate of its frame rate."
    assert out[row + 2] == "    s1: rate=2; at most half the clip"


def test_a_plugin_registered_corruption_shows_in_its_family(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = CorruptionRegistry.builtin()
    registry.register(FrameFreeze("plugin_stall", Category.TEMPORAL, FRAME_FREEZE), presets=("my-plugin",))
    registry.register(GaussianNoise("plugin_grain", Category.NOISE, GAUSSIAN_NOISE))  # into the default preset
    monkeypatch.setattr(cli, "REGISTRY", registry)
    temporal = _listed(capsys, "--names", "--family", "temporal")
    assert "plugin_stall" in temporal and "plugin_grain" not in temporal
    image = _listed(capsys, "--names", "--family", IMAGE)
    assert "plugin_grain" in image and "plugin_stall" not in image
    assert "preset my-plugin: " in _listed(capsys, "--family", "temporal")


def test_a_plugin_text_perturbation_shows_in_the_text_family(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = importlib.metadata.EntryPoint("homoglyphs", f"{__name__}:HOMOGLYPHS", ENTRY_POINT_GROUP)
    real = importlib.metadata.entry_points

    def entry_points(**selection: Any) -> Any:
        if selection.get("group") != ENTRY_POINT_GROUP:
            return real(**selection)
        return [plugin] if selection.get("name") in (None, plugin.name) else []

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    assert _listed(capsys, "--names", "--family", "text") == [*TextPerturbationRegistry.builtin().names(), "homoglyphs"]
