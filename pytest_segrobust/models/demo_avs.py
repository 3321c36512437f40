"""The demo audio-visual model: listen for a class's tone, segment the shapes of that class.

:class:`TinyAVSNet` segments, in every frame of a clip, the shapes heard during that frame's
second of sound (audio-visual segmentation, :mod:`pytest_segrobust.data.demo_avs`). Its two
halves meet only at the end:

* Audio: its own front end, in torch, as AVSBench models run VGGish's: a 32 ms Hann STFT of
  the (perturbed) waveform, a 64-band log-mel spectrogram (125 Hz to 7.5 kHz, ``log(mel + 0.01)``
  as VGGish takes it), averaged over each frame's span of :attr:`Audio.frame_bounds
  <pytest_segrobust.core.types.Audio.frame_bounds>`, then a small MLP: one embedding per frame,
  the evidence of which tones sound.
* Vision: a small convolutional network, one feature vector per pixel and frame (what the
  pixel looks like: which class of shape it shows, if any).
* Fusion: the pixel features gated by the frame's audio embedding (an elementwise product),
  then a 3x3 convolution to one logit per pixel. A pixel lights up when what it shows matches
  what is heard.

It implements the audio-visual model protocol itself (``task = "avs"``, ``device``,
``fingerprint()``, ``predict(clips, audio)``), and its ``forward(clips, waveform,
frame_bounds, sample_rate)`` is the torch-module form adapters call. Trained on clean clips
only (``scripts/train_demo_avs.py``; weights ``models/weights/tiny_avs.pt``), so noise, a
low-pass that removes the high tones and silenced spans all hurt it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from pytest_segrobust.core.types import Audio
from pytest_segrobust.models.demo import load_weights
from pytest_segrobust.models.torch_module import module_fingerprint

WEIGHTS_PATH = ("weights", "tiny_avs.pt")
N_FFT = 512
HOP = 256
MEL_BANDS = 64
MEL_RANGE_HZ = (125.0, 7500.0)  # VGGish's
LOG_OFFSET = 0.01  # VGGish's
# Rough centre and spread of the log-mel values of the demo clips; they only scale the inputs.
_LOG_MEL_MEAN = -3.5
_LOG_MEL_STD = 2.5
_MEAN = (0.5, 0.5, 0.5)
_STD = (0.25, 0.25, 0.25)
FEATURES = 24


def mel_filterbank(sample_rate: int, n_fft: int = N_FFT, bands: int = MEL_BANDS) -> torch.Tensor:
    """Triangular filters on the HTK mel scale over :data:`MEL_RANGE_HZ` (capped at Nyquist).

    Shape:
        return: ``(n_fft // 2 + 1, bands)``, float32.
    """

    def mel(hz: float) -> float:
        return 1127.0 * math.log(1.0 + hz / 700.0)

    low, high = MEL_RANGE_HZ[0], min(MEL_RANGE_HZ[1], sample_rate / 2)
    edges_mel = torch.linspace(mel(low), mel(high), bands + 2, dtype=torch.float64)
    edges = 700.0 * (torch.exp(edges_mel / 1127.0) - 1.0)
    bins = torch.arange(n_fft // 2 + 1, dtype=torch.float64) * sample_rate / n_fft
    lower, centre, upper = edges[:-2], edges[1:-1], edges[2:]
    rising = (bins[:, None] - lower) / (centre - lower)
    falling = (upper - bins[:, None]) / (upper - centre)
    return rising.minimum(falling).clamp(min=0.0).float()


class LogMelFrames(nn.Module):
    """The audio front end: a log-mel spectrogram averaged over each frame's span of samples.

    An STFT column belongs to the frame whose span holds its window's centre; a frame whose
    span holds no centre (shorter than a hop) gets the log of zero energy.
    """

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("window", torch.hann_window(N_FFT), persistent=False)
        self._filters: dict[int, torch.Tensor] = {}

    def filters(self, sample_rate: int, device: torch.device) -> torch.Tensor:
        if sample_rate not in self._filters:
            self._filters[sample_rate] = mel_filterbank(sample_rate)
        return self._filters[sample_rate].to(device)

    def forward(self, waveform: torch.Tensor, frame_bounds: torch.Tensor, sample_rate: int) -> torch.Tensor:
        """Shape: waveform ``(B, C, S)``, frame_bounds ``(B, T, 2)`` -> ``(B, T, MEL_BANDS)``."""
        mono = waveform.float().mean(dim=1)
        if mono.shape[-1] < N_FFT:
            mono = F.pad(mono, (0, N_FFT - mono.shape[-1]))
        spectrum = torch.stft(mono, N_FFT, HOP, window=self.window, center=False, return_complex=True)
        power = spectrum.real.square() + spectrum.imag.square()  # (B, N_FFT // 2 + 1, K)
        mel = torch.einsum("bfk,fm->bkm", power, self.filters(sample_rate, power.device))
        centres = torch.arange(mel.shape[1], device=mel.device) * HOP + N_FFT // 2
        bounds = frame_bounds.to(mel.device)
        inside = (centres >= bounds[..., 0:1]) & (centres < bounds[..., 1:2])  # (B, T, K)
        weights = inside.float() / inside.sum(dim=2, keepdim=True).clamp(min=1)
        return torch.log(torch.bmm(weights, mel) + LOG_OFFSET)


def _conv(in_channels: int, out_channels: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    )


class TinyAVSNet(nn.Module):
    """Sounding-object segmentation of clips from their frames and waveform.

    Args:
        features: Width of the per-pixel features and of the audio embedding.
        listen: ``False`` makes the visual-only baseline of the training script: the audio
            embedding is one learnt vector, whatever is heard.
    """

    task = "avs"

    def __init__(self, features: int = FEATURES, listen: bool = True) -> None:
        super().__init__()
        self.listen = listen
        self.front_end = LogMelFrames()
        self.hearing = nn.Sequential(
            nn.Linear(MEL_BANDS, 64), nn.ReLU(inplace=True), nn.Linear(64, features), nn.ReLU(inplace=True)
        )
        # Ones, not zeros: a zero gate would pass no gradient to the pixel features (ReLU at 0).
        self.silence = nn.Parameter(torch.ones(features))
        self.register_buffer("mean", torch.tensor(_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(_STD).view(1, 3, 1, 1), persistent=False)
        self.fine = nn.Sequential(_conv(3, 16), _conv(16, 16))
        self.coarse = nn.Sequential(_conv(16, 32, stride=2), _conv(32, 32))
        # 1x1: the 3x3 layers before it already see each pixel's neighbourhood.
        self.pixels = nn.Sequential(
            nn.Conv2d(48, features, 1, bias=False),
            nn.BatchNorm2d(features),
            nn.ReLU(inplace=True),
            nn.Conv2d(features, features, 1),
        )
        self.readout = nn.Conv2d(features, 1, 3, padding=1)

    def extra_repr(self) -> str:
        return f"listen={self.listen}"

    @property
    def device(self) -> torch.device:
        return self.silence.device

    def fingerprint(self) -> str:
        """Digest of the class, its settings and every parameter and buffer."""
        return module_fingerprint(self, f"listen={self.listen}")

    def hear(self, log_mel: torch.Tensor) -> torch.Tensor:
        """The audio embedding of each frame from its log-mel bands (or the learnt constant when not listening).

        Shape:
            log_mel: ``(B, T, MEL_BANDS)``; return: ``(B, T, features)``.
        """
        if not self.listen:
            return self.silence.expand(*log_mel.shape[:2], -1)
        return self.hearing((log_mel - _LOG_MEL_MEAN) / _LOG_MEL_STD)

    def see(self, frames: torch.Tensor) -> torch.Tensor:
        """Per-pixel features of frames.

        Shape:
            frames: ``(N, 3, H, W)`` in ``[0, 1]``; return: ``(N, features, H, W)``.
        """
        fine = self.fine((frames - self.mean) / self.std)
        coarse = F.interpolate(self.coarse(fine), size=fine.shape[-2:], mode="bilinear", align_corners=False)
        return self.pixels(torch.cat([fine, coarse], dim=1))

    def fuse(self, pixels: torch.Tensor, heard: torch.Tensor) -> torch.Tensor:
        """One logit per pixel: the pixel features gated by what its frame hears.

        Shape:
            pixels: ``(N, features, H, W)``; heard: ``(N, features)``; return: ``(N, H, W)``.
        """
        return self.readout(F.relu(pixels * heard[:, :, None, None]))[:, 0]

    def forward(
        self, clips: torch.Tensor, waveform: torch.Tensor, frame_bounds: torch.Tensor, sample_rate: int
    ) -> torch.Tensor:
        """Sounding-object logits per pixel and frame (a pixel sounds where its logit is > 0).

        Args:
            clips: Float RGB frames in ``[0, 1]``.
            waveform: Each clip's sound.
            frame_bounds: Per frame, the samples heard while it is shown (start inclusive, stop exclusive).
            sample_rate: Samples per second.

        Shape:
            clips: ``(B, T, 3, H, W)``; waveform: ``(B, C, S)``; frame_bounds: ``(B, T, 2)``;
            return: ``(B, T, H, W)``.
        """
        batch, frames = clips.shape[:2]
        if tuple(frame_bounds.shape[:2]) != (batch, frames):
            raise ValueError(f"frame_bounds {tuple(frame_bounds.shape)} do not match {batch} clips of {frames} frames")
        heard = self.hear(self.front_end(waveform, frame_bounds, sample_rate))
        pixels = self.see(clips.flatten(0, 1))
        return self.fuse(pixels, heard.flatten(0, 1)).unflatten(0, (batch, frames))

    @torch.no_grad()
    def predict(self, clips: torch.Tensor, audio: Audio) -> torch.Tensor:
        """The audio-visual protocol: logits of the sounding pixels of every frame.

        Shape:
            clips: ``(B, T, 3, H, W)`` in ``[0, 1]``; return: ``(B, T, H, W)`` float logits.
        """
        device = self.device
        return self(clips.to(device), audio.data.to(device), audio.frame_bounds, audio.sample_rate)


def tiny_avs(weights: str | None = None, device: str = "cpu") -> TinyAVSNet:
    """Build the demo audio-visual model with trained weights, in eval mode.

    Args:
        weights: Path of a state dict file; ``None`` loads the weights shipped with the package.
        device: Device to put the model on.

    Returns:
        The model: a module with ``forward(clips, waveform, frame_bounds, sample_rate)`` that
        also implements the audio-visual protocol (``predict(clips, audio)``).

    Raises:
        FileNotFoundError: When the weights file does not exist.
    """
    return load_weights(TinyAVSNet(), weights, WEIGHTS_PATH, device)
