"""Real image codecs (round-trip through host memory)."""

from __future__ import annotations

import io

import numpy as np
import torch
from PIL import Image

from pytest_segrobust.corruptions.functional.color import to_uint8


def jpeg(images: torch.Tensor, quality: int) -> torch.Tensor:
    """Encode and decode each image as baseline JPEG with Pillow at ``quality``.

    Real codec, so it round-trips through host memory; the only corruption that does.

    Shape:
        images: ``(B, 3, H, W)``; return: same, quantised to multiples of 1/255.
    """
    host = to_uint8(images).permute(0, 2, 3, 1).cpu().numpy()
    decoded = []
    for pixels in host:
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=quality)
        buffer.seek(0)
        decoded.append(np.asarray(Image.open(buffer).convert("RGB")))
    batch = torch.from_numpy(np.stack(decoded)).permute(0, 3, 1, 2)
    return batch.to(device=images.device, dtype=images.dtype) / 255.0
