"""The acoustic family (R2-Bench's twelve, impulse noise in both forms): determinism, level order,
SNR and cutoffs, known answers from audiomentations called with the same parameters, and fields
that stay apart (audio untouched by image corruptions, pixels untouched by acoustic ones).

Tests of the perturbations computed with audiomentations skip where it is not installed; the
torch ones, and every property test of them, run without it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
import torch

from pytest_segrobust.core.types import Audio, Image, Video, VideoMasks
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions import acoustic as A

RATE = 16000
SECONDS = 1.0


def needs(corruption: A.AcousticCorruption[Any, Any]) -> list[pytest.MarkDecorator]:
    missing = [m for extra in corruption.requires for m in extra.missing()]
    reason = f"{', '.join(missing)} not installed: pip install 'pytest-segrobust[audio]'"
    return [pytest.mark.skipif(bool(missing), reason=reason)]


def each(corruptions: tuple[A.AcousticCorruption[Any, Any], ...] = A.ACOUSTIC) -> list[Any]:
    return [pytest.param(c, id=c.name, marks=needs(c)) for c in corruptions]


def clips(count: int = 4, seconds: float = SECONDS, loudness: float = 0.25, seed: int = 0) -> torch.Tensor:
    """Speech-like test clips: a few harmonics of a drawn pitch from 100 Hz to 7 kHz, amplitude-modulated,
    with a little noise. Shape: ``(count, 1, S)``, float32."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(int(seconds * RATE), dtype=torch.float64) / RATE
    out = []
    for _ in range(count):
        pitch = 100 + 150 * torch.rand((), generator=g, dtype=torch.float64)
        wave = torch.zeros_like(t)
        for k in range(1, 70):
            if k * pitch < 7000:
                wave += (
                    torch.sin(2 * math.pi * k * pitch * t + 6.28 * torch.rand((), generator=g, dtype=torch.float64)) / k
                )
        wave *= 0.6 + 0.4 * torch.sin(2 * math.pi * 3 * t)
        wave += 0.02 * torch.randn(t.shape, generator=g, dtype=torch.float64)
        out.append(loudness * wave / wave.abs().max())
    return torch.stack(out)[:, None].float()


