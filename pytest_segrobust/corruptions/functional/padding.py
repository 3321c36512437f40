"""Reading beyond the frame: one border enum, one padding function, for every filter here."""

from __future__ import annotations

from enum import Enum

import torch
import torch.nn.functional as F

SMALL_IMAGE = 16384
"""Values per image (C x H x W) up to which filters work image by image with plain
elementwise sums: a multithreaded convolution or FFT costs more than it saves there, and
stalls badly when the CPU is shared. The choice depends on one image's size only, never on
the batch, so a sample takes the same path in any batch."""


class Border(Enum):
    """What a filter reads beyond the frame, named after ``scipy.ndimage``'s modes.

    For a row ``a b c d``:

    * ``CONSTANT``: ``k k | a b c d | k k`` for a given value ``k``. scipy ``"constant"``,
      OpenCV ``BORDER_CONSTANT``.
    * ``NEAREST``: ``a a | a b c d | d d``, the edge pixel repeated. scipy ``"nearest"``,
      OpenCV ``BORDER_REPLICATE``, torch ``F.pad(mode="replicate")``, numpy ``"edge"``.
    * ``REFLECT``: ``b a | a b c d | d c``, mirrored about the frame's edge, so the edge
      pixel repeats. scipy ``"reflect"``, OpenCV ``BORDER_REFLECT``, numpy ``"symmetric"``;
      torch has no such padding mode.
    * ``MIRROR``: ``c b | a b c d | c b``, mirrored about the edge pixel, which does not
      repeat. scipy ``"mirror"``, OpenCV ``BORDER_REFLECT_101`` (``BORDER_DEFAULT``, what
      ``filter2D`` and ``GaussianBlur`` use), torch ``F.pad(mode="reflect")``, numpy ``"reflect"``.

    The reflections repeat periodically, so a pad may be wider than the image. An axis of
    one pixel reads that pixel everywhere under all three.
    """

    CONSTANT = "constant"
    NEAREST = "nearest"
    REFLECT = "reflect"
    MIRROR = "mirror"


# Borders that torch's F.pad implements itself, and its names for them.
_TORCH_MODES = {Border.NEAREST: "replicate", Border.MIRROR: "reflect"}


def pad(fields: torch.Tensor, widths: tuple[int, int, int, int], border: Border, value: float = 0.0) -> torch.Tensor:
    """Pad the last two axes by ``widths = (left, right, top, bottom)`` pixels, read from ``border``.

    Any width works, even wider than the image. ``value`` fills a ``Border.CONSTANT`` pad.
    Padding copies values, so the result is exact whichever way it is computed; with no
    width at all (not ``Border.CONSTANT``) it is ``fields`` itself, not a copy.

    Raises:
        TypeError: when ``border`` is not a :class:`Border` (a bare ``"reflect"`` meant two
            different things in this package once; it must be named now).

    Shape:
        fields: ``(..., H, W)``; return: ``(..., H + top + bottom, W + left + right)``.
    """
    if not isinstance(border, Border):
        raise TypeError(f"border must be a Border ({', '.join(b.name for b in Border)}), got {border!r}")
    if border is Border.CONSTANT:
        return F.pad(fields, widths, mode="constant", value=value)
    left, right, top, bottom = widths
    h, w = fields.shape[-2:]
    fits = border is Border.NEAREST or (max(left, right) < w and max(top, bottom) < h)
    # F.pad is faster on large images, but always starts worker threads, which costs
    # milliseconds on a busy machine; index arithmetic also handles pads wider than the image.
    if border in _TORCH_MODES and fits and fields.dim() in (3, 4) and fields.numel() > SMALL_IMAGE:
        return F.pad(fields, widths, mode=_TORCH_MODES[border])
    if top or bottom:
        fields = fields.index_select(-2, _border_index(h, top, bottom, border, fields.device))
    if left or right:
        fields = fields.index_select(-1, _border_index(w, left, right, border, fields.device))
    return fields


def _border_index(n: int, before: int, after: int, border: Border, device: torch.device) -> torch.Tensor:
    # The source index of every padded position along one axis of n pixels.
    index = torch.arange(-before, n + after, device=device)
    if border is Border.NEAREST or n == 1:
        return index.clamp(0, n - 1)
    period = 2 * n if border is Border.REFLECT else 2 * n - 2
    index = index.remainder(period)
    return torch.where(index >= n, period - 1 - index if border is Border.REFLECT else period - index, index)
