"""Acoustic perturbations: R2-Bench's twelve, at five levels, on clips' waveforms (audio-visual segmentation).

Each acts on :class:`~pytest_segrobust.core.types.Audio` fields only, so images, frames and masks
pass through untouched by construction, and image corruptions leave audio alone. A
perturbation first draws its parameters, one typed row per clip (:meth:`AcousticCorruption.draws`),
from the clip's own Philox streams (:meth:`StreamKeys.of_field` ``("audio")``, keyed by
(seed, clip, perturbation, level)), then applies them. A clip's result is a function of those
keys alone, in any batch, order or worker. Every output keeps the clip's length (so the
frame bounds still hold) and is clipped to ``[-1, 1]``, as a recording saturates.

Where ``audiomentations`` (MIT; the ``audio`` extra) has the operation, the perturbation (an
:class:`AudiomentationsCorruption`) hands its transform the drawn values as the transform's
``parameters``, frozen, so the library's ``randomize_parameters`` never runs: it would draw from
Python's and NumPy's global generators (it has no generator argument), and here those are never
read, seeded or moved, whatever other threads draw from them meanwhile. ``room_reverb`` builds
``RoomSimulator``'s room with pyroomacoustics itself, as that transform builds it only while
drawing. The libraries are imported when a perturbation runs, never by the core. The rest is
torch, batched and on any device, and runs without the extra.

===================  ===================  ==========================================  ==============
name                 R2-Bench group       computed by                                 levels change
===================  ===================  ==========================================  ==============
audio_gaussian_noise noise                torch (AddGaussianNoise's formula)          amplitude
background_noise     noise                torch (AddBackgroundNoise's SNR mixing)     SNR
audio_impulse_noise  noise                torch (the paper's spikes)                  spike rate, height
impulse_response     noise                torch FFT (ApplyImpulseResponse's rules)    RT60 of the IR
gain                 signal               torch (Gain's formula)                      dB
tanh_distortion      signal               audiomentations TanhDistortion              distortion
peaking_filter       filter               audiomentations PeakingFilter               gain, Q
low_pass             filter               audiomentations LowPassFilter               cutoff
high_pass            filter               audiomentations HighPassFilter              cutoff
air_absorption       physical             audiomentations AirAbsorption               humidity, distance
room_reverb          physical             pyroomacoustics (RoomSimulator's ISM room)  room, RT60
time_mask            post-processing      torch (TimeMask's faded mask)               masked share
mp3_compression      post-processing      audiomentations Mp3Compression (fast-mp3)   bitrate
===================  ===================  ==========================================  ==============

The tables are ours, written from what is known of R2-Bench's toolbox (its configuration of
``audiomentations`` per level; the toolbox has no licence, so only its endpoints are used):
where the toolbox's level 1 and level 5 ranges are known they are kept, the levels between
are ours and contiguous; everything else is said row by row in each table's comment.

How the family differs from the toolbox:

* impulse noise comes twice: ``audio_impulse_noise`` is the paper's (short sharp spikes at
  irregular intervals), ``impulse_response`` the toolbox's (a convolution with an impulse
  response; the toolbox has five recordings, we generate one per clip whose reverberation
  grows with the level, normalised as ``ApplyImpulseResponse`` does, to a peak of 0.5).
* ``tanh_distortion`` is audiomentations' (a pre-gain to the ``100 - 99 d`` percentile of
  ``|A|``, ``tanh``, then the input's RMS), not the paper's plain ``tanh(A)``.
* ``low_pass`` level 1 (cutoff 8-16 kHz) is nearly a no-op on 16 kHz audio: every cutoff is
  at or above Nyquist, where audiomentations moves it to ``0.9999 * Nyquist``.
* ``gain`` draws the size of the change within the level's band and its sign at random
  (the toolbox: uniform on ``[-g, g]``, so a level-5 clip may be left as it was).
* ``room_reverb`` keeps the clip's RMS (the simulated room's raw output is louder by the
  impulse response's gain; clipping that would add a distortion nobody asked for).
* ``background_noise``'s noise is another clip of the dataset, a competing sound source,
  carried in the batch as a :class:`CompetingAudio` field (see there).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import torch

from pytest_segrobust.core.extras import Extra
from pytest_segrobust.core.modality import Category
from pytest_segrobust.core.types import Audio, Field
from pytest_segrobust.corruptions import kernels
from pytest_segrobust.corruptions.base import Corruption, SeverityTable
from pytest_segrobust.randomness.seeding import SampleStreams

Params = TypeVar("Params")
Draw = TypeVar("Draw")

# The versions tested are pinned in pyproject.toml's ``audio`` extra.
AUDIO = Extra("audio", ("audiomentations",))
AUDIO_ROOMS = Extra("audio", ("pyroomacoustics", "scipy"))
AUDIO_MP3 = Extra("audio", ("audiomentations", "fast_mp3_augment"))


@dataclass(frozen=True)
class Range:
    """A closed interval ``[low, high]`` a value is drawn from; ``low == high`` fixes it."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"a range needs low <= high, got {self.low} > {self.high}")

    def __repr__(self) -> str:
        return f"{self.low:g}" if self.low == self.high else f"{self.low:g}..{self.high:g}"

    def at(self, fraction: torch.Tensor) -> torch.Tensor:
        """The values at ``fraction`` (uniforms in ``[0, 1)``) of the way from low to high."""
        return self.low + (self.high - self.low) * fraction


def _audiomentations() -> Any:
    import audiomentations  # the ``audio`` extra, imported only when a perturbation needs it

    return audiomentations


# --- the competing source of background noise ---------------------------------------------


@dataclass(frozen=True)
class CompetingAudio(Field):
    """Per clip, the waveform of another clip of the dataset: the competing source ``background_noise`` mixes in.

    A dataset that offers ``background_noise`` reads, for each clip, the clip
    :func:`competing_clip` names, and collates its waveform into this field beside the
    clip's :class:`~pytest_segrobust.core.types.Audio`. It is a field of its own type (not an
    ``Audio``), so no perturbation changes it and metrics never mistake it for the clip's sound.

    Attributes:
        sample_rate: Samples per second; the clip's own.
        source_ids: The sample id of each competing clip.

    Shape:
        data: ``(B, C, S')``, float in ``[-1, 1]`` (any length: it is looped or cut to the clip's).
    """

    data: torch.Tensor
    sample_rate: int
    source_ids: tuple[str, ...]

    def batch_size(self) -> int:
        return int(self.data.shape[0])

    def size(self) -> None:
        return None


