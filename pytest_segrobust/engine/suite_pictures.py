"""What the report shows of a suite's corruptions, measured on its first image.

The gallery: the image under every visual corruption at severities 1, 3, 5, each corrupted at
the image's own size (as a model sees it) and only then shrunk to the report's tile. The frame
table: how much of the frame a geometric corruption keeps, per severity.

A rotation, a shear or a translation moves part of the image out of the frame: those pixels
turn black and their labels become the ignore label, so they are no longer scored. The share
of the frame that still shows the image tells a reader how much a geometric cell measures
robustness and how much it just measures less. Where it changes with the image size, the
corruption's constants are in pixels (a translation by 100 px leaves little of a 128 px image
and most of a 1024 px one).

Both are values (:class:`~pytest_segrobust.pictures.values.SuitePictures`): the report draws the
gallery (:func:`pytest_segrobust.report.gallery.render_gallery`) and never runs a corruption.

Sound has no pixels: an acoustic perturbation is shown as the log-magnitude spectrogram of
a clip's sound (:func:`spectrogram_tiles`), clean and at each level, tiles the same gallery
lays out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image as PILImage

from pytest_segrobust.core.errors import error_message
from pytest_segrobust.core.types import Audio, Field, Image, SemanticMask, field_of
from pytest_segrobust.corruptions import Corruption
from pytest_segrobust.corruptions.functional import to_uint8
from pytest_segrobust.pictures.values import REPORT_TILE, GalleryTiles, SuitePictures
from pytest_segrobust.randomness.seeding import sample_seed

GALLERY_SEVERITIES = (1, 3, 5)
# The kept share measured again at half the size: a change beyond this means constants in pixels.
SIZE_DEPENDENT = 0.01
_OUTSIDE = 1  # the label the warp gives pixels that come from outside the frame
SPECTROGRAM_LEVELS = (1, 2, 3, 4, 5)
SPECTROGRAM_FFT = 512  # 32 ms at 16 kHz: a tone's harmonics stay apart, a click stays short
SPECTROGRAM_HOP = 128
# The shown range, in dB of full scale: the demo's hiss (peak 0.002) sits near -80 dB, so a
# perturbation that adds or removes quiet sound shows, and 0 dB (a full-scale sine) is the top.
SPECTROGRAM_FLOOR_DB = -100.0
SPECTROGRAM_ASPECT = 5 / 8  # tile height over width
# viridis at five stops: dark where the spectrum is quiet, yellow where it is loud, monotone in lightness
_COLOURS = np.array([(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)], dtype=np.float64)


def gallery_tiles(
    image: torch.Tensor,
    corruptions: Sequence[Corruption[Any]],
    severities: Sequence[int] = GALLERY_SEVERITIES,
    seed: int = 0,
    sample_id: str = "gallery",
    tile: int | None = None,
) -> GalleryTiles:
    """The image clean and under each corruption at each severity, shrunk to ``tile`` for display.

    Args:
        image: The image to corrupt.
        corruptions: What to show, in order.
        severities: The severities of each corruption.
        seed: Global seed; with ``sample_id`` it fixes every random draw, as in a suite.
        sample_id: Identifier the per-image seed is derived from.
        tile: Longest side of each shown tile in pixels (``None``: the image's own size); an
            image is never enlarged.

    Shape:
        image: ``(3, H, W)``, ``uint8``.
    """
    full_h, full_w = image.shape[-2:]
    scale = 1.0 if tile is None else min(1.0, tile / max(full_h, full_w))
    size = max(1, round(full_w * scale)), max(1, round(full_h * scale))
    batch = image[None].float() / 255.0

    def shown(corrupted: torch.Tensor) -> np.ndarray:
        picture = PILImage.fromarray(to_uint8(corrupted[0]).permute(1, 2, 0).cpu().numpy())
        if picture.size != size:
            picture = picture.resize(size, PILImage.Resampling.LANCZOS)
        return np.asarray(picture)

    return _tiles(batch, corruptions, severities, seed, sample_id, shown)


def log_spectrogram(
    waveform: torch.Tensor, n_fft: int = SPECTROGRAM_FFT, hop: int = SPECTROGRAM_HOP
) -> torch.Tensor:
    """The log magnitude of a clip's sound (its channels' mean), in dB of full scale.

    A Hann-windowed STFT (:func:`torch.stft`, zero-padded at both ends), scaled so that a
    full-scale sine reads 0 dB in its bin; silence is clamped at -240 dB.

    Shape:
        waveform: ``(C, S)``; return: ``(n_fft // 2 + 1, frames)``, float64, the lowest frequency first.
    """
    mono = waveform.detach().to("cpu", torch.float64).mean(dim=0)
    window = torch.hann_window(n_fft, dtype=torch.float64)
    spectrum = torch.stft(mono, n_fft, hop, window=window, center=True, pad_mode="constant", return_complex=True)
    magnitude = spectrum.abs() * (2.0 / window.sum())
    return 20.0 * torch.log10(magnitude.clamp_min(1e-12))


def spectrogram_picture(decibels: torch.Tensor, size: tuple[int, int], floor_db: float = SPECTROGRAM_FLOOR_DB) -> np.ndarray:
    """A spectrogram as an RGB picture: time left to right, frequency bottom to top, viridis from
    ``floor_db`` (dark) to 0 dB (yellow); averaged down (or stretched) to ``size`` = ``(width, height)``.

    Shape:
        decibels: ``(F, T)``, the lowest frequency first; return: ``(height, width, 3)``, uint8.
    """
    shade = ((decibels - floor_db) / -floor_db).clamp(0.0, 1.0).flip(0).to(torch.float32).numpy()
    shade = np.asarray(PILImage.fromarray(np.ascontiguousarray(shade)).resize(size, PILImage.Resampling.BOX))
    stops = np.linspace(0.0, 1.0, len(_COLOURS))
    rgb = np.stack([np.interp(shade, stops, _COLOURS[:, channel]) for channel in range(3)], axis=-1)
    return np.round(rgb).clip(0, 255).astype(np.uint8)


def spectrogram_tiles(
    batch: Mapping[str, Field],
    corruptions: Sequence[Corruption[Any]],
    severities: Sequence[int] = SPECTROGRAM_LEVELS,
    seed: int = 0,
    sample_id: str = "gallery",
    tile: int = REPORT_TILE,
) -> GalleryTiles:
    """One clip's sound clean and under each acoustic perturbation at each level, as spectrograms.

    Args:
        batch: One clip as the audio-visual task collates it: its :class:`~pytest_segrobust.core.types.Audio`
            and the fields a perturbation reads beside it (``background_noise``: the competing clip).
        corruptions: Acoustic perturbations, in order.
        severities: The levels of each.
        seed: Global seed; with ``sample_id`` it fixes every random draw, as in a suite.
        sample_id: The clip's identifier the per-clip seed is derived from.
        tile: Width of each shown spectrogram in pixels (its height is 5/8 of it).
    """
    size = (tile, max(1, round(tile * SPECTROGRAM_ASPECT)))
    fields = dict(batch)

    def shown(perturbed: Mapping[str, Field]) -> np.ndarray:
        return spectrogram_picture(log_spectrogram(field_of(perturbed, Audio).data[0]), size)

    return _tiles(fields, corruptions, severities, seed, sample_id, shown)


def _tiles(
    batch: Any,
    corruptions: Sequence[Corruption[Any]],
    severities: Sequence[int],
    seed: int,
    sample_id: str,
    shown: Callable[[Any], np.ndarray],
) -> GalleryTiles:
    """``batch`` (one sample) clean and under each corruption at each severity, drawn with the
    suite's per-sample seed, each turned into a tile by ``shown``."""
    return GalleryTiles(
        corruptions=tuple(c.name for c in corruptions),
        severities=tuple(severities),
        clean=shown(batch),
        tiles=tuple(
            tuple(shown(c(batch, s, [sample_seed(seed, sample_id, c.name, s)])) for s in severities)
            for c in corruptions
        ),
    )


def frame_kept(
    corruption: Corruption[Any], height: int, width: int, severities: Sequence[int], seed: int, sample_id: str
) -> list[float]:
    """The share of the output frame that shows the image, per severity, for one image's draw.

    A zero mask is warped with the image, as the annotations are in a suite, and the pixels
    that read from outside the frame (the ignore label) are counted. Random draws (a
    rotation's sign) come from the seed the image ``sample_id`` gets in the suite.

    Args:
        corruption: A geometric corruption (or a composition with a geometric part).
        height: Image height in pixels.
        width: Image width in pixels.
        severities: The severities to measure, 1..5.
        seed: The suite's global seed.
        sample_id: The image whose draw is used.

    Returns:
        One share in ``[0, 1]`` per severity.
    """
    batch = {
        "image": Image(torch.zeros(1, 3, height, width)),
        "mask": SemanticMask(torch.zeros(1, height, width, dtype=torch.int64), ignore_index=_OUTSIDE),
    }
    kept = []
    for severity in severities:
        warped = corruption(batch, severity, [sample_seed(seed, sample_id, corruption.name, severity)])
        kept.append(float((field_of(warped, SemanticMask).data != _OUTSIDE).double().mean()))
    return kept


def describe_frames(
    corruptions: Sequence[Corruption[Any]],
    height: int,
    width: int,
    severities: Sequence[int],
    seed: int,
    sample_id: str,
) -> dict[str, Any] | None:
    """The kept share of every geometric corruption, at the image's size and at half of it (JSON-safe).

    Returns:
        ``{"size": [H, W], "severities": [...], "corruptions": {name: {"parameters": [...],
        "kept": [...], "kept_at_half_size": [...], "in_pixels": bool}}}`` (one entry per
        severity in each list), or ``None`` when none of ``corruptions`` is geometric.
    """
    geometric = [c for c in corruptions if c.geometric]
    if not geometric:
        return None
    severities = sorted(severities)
    half = (max(8, height // 2), max(8, width // 2))
    out: dict[str, Any] = {}
    for corruption in geometric:
        kept = frame_kept(corruption, height, width, severities, seed, sample_id)
        smaller = frame_kept(corruption, *half, severities, seed, sample_id)
        described = corruption.table.describe()
        out[corruption.name] = {
            "parameters": [described[s - 1] for s in severities],
            "kept": kept,
            "kept_at_half_size": smaller,
            "in_pixels": any(abs(a - b) > SIZE_DEPENDENT for a, b in zip(kept, smaller)),
        }
    return {"size": [height, width], "severities": list(severities), "corruptions": out}


def suite_pictures(
    suite: str,
    image: torch.Tensor,
    sample_id: str,
    corruptions: Sequence[Corruption[Any]],
    *,
    severities: Sequence[int],
    seed: int,
    tile: int = REPORT_TILE,
    gallery: bool = True,
) -> SuitePictures:
    """A suite's gallery and frame table from its first image; a part that fails is a warning.

    Args:
        suite: The suite's name, for the warnings.
        image: The first image of the suite's reference data.
        sample_id: Its identifier (the gallery's and the frame table's draws are its own).
        corruptions: The suite's visual corruptions, in order.
        severities: The suite's severities (of the frame table; the gallery shows 1, 3, 5).
        seed: The suite's global seed.
        tile: Longest side of a gallery tile.
        gallery: ``False``: the frame table alone (``--segrobust-figures=none``).

    Shape:
        image: ``(3, H, W)``, ``uint8``.
    """
    warnings: list[str] = []
    tiles: GalleryTiles | None = None
    frames: dict[str, Any] | None = None
    try:
        if gallery:
            tiles = gallery_tiles(image, corruptions, seed=seed, sample_id=sample_id, tile=tile)
    except Exception as exc:  # noqa: BLE001 - a figure must never cost the report
        warnings.append(f"no gallery for suite {suite}: {error_message(exc)}")
    try:
        height, width = image.shape[-2:]
        frames = describe_frames(corruptions, int(height), int(width), severities, seed, sample_id)
    except Exception as exc:  # noqa: BLE001 - a table of the report must never cost the report
        warnings.append(f"no frame table for suite {suite}: {error_message(exc)}")
    return SuitePictures(tiles, frames, tuple(warnings))

