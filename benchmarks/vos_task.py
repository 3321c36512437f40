"""What the vos task adds around a model: collating clips, building the reference, checking the ids.

Clips of ``--frames`` frames of ``--height`` x ``--width`` pixels with 3 objects, ``--batch``
clips, on the CPU with one thread. Each step runs once per round, the rounds interleaved; the
table gives the minimum CPU time (``time.thread_time``) over ``--repeats`` rounds per
clip-frame, beside a bare model that copies the reference forward (about the cheapest model
there is) and the same model driven online, frame by frame:

    python benchmarks/vos_task.py [--batch 2] [--frames 20] [--height 240] [--width 427] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from pytest_segrobust.data.base import Sample
from pytest_segrobust.data.clips import ClipFrames, ClipObjects
from pytest_segrobust.tasks import get_task
from pytest_segrobust.tasks.vos import drive_online, reference_masks


class Scenes:
    name, class_names, ignore_index = "bench", ("background", "object"), 255

    def __init__(self, batch: int, frames: int, height: int, width: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.samples = []
        for index in range(batch):
            pixels = torch.randint(0, 256, (frames, 3, height, width), dtype=torch.uint8, generator=generator)
            masks = torch.zeros(frames, height, width, dtype=torch.int64)
            for object_id in (1, 2, 3):
                top, left = object_id * height // 5, object_id * width // 5
                masks[:, top : top + height // 5, left : left + width // 5] = object_id
            objects = ClipObjects(masks, torch.ones(frames, dtype=torch.bool), (1, 2, 3), (0, 0, 0), (False,) * 3)
            names = tuple(f"{t:05d}" for t in range(frames))
            self.samples.append(Sample.of(f"clip{index}", video=ClipFrames(pixels, names), objects=objects))


class CopyForward:
    """Each frame gets the last reference mask seen: offline and online."""

    task, device = "vos", torch.device("cpu")

    def predict(self, clips: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        out = reference.clone()
        for frame in range(1, out.shape[1]):
            out[:, frame] = torch.where(reference[:, frame] > 0, reference[:, frame], out[:, frame - 1])
        return out

    def start(self, frame: torch.Tensor, reference: torch.Tensor) -> None:
        self.last = reference.clone()

    def step(self, frame: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        self.last = torch.where(reference > 0, reference, self.last)
        return self.last

    def fingerprint(self) -> str:
        return "copy-forward"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--width", type=int, default=427)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    scenes, task, model = Scenes(args.batch, args.frames, args.height, args.width), get_task("vos"), CopyForward()
    batch = task.collate(scenes.samples, range(args.batch), scenes, torch.device("cpu"))  # type: ignore[arg-type]
    reference = reference_masks(batch["objects"])
    clips = batch["video"].data
    predictions = model.predict(clips, reference)
    steps: dict[str, Callable[[], object]] = {
        "collate (uint8 -> float, masks)": lambda: task.collate(
            scenes.samples, range(args.batch), scenes, clips.device
        ),  # type: ignore[arg-type]
        "reference masks": lambda: reference_masks(batch["objects"]),
        "check predictions": lambda: task.check_predictions(predictions, batch),
        "bare model, offline": lambda: model.predict(clips, reference),
        "same model, driven online": lambda: drive_online(model, clips, reference),  # type: ignore[arg-type]
    }
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(args.repeats):
        for name, step in steps.items():
            start = time.thread_time()
            step()
            best[name] = min(best[name], time.thread_time() - start)
    per = args.batch * args.frames
    bare = best["bare model, offline"]
    print(f"{args.batch} clips x {args.frames} frames of {args.height}x{args.width}, 3 objects, CPU, 1 thread")
    print(f"| {'step':<34} | ms per clip-frame | x bare model |")
    print(f"|{'-' * 36}|-------------------|--------------|")
    for name, seconds in best.items():
        print(f"| {name:<34} | {1000 * seconds / per:17.3f} | {seconds / bare:12.2f} |")


if __name__ == "__main__":
    main()