@kernels.warp.register
def _(field: CompetingAudio, coords: torch.Tensor) -> CompetingAudio:
    return field  # sound has no pixels: nothing moves


def competing_clip(sample_id: str, sample_ids: Sequence[str], seed: int = 0) -> str:
    """The clip whose sound competes with ``sample_id``'s in ``background_noise``: another clip of the dataset.

    A function of the suite's ``seed``, the clip's id and the set of ids alone (not of their
    order, the batch or the worker): the other ids, sorted, indexed by a stable hash of
    ``(seed, sample_id)``.

    Raises:
        ValueError: for a dataset of fewer than two clips.
    """
    others = sorted(set(sample_ids) - {sample_id})
    if not others:
        raise ValueError(f"background_noise needs a second clip to compete with {sample_id!r}; the dataset has one")
    digest = hashlib.blake2b(f"{seed}\x1fbackground\x1f{sample_id}".encode(), digest_size=8).digest()
    return others[int.from_bytes(digest, "little") % len(others)]


# --- the family's base class --------------------------------------------------------------


class AcousticCorruption(Corruption[Params], Generic[Params, Draw]):
    """An acoustic perturbation: draws one typed row of values per clip, then changes its waveform.

    Subclasses implement :meth:`draw` (every random number, from ``streams`` alone, in an
    order fixed by the code) and :meth:`apply` (the waveforms of a batch with their rows).
    Every :class:`~pytest_segrobust.core.types.Audio` field of a batch is changed, each drawing
    from fresh streams of the clip's audio keys; every other field passes through. A clip's
    waveform is perturbed as a whole, once per clip, whatever :attr:`frame_draws` says.
    """

    acts_on = (Audio,)
    group: ClassVar[str] = ""  # R2-Bench's group: noise, signal, filter, physical, post-processing

    @property
    def kind(self) -> str:
        """What ``segrobust list`` shows beside the category: the R2-Bench group (``acoustic, noise``)."""
        return self.group

    def draws(self, audio: Audio, severity: int, seeds: Sequence[int]) -> list[Draw]:
        """The values each clip of ``audio`` is perturbed with at ``severity`` (what :meth:`apply` receives)."""
        streams = SampleStreams(self.keys(seeds).of_field("audio").seeds, audio.data.device)
        return self.draw(self.table[severity], streams, audio)

    @abstractmethod
    def draw(self, params: Params, streams: SampleStreams, audio: Audio) -> list[Draw]:
        """One row per clip, every random number from ``streams``."""

    def apply(self, audio: Audio, params: Params, draws: list[Draw], batch: dict[str, Field]) -> torch.Tensor:
        """The perturbed waveforms (before clipping); by default clip by clip through :meth:`apply_one`.

        Shape:
            return: ``(B, C, S)``, like ``audio.data``.
        """
        waves = audio.data.detach().to("cpu", torch.float32).numpy()
        # A mono clip goes as audiomentations takes mono sound, 1-D: some transforms round a
        # multichannel result through float64 and a mono one not.
        mono = waves.shape[1] == 1
        out = [
            self.apply_one(np.ascontiguousarray(waves[i, 0] if mono else waves[i]), audio.sample_rate, params, draw)
            for i, draw in enumerate(draws)
        ]
        stacked = np.stack(out)[:, None] if mono else np.stack(out)
        return torch.from_numpy(stacked).to(audio.data.device, audio.data.dtype)

    def apply_one(self, wave: np.ndarray, sample_rate: int, params: Params, draw: Draw) -> np.ndarray:
        """One clip's waveform, float32, ``(S,)`` when mono and ``(C, S)`` otherwise, perturbed; the same shape back."""
        raise NotImplementedError(f"{type(self).__name__} implements apply or apply_one")

    def _corrupt(self, batch, severity, seeds, size, device):  # type: ignore[no-untyped-def]
        out = dict(batch)
        for name, field in batch.items():
            if isinstance(field, Audio):
                draws = self.draws(field, severity, seeds)
                waves = self.apply(field, self.table[severity], draws, batch)
                if waves.shape != field.data.shape:
                    raise AssertionError(
                        f"{self.name}: changed the waveform's shape {tuple(field.data.shape)} to {tuple(waves.shape)}"
                    )
                out[name] = dataclasses.replace(field, data=waves.clamp(-1.0, 1.0))
        return out


class AudiomentationsCorruption(AcousticCorruption[Params, Draw]):
    """An acoustic perturbation that audiomentations computes: its transform, given a clip's draw as its parameters.

    Subclasses implement :meth:`transform` and :meth:`library_parameters`; :meth:`apply_one`
    sets the transform's ``parameters`` to them and freezes them, so the transform applies the
    draw without calling its ``randomize_parameters`` (which draws from Python's and NumPy's
    global generators). The output is the one the transform gives when built with every range
    fixed at the draw, to the bit.
    """

    requires = (AUDIO,)

    @abstractmethod
    def transform(self) -> Any:
        """The audiomentations transform (``p=1``; the settings that are not drawn, its ranges left at their defaults)."""

    @abstractmethod
    def library_parameters(self, draw: Draw) -> dict[str, Any]:
        """What the transform's ``randomize_parameters`` sets when every range is fixed at ``draw``."""

    def apply_one(self, wave: np.ndarray, sample_rate: int, params: Params, draw: Draw) -> np.ndarray:
        transform = self.transform()
        transform.parameters = {"should_apply": True, **self.library_parameters(draw)}
        transform.freeze_parameters()
        return transform(wave, sample_rate)  # type: ignore[no-any-return]


