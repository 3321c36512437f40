"""Corruptions by name and preset.

A preset is a paper's benchmark: an ordered list of corruptions, each carrying that paper's
severity table. :data:`PRESETS` is the one place that says which corruptions a built-in preset
has and in what order. A registry holds the presets of one pytest run: registering a
corruption into a preset appends it, so it is part of the preset's default list. A bare
corruption name in a suite resolves in the default preset.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pytest_segrobust.core.errors import UnknownCorruptionError
from pytest_segrobust.core.wording import did_you_mean
from pytest_segrobust.corruptions import (
    acoustic,
    blur,
    compression,
    digital,
    geometric,
    noise,
    prompts,
    temporal,
    weather,
)
from pytest_segrobust.corruptions.base import Corruption
from pytest_segrobust.corruptions.composition import SEPARATOR, Composition

DEFAULT_PRESET = "coco-p"
ENTRY_POINT_GROUP = "segrobust.corruptions"


@dataclass(frozen=True)
class Preset:
    """A benchmark's corruptions, in the paper's order, each with the paper's severity table.

    Raises:
        ValueError: for two corruptions of one name, or a name containing the composition separator.
    """

    name: str
    description: str
    corruptions: tuple[Corruption[Any], ...]

    def __post_init__(self) -> None:
        names = self.corruption_names
        for name in names:
            if SEPARATOR in name:
                raise ValueError(f"corruption names cannot contain {SEPARATOR!r}: {name!r}")
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"preset {self.name!r} lists {', '.join(repeated)} more than once")

    @property
    def corruption_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.corruptions)

    def find(self, name: str) -> Corruption[Any] | None:
        """The corruption called ``name``, or None."""
        return next((c for c in self.corruptions if c.name == name), None)

    def appended(self, corruption: Corruption[Any]) -> Preset:
        """This preset with ``corruption`` added at the end."""
        return Preset(self.name, self.description, (*self.corruptions, corruption))


def _coco_p(shear: Corruption[Any]) -> tuple[Corruption[Any], ...]:
    # Schiappa et al.'s 17, in their order, with one of the two shear conventions.
    return (
        noise.gaussian_noise, noise.shot_noise_coco_p, noise.impulse_noise, noise.speckle_noise_coco_p,
        blur.defocus_blur, blur.motion_blur_coco_p, blur.zoom_blur_coco_p,
        compression.jpeg_compression, compression.pixelate,
        digital.contrast_coco_p, shear,
        geometric.rotate, geometric.translate,
        digital.brightness_coco_p, digital.darkness, weather.fog, weather.snow,
    )


# Kamann & Rother's Cityscapes-C reuses ImageNet-C's instances (and so its tables); an
# instance shared by presets is one object.
PRESETS: Mapping[str, Preset] = MappingProxyType(
    {
        preset.name: preset
        for preset in (
            Preset(
                "coco-p",
                "Schiappa et al., COCO-P / ADE20K-P: 17 corruptions x 5 severities",
                _coco_p(geometric.shear),
            ),
            Preset(
                "coco-p-legacy-shear",
                "COCO-P with shear as imgaug 0.4.0 drew it on scikit-image <= 0.20 (sin shear, rows squeezed by cos)",
                _coco_p(geometric.shear_legacy),
            ),
            Preset(
                "coco-p-prompts",
                "COCO-P's 17 corruptions and six perturbations of the prompts of a promptable model (ours): box "
                "jitter and shift, point displacement, a missing click, a false click, a neighbour's box",
                (*_coco_p(geometric.shear), *prompts.PROMPT_PERTURBATIONS),
            ),
            Preset(
                "imagenet-c",
                "Hendrycks & Dietterich, ImageNet-C: 15 corruptions + 4 hold-out, published constants",
                (
                    noise.gaussian_noise, noise.shot_noise_imagenet_c, noise.impulse_noise,
                    blur.defocus_blur, blur.glass_blur, blur.motion_blur_imagenet_c, blur.zoom_blur_imagenet_c,
                    weather.snow, weather.frost, weather.fog,
                    digital.brightness_imagenet_c, digital.contrast_imagenet_c, geometric.elastic_transform,
                    compression.pixelate, compression.jpeg_compression,
                    noise.speckle_noise_imagenet_c, blur.gaussian_blur, weather.spatter, digital.saturate,
                ),
            ),
            Preset(
                "cityscapes-c",
                "Kamann & Rother, Cityscapes-C: ImageNet-C plus intensity-dependent noise, PSF blur, "
                "geometric distortion",
                (
                    blur.motion_blur_imagenet_c, blur.defocus_blur, blur.glass_blur, blur.gaussian_blur, blur.psf_blur,
                    noise.gaussian_noise, noise.impulse_noise, noise.shot_noise_imagenet_c,
                    noise.speckle_noise_imagenet_c, noise.intensity_noise,
                    digital.brightness_imagenet_c, digital.contrast_imagenet_c, digital.saturate,
                    compression.jpeg_compression,
                    weather.snow, weather.spatter, weather.fog, weather.frost,
                    geometric.geometric_distortion,
                ),
            ),
            Preset(
                "video-temporal",
                "Clips whose frames stall, skip, run backwards or come out of order (ours: freeze; Schiappa et "
                "al., video action recognition: sampling, reverse sampling, jumble, box jumble); acts on clips only",
                (
                    temporal.frame_freeze, temporal.frame_sampling, temporal.reverse_sampling,
                    temporal.jumble, temporal.box_jumble,
                ),
            ),
            Preset(
                "avs-acoustic",
                "Li et al., R2-Bench: twelve acoustic perturbations of audio-visual segmentation (impulse noise both "
                "as the paper's spikes and as the toolbox's impulse response), our tables; acts on audio only",
                acoustic.ACOUSTIC,
            ),
        )
    }
)
"""The built-in presets. Read-only: a run adds corruptions to its own registry."""


class CorruptionRegistry:
    """Presets by name, each an ordered list of corruptions.

    ``CorruptionRegistry()`` is empty; :meth:`builtin` holds the built-in presets. Registries
    share no state: registering into one leaves every other untouched.

    Args:
        presets: The presets to start from; a registry never changes a :class:`Preset`, it
            replaces it.
    """

    def __init__(self, presets: Iterable[Preset] = ()) -> None:
        self._presets: dict[str, Preset] = {preset.name: preset for preset in presets}

    @classmethod
    def builtin(cls) -> CorruptionRegistry:
        """A new registry holding the built-in presets (:data:`PRESETS`) and nothing else."""
        return cls(PRESETS.values())

    def register(self, corruption: Corruption[Any], presets: tuple[str, ...] = (DEFAULT_PRESET,)) -> Corruption[Any]:
        """Append ``corruption`` to each of ``presets``, creating a preset that does not exist yet.

        It then belongs to the preset's default list (a suite that names no corruptions runs
        it) and resolves by name in the preset. Registering an equal corruption (same class,
        name, category and table) again is a no-op, so a conftest and an installed plugin may
        both register it.

        Raises:
            ValueError: when a different corruption already holds the name in one of the
                presets (then no preset changes), or the name contains the composition separator.
        """
        if SEPARATOR in corruption.name:
            raise ValueError(f"corruption names cannot contain {SEPARATOR!r}: {corruption.name!r}")
        if isinstance(presets, str):
            presets = (presets,)
        changed: dict[str, Preset] = {}
        for name in presets:
            preset = changed.get(name) or self._presets.get(name) or Preset(name, "", ())
            existing = preset.find(corruption.name)
            if existing is None:
                changed[name] = preset.appended(corruption)
            elif not _same(existing, corruption):
                raise ValueError(f"corruption {corruption.name!r} is already registered in preset {name!r}")
        self._presets.update(changed)
        return corruption

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> None:
        """Call every ``group`` entry point with this registry (installed corruption plugins)."""
        for entry_point in importlib.metadata.entry_points(group=group):
            try:
                register = entry_point.load()
                register(self)
            except Exception as exc:
                raise UnknownCorruptionError(
                    f"corruption plugin {entry_point.name!r} ({entry_point.value}) failed to register: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc

    def get(self, name: str, preset: str = DEFAULT_PRESET) -> Corruption[Any]:
        """The corruption ``name`` with the severity table of ``preset``.

        ``"a+b"`` names a composition of two corruptions of the preset (R2-Bench).
        """
        if SEPARATOR in name:
            parts = [self.get(part.strip(), preset) for part in name.split(SEPARATOR)]
            try:
                return Composition(parts)
            except ValueError as exc:
                raise UnknownCorruptionError(f"invalid composition {name!r}: {exc}") from exc
        found = self.definition(preset).find(name)
        if found is None:
            names = self.definition(preset).corruption_names
            close = did_you_mean(name, names)
            raise UnknownCorruptionError(
                f"unknown corruption {name!r} in preset {preset!r}{close}; known: {', '.join(sorted(names))}"
            )
        return found

    def definition(self, preset: str) -> Preset:
        """The preset called ``preset``, with this registry's registrations appended.

        Raises:
            UnknownCorruptionError: naming the known presets.
        """
        if preset not in self._presets:
            raise UnknownCorruptionError(f"unknown preset {preset!r}; known: {', '.join(self.presets())}")
        return self._presets[preset]

    def preset(self, name: str) -> list[Corruption[Any]]:
        """Every corruption of a preset, in order: the paper's, then the registered ones."""
        return list(self.definition(name).corruptions)

    def available(self, preset: str = DEFAULT_PRESET) -> list[Corruption[Any]]:
        """The same as :meth:`preset` (a preset now always has all its corruptions)."""
        return self.preset(preset)

    def presets(self) -> list[str]:
        """The names of the presets, sorted."""
        return sorted(self._presets)

    def labelled(self) -> list[tuple[str, Corruption[Any]]]:
        """Every distinct corruption instance as ``("name@preset", corruption)``, first preset wins."""
        return [(f"{corruption.name}@{preset}", corruption) for preset, corruption in self._distinct()]

    def __iter__(self) -> Iterator[Corruption[Any]]:
        return (corruption for _, corruption in self._distinct())

    def _distinct(self) -> Iterator[tuple[str, Corruption[Any]]]:
        seen: set[int] = set()
        for preset in self._presets.values():
            for corruption in preset.corruptions:
                if id(corruption) not in seen:
                    seen.add(id(corruption))
                    yield preset.name, corruption


def _same(a: Corruption[Any], b: Corruption[Any]) -> bool:
    return type(a) is type(b) and a.name == b.name and a.category == b.category and a.table == b.table


REGISTRY = CorruptionRegistry.builtin()
"""The built-in presets. A pytest run uses its own copy (``pytest_segrobust.plugin.run_registry``)."""
