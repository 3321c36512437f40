"""Write the example's DAVIS 2017 folder: six procedural clips of 12 frames of 64x64 pixels.

Usage (from this folder): ``python make_data.py``. The files are shipped, so you need not run
it; it says where they came from: the package's procedural validation clips (textured shapes
moving, occluding, entering and leaving), those whose every object shows in the first frame,
as DAVIS's semi-supervised protocol gives every object there. The layout is DAVIS 2017's::

    data/DAVIS/JPEGImages/480p/<clip>/00000.jpg ...    frames
    data/DAVIS/Annotations/480p/<clip>/00000.png ...   palette PNGs: index k is object k
    data/DAVIS/ImageSets/2017/val.txt                  one clip a line
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from pytest_segrobust.data.demo_video import generate_clip

ROOT = Path(__file__).resolve().parent / "data" / "DAVIS"
CLIPS = 6
JPEG_QUALITY = 90
# DAVIS's palette: index 0 black, then the colours of its annotation tool (enough for 4 objects).
PALETTE = [0, 0, 0, 128, 0, 0, 0, 128, 0, 128, 128, 0, 0, 0, 128] + [0, 0, 0] * 251


def main() -> None:
    """Draw the clips and write their frames, masks and the split file."""
    names: list[str] = []
    index = 0
    while len(names) < CLIPS:
        clip = generate_clip("val", index)
        index += 1
        if any(clip.first_frames):  # an object that enters late: DAVIS would neither give nor score it
            continue
        name = f"shapes-{index - 1:02d}"
        names.append(name)
        for folder in ("JPEGImages", "Annotations"):
            (ROOT / folder / "480p" / name).mkdir(parents=True, exist_ok=True)
        for frame, (pixels, mask) in enumerate(zip(clip.frames, clip.masks, strict=True)):
            image = Image.fromarray(np.ascontiguousarray(pixels.transpose(1, 2, 0)))
            image.save(ROOT / "JPEGImages" / "480p" / name / f"{frame:05d}.jpg", quality=JPEG_QUALITY)
            labels = Image.fromarray(mask.astype(np.uint8), mode="P")
            labels.putpalette(PALETTE)
            labels.save(ROOT / "Annotations" / "480p" / name / f"{frame:05d}.png")
    (ROOT / "ImageSets" / "2017").mkdir(parents=True, exist_ok=True)
    (ROOT / "ImageSets" / "2017" / "val.txt").write_text("".join(f"{name}\n" for name in names))
    print(f"wrote {CLIPS} clips under {ROOT}: {', '.join(names)}")


if __name__ == "__main__":
    main()