def _mel_round_trip(frequency: float) -> float:
    """``frequency`` to mels and back, in audiomentations' arithmetic: the frequency its filters use when
    ``randomize_parameters`` draws from the one-point mel range at ``frequency``."""
    utils = _audiomentations().core.utils
    return float(utils.convert_mel_to_frequency(utils.convert_frequency_to_mel(frequency)))


def _banded(params: Callable[[Range], Params], bands: Sequence[tuple[float, float]]) -> SeverityTable[Params]:
    """A table of one band per level: ``params`` of each ``(low, high)``, level 1 first."""
    return SeverityTable(tuple(params(Range(low, high)) for low, high in bands))


def _rows(**columns: torch.Tensor) -> list[dict[str, float]]:
    """Columns of ``(B,)`` tensors as one dict of Python floats per clip."""
    lists = {name: column.double().cpu().tolist() for name, column in columns.items()}
    count = len(next(iter(lists.values())))
    return [{name: values[i] for name, values in lists.items()} for i in range(count)]


def _uniform(band: Range, streams: SampleStreams) -> torch.Tensor:
    """One value per clip, uniform in ``band`` (one draw from ``streams``). Shape: return ``(B,)``, float64."""
    return band.at(streams.uniform((1,), torch.float64)[:, 0])


def _sign(streams: SampleStreams) -> torch.Tensor:
    """``+1`` or ``-1`` per clip, each as likely (one draw from ``streams``): a change up or down. Shape: ``(B,)``."""
    return streams.integers(0, 2, (1,))[:, 0] * 2 - 1


def _mel(frequency: float) -> float:
    return 2595.0 * math.log10(1.0 + frequency / 700.0)


def _hertz(mel: torch.Tensor) -> torch.Tensor:
    return 700.0 * (10 ** (mel / 2595.0) - 1.0)


def _mel_uniform(band: Range, fraction: torch.Tensor) -> torch.Tensor:
    """Frequencies uniform on the mel scale within ``band`` (hertz), as audiomentations draws them."""
    return _hertz(_mel(band.low) + (_mel(band.high) - _mel(band.low)) * fraction)


def _rms(waves: torch.Tensor) -> torch.Tensor:
    """audiomentations' ``calculate_rms``: the mean over channels of each channel's RMS. Shape: ``(B, C, S)`` to ``(B,)``."""
    return waves.double().pow(2).mean(dim=-1).sqrt().mean(dim=-1)


# --- noise ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GaussianNoiseParams:
    """Standard deviation of the added white noise, in full-scale units (``AddGaussianNoise``'s amplitude)."""

    amplitude: Range


@dataclass(frozen=True)
class GaussianNoiseDraw:
    amplitude: float
    noise: torch.Tensor  # (C, S), standard normal


# Level 1 (.0001-.0025) and level 5 (.015-.02) are the toolbox's; 2-4 ours, contiguous.
AUDIO_GAUSSIAN_NOISE = _banded(
    GaussianNoiseParams, ((0.0001, 0.0025), (0.0025, 0.005), (0.005, 0.01), (0.01, 0.015), (0.015, 0.02))
)


class AudioGaussianNoise(AcousticCorruption[GaussianNoiseParams, GaussianNoiseDraw]):
    """``A + amplitude * N(0, 1)``: AddGaussianNoise's formula, the noise a Philox normal per sample and channel."""

    group = "noise"

    def draw(self, params, streams, audio):  # type: ignore[no-untyped-def]
        amplitude = _uniform(params.amplitude, streams)
        noise = streams.normal(tuple(audio.data.shape[1:]))  # (B, C, S)
        return [GaussianNoiseDraw(a, n) for a, n in zip(amplitude.cpu().tolist(), noise)]

    def apply(self, audio, params, draws, batch):  # type: ignore[no-untyped-def]
        amplitude = torch.tensor([d.amplitude for d in draws], dtype=torch.float32, device=audio.data.device)
        noise = torch.stack([d.noise for d in draws]).to(audio.data.device)
        return audio.data + (amplitude[:, None, None] * noise).to(audio.data.dtype)


@dataclass(frozen=True)
class BackgroundNoiseParams:
    """Signal-to-noise ratio in dB of the clip over the competing clip mixed in (``AddBackgroundNoise``'s ``snr``)."""

    snr_db: Range


@dataclass(frozen=True)
class BackgroundDraw:
    snr_db: float
    offset: float  # where in the competing clip the mix starts, as a share of its length


# Level 1 (25-30 dB) and level 5 (5-10 dB) are the toolbox's; 2-4 ours, contiguous 5-dB bands.
BACKGROUND_NOISE = SeverityTable(
    tuple(BackgroundNoiseParams(Range(lo, lo + 5.0)) for lo in (25.0, 20.0, 15.0, 10.0, 5.0))
)


class BackgroundNoise(AcousticCorruption[BackgroundNoiseParams, BackgroundDraw]):
    """Another clip of the dataset, a competing sound source, mixed in at a drawn SNR.

    The batch carries the competing clips in a :class:`CompetingAudio` field (which clip
    competes with which is :func:`competing_clip`'s choice). As ``AddBackgroundNoise`` does,
    the competitor is scaled to an RMS of ``rms(clip) / 10 ** (snr / 20)`` (RMS: the mean of
    the channels' RMS), looped or cut to the clip's length, here from a drawn offset (the
    competitor rolled round), and added; a silent competitor leaves the clip as it was. A
    mono competitor is heard on every channel; one of another layout is mixed down to mono.
    """

    group = "noise"

    def draw(self, params, streams, audio):  # type: ignore[no-untyped-def]
        snr = _uniform(params.snr_db, streams)
        offset = streams.uniform((1,), torch.float64)[:, 0]
        return [BackgroundDraw(**row) for row in _rows(snr_db=snr, offset=offset)]

    def apply(self, audio, params, draws, batch):  # type: ignore[no-untyped-def]
        competing = [f for f in batch.values() if isinstance(f, CompetingAudio)]
        if len(competing) != 1:
            have = ", ".join(f"{name}: {type(f).__name__}" for name, f in batch.items())
            raise ValueError(
                f"{self.name}: needs the competing clips in one CompetingAudio field (read the clip "
                f"pytest_segrobust.corruptions.acoustic.competing_clip names), the batch has {len(competing)} ({have})"
            )
        source = competing[0]
        if source.sample_rate != audio.sample_rate:
            raise ValueError(
                f"{self.name}: competing clips at {source.sample_rate} Hz, the clips at {audio.sample_rate} Hz"
            )
        noise = source.data.to(audio.data.device, torch.float32)
        channels = audio.data.shape[1]
        if noise.shape[1] not in (1, channels):
            noise = noise.mean(dim=1, keepdim=True)
        noise = noise.expand(-1, channels, -1)
        length, available = audio.data.shape[-1], noise.shape[-1]
        starts = torch.tensor([int(d.offset * available) for d in draws], device=noise.device)
        positions = (starts[:, None] + torch.arange(length, device=noise.device)) % available  # (B, S)
        noise = torch.gather(noise, 2, positions[:, None, :].expand(-1, channels, -1))
        clean_rms, noise_rms = _rms(audio.data), _rms(noise)
        snr = torch.tensor([d.snr_db for d in draws], dtype=torch.float64, device=noise.device)
        scale = torch.where(noise_rms < 1e-9, 0.0, clean_rms / 10 ** (snr / 20) / noise_rms.clamp_min(1e-9))
        return audio.data + (noise.double() * scale[:, None, None]).to(audio.data.dtype)


