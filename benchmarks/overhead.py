"""What the harness costs on top of inference, measured so that the figure means something.

Two ways of scoring the same model on the same images run interleaved, repeated, in one
process, at equal work in two pairs:

* on decoded data: (a) ``bare``, the adapted model's ``predict`` alone on batches already
  decoded, in memory on the device and scaled to [0, 1] (what a hand-written evaluation loop
  cannot do faster), against (b) ``harness, cache warm``, ``evaluate()`` of the clean cell
  with its samples in a warm :class:`~pytest_segrobust.data.sample_cache.SampleCache` (what
  a suite's cells after the first one do);
* including decoding: (c) ``bare incl. decode``, the dataset's samples read and decoded,
  stacked, scaled and predicted, against (d) ``harness incl. decode``, ``evaluate()`` reading
  every sample from disk (no cache: a suite's first cell).

(b) over (a) is the harness's overhead, the figure the goal of at most 5% applies to; (d)
over (c) is the same at equal work when the files are read as well. Each repeat runs all
the runs in alternating order (forwards, then backwards) so that a slow phase of a shared
machine hits them alike; the table gives min and median milliseconds per image and the
overheads of the minima (noise only ever adds time) and of the medians, in wall time and
again in the process's CPU time (which a busy machine inflates less: time spent waiting for
a core is not counted, though threads spinning at barriers are). A corrupted cell
(cache warm) is timed the same way and its corruption's time is taken out, since that is
work the harness exists to do, not overhead.

``--phases`` then runs each harness run ``--repeats`` more times with
:class:`~pytest_segrobust.engine.evaluation.Phases` and prints where its time goes: reading (or
copying from the cache) and decoding, collating onto the device, corrupting, the model's
``predict``, checking the predictions, updating and computing the metrics. Those runs are
apart from the timed ones because on a GPU each phase waits for the device.

``--keep-memory`` tunes glibc's allocator as ``pytest --segrobust`` does by default
(``--segrobust-malloc tuned``, :mod:`pytest_segrobust.runtime.allocator`): without it each large
tensor is a fresh ``mmap`` whose pages fault in (and are zeroed) on first touch, which at
512x512 costs the model and the harness alike tens of thousands of page faults per image.
The option shows that cost apart; it changes the whole process, bare runs included
(``benchmarks/malloc.py`` compares the two settings in fresh processes).

Images are demo scenes rendered at ``--size`` and written as PNG files read through
``SemanticFolder``, so reading and decoding cost what they cost for a real dataset.
Models: ``tiny`` (the demo's U-Net, the worst case: almost no compute), ``wide`` (the
same U-Net 8x wider) and ``segformer-b0`` (SegFormer-B0's architecture with random
weights through the transformers adapter; needs the ``transformers`` extra).

    python benchmarks/overhead.py [--model segformer-b0] [--images 16] [--size 512] [--repeats 5] [--phases]
                                  [--threads 2] [--keep-memory]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image as PILImage

from pytest_segrobust.core.types import Image
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.demo import CLASS_NAMES, DemoScenes
from pytest_segrobust.data.sample_cache import SampleCache
from pytest_segrobust.data.semantic_folder import SemanticFolder
from pytest_segrobust.engine.evaluation import EvalHooks, EvalSettings, Phases, evaluate
from pytest_segrobust.models import as_segmentation_model
from pytest_segrobust.models.demo import DEFAULT_WIDTHS, TinyUNet, tiny_unet
from pytest_segrobust.randomness.seeding import sample_seed
from pytest_segrobust.runtime import allocator


def clock(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def write_dataset(folder: Path, images: int, size: int) -> SemanticFolder:
    """Demo scenes at ``size`` as PNG image and label files in ``folder``."""
    (folder / "images").mkdir()
    (folder / "masks").mkdir()
    scenes = DemoScenes("val", size=images, image_size=size)
    for index in range(images):
        sample = scenes[index]
        PILImage.fromarray(sample.image.permute(1, 2, 0).numpy()).save(folder / "images" / f"{index:04d}.png")
        PILImage.fromarray(sample.target.mask.numpy().astype(np.uint8)).save(folder / "masks" / f"{index:04d}.png")
    return SemanticFolder(folder / "images", folder / "masks", CLASS_NAMES, name="overhead")


def build_model(name: str, device: torch.device, folder: Path) -> Any:
    if name == "tiny":
        return as_segmentation_model(tiny_unet(), device)
    if name == "wide":
        torch.manual_seed(0)
        return as_segmentation_model(TinyUNet(widths=tuple(8 * w for w in DEFAULT_WIDTHS)).eval(), device)
    import transformers  # the transformers extra

    from pytest_segrobust.models.transformers import load_transformers

    names = list(CLASS_NAMES)
    config = transformers.SegformerConfig(
        num_labels=len(names), id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)}
    )
    torch.manual_seed(0)
    checkpoint = folder / "segformer-b0"
    transformers.SegformerForSemanticSegmentation(config).save_pretrained(checkpoint)
    # No resize: the processor's size is the images' size, so inference is SegFormer-B0 at --size.
    size = int(PILImage.open(next((folder / "images").iterdir())).size[0])
    transformers.SegformerImageProcessorPil(size={"height": size, "width": size}).save_pretrained(checkpoint)
    return load_transformers(
        checkpoint, task="semantic", device=device, class_names=names, label_map=None, allow_download=False
    )


def keep_memory() -> None:
    """This process's allocator tuned as the gate tunes it (see the module docstring)."""
    setting = allocator.configure("tuned")
    if not setting.tuned:
        raise SystemExit(f"--keep-memory: {setting.detail}")


