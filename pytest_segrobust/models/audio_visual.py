"""Audio-visual segmentation models (``task = "avs"``): the sounding object(s) of each frame, from frames and sound.

:class:`AudioVisualModel` is the protocol the task (:mod:`pytest_segrobust.tasks.avs`) calls:
``predict(clips, audio)`` takes a batch of clips (frames in ``[0, 1]`` on the model's
``device``) and their :class:`~pytest_segrobust.core.types.Audio` (the waveforms, possibly
perturbed, with one span of samples per frame), and returns a mask per frame: ``bool``, or
float logits thresholded at 0 (whose sigmoid AVSBench's F cuts at 255 thresholds). The model
runs its own audio front end on ``audio.data`` (a VGGish-style log-mel for AVSBench models):
the perturbation reaches it as a waveform, as it would reach a microphone.

Adapters fit plain models to it, as the video adapters do (:mod:`pytest_segrobust.models.video`):

* an ``nn.Module`` called as ``module(clips, waveform, frame_bounds, sample_rate)``;
* a function of numpy arrays ``fn(clips, waveform, frame_bounds, sample_rate)``;

each returning ``(B, T, H, W)`` bool masks or float logits (a mask of another size is an error,
not resized: the module knows its own resolution).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from pytest_segrobust.core.types import Audio
from pytest_segrobust.models.adapters import register_adapter
from pytest_segrobust.models.torch_module import _TorchModuleAdapter, module_fingerprint
from pytest_segrobust.models.video import _ArrayAdapter, _fingerprint_of, _is_function, _is_module

__all__ = ["ArrayAudioVisualModel", "AudioVisualModel", "TorchModuleAudioVisualSegmenter"]


@runtime_checkable
class AudioVisualModel(Protocol):
    """Audio-visual segmentation: per frame, the mask of what sounds."""

    device: torch.device

    def predict(self, clips: torch.Tensor, audio: Audio) -> torch.Tensor:
        """Segment the sounding object(s) in every frame of each clip.

        Shape:
            clips: ``(B, T, 3, H, W)``, float in ``[0, 1]``; audio.data: ``(B, C, S)``, float in
            ``[-1, 1]``; audio.frame_bounds: ``(B, T, 2)``, frame ``t``'s samples; return:
            ``(B, T, H, W)``, bool masks or float logits (a pixel sounds where its logit is > 0).
        """
        ...

    def fingerprint(self) -> str:
        """A string that changes whenever the model's behaviour may change (weights, config)."""
        ...


class TorchModuleAudioVisualSegmenter(_TorchModuleAdapter):
    """Wraps an ``nn.Module`` called as ``module(clips, waveform, frame_bounds, sample_rate)`` returning
    ``(B, T, H, W)`` bool masks or float logits."""

    task = "avs"

    @torch.inference_mode()
    def predict(self, clips: torch.Tensor, audio: Audio) -> torch.Tensor:
        waveform = audio.data.to(self.device)
        return self._forward(clips, waveform, audio.frame_bounds.to(self.device), audio.sample_rate)

    def fingerprint(self) -> str:
        return module_fingerprint(self.module, "avs")


class ArrayAudioVisualModel(_ArrayAdapter):
    """Wraps ``fn(clips, waveform, frame_bounds, sample_rate)`` of numpy arrays (``(B, T, 3, H, W)`` float32,
    ``(B, C, S)`` float32, ``(B, T, 2)`` int64, an int) returning ``(B, T, H, W)`` bool masks or float logits."""

    task = "avs"

    def predict(self, clips: torch.Tensor, audio: Audio) -> torch.Tensor:
        arrays = (self._array(clips), self._array(audio.data.float()), self._array(audio.frame_bounds))
        return self._masks_back(self.obj(*arrays, int(audio.sample_rate)))

    def fingerprint(self) -> str:
        return _fingerprint_of(self.obj, "avs-array")


# Later registrations are tried first: a module before the generic callable.
register_adapter("avs", _is_function, "function of numpy clips, waveform, frame bounds and sample rate")(
    ArrayAudioVisualModel
)
register_adapter(
    "avs", _is_module, "torch.nn.Module(clips, waveform, frame_bounds, sample_rate) returning masks or logits"
)(TorchModuleAudioVisualSegmenter)