@dataclass(frozen=True)
class SpikeParams:
    """Spikes per second of audio and their peak amplitude (full scale), each a 1 ms click decaying over 0.2 ms."""

    rate: float
    height: Range


@dataclass(frozen=True)
class SpikeDraw:
    positions: tuple[int, ...]
    heights: tuple[float, ...]  # signed


SPIKE_SECONDS = 0.001
SPIKE_DECAY_SECONDS = 0.0002

# Ours (the paper gives no numbers): rates doubling per level, heights from well above a
# speech-level RMS (about 0.05-0.1) to full scale, "higher than the typical sound level".
AUDIO_IMPULSE_NOISE = SeverityTable(
    (
        SpikeParams(2.0, Range(0.1, 0.3)),
        SpikeParams(4.0, Range(0.2, 0.5)),
        SpikeParams(8.0, Range(0.3, 0.7)),
        SpikeParams(16.0, Range(0.5, 0.9)),
        SpikeParams(32.0, Range(0.7, 1.0)),
    )
)


def spike_count(rate: float, samples: int, sample_rate: int) -> int:
    """Spikes in a clip of ``samples``: ``ceil(rate * seconds)``."""
    return math.ceil(rate * samples / sample_rate)


class AudioImpulseNoise(AcousticCorruption[SpikeParams, SpikeDraw]):
    """The paper's impulse noise: short sharp spikes at irregular intervals, louder than the sound.

    :func:`spike_count` spikes per clip at uniform positions, each of a drawn height and sign:
    a click of 1 ms decaying exponentially (time constant 0.2 ms), added to every channel.
    """

    group = "noise"

    def draw(self, params, streams, audio):  # type: ignore[no-untyped-def]
        count = spike_count(params.rate, int(audio.data.shape[-1]), audio.sample_rate)
        positions = streams.integers(0, int(audio.data.shape[-1]), (count,))
        heights = params.height.at(streams.uniform((count,), torch.float64))
        signs = streams.integers(0, 2, (count,)) * 2 - 1
        return [
            SpikeDraw(tuple(int(p) for p in pos), tuple(float(h) for h in height))
            for pos, height in zip(positions.cpu().tolist(), (heights * signs).cpu().tolist())
        ]

    def apply(self, audio, params, draws, batch):  # type: ignore[no-untyped-def]
        device = audio.data.device
        length = int(audio.data.shape[-1])
        train = torch.zeros(len(draws), length, dtype=torch.float64, device=device)
        for i, draw in enumerate(draws):
            if draw.positions:
                train[i].index_add_(
                    0,
                    torch.tensor(draw.positions, device=device),
                    torch.tensor(draw.heights, dtype=torch.float64, device=device),
                )
        taps = max(1, round(SPIKE_SECONDS * audio.sample_rate))
        click = torch.exp(
            -torch.arange(taps, dtype=torch.float64, device=device) / (SPIKE_DECAY_SECONDS * audio.sample_rate)
        )
        spikes = torch.nn.functional.conv1d(
            torch.nn.functional.pad(train[:, None], (taps - 1, 0)), click.flip(0)[None, None]
        )[:, 0]  # causal: spike at p sounds in p .. p + taps - 1
        return audio.data + spikes[:, None, :].to(audio.data.dtype)


@dataclass(frozen=True)
class ImpulseResponseParams:
    """Reverberation time (s) of the generated impulse response; its tail starts at a tenth of the direct sound."""

    rt60: Range


@dataclass(frozen=True)
class ImpulseResponseDraw:
    rt60: float
    tail: torch.Tensor  # (taps,), standard normal, float64: the level's longest tail


IR_TAIL_LEVEL = 0.1
IR_TAIL_START_SECONDS = 0.001

# Ours: the toolbox convolves with five recorded impulse responses, which are not published.
# Small room (0.1 s) to a hall (about 1 s), the tail's share of the energy growing with it.
IMPULSE_RESPONSE = _banded(ImpulseResponseParams, ((0.05, 0.15), (0.15, 0.3), (0.3, 0.5), (0.5, 0.8), (0.8, 1.2)))


