"""A labelled grid of one image under many corruptions, like the papers' perturbation figures.

The tiles come corrupted and shrunk (:func:`pytest_segrobust.engine.suite_pictures.gallery_tiles`):
the report lays them out and labels them, and runs no corruption.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from pytest_segrobust.pictures.values import REPORT_TILE, GalleryTiles

__all__ = ["REPORT_TILE", "render_gallery", "report_font"]

_BACKGROUND = (255, 255, 255)
_INK = (20, 20, 20)


def render_gallery(tiles: GalleryTiles, columns: int = 2, column_title: str = "severity") -> Image.Image:
    """One row per corruption (clean, then each severity), laid out in ``columns`` blocks.

    Args:
        tiles: The image clean and under each corruption at each severity, at the shown size
            (or a clip's sound as spectrograms, :func:`pytest_segrobust.engine.suite_pictures.spectrogram_tiles`).
        columns: Side-by-side blocks of rows, to keep the figure readable.
        column_title: What a severity column is called above it (``"level"`` for acoustic perturbations).
    """
    h, w = tiles.clean.shape[:2]
    font = report_font(max(11, h // 12))
    pad, label_width, header = 4, _label_width(tiles.corruptions, font), max(16, h // 8)
    cells = 1 + len(tiles.severities)
    block_width = label_width + cells * (w + pad)
    rows = -(-len(tiles.corruptions) // columns)
    canvas = Image.new("RGB", (columns * block_width + pad, header + rows * (h + pad) + pad), _BACKGROUND)
    draw = ImageDraw.Draw(canvas)
    for block in range(min(columns, len(tiles.corruptions))):
        x0 = block * block_width + label_width
        for column, title in enumerate(["clean", *(f"{column_title} {s}" for s in tiles.severities)]):
            draw.text((x0 + column * (w + pad) + 2, 2), title, fill=_INK, font=font)
    clean = Image.fromarray(tiles.clean)
    for index, (name, row_tiles) in enumerate(zip(tiles.corruptions, tiles.tiles)):
        block, row = divmod(index, rows)
        top = header + row * (h + pad)
        left = block * block_width
        draw.text((left + 4, top + h // 2 - font.size // 2), name, fill=_INK, font=font)
        for column, shown in enumerate([clean, *(Image.fromarray(tile) for tile in row_tiles)]):
            canvas.paste(shown, (left + label_width + column * (w + pad), top))
    return canvas


def report_font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    """Pillow's default font at ``size`` pixels, where the installed Pillow can scale it."""
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has one fixed-size default font
        return ImageFont.load_default()


def _label_width(names: Sequence[str], font: Any) -> int:
    widest = max((font.getlength(name) for name in names), default=0)
    return int(widest) + 12
