"""A labelled grid of one image under many corruptions, like the papers' perturbation figures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from PIL import Image, ImageDraw, ImageFont

from pytest_segrobust.corruptions import Corruption
from pytest_segrobust.corruptions.functional import to_uint8
from pytest_segrobust.seeding import sample_seed

GALLERY_SEVERITIES = (1, 3, 5)
# Longest side of a tile in the report's gallery: corrupted at full size, shown at this one.
REPORT_TILE = 256
_BACKGROUND = (255, 255, 255)
_INK = (20, 20, 20)


def render_gallery(
    image: torch.Tensor,
    corruptions: Sequence[Corruption[Any]],
    severities: Sequence[int] = GALLERY_SEVERITIES,
    seed: int = 0,
    sample_id: str = "gallery",
    columns: int = 2,
    tile: int | None = None,
) -> Image.Image:
    """One row per corruption (clean, then each severity), laid out in ``columns`` blocks.

    The image is corrupted at its own resolution, as a model would see it, and only then
    shrunk for display: pixel-sized parameters (a translation, a blur radius) look as strong
    as they are.

    Args:
        image: The image to corrupt.
        corruptions: What to show, in order.
        severities: Columns after the clean one.
        seed: Global seed; with ``sample_id`` it fixes every random draw, as in a suite.
        sample_id: Identifier the per-image seed is derived from.
        columns: Side-by-side blocks of rows, to keep the figure readable.
        tile: Longest side of each shown tile in pixels (``None``: the image's own size).

    Shape:
        image: ``(3, H, W)``, ``uint8``.
    """
    full_h, full_w = image.shape[-2:]
    scale = 1.0 if tile is None else min(1.0, tile / max(full_h, full_w))
    h, w = max(1, round(full_h * scale)), max(1, round(full_w * scale))
    font = report_font(max(11, h // 12))
    pad, label_width, header = 4, _label_width(corruptions, font), max(16, h // 8)
    cells = 1 + len(severities)
    block_width = label_width + cells * (w + pad)
    rows = -(-len(corruptions) // columns)
    canvas = Image.new("RGB", (columns * block_width + pad, header + rows * (h + pad) + pad), _BACKGROUND)
    draw = ImageDraw.Draw(canvas)
    batch = image[None].float() / 255.0
    for block in range(min(columns, len(corruptions))):
        x0 = block * block_width + label_width
        for column, title in enumerate(["clean", *(f"severity {s}" for s in severities)]):
            draw.text((x0 + column * (w + pad) + 2, 2), title, fill=_INK, font=font)
    for index, corruption in enumerate(corruptions):
        block, row = divmod(index, rows)
        top = header + row * (h + pad)
        left = block * block_width
        draw.text((left + 4, top + h // 2 - font.size // 2), corruption.name, fill=_INK, font=font)
        tiles = [batch] + [
            corruption(batch, s, [sample_seed(seed, sample_id, corruption.name, s)]) for s in severities
        ]
        for column, corrupted in enumerate(tiles):
            shown = Image.fromarray(to_uint8(corrupted[0]).permute(1, 2, 0).cpu().numpy())
            if shown.size != (w, h):
                shown = shown.resize((w, h), Image.Resampling.LANCZOS)
            canvas.paste(shown, (left + label_width + column * (w + pad), top))
    return canvas


def report_font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    """Pillow's default font at ``size`` pixels, where the installed Pillow can scale it."""
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has one fixed-size default font
        return ImageFont.load_default()


def _label_width(corruptions: Sequence[Corruption[Any]], font: Any) -> int:
    widest = max((font.getlength(c.name) for c in corruptions), default=0)
    return int(widest) + 12