class ImpulseResponse(AcousticCorruption[ImpulseResponseParams, ImpulseResponseDraw]):
    """The toolbox's impulse noise: the clip convolved with an impulse response, by ``ApplyImpulseResponse``'s rules.

    The impulse response is generated per clip (:meth:`impulse_responses`): a unit direct
    sound, then from 1 ms on Gaussian noise of standard deviation 0.1 decaying by 60 dB over
    the drawn RT60, as long as that RT60. As ``ApplyImpulseResponse`` does, each channel is
    convolved, the result scaled to a peak of 0.5 and cut to the clip's length.
    """

    group = "noise"

    def draw(self, params, streams, audio):  # type: ignore[no-untyped-def]
        rt60 = _uniform(params.rt60, streams)
        taps = self.taps(params.rt60.high, audio.sample_rate)
        tails = streams.normal((taps,), torch.float64)  # (B, taps)
        return [ImpulseResponseDraw(r, t) for r, t in zip(rt60.cpu().tolist(), tails)]

    @staticmethod
    def taps(rt60: float, sample_rate: int) -> int:
        return max(2, math.ceil(rt60 * sample_rate))

    @staticmethod
    def impulse_responses(draws: Sequence[ImpulseResponseDraw], sample_rate: int) -> torch.Tensor:
        """The impulse response of every clip, zero past its own RT60. Shape: return ``(B, taps)``, float64."""
        tails = torch.stack([d.tail for d in draws])
        taps = tails.shape[-1]
        time = torch.arange(taps, dtype=torch.float64, device=tails.device) / sample_rate
        rt60 = torch.tensor([d.rt60 for d in draws], dtype=torch.float64, device=tails.device)[:, None]
        envelope = IR_TAIL_LEVEL * torch.exp(-math.log(1000.0) * time / rt60)
        envelope = torch.where((time >= IR_TAIL_START_SECONDS) & (time < rt60), envelope, 0.0)
        responses = tails * envelope
        responses[:, 0] = 1.0
        return responses

    def apply(self, audio, params, draws, batch):  # type: ignore[no-untyped-def]
        responses = self.impulse_responses(draws, audio.sample_rate).to(audio.data.device)
        length, taps = int(audio.data.shape[-1]), int(responses.shape[-1])
        size = length + taps - 1
        spectrum = torch.fft.rfft(audio.data.double(), n=size) * torch.fft.rfft(responses, n=size)[:, None, :]
        full = torch.fft.irfft(spectrum, n=size)  # (B, C, S + taps - 1): the whole convolution
        peak = full.abs().flatten(1).amax(dim=1)
        full = full * torch.where(peak > 0, 0.5 / peak.clamp_min(1e-300), 1.0)[:, None, None]
        return full[..., :length].to(audio.data.dtype)


# --- signal-level --------------------------------------------------------------------------


@dataclass(frozen=True)
class GainParams:
    """Size of the gain change in dB; its sign is drawn, up or down alike."""

    decibels: Range


@dataclass(frozen=True)
class GainDraw:
    gain_db: float


# The toolbox: uniform on [-3, 3] dB (level 1) ... [-15, 15] dB (level 5). Ours: the size in
# the level's own 3-dB band (level 1 from 1 dB), the sign at random, so that levels are ordered.
GAIN = _banded(GainParams, ((1.0, 3.0), (3.0, 6.0), (6.0, 9.0), (9.0, 12.0), (12.0, 15.0)))


class Gain(AcousticCorruption[GainParams, GainDraw]):
    """``10 ** (dB / 20) * A``: Gain's formula (then clipped to full scale, as a louder recording saturates)."""

    group = "signal"

    def draw(self, params, streams, audio):  # type: ignore[no-untyped-def]
        size = _uniform(params.decibels, streams)
        sign = _sign(streams)
        return [GainDraw(**row) for row in _rows(gain_db=size * sign)]

    def apply(self, audio, params, draws, batch):  # type: ignore[no-untyped-def]
        ratio = torch.tensor([10 ** (d.gain_db / 20) for d in draws], dtype=torch.float32, device=audio.data.device)
        return audio.data * ratio[:, None, None].to(audio.data.dtype)


@dataclass(frozen=True)
class TanhParams:
    """``TanhDistortion``'s ``distortion_amount``: the pre-gain puts the ``100 - 99 d`` percentile of ``|A|`` at 0.5."""

    distortion: Range


@dataclass(frozen=True)
class TanhDraw:
    distortion: float


# Level 1 (.01-.1) and level 5 (.6-.7) are the toolbox's; 2-4 ours, contiguous.
TANH_DISTORTION = _banded(TanhParams, ((0.01, 0.1), (0.1, 0.25), (0.25, 0.4), (0.4, 0.6), (0.6, 0.7)))


class TanhDistortion(AudiomentationsCorruption[TanhParams, TanhDraw]):
    """audiomentations' ``TanhDistortion`` at the drawn amount (pre-gain by a percentile, ``tanh``, the input's RMS)."""

    group = "signal"

    def draw(self, params, streams, audio):  # type: ignore[no-untyped-def]
        return [TanhDraw(**row) for row in _rows(distortion=_uniform(params.distortion, streams))]

    def transform(self) -> Any:
        return _audiomentations().TanhDistortion(p=1.0)

    def library_parameters(self, draw: TanhDraw) -> dict[str, Any]:
        return {"distortion_amount": draw.distortion}


# --- filters -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeakingParams:
    """``PeakingFilter``'s centre (Hz, drawn uniform in mels), the size of its gain (dB; the sign is drawn) and Q."""

    centre_hz: Range
    gain_db: Range
    q: Range


@dataclass(frozen=True)
class PeakingDraw:
    centre_hz: float
    gain_db: float
    q: float


# Ours. The centre range is audiomentations' default (50-7500 Hz) at every level, capped
# below Nyquist (0.45 x the sample rate); the gain's size grows to audiomentations' default
# limit of 24 dB and the band widens (Q falls) with the level.
PEAKING_FILTER = SeverityTable(
    tuple(
        PeakingParams(Range(50.0, 7500.0), Range(*gain), Range(*q))
        for gain, q in (
            ((3.0, 6.0), (3.0, 5.0)),
            ((6.0, 9.0), (2.0, 3.0)),
            ((9.0, 12.0), (1.5, 2.0)),
            ((12.0, 18.0), (1.0, 1.5)),
            ((18.0, 24.0), (0.5, 1.0)),
        )
    )
)


