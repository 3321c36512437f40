"""What a clip sample holds (video object segmentation, referring video, audio-visual).

A clip dataset yields one :class:`~pytest_segrobust.data.base.Sample` per clip (VOS) or per
clip and expression (R-VOS), built with :meth:`Sample.of <pytest_segrobust.data.base.Sample.of>`
from these fields:

* ``video``: :class:`ClipFrames`, the clip's frames as read (``uint8``);
* ``objects``: :class:`ClipObjects`, an object id per pixel of each annotated frame;
* ``expression``: :class:`ClipExpression` (R-VOS only), the words and the object they name;
* ``audio``: :class:`ClipAudio` (audio-visual segmentation), the clip's sound.

The video tasks collate them into the batch fields :class:`~pytest_segrobust.core.types.Video`
and :class:`~pytest_segrobust.core.types.VideoMasks`. Frames stay ``uint8`` until the task
uploads them, so a clip costs what its pixels cost, and a dataset decodes a clip when it
is asked for it, not before (a 480p DAVIS clip is decoded once per cell).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pytest_segrobust.core.types import DEFAULT_IGNORE_INDEX


@dataclass(frozen=True)
class ClipFrames:
    """The frames of one clip, in play order.

    Attributes:
        frames: ``(T, 3, H, W)``, ``uint8``, RGB.
        names: Each frame's name in its dataset (``"00000"`` for ``00000.jpg``), ``T`` of them;
            reports and errors name frames by it.
    """

    frames: torch.Tensor
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.frames.dim() != 4 or self.frames.shape[1] != 3 or self.frames.dtype != torch.uint8:
            raise ValueError(
                f"clip frames must be uint8 (T, 3, H, W), got {self.frames.dtype} {tuple(self.frames.shape)}"
            )
        if len(self.names) != self.frames.shape[0]:
            raise ValueError(f"a clip of {self.frames.shape[0]} frames needs as many names, got {len(self.names)}")


@dataclass(frozen=True)
class ClipObjects:
    """The annotated objects of one clip.

    ``masks[t]`` gives an object id per pixel of frame ``t`` (``0`` background,
    ``ignore_index`` not scored) where ``annotated[t]``; an unannotated frame's mask is all
    ``ignore_index``. ``object_ids`` are the objects a model is asked to segment, each given
    to it in the first annotated frame where it appears (``first_frames``: DAVIS objects all
    start at frame 0 under DAVIS's rule, YouTube-VOS objects may appear late). ``unseen[i]`` says whether object
    ``i``'s category is outside the training categories (YouTube-VOS's seen / unseen split;
    all ``False`` where a dataset has no such split).

    Shape:
        masks: ``(T, H, W)``, ``int64``; annotated: ``(T,)``, ``bool``.
    """

    masks: torch.Tensor
    annotated: torch.Tensor
    object_ids: tuple[int, ...]
    first_frames: tuple[int, ...]
    unseen: tuple[bool, ...]
    ignore_index: int = DEFAULT_IGNORE_INDEX

    def __post_init__(self) -> None:
        if self.masks.dim() != 3 or self.masks.dtype != torch.int64:
            raise ValueError(f"clip masks must be int64 (T, H, W), got {self.masks.dtype} {tuple(self.masks.shape)}")
        frames = int(self.masks.shape[0])
        if tuple(self.annotated.shape) != (frames,) or self.annotated.dtype != torch.bool:
            raise ValueError(
                f"annotated must be bool ({frames},), got {self.annotated.dtype} {tuple(self.annotated.shape)}"
            )
        if not (len(self.object_ids) == len(self.first_frames) == len(self.unseen)):
            raise ValueError(
                f"object_ids, first_frames and unseen must have one entry per object, got "
                f"{len(self.object_ids)}, {len(self.first_frames)} and {len(self.unseen)}"
            )
        for object_id, first in zip(self.object_ids, self.first_frames, strict=True):
            if not 0 <= first < frames:
                raise ValueError(f"object {object_id} first appears at frame {first}, outside 0..{frames - 1}")


@dataclass(frozen=True)
class ClipExpression:
    """A referring expression of a clip (R-VOS) and the object it names in ``objects``."""

    text: str
    object_id: int


@dataclass(frozen=True)
class ClipAudio:
    """The sound of one clip (audio-visual segmentation), heard over its frames from first to last.

    The task cuts it into one span per frame (:meth:`Audio.of <pytest_segrobust.core.types.Audio.of>`).

    Attributes:
        waveform: ``(C, S)``, float32 in ``[-1, 1]``.
        sample_rate: Samples per second.
        layout: The channels, named and comma-separated (``"mono"``, ``"left,right"``).
    """

    waveform: torch.Tensor
    sample_rate: int
    layout: str = "mono"

    def __post_init__(self) -> None:
        if self.waveform.dim() != 2 or not self.waveform.is_floating_point():
            raise ValueError(
                f"a clip's waveform must be float (C, S), got {self.waveform.dtype} {tuple(self.waveform.shape)}"
            )
        channels = len(self.layout.split(","))
        if self.waveform.shape[0] != channels:
            raise ValueError(
                f"layout {self.layout!r} names {channels} channels, the waveform has {self.waveform.shape[0]}"
            )
        if self.sample_rate <= 0:
            raise ValueError(f"sample_rate must be positive, got {self.sample_rate}")