def timed(run: Callable[[], object], device: torch.device) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds (all its threads) of ``run()``."""
    start, cpu = clock(device), time.process_time()
    run()
    return clock(device) - start, time.process_time() - cpu


def overhead(times: list[float], reference: list[float]) -> str:
    """``times`` over ``reference`` by minimum and by median, in percent."""
    low = (min(times) - min(reference)) / min(reference)
    mid = (statistics.median(times) - statistics.median(reference)) / statistics.median(reference)
    return f"{100 * low:+.1f}% | {100 * mid:+.1f}%"


def print_table(title: str, times: dict[str, list[float]]) -> None:
    """Min and median ms/img of every run, and each harness run's overhead over its bare run."""
    net = [t - c for t, c in zip(times["harness corrupted, cache warm"], times["corruption alone"], strict=True)]
    overheads = {
        "harness, cache warm": overhead(times["harness, cache warm"], times["bare"]) + " (vs bare)",
        "harness incl. decode": overhead(times["harness incl. decode"], times["bare incl. decode"])
        + " (vs bare incl. decode)",
        "harness corrupted, cache warm": overhead(net, times["bare"]) + " (vs bare; corruption's time taken out)",
    }
    print(f"{title}:\n")
    print("| run | min ms/img | median ms/img | overhead (min) | overhead (median) |")
    print("|---|---:|---:|---:|---:|")
    for name, values in times.items():
        print(f"| {name} | {min(values):.1f} | {statistics.median(values):.1f} | {overheads.get(name, ' | ')} |")
    print()


