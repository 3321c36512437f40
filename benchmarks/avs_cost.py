"""Cost per clip of each acoustic perturbation beside the demo audio-visual model's bare inference.

For every perturbation of the ``avs-acoustic`` preset at levels 1, 3 and 5: the CPU time to
perturb one clip's sound, on the first demo AVS clip (``demo-avs/val/0000``: 5 s, 16 kHz,
tones over a faint hiss) and on a synthetic 5-s 16 kHz clip (29 harmonics and noise, as in
benchmarks/acoustic.py), next to the bare inference of the demo model ``tiny_avs`` on that
clip (``predict`` under ``torch.no_grad``: 5 frames of 64x64 and the 5-s waveform), and the
ratio of the two. A batch is one clip, collated as a suite collates it (the competing clip
``background_noise`` mixes in included).

One torch thread (``torch.set_num_threads(1)``). Two clocks: the calling thread's CPU time
(``time.thread_time``) and the process's (``time.process_time``): ``mp3_compression`` encodes
and decodes in threads of its own, which the thread clock does not see, so the ratio uses the
process clock. Rounds interleaved (every row once per round, after one warm-up round that
imports the libraries), the median over rounds. (The whole suite's harness overhead per clip
is not measured here.)

    PYTHONPATH=$PWD python benchmarks/avs_cost.py [--rounds 7] [--levels 1 3 5]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import torch

from pytest_segrobust.core.types import Audio, Field, Video
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.acoustic import CompetingAudio
from pytest_segrobust.data.demo_avs import demo_avs_dataset
from pytest_segrobust.models.demo_avs import tiny_avs
from pytest_segrobust.randomness.seeding import sample_seed
from pytest_segrobust.tasks import get_task

RATE = 16000


def synthetic(seconds: float = 5.0, fundamental: float = 150.0) -> torch.Tensor:
    """A 5-s clip rich in harmonics, with noise, peak 0.3 (benchmarks/acoustic.py's). Shape: ``(1, 1, S)``."""
    g = torch.Generator().manual_seed(0)
    t = torch.arange(int(seconds * RATE), dtype=torch.float64) / RATE
    wave = sum(torch.sin(2 * math.pi * k * fundamental * t) / k for k in range(1, 30)) * (0.6 + 0.4 * torch.sin(6 * t))
    wave = wave + 0.05 * torch.randn(t.shape, generator=g, dtype=torch.float64)
    return (0.3 * wave / wave.abs().max()).float()[None, None]


def clocks(call: Callable[[], object]) -> tuple[float, float]:
    """Thread and process CPU milliseconds of one call."""
    thread, process = time.thread_time(), time.process_time()
    call()
    return 1000 * (time.thread_time() - thread), 1000 * (time.process_time() - process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 3, 5])
    args = parser.parse_args()
    torch.set_num_threads(1)

    dataset = demo_avs_dataset("val")
    sample = dataset[0]
    demo = dict(get_task("avs").collate([sample], [0], dataset, torch.device("cpu")))
    made = demo["audio"]
    assert isinstance(made, Audio)
    five_seconds = synthetic()
    assert five_seconds.shape == made.data.shape, (five_seconds.shape, made.data.shape)
    other = synthetic(fundamental=230.0)
    clip: dict[str, Field] = {
        "audio": Audio.of(five_seconds, RATE, 5),
        "competing": CompetingAudio(other, RATE, ("synthetic-b",)),
    }
    batches = {"demo": demo, "5s": clip}
    model = tiny_avs()
    video = demo["video"]
    assert isinstance(video, Video)

    def infer() -> None:
        with torch.no_grad():
            model.predict(video.data, made)

    corruptions = REGISTRY.available("avs-acoustic")
    rows = [(c, level, kind) for c in corruptions for level in args.levels for kind in batches]
    seeds = {
        (c.name, level): [sample_seed(0, sample.sample_id, c.name, level)] for c in corruptions for level in args.levels
    }
    times: dict[object, list[tuple[float, float]]] = {}
    for round_number in range(args.rounds + 1):  # round 0 warms up (imports, caches)
        measured = {"model": clocks(infer)}
        for corruption, level, kind in rows:
            batch = batches[kind]
            measured[(corruption.name, level, kind)] = clocks(
                lambda c=corruption, b=batch, s=seeds[(corruption.name, level)], v=level: c(b, v, s)
            )
        if round_number:
            for key, value in measured.items():
                times.setdefault(key, []).append(value)

    def median(key: object, clock: int) -> float:
        return statistics.median(value[clock] for value in times[key])

    model_thread, model_process = median("model", 0), median("model", 1)
    print(
        f"tiny_avs bare inference per clip (5 frames 64x64, 5 s at 16 kHz): thread {model_thread:.2f} ms, "
        f"process {model_process:.2f} ms; median of {args.rounds} interleaved rounds, one torch thread"
    )
    header = ("perturbation", "level", "demo thread ms", "demo process ms", "5s thread ms", "5s process ms", "x model")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for corruption in corruptions:
        for level in args.levels:
            demo_t, demo_p = median((corruption.name, level, "demo"), 0), median((corruption.name, level, "demo"), 1)
            five_t, five_p = median((corruption.name, level, "5s"), 0), median((corruption.name, level, "5s"), 1)
            print(
                f"| {corruption.name} | {level} | {demo_t:.2f} | {demo_p:.2f} | {five_t:.2f} | {five_p:.2f} "
                f"| {demo_p / model_process:.2f} |"
            )
    print(f"| tiny_avs inference | - | {model_thread:.2f} | {model_process:.2f} | - | - | 1.00 |")


if __name__ == "__main__":
    main()
