"""Corruptions by name and preset.

A preset is a paper's benchmark: an ordered list of corruption names, each bound to that
paper's severity table. A bare corruption name in a suite resolves in the default preset.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from dataclasses import dataclass

from pytest_segrobust.corruptions import blur, compression, digital, geometric, noise, weather
from pytest_segrobust.corruptions.base import Corruption
from pytest_segrobust.corruptions.composition import SEPARATOR, Composition
from pytest_segrobust.errors import UnknownCorruptionError

DEFAULT_PRESET = "coco-p"
ENTRY_POINT_GROUP = "segrobust.corruptions"


@dataclass(frozen=True)
class Preset:
    """A benchmark's corruption list, in the paper's order."""

    name: str
    description: str
    corruption_names: tuple[str, ...]


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "coco-p",
            "Schiappa et al., COCO-P / ADE20K-P: 17 corruptions x 5 severities",
            (
                "gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise",
                "defocus_blur", "motion_blur", "zoom_blur",
                "jpeg_compression", "pixelate",
                "contrast", "shear",
                "rotate", "translate",
                "brightness", "darkness", "fog", "snow",
            ),
        ),
        Preset(
            "imagenet-c",
            "Hendrycks & Dietterich, ImageNet-C: 15 corruptions + 4 hold-out, published constants",
            (
                "gaussian_noise", "shot_noise", "impulse_noise",
                "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
                "snow", "frost", "fog",
                "brightness", "contrast", "elastic_transform", "pixelate", "jpeg_compression",
                "speckle_noise", "gaussian_blur", "spatter", "saturate",
            ),
        ),
        Preset(
            "cityscapes-c",
            "Kamann & Rother, Cityscapes-C: ImageNet-C plus intensity-dependent noise, PSF blur, geometric distortion",
            (
                "motion_blur", "defocus_blur", "glass_blur", "gaussian_blur", "psf_blur",
                "gaussian_noise", "impulse_noise", "shot_noise", "speckle_noise", "intensity_noise",
                "brightness", "contrast", "saturate", "jpeg_compression",
                "snow", "spatter", "fog", "frost",
                "geometric_distortion",
            ),
        ),
    )
}


class CorruptionRegistry:
    """Corruption instances keyed by ``(preset, name)``."""

    def __init__(self) -> None:
        self._by_preset: dict[str, dict[str, Corruption]] = {}

    def register(self, corruption: Corruption, presets: tuple[str, ...] = (DEFAULT_PRESET,)) -> Corruption:
        """Make ``corruption`` available under its name in each of ``presets``.

        Registering an equal corruption (same class, name, category and table) again is a
        no-op, so hooks may run once per pytest session in the same process.

        Raises:
            ValueError: when a different corruption already holds the name in a preset.
        """
        if SEPARATOR in corruption.name:
            raise ValueError(f"corruption names cannot contain {SEPARATOR!r}: {corruption.name!r}")
        for preset in presets:
            table = self._by_preset.setdefault(preset, {})
            existing = table.get(corruption.name)
            if existing is not None and not _same(existing, corruption):
                raise ValueError(f"corruption {corruption.name!r} is already registered in preset {preset!r}")
            table.setdefault(corruption.name, corruption)
        return corruption

    def snapshot(self) -> dict[str, dict[str, Corruption]]:
        """The current registrations, to :meth:`restore` later."""
        return {preset: dict(table) for preset, table in self._by_preset.items()}

    def restore(self, state: dict[str, dict[str, Corruption]]) -> None:
        """Forget every registration made since ``state`` was taken."""
        self._by_preset = {preset: dict(table) for preset, table in state.items()}

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

    def get(self, name: str, preset: str = DEFAULT_PRESET) -> Corruption:
        """The corruption ``name`` with the severity table of ``preset``.

        ``"a+b"`` names a composition of two corruptions of the preset (R2-Bench).
        """
        if SEPARATOR in name:
            parts = [self.get(part.strip(), preset) for part in name.split(SEPARATOR)]
            try:
                return Composition(parts)
            except ValueError as exc:
                raise UnknownCorruptionError(f"invalid composition {name!r}: {exc}") from exc
        table = self._table(preset)
        if name not in table:
            known = ", ".join(sorted(table))
            raise UnknownCorruptionError(f"unknown corruption {name!r} in preset {preset!r}; known: {known}")
        return table[name]

    def preset(self, name: str) -> list[Corruption]:
        """Every corruption of a preset, in the paper's order.

        Raises:
            UnknownCorruptionError: for an unknown preset, or one whose corruptions are
                not all implemented yet (naming the missing ones).
        """
        table = self._table(name)
        wanted = PRESETS[name].corruption_names if name in PRESETS else tuple(table)
        missing = [n for n in wanted if n not in table]
        if missing:
            raise UnknownCorruptionError(
                f"preset {name!r} is incomplete: not implemented yet: {', '.join(missing)}; "
                f"list the corruptions by name instead"
            )
        return [table[n] for n in wanted]

    def available(self, preset: str = DEFAULT_PRESET) -> list[Corruption]:
        """The implemented corruptions of a preset, in the paper's order."""
        table = self._table(preset)
        order = PRESETS[preset].corruption_names if preset in PRESETS else ()
        ranked = sorted(table.values(), key=lambda c: order.index(c.name) if c.name in order else len(order))
        return ranked

    def labelled(self) -> list[tuple[str, Corruption]]:
        """Every distinct corruption instance as ``("name@preset", corruption)``, first preset wins."""
        seen: dict[int, str] = {}
        out = []
        for preset, table in self._by_preset.items():
            for corruption in table.values():
                if id(corruption) not in seen:
                    seen[id(corruption)] = preset
                    out.append((f"{corruption.name}@{preset}", corruption))
        return out

    def presets(self) -> list[str]:
        return sorted(set(self._by_preset) | set(PRESETS))

    def __iter__(self) -> Iterator[Corruption]:
        seen: set[int] = set()
        for table in self._by_preset.values():
            for corruption in table.values():
                if id(corruption) not in seen:
                    seen.add(id(corruption))
                    yield corruption

    def _table(self, preset: str) -> dict[str, Corruption]:
        if preset not in self._by_preset:
            raise UnknownCorruptionError(f"unknown preset {preset!r}; known: {', '.join(self.presets())}")
        return self._by_preset[preset]


def _same(a: Corruption, b: Corruption) -> bool:
    return type(a) is type(b) and a.name == b.name and a.category == b.category and a.table == b.table


FAMILIES = (noise, blur, compression, digital, geometric, weather)


def _default_registry() -> CorruptionRegistry:
    registry = CorruptionRegistry()
    for family in FAMILIES:
        for entry in family.CATALOGUE:
            registry.register(entry.corruption, entry.presets)
    return registry


REGISTRY = _default_registry()
