"""Write the example's image folder: 16 procedural validation scenes of 64x64 pixels.

Usage (from this folder): ``python make_data.py``. The files are shipped, so you need not run
it; it says where they came from. ``data/images/<id>.png`` are RGB images and
``data/masks/<id>.png`` their label maps (one grey level per class: 0 background, 1 striped,
2 checkered, 3 dotted, 4 smooth), the layout ``SemanticFolder`` reads.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from pytest_segrobust.data.demo import generate_scene

HERE = Path(__file__).resolve().parent
SCENES = 16
SIZE = 64


def main() -> None:
    """Draw the scenes and write them as PNG files."""
    for folder in ("images", "masks"):
        (HERE / "data" / folder).mkdir(parents=True, exist_ok=True)
    for index in range(SCENES):
        scene = generate_scene("val", index, image_size=SIZE)
        name = f"scene-{index:02d}.png"
        Image.fromarray(np.ascontiguousarray(scene.pixels.transpose(1, 2, 0))).save(HERE / "data" / "images" / name)
        Image.fromarray(scene.labels.astype(np.uint8)).save(HERE / "data" / "masks" / name)
    print(f"wrote {SCENES} images and masks under {HERE / 'data'}")


if __name__ == "__main__":
    main()
