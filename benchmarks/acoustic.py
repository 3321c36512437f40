"""CPU cost of the acoustic perturbations per clip, beside a log-mel front end's.

One torch thread (``torch.set_num_threads(1)``), the process's CPU time (``time.process_time``,
which other load on the machine disturbs least; not the thread's, since the MP3 round trip
encodes and decodes in threads of its own), rounds interleaved (every row once per round), the
median over rounds. A clip is 5 s of mono audio at 16 kHz (an AVSBench clip); each cell
corrupts a batch of 4 clips and reports the cost per clip. The reference row is a log-mel
spectrogram of the clip (64 mel bands, 25 ms windows, 10 ms hop: VGGish's front end), the
least any audio model's adapter does with the waveform.

    PYTHONPATH=$PWD python benchmarks/acoustic.py [--rounds 5] [--severities 1 3 5]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import torch

from pytest_segrobust.core.types import Audio
from pytest_segrobust.corruptions import acoustic as A

RATE = 16000
CLIPS = 4


def clips(seconds: float = 5.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    t = torch.arange(int(seconds * RATE), dtype=torch.float64) / RATE
    waves = [
        sum(torch.sin(2 * math.pi * k * (110 + 40 * i) * t) / k for k in range(1, 30)) * (0.6 + 0.4 * torch.sin(6 * t))
        + 0.05 * torch.randn(t.shape, generator=g, dtype=torch.float64)
        for i in range(CLIPS)
    ]
    stacked = torch.stack(waves)[:, None]
    return (0.3 * stacked / stacked.abs().amax(dim=-1, keepdim=True)).float()


def log_mel(waves: torch.Tensor) -> torch.Tensor:
    window = torch.hann_window(400)
    spectrum = torch.stft(waves[:, 0], 512, 160, 400, window=window, return_complex=True).abs().pow(2)
    freqs = torch.linspace(0, RATE / 2, spectrum.shape[1])
    mel = 2595 * torch.log10(1 + freqs / 700)
    centres = torch.linspace(float(mel[0]), float(mel[-1]), 66)
    bank = (1 - (mel[None] - centres[1:-1, None]).abs() / (centres[1] - centres[0])).clamp_min(0)  # (64, F)
    return torch.log(bank @ spectrum + 1e-6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--severities", type=int, nargs="+", default=[1, 3, 5])
    args = parser.parse_args()
    torch.set_num_threads(1)
    waves = clips()
    batch = {
        "audio": Audio.of(waves, RATE, 10),
        "competing": A.CompetingAudio(waves.roll(1, 0), RATE, tuple(f"c{i}" for i in range(CLIPS))),
    }
    seeds = list(range(CLIPS))
    rows: dict[str, Callable[[], object]] = {"log-mel front end (reference)": lambda: log_mel(waves)}
    for corruption in A.ACOUSTIC:
        if any(extra.missing() for extra in corruption.requires):
            print(f"skipped {corruption.name}: pip install 'pytest-segrobust[audio]'")
            continue
        for severity in args.severities:
            rows[f"{corruption.name} s{severity}"] = lambda c=corruption, s=severity: c(batch, s, seeds)
    for run in rows.values():  # warm up: imports, numba caches, FFT plans
        run()
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.rounds):
        for name, run in rows.items():
            start = time.process_time()
            run()
            times[name].append((time.process_time() - start) / CLIPS)
    reference = statistics.median(times["log-mel front end (reference)"])
    print(f"{'row':34s} {'ms per 5 s clip':>16s} {'x log-mel':>10s}")
    for name, measured in times.items():
        median = statistics.median(measured)
        print(f"{name:34s} {1000 * median:16.2f} {median / reference:10.1f}")


if __name__ == "__main__":
    main()
