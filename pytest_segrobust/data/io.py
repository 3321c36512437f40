"""Reading files (bytes, JSON, images), with errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from pytest_segrobust.core.errors import DatasetError


def read_file(path: Path, what: str) -> bytes:
    """The bytes of ``path``.

    Args:
        path: The file.
        what: The file's role in words, for the message (``"annotation file"``).

    Raises:
        DatasetError: ``<path>: cannot read the <what> (<reason>)`` when it is missing or unreadable.
    """
    try:
        return path.read_bytes()
    except OSError as error:
        raise DatasetError(f"{path}: cannot read the {what} ({error})") from error


def file_size(path: Path) -> int:
    """The size of ``path`` in bytes, for fingerprints that count files by name and size.

    Raises:
        DatasetError: naming the file when it has disappeared or cannot be read.
    """
    try:
        return path.stat().st_size
    except OSError as error:
        raise DatasetError(f"{path}: cannot read file ({error})") from error


def parse_json(path: Path, raw: bytes) -> Any:
    """The JSON document ``raw``, the bytes of ``path``.

    Raises:
        DatasetError: naming the file when the bytes are not valid JSON (or not text).
    """
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DatasetError(f"{path}: not valid JSON ({error})") from error


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
