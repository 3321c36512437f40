from __future__ import annotations

import pytest

from pytest_segrobust.corruptions import REGISTRY, Category, CorruptionRegistry
from pytest_segrobust.corruptions.noise import GAUSSIAN_NOISE, GaussianNoise
from pytest_segrobust.errors import UnknownCorruptionError


def test_registering_an_equal_corruption_twice_is_a_no_op() -> None:
    registry = CorruptionRegistry()
    first = registry.register(GaussianNoise("g", Category.NOISE, GAUSSIAN_NOISE))
    registry.register(GaussianNoise("g", Category.NOISE, GAUSSIAN_NOISE))
    assert registry.get("g") is first


def test_a_different_corruption_cannot_take_a_name() -> None:
    registry = CorruptionRegistry()
    registry.register(GaussianNoise("g", Category.NOISE, GAUSSIAN_NOISE))
    with pytest.raises(ValueError, match="already registered in preset 'coco-p'"):
        registry.register(GaussianNoise("g", Category.BLUR, GAUSSIAN_NOISE))


def test_names_cannot_contain_the_composition_separator() -> None:
    with pytest.raises(ValueError, match="cannot contain"):
        CorruptionRegistry().register(GaussianNoise("a+b", Category.NOISE, GAUSSIAN_NOISE))


def test_unknown_names_and_presets_list_what_is_known() -> None:
    with pytest.raises(UnknownCorruptionError, match="unknown corruption 'nope' in preset 'coco-p'; known: .*gaussian_noise"):
        REGISTRY.get("nope")
    with pytest.raises(UnknownCorruptionError, match="unknown preset 'nope'; known: cityscapes-c, coco-p, imagenet-c"):
        REGISTRY.get("gaussian_noise", preset="nope")


def test_presets_differ_where_the_papers_do() -> None:
    assert REGISTRY.get("shot_noise", "coco-p").table[1].photons == 250
    assert REGISTRY.get("shot_noise", "imagenet-c").table[1].photons == 60


def test_restore_forgets_later_registrations() -> None:
    registry = CorruptionRegistry()
    state = registry.snapshot()
    registry.register(GaussianNoise("g", Category.NOISE, GAUSSIAN_NOISE))
    registry.restore(state)
    with pytest.raises(UnknownCorruptionError):
        registry.get("g")


def test_entry_point_plugins_register_their_corruptions(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "segrobust_extra.py").write_text(
        "from pytest_segrobust.corruptions import Category\n"
        "from pytest_segrobust.corruptions.noise import GAUSSIAN_NOISE, GaussianNoise\n"
        "def register(registry):\n"
        "    registry.register(GaussianNoise('extra_noise', Category.NOISE, GAUSSIAN_NOISE))\n"
    )
    info = tmp_path / "segrobust_extra-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: segrobust-extra\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[segrobust.corruptions]\nextra = segrobust_extra:register\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = CorruptionRegistry()
    registry.load_entry_points()
    assert registry.get("extra_noise").name == "extra_noise"


def test_a_broken_plugin_is_named(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "segrobust_broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: segrobust-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[segrobust.corruptions]\nbroken = no_such_module:register\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UnknownCorruptionError, match="corruption plugin 'broken' .* failed to register: ModuleNotFoundError"):
        CorruptionRegistry().load_entry_points()


def test_an_incomplete_preset_names_what_is_missing() -> None:
    registry = CorruptionRegistry()
    registry.register(GaussianNoise("gaussian_noise", Category.NOISE, GAUSSIAN_NOISE), presets=("coco-p",))
    with pytest.raises(UnknownCorruptionError, match="preset 'coco-p' is incomplete: not implemented yet: shot_noise, "):
        registry.preset("coco-p")
    assert [c.name for c in registry.available("coco-p")] == ["gaussian_noise"]


def test_every_preset_is_complete() -> None:
    for preset in ("coco-p", "imagenet-c", "cityscapes-c"):
        names = [c.name for c in REGISTRY.preset(preset)]
        assert len(names) == len(set(names)) and len(names) in (17, 19), preset
