"""Write the example's COCO-format dataset: eight 64x64 images of coloured shapes on a shaded floor.

``data/images/*.png`` and ``data/annotations.json`` (COCO instance format: ``images``,
``annotations`` with polygon ``segmentation``s, ``categories``), as an annotation tool exports
them. Each image holds two or three shapes (squares, triangles, hexagons) of one colour each,
drawn from their polygons with Pillow, so a pixel belongs to a shape exactly where its polygon
rasterises. Run it from this folder: ``python make_data.py`` (the shipped files are its output).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

SIZE = 64
IMAGES = 8
CATEGORIES = ({"id": 1, "name": "square"}, {"id": 2, "name": "triangle"}, {"id": 3, "name": "hexagon"})
COLOURS = ((210, 60, 50), (60, 170, 80), (70, 90, 200), (220, 190, 60), (170, 80, 190))


def polygon(category: int, cx: float, cy: float, radius: float, turn: float) -> list[float]:
    """The shape's vertices ``[x0, y0, x1, y1, ...]`` in pixel-edge coordinates."""
    corners = {1: 4, 2: 3, 3: 6}[category]
    points = []
    for k in range(corners):
        angle = turn + 2 * math.pi * k / corners
        points += [round(cx + radius * math.cos(angle), 1), round(cy + radius * math.sin(angle), 1)]
    return points


def shoelace_area(vertices: list[float]) -> float:
    """The polygon's area (COCO's ``area`` of a polygon annotation)."""
    xs, ys = vertices[0::2], vertices[1::2]
    twice = sum(xs[k] * ys[k - 1] - xs[k - 1] * ys[k] for k in range(len(xs)))
    return round(abs(twice) / 2, 2)


def scene(index: int, rng: np.random.Generator) -> tuple[Image.Image, list[tuple[int, list[float]]]]:
    """One image and its shapes ``(category, polygon)``, laid out on a 2x2 grid so they never touch."""
    ys, xs = np.mgrid[0:SIZE, 0:SIZE]
    floor = 90 + 40 * (xs + ys) / (2 * SIZE) + rng.normal(0, 3, (SIZE, SIZE))  # a shaded, slightly grainy floor
    image = Image.fromarray(np.repeat(floor.clip(0, 255).astype(np.uint8)[..., None], 3, axis=2))
    draw = ImageDraw.Draw(image)
    cells = rng.permutation(4)[: 2 + index % 2]
    shapes = []
    for cell in cells:
        category = int(rng.integers(1, 4))
        cx, cy = 16 + 32 * (cell % 2) + rng.uniform(-3, 3), 16 + 32 * (cell // 2) + rng.uniform(-3, 3)
        vertices = polygon(category, cx, cy, float(rng.uniform(8, 12)), float(rng.uniform(0, math.pi)))
        draw.polygon(vertices, fill=COLOURS[int(rng.integers(len(COLOURS)))])
        shapes.append((category, vertices))
    return image, shapes


def main() -> None:
    root = Path(__file__).resolve().parent / "data"
    (root / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(45)
    images, annotations = [], []
    for index in range(IMAGES):
        image, shapes = scene(index, rng)
        name = f"{index:04d}.png"
        image.save(root / "images" / name)
        images.append({"id": index + 1, "file_name": name, "height": SIZE, "width": SIZE})
        for category, vertices in shapes:
            xs, ys = vertices[0::2], vertices[1::2]
            x0, y0 = min(xs), min(ys)
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": index + 1,
                    "category_id": category,
                    "segmentation": [vertices],
                    "bbox": [x0, y0, round(max(xs) - x0, 1), round(max(ys) - y0, 1)],
                    "area": shoelace_area(vertices),
                    "iscrowd": 0,
                }
            )
    payload = {"images": images, "annotations": annotations, "categories": list(CATEGORIES)}
    (root / "annotations.json").write_text(json.dumps(payload, indent=1) + "\n")


if __name__ == "__main__":
    main()
