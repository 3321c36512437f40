"""A clip's sound against its frames: as long as the frames need, padded only where a suite says how.

The task cuts a clip's sound into one equal span per frame
(:meth:`Audio.of <pytest_segrobust.core.types.Audio.of>`). A sound shorter than its frames
would be cut all the same, each frame then hearing the wrong stretch, so a dataset that knows
how long each frame lasts (AVSBench: one second) refuses a short sound, naming the file, the
length found and the length needed, unless its ``audio_pad`` option says how to pad:

* ``none`` (the default): refuse.
* ``zeros``: silence after the sound, to the length needed.
* ``repeat``: the sound again from its start, as often as needed (an empty sound is refused).

The length needed is every whole sample the frames span, ``floor(frames * frame_seconds *
sample_rate)``: a sound short by less than one sample period (the fraction of a sample the
frames' span may end in) is whole. A longer sound is left as it is.
"""

from __future__ import annotations

import math
from enum import Enum
from pathlib import Path

import torch

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.clips import ClipAudio


class AudioPad(str, Enum):
    """How a dataset pads a clip's sound that is shorter than its frames need (its ``audio_pad`` option)."""

    NONE = "none"
    ZEROS = "zeros"
    REPEAT = "repeat"

    @classmethod
    def parse(cls, value: object, where: str) -> AudioPad:
        """``value`` as an :class:`AudioPad`.

        Raises:
            DatasetError: naming ``where`` (the dataset) and the option, for another value.
        """
        try:
            return cls(value)
        except ValueError:
            expected = ", ".join(pad.value for pad in cls)
            raise DatasetError(f"{where}: option audio_pad is {value!r}; expected one of {expected}") from None


def samples_needed(frames: int, frame_seconds: float, sample_rate: int) -> int:
    """The whole samples ``frames`` frames of ``frame_seconds`` each span at ``sample_rate``."""
    # The epsilon keeps a span of a whole number of samples (5 x 1 s x 16 kHz) whole despite rounding.
    return math.floor(frames * frame_seconds * sample_rate + 1e-6)


def fit_to_frames(audio: ClipAudio, path: Path, frames: int, frame_seconds: float, pad: AudioPad) -> ClipAudio:
    """``audio`` (read from ``path``) as long as ``frames`` frames of ``frame_seconds`` each need, padded by ``pad``.

    Raises:
        DatasetError: naming ``path``, the length found and the length needed (in seconds and
            samples) and the option that pads, when the sound is shorter and ``pad`` is ``none``,
            or when it is empty and ``pad`` is ``repeat``.
    """
    rate = audio.sample_rate
    need = samples_needed(frames, frame_seconds, rate)
    have = int(audio.waveform.shape[-1])
    if have >= need:
        return audio
    found = f"{have / rate:g} s ({have} samples at {rate} Hz)"
    needed = f"{need / rate:g} s ({need} samples) for its {frames} frames of {frame_seconds:g} s"
    if pad is AudioPad.NONE:
        raise DatasetError(
            f"{path}: sound is {found}, shorter than the {needed}; each frame would hear the wrong stretch. "
            "Set the dataset's option audio_pad to zeros (silence after it) or repeat (it again) to pad it"
        )
    if pad is AudioPad.REPEAT:
        if have == 0:
            raise DatasetError(
                f"{path}: sound is {found}, and audio_pad repeat has nothing to repeat for the {needed}; "
                "audio_pad zeros pads it with silence"
            )
        waveform = audio.waveform.repeat(1, -(-need // have))[:, :need]
    else:
        waveform = torch.cat([audio.waveform, audio.waveform.new_zeros(audio.waveform.shape[0], need - have)], dim=1)
    return ClipAudio(waveform.contiguous(), rate, audio.layout)