class PeakingFilter(AudiomentationsCorruption[PeakingParams, PeakingDraw]):
    """audiomentations' ``PeakingFilter`` (an RBJ cookbook biquad) at the drawn centre, gain and Q."""

    group = "filter"

    def draw(self, params, streams, audio):  # type: ignore[no-untyped-def]
        top = min(params.centre_hz.high, 0.45 * audio.sample_rate)
        band = Range(min(params.centre_hz.low, top), top)
        centre = _mel_uniform(band, streams.uniform((1,), torch.float64)[:, 0])
        size = _uniform(params.gain_db, streams)
        sign = _sign(streams)
        q = _uniform(params.q, streams)
        return [PeakingDraw(**row) for row in _rows(centre_hz=centre, gain_db=size * sign, q=q)]

    def transform(self) -> Any:
        return _audiomentations().PeakingFilter(p=1.0)

    def library_parameters(self, draw: PeakingDraw) -> dict[str, Any]:
        return {"center_freq": _mel_round_trip(draw.centre_hz), "gain_db": draw.gain_db, "q_factor": draw.q}


@dataclass(frozen=True)
class CutoffParams:
    """A Butterworth filter's cutoff (Hz, drawn uniform in mels) and roll-off (dB/octave, a multiple of 6 drawn in range)."""

    cutoff_hz: Range
    rolloff_db: Range


@dataclass(frozen=True)
class CutoffDraw:
    cutoff_hz: float
    rolloff_db: int


# Level 1 (8-16 kHz) and level 5 (0.5-1 kHz) are the toolbox's; 2-4 ours, an octave each.
# The roll-off is audiomentations' default, 12-24 dB/octave. On 16 kHz audio level 1 is
# nearly a no-op: its cutoff is never below Nyquist (8 kHz).
LOW_PASS = SeverityTable(
    tuple(CutoffParams(Range(lo, 2 * lo), Range(12.0, 24.0)) for lo in (8000.0, 4000.0, 2000.0, 1000.0, 500.0))
)
# Level 1 (100-200 Hz) and level 5 (1.6-3.2 kHz) are the toolbox's; 2-4 ours, an octave each.
HIGH_PASS = SeverityTable(
    tuple(CutoffParams(Range(lo, 2 * lo), Range(12.0, 24.0)) for lo in (100.0, 200.0, 400.0, 800.0, 1600.0))
)


