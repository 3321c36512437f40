"""Reading image files, with errors that name the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from pytest_segrobust.core.errors import DatasetError


def read_rgb(path: Path) -> np.ndarray:
    """An image file as ``uint8`` RGB (stored pixels: EXIF orientation is not applied).

    Shape:
        return: ``(H, W, 3)``.

    Raises:
        DatasetError: naming the file when it cannot be read or decoded.
    """
    try:
        with Image.open(path) as opened:
            return np.asarray(opened.convert("RGB"))
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise DatasetError(f"{path}: cannot read image ({error})") from error
