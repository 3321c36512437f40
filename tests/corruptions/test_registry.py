from __future__ import annotations

import pytest

from pytest_segrobust.core.errors import UnknownCorruptionError
from pytest_segrobust.corruptions import PRESETS, REGISTRY, Category, CorruptionRegistry, Preset
from pytest_segrobust.corruptions.noise import GAUSSIAN_NOISE, GaussianNoise


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
    with pytest.raises(UnknownCorruptionError, match="unknown preset 'nope'; known: avs-acoustic, cityscapes-c, coco-p, coco-p-legacy-shear, coco-p-prompts, imagenet-c, video-temporal"):
        REGISTRY.get("gaussian_noise", preset="nope")


def test_presets_differ_where_the_papers_do() -> None:
    assert REGISTRY.get("shot_noise", "coco-p").table[1].photons == 250
    assert REGISTRY.get("shot_noise", "imagenet-c").table[1].photons == 60


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


def test_every_preset_is_complete() -> None:
    for preset in ("coco-p", "imagenet-c", "cityscapes-c"):
        names = [c.name for c in REGISTRY.preset(preset)]
        assert len(names) == len(set(names)) and len(names) in (17, 19), preset


# The papers' order, written out: the presets' order is part of every report and baseline.
PAPER_ORDER = {
    "coco-p": [
        "gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise",
        "defocus_blur", "motion_blur", "zoom_blur",
        "jpeg_compression", "pixelate",
        "contrast", "shear",
        "rotate", "translate",
        "brightness", "darkness", "fog", "snow",
    ],
    "imagenet-c": [
        "gaussian_noise", "shot_noise", "impulse_noise",
        "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
        "snow", "frost", "fog",
        "brightness", "contrast", "elastic_transform", "pixelate", "jpeg_compression",
        "speckle_noise", "gaussian_blur", "spatter", "saturate",
    ],
    "cityscapes-c": [
        "motion_blur", "defocus_blur", "glass_blur", "gaussian_blur", "psf_blur",
        "gaussian_noise", "impulse_noise", "shot_noise", "speckle_noise", "intensity_noise",
        "brightness", "contrast", "saturate", "jpeg_compression",
        "snow", "spatter", "fog", "frost",
        "geometric_distortion",
    ],
    "video-temporal": ["frame_freeze", "frame_sampling", "reverse_sampling", "jumble", "box_jumble"],
    "avs-acoustic": [
        "audio_gaussian_noise", "background_noise", "audio_impulse_noise", "impulse_response",
        "gain", "tanh_distortion", "peaking_filter", "low_pass", "high_pass",
        "air_absorption", "room_reverb", "time_mask", "mp3_compression",
    ],
}


PAPER_ORDER["coco-p-legacy-shear"] = PAPER_ORDER["coco-p"]
PAPER_ORDER["coco-p-prompts"] = [
    *PAPER_ORDER["coco-p"],
    "box_jitter", "box_shift", "point_displacement", "missing_click", "false_click", "neighbour_box",
]


def test_legacy_shear_preset_differs_from_coco_p_in_shear_alone() -> None:
    registry = CorruptionRegistry.builtin()
    for name in PAPER_ORDER["coco-p"]:
        legacy, plain = registry.get(name, "coco-p-legacy-shear"), registry.get(name, "coco-p")
        assert (legacy is plain) == (name != "shear"), name
    assert registry.get("shear", "coco-p-legacy-shear").convention == "legacy"


def test_presets_keep_the_papers_order() -> None:
    registry = CorruptionRegistry.builtin()
    assert registry.presets() == sorted(PAPER_ORDER)
    for preset, names in PAPER_ORDER.items():
        assert [c.name for c in registry.preset(preset)] == names, preset
        assert list(PRESETS[preset].corruption_names) == names, preset


def test_cityscapes_c_shares_imagenet_c_instances() -> None:
    registry = CorruptionRegistry.builtin()
    for name in ("shot_noise", "speckle_noise", "motion_blur", "contrast", "brightness", "frost"):
        assert registry.get(name, "cityscapes-c") is registry.get(name, "imagenet-c"), name


def test_registering_into_a_preset_appends_to_its_default_list() -> None:
    registry = CorruptionRegistry.builtin()
    extra = GaussianNoise("extra_noise", Category.NOISE, GAUSSIAN_NOISE)
    registry.register(extra, presets=("coco-p", "cityscapes-c"))
    for preset in ("coco-p", "cityscapes-c"):
        assert registry.preset(preset) == [*CorruptionRegistry.builtin().preset(preset), extra], preset
        assert registry.get("extra_noise", preset) is extra
        assert registry.definition(preset).description == PRESETS[preset].description
    assert [c.name for c in registry.preset("imagenet-c")] == PAPER_ORDER["imagenet-c"]
    assert registry.get("extra_noise+rotate").name == "rotate+extra_noise"  # composable like a built-in


def test_registering_into_a_new_preset_creates_it() -> None:
    registry = CorruptionRegistry.builtin()
    extra = GaussianNoise("extra_noise", Category.NOISE, GAUSSIAN_NOISE)
    registry.register(extra, presets=("mine",))
    assert registry.presets() == ["avs-acoustic", "cityscapes-c", "coco-p", "coco-p-legacy-shear", "coco-p-prompts", "imagenet-c", "mine", "video-temporal"]
    assert registry.preset("mine") == [extra]


def test_a_refused_registration_changes_no_preset() -> None:
    registry = CorruptionRegistry.builtin()
    impostor = GaussianNoise("rotate", Category.NOISE, GAUSSIAN_NOISE)  # free in imagenet-c, taken in coco-p
    with pytest.raises(ValueError, match="'rotate' is already registered in preset 'coco-p'"):
        registry.register(impostor, presets=("imagenet-c", "coco-p"))
    assert [c.name for c in registry.preset("imagenet-c")] == PAPER_ORDER["imagenet-c"]


def test_registries_are_independent() -> None:
    first, second = CorruptionRegistry.builtin(), CorruptionRegistry.builtin()
    first.register(GaussianNoise("extra_noise", Category.NOISE, GAUSSIAN_NOISE))
    for untouched in (second, CorruptionRegistry.builtin(), REGISTRY):
        assert [c.name for c in untouched.preset("coco-p")] == PAPER_ORDER["coco-p"]
        with pytest.raises(UnknownCorruptionError):
            untouched.get("extra_noise")
    assert PRESETS["coco-p"].corruption_names == tuple(PAPER_ORDER["coco-p"])


def test_the_builtin_presets_are_read_only() -> None:
    with pytest.raises(TypeError):
        PRESETS["mine"] = Preset("mine", "", ())  # type: ignore[index]
    with pytest.raises(AttributeError):
        PRESETS["coco-p"].corruptions = ()  # type: ignore[misc]


def test_a_preset_lists_each_name_once() -> None:
    noise = GaussianNoise("g", Category.NOISE, GAUSSIAN_NOISE)
    with pytest.raises(ValueError, match="preset 'mine' lists g more than once"):
        Preset("mine", "", (noise, GaussianNoise("g", Category.NOISE, GAUSSIAN_NOISE)))