def audio_batch(waves: torch.Tensor, frames: int = 4) -> dict[str, Any]:
    """An audio batch with its competing clips (each clip's competitor: the next one, round)."""
    ids = tuple(f"clip{i}" for i in range(waves.shape[0]))
    competitors = waves.roll(1, dims=0)[..., : waves.shape[-1] // 2 + 123]  # shorter: it loops
    return {
        "audio": Audio.of(waves, RATE, frames),
        "competing": A.CompetingAudio(competitors, RATE, ids[-1:] + ids[:-1]),
    }


@pytest.fixture(scope="module")
def waves() -> torch.Tensor:
    return clips()


SEEDS = [3, 2**62 + 7, 11, 5]


def run(
    corruption: A.AcousticCorruption[Any, Any], waves: torch.Tensor, severity: int, seeds: list[int] = SEEDS
) -> torch.Tensor:
    return corruption(audio_batch(waves), severity, seeds[: waves.shape[0]])["audio"].data


# --- determinism -----------------------------------------------------------------------------


@pytest.mark.parametrize("corruption", each())
def test_a_clip_is_perturbed_alike_alone_in_any_batch_and_order(
    corruption: A.AcousticCorruption[Any, Any], waves: torch.Tensor
) -> None:
    batch, seeds = audio_batch(waves), SEEDS
    whole = corruption(batch, 4, seeds)["audio"].data
    again = corruption(batch, 4, seeds)["audio"].data
    assert torch.equal(whole, again)
    order = [2, 0, 3, 1]
    shuffled = {name: field.take(order) for name, field in batch.items()}
    reordered = corruption(shuffled, 4, [seeds[i] for i in order])["audio"].data
    assert torch.equal(reordered, whole[order])
    for i in (0, 3):
        alone = corruption({name: field.take([i]) for name, field in batch.items()}, 4, [seeds[i]])["audio"].data
        assert torch.equal(alone[0], whole[i]), i
    # Other seeds, other draws (mp3's level 4 has two bitrates: three tries); severity 0 is the clean clip.
    assert any(not torch.equal(corruption(batch, 4, [s + k for s in seeds])["audio"].data, whole) for k in (1, 2, 3))
    assert corruption(batch, 0, seeds)["audio"] is batch["audio"]


def test_draws_depend_on_the_seed_alone_and_are_typed(waves: torch.Tensor) -> None:
    audio = Audio.of(waves, RATE, 4)
    first = A.gain.draws(audio, 3, SEEDS)
    assert [d.gain_db for d in first] == [d.gain_db for d in A.gain.draws(audio.take([0, 1, 2, 3]), 3, SEEDS)]
    assert all(6.0 <= abs(d.gain_db) <= 9.0 for d in first)
    assert A.gain.draws(audio.take([1]), 3, SEEDS[1:2]) == first[1:2]


def test_competing_clip_is_another_clip_chosen_by_id_alone() -> None:
    ids = [f"clip{i}" for i in range(7)]
    chosen = {i: A.competing_clip(i, ids, seed=1) for i in ids}
    assert all(other != clip and other in ids for clip, other in chosen.items())
    assert chosen == {i: A.competing_clip(i, list(reversed(ids)), seed=1) for i in ids}
    assert len(set(chosen.values())) > 1
    with pytest.raises(ValueError, match="second clip"):
        A.competing_clip("only", ["only"])


def test_background_noise_without_competing_clips_says_what_it_needs(waves: torch.Tensor) -> None:
    with pytest.raises(ValueError, match="CompetingAudio field .*competing_clip"):
        A.background_noise({"audio": Audio.of(waves, RATE, 4)}, 3, SEEDS)


# --- level order -----------------------------------------------------------------------------


def spectral_distance(clean: torch.Tensor, perturbed: torch.Tensor) -> float:
    """Mean log-spectral distance (dB) between the magnitude spectrograms (1024-point frames), over clips.

    Phase-blind: a filter's or a room's delay is no change, what reaches the ear is.
    """

    def spectrum(x: torch.Tensor) -> torch.Tensor:
        window = torch.hann_window(1024, dtype=torch.float64)
        return torch.stft(x[:, 0].double(), 1024, 256, window=window, return_complex=True).abs()

    floor = 1e-5
    difference = 20 * (torch.log10(spectrum(perturbed) + floor) - torch.log10(spectrum(clean) + floor))
    return float(difference.pow(2).mean(dim=(1, 2)).sqrt().mean())


@pytest.mark.parametrize("corruption", each())
def test_the_signal_changes_more_at_higher_levels(
    corruption: A.AcousticCorruption[Any, Any], waves: torch.Tensor
) -> None:
    # The measure: mean log-spectral distance over 4 clips, strictly rising over levels 1, 3, 5
    # and never falling by more than 10% from one level to the next.
    distances = [spectral_distance(waves, run(corruption, waves, severity)) for severity in range(1, 6)]
    assert distances[0] < distances[2] < distances[4], distances
    assert all(b > 0.9 * a for a, b in itertools.pairwise(distances)), distances


# --- SNR, cutoffs and shares -----------------------------------------------------------------


def rms(x: torch.Tensor) -> torch.Tensor:
    return x.double().pow(2).mean(dim=(-2, -1)).sqrt()


@pytest.mark.parametrize("severity", range(1, 6))
def test_gaussian_noise_has_the_drawn_amplitude(severity: int, waves: torch.Tensor) -> None:
    out = run(A.audio_gaussian_noise, waves, severity)
    drawn = A.audio_gaussian_noise.draws(Audio.of(waves, RATE, 4), severity, SEEDS)
    table = A.AUDIO_GAUSSIAN_NOISE[severity].amplitude
    for i, draw in enumerate(drawn):
        assert table.low <= draw.amplitude <= table.high
        # 16000 normals: the measured std is within 3% of the amplitude.
        assert rms(out[i] - waves[i]).item() == pytest.approx(draw.amplitude, rel=0.03)


@pytest.mark.parametrize("severity", range(1, 6))
def test_background_noise_is_mixed_at_the_drawn_snr(severity: int, waves: torch.Tensor) -> None:
    out = run(A.background_noise, waves, severity)
    drawn = A.background_noise.draws(Audio.of(waves, RATE, 4), severity, SEEDS)
    table = A.BACKGROUND_NOISE[severity].snr_db
    for i, draw in enumerate(drawn):
        snr = 20 * math.log10(rms(waves[i]).item() / rms(out[i] - waves[i]).item())
        assert table.low <= draw.snr_db <= table.high
        assert snr == pytest.approx(draw.snr_db, abs=1e-3)


def test_background_noise_is_the_competing_clip_from_the_drawn_offset(waves: torch.Tensor) -> None:
    batch = audio_batch(waves)
    out = A.background_noise(batch, 5, SEEDS)["audio"].data
    noise, competitor = (out - waves).double(), batch["competing"].data.double()
    for i, draw in enumerate(A.background_noise.draws(batch["audio"], 5, SEEDS)):
        start = int(draw.offset * competitor.shape[-1])
        looped = competitor[i, 0].roll(-start).repeat(3)[: waves.shape[-1]]
        scale = float(noise[i, 0] @ looped / (looped @ looped))
        assert torch.allclose(noise[i, 0], scale * looped, atol=2e-7)


def test_impulse_noise_adds_the_drawn_spikes(waves: torch.Tensor) -> None:
    quiet = torch.zeros_like(waves)
    out = run(A.audio_impulse_noise, quiet, 3)
    for i, draw in enumerate(A.audio_impulse_noise.draws(Audio.of(quiet, RATE, 4), 3, SEEDS)):
        assert len(draw.positions) == A.spike_count(8.0, quiet.shape[-1], RATE) == 8
        reference = np.zeros(quiet.shape[-1])
        for position, height in zip(draw.positions, draw.heights):  # the click, written out
            assert 0.3 <= abs(height) <= 0.7
            for k in range(16):
                if position + k < len(reference):
                    reference[position + k] += height * math.exp(-k / 3.2)
        assert np.allclose(out[i, 0].numpy(), np.clip(reference, -1, 1), atol=1e-6)


@pytest.mark.parametrize("severity", range(1, 6))
def test_time_mask_silences_the_drawn_share(severity: int, waves: torch.Tensor) -> None:
    out = run(A.time_mask, waves, severity)
    table = A.TIME_MASK[severity].band_part
    for i, draw in enumerate(A.time_mask.draws(Audio.of(waves, RATE, 4), severity, SEEDS)):
        silent = (out[i, 0] == 0) & (waves[i, 0] != 0)
        share = draw.length / waves.shape[-1]
        assert int(table.low * waves.shape[-1]) <= draw.length <= int(table.high * waves.shape[-1])
        # The fades (5 ms each side) are quiet but not silent.
        assert int(silent.sum()) == pytest.approx(draw.length - 2 * 80, abs=2), share
        assert torch.equal(out[i, 0, : draw.start], waves[i, 0, : draw.start])


def tone(frequency: float, seconds: float = 0.5) -> torch.Tensor:
    t = torch.arange(int(seconds * RATE), dtype=torch.float64) / RATE
    return (0.25 * torch.sin(2 * math.pi * frequency * t)).float()[None, None]


def tone_gain_db(corruption: A.AcousticCorruption[Any, Any], frequency: float, severity: int, seed: int) -> float:
    """The steady-state gain (dB) a tone at ``frequency`` gets (its second half, after the filter settles)."""
    clean = tone(frequency)
    out = corruption({"audio": Audio.of(clean, RATE, 1)}, severity, [seed])["audio"].data
    half = clean.shape[-1] // 2
    return 20 * math.log10(rms(out[..., half:]).item() / rms(clean[..., half:]).item())


@pytest.mark.parametrize("severity", range(2, 6))
@pytest.mark.parametrize("corruption", each((A.low_pass, A.high_pass)))
def test_butterworth_cutoffs_pass_and_stop_where_drawn(
    corruption: A.AcousticCorruption[Any, Any], severity: int
) -> None:
    audio = Audio.of(tone(100.0), RATE, 1)
    (draw,) = corruption.draws(audio, severity, [7])
    table = corruption.table[severity]
    assert table.cutoff_hz.low <= draw.cutoff_hz <= table.cutoff_hz.high and draw.rolloff_db in (12, 18, 24)
    low = corruption is A.low_pass
    passed, stopped = (draw.cutoff_hz / 4, draw.cutoff_hz * 4) if low else (draw.cutoff_hz * 4, draw.cutoff_hz / 4)
    if stopped < RATE / 2:
        # Two octaves into the stop band: at least 2 x roll-off - 3 dB down (the -3 dB point is the cutoff).
        assert tone_gain_db(corruption, stopped, severity, 7) < -(2 * draw.rolloff_db - 3)
    if passed < RATE / 2:
        assert abs(tone_gain_db(corruption, passed, severity, 7)) < 0.5
    # At the cutoff itself: -3 dB.
    assert tone_gain_db(corruption, draw.cutoff_hz, severity, 7) == pytest.approx(-3.0, abs=0.3)


@pytest.mark.parametrize("corruption", each((A.low_pass,)))
def test_low_pass_level_1_is_nearly_a_no_op_at_16_khz(
    corruption: A.AcousticCorruption[Any, Any], waves: torch.Tensor
) -> None:
    for draw in corruption.draws(Audio.of(waves, RATE, 4), 1, SEEDS):
        assert draw.cutoff_hz >= RATE / 2  # every cutoff of level 1 is at or above Nyquist
    out = run(corruption, waves, 1)
    assert spectral_distance(waves, out) < 0.1 * spectral_distance(waves, run(corruption, waves, 2))
    assert abs(tone_gain_db(corruption, 7000.0, 1, 3)) < 0.1


@pytest.mark.parametrize("corruption", each((A.peaking_filter,)))
def test_peaking_filter_gain_at_its_centre(corruption: A.AcousticCorruption[Any, Any]) -> None:
    for severity in (1, 5):
        (draw,) = corruption.draws(Audio.of(tone(100.0), RATE, 1), severity, [5])
        table = corruption.table[severity]
        assert table.gain_db.low <= abs(draw.gain_db) <= table.gain_db.high
        # Below 0 dBFS at the boost: the tone is quiet enough not to clip.
        assert tone_gain_db(corruption, draw.centre_hz, severity, 5) == pytest.approx(draw.gain_db, abs=0.3)


# --- known answers: audiomentations called with the same parameters -------------------------


def mono(waves: torch.Tensor, i: int) -> np.ndarray:
    return np.ascontiguousarray(waves[i, 0].numpy())


def clipped(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -1.0, 1.0)


@pytest.fixture(scope="module")
def am() -> Iterator[Any]:
    yield pytest.importorskip(
        "audiomentations", reason="audiomentations not installed: pip install 'pytest-segrobust[audio]'"
    )


def compare(ours: torch.Tensor, theirs: np.ndarray, atol: float = 0.0) -> None:
    assert ours.shape[-1] == theirs.shape[-1]
    np.testing.assert_allclose(ours.numpy().reshape(theirs.shape), clipped(theirs), rtol=0, atol=atol)


def test_known_answer_gaussian_noise(am: Any, waves: torch.Tensor) -> None:
    out = run(A.audio_gaussian_noise, waves, 5)
    for i, draw in enumerate(A.audio_gaussian_noise.draws(Audio.of(waves, RATE, 4), 5, SEEDS)):
        transform = am.AddGaussianNoise(min_amplitude=draw.amplitude, max_amplitude=draw.amplitude, p=1.0)
        with mock.patch("numpy.random.randn", lambda *shape, d=draw: d.noise[0].numpy().reshape(shape)):
            compare(out[i, 0], transform(mono(waves, i), RATE))


def test_known_answer_background_noise(am: Any, waves: torch.Tensor, tmp_path: Path) -> None:
    import soundfile

    batch = audio_batch(waves)
    out = A.background_noise(batch, 4, SEEDS)["audio"].data
    competitor = batch["competing"].data
    for i, draw in enumerate(A.background_noise.draws(batch["audio"], 4, SEEDS)):
        # The competitor from our offset, looped to the clip's length: AddBackgroundNoise reads it from offset 0.
        start = int(draw.offset * competitor.shape[-1])
        noise = competitor[i, 0].roll(-start).repeat(3)[: waves.shape[-1]].numpy()
        path = tmp_path / f"noise{i}.wav"
        soundfile.write(path, noise, RATE, subtype="FLOAT")
        transform = am.AddBackgroundNoise(sounds_path=path, min_snr_db=draw.snr_db, max_snr_db=draw.snr_db, p=1.0)
        compare(out[i, 0], transform(mono(waves, i), RATE), atol=2e-7)


def test_known_answer_impulse_response(am: Any, waves: torch.Tensor, tmp_path: Path) -> None:
    import soundfile

    out = run(A.impulse_response, waves, 3)
    draws = A.impulse_response.draws(Audio.of(waves, RATE, 4), 3, SEEDS)
    responses = A.ImpulseResponse.impulse_responses(draws, RATE)
    for i, draw in enumerate(draws):
        path = tmp_path / f"ir{i}.wav"
        soundfile.write(path, responses[i].numpy().astype(np.float32), RATE, subtype="FLOAT")
        transform = am.ApplyImpulseResponse(ir_path=path, p=1.0, leave_length_unchanged=True)
        # Our IR is float64 and the convolution an FFT's; theirs reads a float32 IR and convolves directly.
        compare(out[i, 0], transform(mono(waves, i), RATE), atol=2e-6)


def test_known_answer_impulse_noise_has_no_audiomentations_twin() -> None:
    # audiomentations has no spike noise: test_impulse_noise_adds_the_drawn_spikes writes the
    # clicks out by hand instead. Nothing to compare here; this says so where the others are.
    assert not hasattr(pytest.importorskip("audiomentations"), "AddImpulseNoise")


def test_known_answer_gain(am: Any, waves: torch.Tensor) -> None:
    out = run(A.gain, waves, 5)
    for i, draw in enumerate(A.gain.draws(Audio.of(waves, RATE, 4), 5, SEEDS)):
        compare(out[i, 0], am.Gain(min_gain_db=draw.gain_db, max_gain_db=draw.gain_db, p=1.0)(mono(waves, i), RATE))


def test_known_answer_time_mask(am: Any, waves: torch.Tensor) -> None:
    out = run(A.time_mask, waves, 5)
    for i, draw in enumerate(A.time_mask.draws(Audio.of(waves, RATE, 4), 5, SEEDS)):
        transform = am.TimeMask(min_band_part=0.4, max_band_part=0.5, fade_duration=0.005, p=1.0)
        transform.parameters = {"should_apply": True, "t": draw.length, "t0": draw.start}
        transform.freeze_parameters()
        compare(out[i, 0], transform(mono(waves, i), RATE), atol=1e-7)


def library_call(am: Any, corruption: A.AcousticCorruption[Any, Any], draw: Any) -> Any:
    """The audiomentations transform ``corruption`` stands for, with ``draw``'s values as fixed parameters."""
    if corruption is A.tanh_distortion:
        return am.TanhDistortion(min_distortion=draw.distortion, max_distortion=draw.distortion, p=1.0)
    if corruption is A.peaking_filter:
        return am.PeakingFilter(
            min_center_freq=draw.centre_hz, max_center_freq=draw.centre_hz, min_gain_db=draw.gain_db,
            max_gain_db=draw.gain_db, min_q=draw.q, max_q=draw.q, p=1.0,
        )  # fmt: skip
    if corruption in (A.low_pass, A.high_pass):
        kind = am.LowPassFilter if corruption is A.low_pass else am.HighPassFilter
        return kind(
            min_cutoff_freq=draw.cutoff_hz,
            max_cutoff_freq=draw.cutoff_hz,
            min_rolloff=draw.rolloff_db,
            max_rolloff=draw.rolloff_db,
            p=1.0,
        )
    if corruption is A.air_absorption:
        return am.AirAbsorption(
            min_temperature=20.0, max_temperature=20.0, min_humidity=draw.humidity, max_humidity=draw.humidity,
            min_distance=draw.distance_m, max_distance=draw.distance_m, p=1.0,
        )  # fmt: skip
    if corruption is A.mp3_compression:
        return am.Mp3Compression(min_bitrate=draw.kbps, max_bitrate=draw.kbps, backend="fast-mp3-augment", p=1.0)
    raise AssertionError(corruption.name)


LIBRARY = (A.tanh_distortion, A.peaking_filter, A.low_pass, A.high_pass, A.air_absorption, A.mp3_compression)


@pytest.mark.parametrize("severity", [1, 5])
@pytest.mark.parametrize("corruption", each(LIBRARY))
def test_known_answer_of_the_library_perturbations(
    am: Any, corruption: A.AcousticCorruption[Any, Any], severity: int, waves: torch.Tensor
) -> None:
    out = run(corruption, waves[:2], severity)
    for i, draw in enumerate(corruption.draws(Audio.of(waves[:2], RATE, 4), severity, SEEDS[:2])):
        compare(out[i, 0], library_call(am, corruption, draw)(mono(waves, i), RATE))


def room_simulator(am: Any, draw: A.RoomDraw, max_order: int) -> Any:
    """audiomentations' RoomSimulator with every range fixed at ``draw``: the room ``room_reverb`` builds itself."""
    fixed: dict[str, float] = {}
    for name, value in (
        ("size_x", draw.width_m), ("size_y", draw.depth_m), ("size_z", draw.height_m),
        ("target_rt60", draw.rt60), ("source_x", draw.source_x), ("source_y", draw.source_y),
        ("source_z", draw.source_z), ("mic_distance", draw.mic_distance_m),
        ("mic_azimuth", draw.mic_azimuth), ("mic_elevation", draw.mic_elevation),
    ):  # fmt: skip
        fixed[f"min_{name}"] = fixed[f"max_{name}"] = value
    return am.RoomSimulator(
        **fixed, calculation_mode="rt60", use_ray_tracing=False, max_order=max_order,
        leave_length_unchanged=True, padding=A.ROOM_PADDING_M, p=1.0,
    )  # fmt: skip


@pytest.mark.parametrize("corruption", each((A.room_reverb,)))
def test_known_answer_room_reverb(am: Any, corruption: A.RoomReverb, waves: torch.Tensor) -> None:
    out = run(corruption, waves[:2], 3)
    for i, draw in enumerate(corruption.draws(Audio.of(waves[:2], RATE, 4), 3, SEEDS[:2])):
        theirs = room_simulator(am, draw, A.ROOM_REVERB[3].max_order)(mono(waves, i), RATE)
        before = float(np.sqrt(np.mean(mono(waves, i).astype(np.float64) ** 2)))
        theirs = theirs * (before / float(np.sqrt(np.mean(theirs.astype(np.float64) ** 2))))
        compare(out[i, 0], theirs.astype(np.float32))
        table = A.ROOM_REVERB[3]
        assert (
            table.rt60.low <= draw.rt60 <= table.rt60.high and table.width_m.low <= draw.width_m <= table.width_m.high
        )


# --- fields stay apart -----------------------------------------------------------------------


def clip_batch(waves: torch.Tensor) -> dict[str, Any]:
    frames = 4
    g = torch.Generator().manual_seed(2)
    video = torch.rand(waves.shape[0], frames, 3, 16, 16, generator=g)
    masks = torch.randint(0, 3, (waves.shape[0], frames, 16, 16), generator=g)
    return {"frames": Video.of(video), "masks": VideoMasks.of(masks), **audio_batch(waves, frames)}


@pytest.mark.parametrize("name", ["gaussian_noise", "rotate", "fog", "contrast+rotate"])
def test_image_corruptions_leave_the_audio_alone(name: str, waves: torch.Tensor) -> None:
    batch = clip_batch(waves)
    out = REGISTRY.get(name)(batch, 3, SEEDS)
    # A geometric corruption cuts CPU batches into samples and joins them: equal, not the same objects.
    for field in ("audio", "competing"):
        assert torch.equal(out[field].data, batch[field].data) and type(out[field]) is type(batch[field])
    assert torch.equal(out["audio"].frame_bounds, batch["audio"].frame_bounds)
    assert not torch.equal(out["frames"].data, batch["frames"].data)


def test_temporal_corruptions_leave_the_audio_alone(waves: torch.Tensor) -> None:
    batch = clip_batch(waves)
    out = REGISTRY.get("frame_freeze", "video-temporal")(batch, 5, SEEDS)
    assert out["audio"] is batch["audio"]


@pytest.mark.parametrize("corruption", each())
def test_acoustic_perturbations_leave_pixels_and_masks_alone(
    corruption: A.AcousticCorruption[Any, Any], waves: torch.Tensor
) -> None:
    batch = {**clip_batch(waves[:2]), "image": Image(torch.rand(2, 3, 16, 16))}
    out = corruption(batch, 2, SEEDS[:2])
    for name in ("frames", "masks", "image", "competing"):
        assert out[name] is batch[name], name
    assert isinstance(out["audio"], Audio) and out["audio"].data.shape == batch["audio"].data.shape
    assert torch.equal(out["audio"].frame_bounds, batch["audio"].frame_bounds)
    assert out["audio"].data.abs().max() <= 1.0


def test_an_acoustic_perturbation_refuses_a_batch_without_audio() -> None:
    with pytest.raises(ValueError, match="needs one Audio field"):
        A.gain({"image": Image(torch.rand(1, 3, 8, 8))}, 3, [1])
    assert not A.gain.accepts(Image) and A.gain.accepts(Audio)


# --- registry and listing --------------------------------------------------------------------


def test_the_preset_lists_the_family_in_r2benchs_order() -> None:
    names = [c.name for c in REGISTRY.preset("avs-acoustic")]
    assert names == [
        "audio_gaussian_noise", "background_noise", "audio_impulse_noise", "impulse_response",
        "gain", "tanh_distortion", "peaking_filter", "low_pass", "high_pass",
        "air_absorption", "room_reverb", "time_mask", "mp3_compression",
    ]  # fmt: skip
    assert all(c.category.value == "acoustic" for c in REGISTRY.preset("avs-acoustic"))


def test_segrobust_list_shows_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_segrobust.cli import main

    assert main(["list", "--preset", "avs-acoustic"]) == 0
    out = capsys.readouterr().out
    assert "  background_noise  [acoustic, noise]" in out and "    s5: snr_db=5..10" in out
    assert "  low_pass  [acoustic, filter]" in out and "    s1: cutoff_hz=8000..16000, rolloff_db=12..24" in out
    assert "    s5: kbps=8..32" in out


WITHOUT_AUDIOMENTATIONS = """
import sys, torch
for name in ("audiomentations", "librosa", "pyroomacoustics", "fast_mp3_augment"):
    sys.modules[name] = None  # as if not installed: importing them raises ImportError
import pytest_segrobust.plugin, pytest_segrobust.cli
from pytest_segrobust.corruptions import acoustic as A
from pytest_segrobust.core.types import Audio
waves = 0.1 * torch.randn(2, 1, 4000, generator=torch.Generator().manual_seed(0))
batch = {"audio": Audio.of(waves, 16000, 2), "competing": A.CompetingAudio(waves.flip(0), 16000, ("b", "a"))}
ran = [c.name for c in A.ACOUSTIC if not c.requires and c(batch, 3, [1, 2])["audio"].data.shape == waves.shape]
try:
    A.tanh_distortion(batch, 3, [1, 2])
except ImportError:
    ran.append("tanh_distortion refused")
print(" ".join(ran))
"""


def test_the_torch_perturbations_run_without_audiomentations_which_the_core_never_imports() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", WITHOUT_AUDIOMENTATIONS], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [
        "audio_gaussian_noise", "background_noise", "audio_impulse_noise", "impulse_response", "gain", "time_mask",
        "tanh_distortion", "refused",
    ]  # fmt: skip


@pytest.mark.parametrize("corruption", each())
def test_stereo_channels_keep_their_layout(corruption: A.AcousticCorruption[Any, Any], waves: torch.Tensor) -> None:
    stereo = torch.cat([waves[:2], 0.5 * waves[2:]], dim=1)  # (2, 2, S): two different channels
    audio = Audio(stereo, Audio.of(stereo, RATE, 4).frame_bounds, RATE, "left,right")
    out = corruption({"audio": audio, "competing": A.CompetingAudio(waves[:2], RATE, ("a", "b"))}, 3, SEEDS[:2])
    assert out["audio"].data.shape == stereo.shape and out["audio"].layout == "left,right"
    assert not torch.equal(out["audio"].data[:, 0], out["audio"].data[:, 1])