class ButterworthFilter(AudiomentationsCorruption[CutoffParams, CutoffDraw]):
    """audiomentations' ``LowPassFilter`` or ``HighPassFilter`` (``kind``) at the drawn cutoff and roll-off.

    A cutoff at or above Nyquist is moved to ``0.9999 * Nyquist`` by audiomentations.
    """

    group = "filter"
    library_transform: ClassVar[str] = ""  # LowPassFilter or HighPassFilter

    def draw(self, params, streams, audio):  # type: ignore[no-untyped-def]
        cutoff = _mel_uniform(params.cutoff_hz, streams.uniform((1,), torch.float64)[:, 0])
        order = streams.integers(int(params.rolloff_db.low) // 6, int(params.rolloff_db.high) // 6 + 1, (1,))[:, 0]
        return [CutoffDraw(c, int(r)) for c, r in zip(cutoff.cpu().tolist(), (order * 6).cpu().tolist())]

    def transform(self) -> Any:
        return getattr(_audiomentations(), self.library_transform)(zero_phase=False, p=1.0)

    def library_parameters(self, draw: CutoffDraw) -> dict[str, Any]:
        return {"rolloff": draw.rolloff_db, "cutoff_freq": _mel_round_trip(draw.cutoff_hz)}


class LowPass(ButterworthFilter):
    library_transform = "LowPassFilter"


class HighPass(ButterworthFilter):
    library_transform = "HighPassFilter"


# --- physical interference -----------------------------------------------------------------


@dataclass(frozen=True)
class AirAbsorptionParams:
    """``AirAbsorption``'s relative humidity (%, an integer drawn in range) and source distance (m), at 20 C."""

    humidity: Range
    distance_m: Range


@dataclass(frozen=True)
class AirAbsorptionDraw:
    humidity: int
    distance_m: float


AIR_TEMPERATURE = 20.0

# Ours (the toolbox's per-level values are not known): drier air and farther sources per level,
# within audiomentations' limits (humidity 30-90 %, distance up to 2500 m). At 8 kHz and 20 C,
# level 1 takes off about 1-5 dB, level 5 30-80 dB.
AIR_ABSORPTION = SeverityTable(
    (
        AirAbsorptionParams(Range(70, 90), Range(10.0, 30.0)),
        AirAbsorptionParams(Range(60, 80), Range(30.0, 60.0)),
        AirAbsorptionParams(Range(50, 70), Range(60.0, 100.0)),
        AirAbsorptionParams(Range(40, 60), Range(100.0, 200.0)),
        AirAbsorptionParams(Range(30, 50), Range(200.0, 400.0)),
    )
)


class AirAbsorption(AudiomentationsCorruption[AirAbsorptionParams, AirAbsorptionDraw]):
    """audiomentations' ``AirAbsorption`` (an STFT filter bank after pyroomacoustics' absorption table) at 20 C."""

    group = "physical"

    def draw(self, params, streams, audio):  # type: ignore[no-untyped-def]
        humidity = streams.integers(int(params.humidity.low), int(params.humidity.high) + 1, (1,))[:, 0]
        distance = _uniform(params.distance_m, streams)
        return [AirAbsorptionDraw(int(h), d) for h, d in zip(humidity.cpu().tolist(), distance.cpu().tolist())]

    def transform(self) -> Any:
        return _audiomentations().AirAbsorption(p=1.0)

    def library_parameters(self, draw: AirAbsorptionDraw) -> dict[str, Any]:
        return {"temperature": AIR_TEMPERATURE, "humidity": draw.humidity, "distance": draw.distance_m}


@dataclass(frozen=True)
class RoomParams:
    """A shoebox room: width, depth, height (m), target RT60 (s; the walls' absorption follows by inverse
    Sabine), the microphone's distance from the source (m) and the image-source order."""

    width_m: Range
    depth_m: Range
    height_m: Range
    rt60: Range
    mic_distance_m: Range
    max_order: int


@dataclass(frozen=True)
class RoomDraw:
    width_m: float
    depth_m: float
    height_m: float
    rt60: float
    source_x: float
    source_y: float
    source_z: float
    mic_distance_m: float
    mic_azimuth: float
    mic_elevation: float


ROOM_PADDING_M = 0.1  # RoomSimulator's default distance of source and microphone from the walls

# Ours (the toolbox's per-level rooms are not known): a small office to a hall, RT60 rising
# from 0.15 s to 1.5 s, the microphone farther from the source. The first level's room is
# audiomentations' default; the order of reflections is capped at 8 to bound the cost
# (pyroomacoustics' image sources grow with its cube; 8 is about 0.1 s of CPU per 5 s clip).
ROOM_REVERB = SeverityTable(
    (
        RoomParams(Range(3.6, 5.6), Range(3.6, 3.9), Range(2.4, 3.0), Range(0.15, 0.3), Range(0.15, 0.35), 8),
        RoomParams(Range(5.0, 7.0), Range(4.0, 6.0), Range(2.5, 3.0), Range(0.3, 0.5), Range(0.35, 0.7), 8),
        RoomParams(Range(7.0, 10.0), Range(6.0, 8.0), Range(3.0, 4.0), Range(0.5, 0.8), Range(0.7, 1.5), 8),
        RoomParams(Range(10.0, 15.0), Range(8.0, 12.0), Range(3.5, 5.0), Range(0.8, 1.1), Range(1.5, 3.0), 8),
        RoomParams(Range(15.0, 25.0), Range(12.0, 18.0), Range(5.0, 8.0), Range(1.1, 1.5), Range(3.0, 5.0), 8),
    )
)


class RoomReverb(AcousticCorruption[RoomParams, RoomDraw]):
    """``RoomSimulator``'s reverberation (pyroomacoustics' image-source model, no ray tracing) in a drawn room.

    The source stands anywhere in the room (the padding from the walls kept, at most 2.1 m
    high); the microphone at the drawn distance, azimuth (uniform) and elevation (within
    +-30 degrees) from it, clamped into the room as RoomSimulator does. The output keeps the
    clip's length and RMS.

    RoomSimulator builds its room only while drawing its parameters from the global
    generators, so :meth:`impulse_response` builds the same room with pyroomacoustics (rt60
    mode: the walls' absorption and the reflection order from inverse Sabine, the order capped
    at the level's; air absorption on) and :meth:`apply_one` convolves as RoomSimulator does.
    """

    group = "physical"
    requires = (AUDIO_ROOMS,)

    def draw(self, params, streams, audio):  # type: ignore[no-untyped-def]
        u = streams.uniform((10,), torch.float64)  # one draw, ten values per clip, in the order below
        width, depth, height = params.width_m.at(u[:, 0]), params.depth_m.at(u[:, 1]), params.height_m.at(u[:, 2])
        pad = ROOM_PADDING_M
        # RoomSimulator's default source height, 1.0-2.1 m, within the padding from the ceiling.
        top = torch.clamp(height - pad, max=2.1)
        bottom = torch.clamp(top, max=1.0)
        return [
            RoomDraw(**row)
            for row in _rows(
                width_m=width, depth_m=depth, height_m=height, rt60=params.rt60.at(u[:, 3]),
                source_x=pad + (width - 2 * pad) * u[:, 4], source_y=pad + (depth - 2 * pad) * u[:, 5],
                source_z=bottom + (top - bottom) * u[:, 6],
                mic_distance_m=params.mic_distance_m.at(u[:, 7]),
                mic_azimuth=-math.pi + 2 * math.pi * u[:, 8],
                mic_elevation=(2 * u[:, 9] - 1) * math.pi / 6,
            )
        ]  # fmt: skip

    @staticmethod
    def impulse_response(draw: RoomDraw, max_order: int, sample_rate: int) -> np.ndarray:
        """The room impulse response from the source to the microphone of ``draw``. Shape: return ``(taps,)``, float64."""
        import pyroomacoustics as pra  # the ``audio`` extra, imported only when the perturbation runs

        width, depth, height = draw.width_m, draw.depth_m, draw.height_m
        absorption, sabine_order = pra.inverse_sabine(draw.rt60, np.array([width, depth, height]))
        # The microphone around the source, then clamped into the room, in RoomSimulator's arithmetic.
        radius, azimuth, elevation = draw.mic_distance_m, draw.mic_azimuth, draw.mic_elevation
        mic = (
            draw.source_x - radius * np.cos(elevation) * np.sin(azimuth),
            draw.source_y + radius * np.cos(elevation) * np.cos(azimuth),
            draw.source_z + radius * np.sin(elevation),
        )
        mic = tuple(
            max(ROOM_PADDING_M, min(side - ROOM_PADDING_M, value)) for side, value in zip((width, depth, height), mic)
        )
        floor = np.array([[0, 0], [0, depth], [width, depth], [width, 0]]).T
        room = pra.Room.from_corners(
            floor, fs=sample_rate, materials=pra.Material(absorption), ray_tracing=False, air_absorption=True,
            max_order=min(sabine_order, max_order),
        )  # fmt: skip
        room.extrude(height=height, materials=pra.Material(absorption))
        room.add_source(np.array([draw.source_x, draw.source_y, draw.source_z]))
        room.add_microphone_array(pra.MicrophoneArray(np.array([mic]).T, room.fs))
        room.compute_rir()
        return np.asarray(room.rir[0][0])

    def apply_one(self, wave, sample_rate, params, draw):  # type: ignore[no-untyped-def]
        from scipy.signal import convolve

        response = self.impulse_response(draw, params.max_order, sample_rate)
        channels = wave[None] if wave.ndim == 1 else wave
        out = np.array([convolve(channel, response) for channel in channels], dtype=wave.dtype)[:, : wave.shape[-1]]
        out = out[0] if wave.ndim == 1 else out
        before, after = (
            float(np.sqrt(np.mean(wave.astype(np.float64) ** 2))),
            float(np.sqrt(np.mean(out.astype(np.float64) ** 2))),
        )
        return (out * (before / after if after > 1e-12 else 1.0)).astype(np.float32)


# --- post-processing -----------------------------------------------------------------------


@dataclass(frozen=True)
class TimeMaskParams:
    """``TimeMask``'s silent share of the clip (drawn in range) and its fade in and out (s)."""

    band_part: Range
    fade_seconds: float


@dataclass(frozen=True)
class TimeMaskDraw:
    start: int
    length: int


# Level 1 (.05-.1) and level 5 (.4-.5) are the toolbox's; 2-4 ours, contiguous. The fade is
# audiomentations' default, 5 ms.
TIME_MASK = _banded(
    lambda band: TimeMaskParams(band, 0.005), ((0.05, 0.1), (0.1, 0.2), (0.2, 0.3), (0.3, 0.4), (0.4, 0.5))
)


def crossfade(length: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """audiomentations' equal-gain crossfade pair (``get_crossfade_mask_pair(length, equal_energy=False)``): in, out."""
    x = torch.linspace(0, 1, length, dtype=torch.float32, device=device)
    x2 = 1 - x
    a = x * x2
    b = a * (1 + -0.70912 * a)
    return (b + x) ** 2, (b + x2) ** 2


class TimeMask(AcousticCorruption[TimeMaskParams, TimeMaskDraw]):
    """A drawn share of the clip silenced, faded in and out: ``TimeMask``'s rule, in torch.

    The masked length is an integer uniform on ``[int(S * low), int(S * high)]`` and its start
    uniform on ``[0, S - length]``; the fades last ``round(fade * rate)`` samples, at most half
    the mask, and are skipped below 2 samples, as in audiomentations.
    """

    group = "post-processing"

    def draw(self, params, streams, audio):  # type: ignore[no-untyped-def]
        samples = int(audio.data.shape[-1])
        low, high = int(samples * params.band_part.low), int(samples * params.band_part.high)
        length = streams.integers(low, high + 1, (1,))[:, 0]
        start = (streams.uniform((1,), torch.float64)[:, 0] * (samples - length + 1)).floor().long()
        return [TimeMaskDraw(int(s), int(n)) for s, n in zip(start.cpu().tolist(), length.cpu().tolist())]

    def apply(self, audio, params, draws, batch):  # type: ignore[no-untyped-def]
        fade_seconds = params.fade_seconds
        out = audio.data.clone()
        for i, draw in enumerate(draws):
            t0, t = draw.start, draw.length
            fade = min(round(audio.sample_rate * fade_seconds), t // 2) if fade_seconds > 0 else 0
            if fade >= 2:
                fade_in, fade_out = crossfade(fade, out.device)
                out[i, :, t0 : t0 + fade] *= fade_out.to(out.dtype)
                out[i, :, t0 + fade : t0 + t - fade] = 0.0
                out[i, :, t0 + t - fade : t0 + t] *= fade_in.to(out.dtype)
            else:
                out[i, :, t0 : t0 + t] = 0.0
        return out


@dataclass(frozen=True)
class Mp3Params:
    """Bitrates (kbps) an MP3 round trip is made at: one of audiomentations' supported bitrates in range, uniformly."""

    kbps: Range


@dataclass(frozen=True)
class Mp3Draw:
    kbps: int


MP3_BITRATES = (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 192, 224, 256, 320)
MP3_QUALITY = 7  # Mp3Compression's default LAME quality

# Level 1 (128-192) and level 5 (8-32) are the toolbox's; 2-4 ours, between them without overlap.
MP3_COMPRESSION = _banded(Mp3Params, ((128, 192), (80, 112), (56, 64), (40, 48), (8, 32)))


class Mp3Compression(AudiomentationsCorruption[Mp3Params, Mp3Draw]):
    """audiomentations' ``Mp3Compression`` through its ``fast-mp3-augment`` backend (LAME, minimp3; in memory,
    the encoder's delay removed so the frames stay aligned)."""

    group = "post-processing"
    requires = (AUDIO_MP3,)

    def draw(self, params, streams, audio):  # type: ignore[no-untyped-def]
        choices = [b for b in MP3_BITRATES if params.kbps.low <= b <= params.kbps.high]
        index = streams.integers(0, len(choices), (1,))[:, 0]
        return [Mp3Draw(choices[int(i)]) for i in index.cpu().tolist()]

    def transform(self) -> Any:
        return _audiomentations().Mp3Compression(backend="fast-mp3-augment", quality=MP3_QUALITY, p=1.0)

    def library_parameters(self, draw: Mp3Draw) -> dict[str, Any]:
        return {"bitrate": draw.kbps}


audio_gaussian_noise = AudioGaussianNoise("audio_gaussian_noise", Category.ACOUSTIC, AUDIO_GAUSSIAN_NOISE)
background_noise = BackgroundNoise("background_noise", Category.ACOUSTIC, BACKGROUND_NOISE)
audio_impulse_noise = AudioImpulseNoise("audio_impulse_noise", Category.ACOUSTIC, AUDIO_IMPULSE_NOISE)
impulse_response = ImpulseResponse("impulse_response", Category.ACOUSTIC, IMPULSE_RESPONSE)
gain = Gain("gain", Category.ACOUSTIC, GAIN)
tanh_distortion = TanhDistortion("tanh_distortion", Category.ACOUSTIC, TANH_DISTORTION)
peaking_filter = PeakingFilter("peaking_filter", Category.ACOUSTIC, PEAKING_FILTER)
low_pass = LowPass("low_pass", Category.ACOUSTIC, LOW_PASS)
high_pass = HighPass("high_pass", Category.ACOUSTIC, HIGH_PASS)
air_absorption = AirAbsorption("air_absorption", Category.ACOUSTIC, AIR_ABSORPTION)
room_reverb = RoomReverb("room_reverb", Category.ACOUSTIC, ROOM_REVERB)
time_mask = TimeMask("time_mask", Category.ACOUSTIC, TIME_MASK)
mp3_compression = Mp3Compression("mp3_compression", Category.ACOUSTIC, MP3_COMPRESSION)

ACOUSTIC: tuple[AcousticCorruption[Any, Any], ...] = (
    audio_gaussian_noise, background_noise, audio_impulse_noise, impulse_response,
    gain, tanh_distortion,
    peaking_filter, low_pass, high_pass,
    air_absorption, room_reverb,
    time_mask, mp3_compression,
)  # fmt: skip
"""R2-Bench's twelve in its order (noise, signal, filter, physical, post-processing), impulse noise in both forms."""