def print_phases(phases: dict[str, Phases]) -> None:
    """Milliseconds per image of each phase of each harness run, and the time outside ``predict``."""
    names = [name for name in Phases.NAMES if any(p.seconds[name] for p in phases.values())]
    print("Where the harness's time goes (ms/img, summed over the runs; share: outside predict / predict):\n")
    print(f"| run | {' | '.join(names)} | outside predict |")
    print(f"|---|{'---:|' * (len(names) + 1)}")
    for run, timing in phases.items():
        per_image = {name: 1000 * seconds / timing.images for name, seconds in timing.seconds.items()}
        outside = sum(per_image.values()) - per_image["predict"] - per_image["corrupt"]
        cells = " | ".join(f"{per_image[name]:.2f}" for name in names)
        print(f"| {run} | {cells} | {outside:.2f} ({100 * outside / per_image['predict']:.1f}%) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("tiny", "wide", "segformer-b0"), default="segformer-b0")
    parser.add_argument("--images", type=int, default=16)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--corruption", default="contrast", help="the corrupted cell's corruption (severity 3)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch's (and OpenCV's) threads; 0: torch's default")
    parser.add_argument("--phases", action="store_true", help="also print where each harness run's time goes")
    parser.add_argument("--keep-memory", action="store_true", help="no page faults from glibc giving memory back")
    args = parser.parse_args()

    if args.keep_memory:
        keep_memory()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        dataset = write_dataset(folder, args.images, args.size)
        model = build_model(args.model, device, folder)
        samples = [dataset[i] for i in range(args.images)]
        starts = range(0, args.images, args.batch)
        batches = [torch.stack([s.image for s in samples[i : i + args.batch]]).to(device).float() / 255 for i in starts]
        corruption = REGISTRY.get(args.corruption)
        seeds = [[sample_seed(0, s.sample_id, args.corruption, 3) for s in samples[i : i + args.batch]] for i in starts]
        cache = SampleCache(2**40)  # warmed by the warm-up runs below

        def bare() -> None:
            with torch.inference_mode():
                for b in batches:
                    model.predict(b)

        def bare_decoding() -> None:
            with torch.inference_mode():
                for i in starts:
                    read = [dataset[j] for j in range(i, min(i + args.batch, args.images))]
                    model.predict(torch.stack([s.image for s in read]).to(device).float() / 255)

        def corrupt_only() -> None:
            for b, s in zip(batches, seeds, strict=True):
                corruption({"image": Image(b)}, 3, s)

        def harness(corrupted: bool, cached: bool) -> Callable[[Phases | None], object]:
            def run(phases: Phases | None = None) -> object:
                return evaluate(
                    model,
                    dataset,
                    corruption if corrupted else None,
                    3 if corrupted else 0,
                    settings=EvalSettings.of(batch_size=args.batch),
                    hooks=EvalHooks(sample_cache=cache if cached else None, phases=phases),
                )

            return run

        harnesses = {
            "harness, cache warm": harness(corrupted=False, cached=True),
            "harness incl. decode": harness(corrupted=False, cached=False),
            "harness corrupted, cache warm": harness(corrupted=True, cached=True),
        }
        runs: dict[str, Callable[[], object]] = {
            "bare": bare,
            "bare incl. decode": bare_decoding,
            "corruption alone": corrupt_only,
            **harnesses,
        }
        for run in runs.values():  # warm-up: lazy imports, allocator, first-call kernels, the sample cache
            run()
        times: dict[str, list[float]] = {name: [] for name in runs}
        cpu_times: dict[str, list[float]] = {name: [] for name in runs}
        order = list(runs)
        for repeat in range(args.repeats):
            for name in order if repeat % 2 == 0 else reversed(order):
                wall, cpu = timed(runs[name], device)
                times[name].append(1000 * wall / args.images)
                cpu_times[name].append(1000 * cpu / args.images)
        phases = {name: Phases() for name in harnesses}
        if args.phases:
            for _ in range(args.repeats):
                for name, run in harnesses.items():
                    run(phases[name])

    print(
        f"model {args.model} on {device}, {args.images} PNG images of {args.size}x{args.size}, batch {args.batch}, "
        f"{args.repeats} interleaved repeats, torch threads {torch.get_num_threads()}"
        f"{', glibc heap kept (--keep-memory)' if args.keep_memory else ''}\n"
    )
    print_table("Wall time", times)
    print_table("CPU time of the process", cpu_times)
    if args.phases:
        print_phases(phases)


if __name__ == "__main__":
    main()
