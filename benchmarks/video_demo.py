"""The video demo models under the demo suites' perturbations, and what a clip frame costs.

Usage::

    python benchmarks/video_demo.py            # J, F, J&F per cell, then the cost table
    python benchmarks/video_demo.py --rounds 5 --skip-scores

Scores: the shipped ``tiny_vos`` on the ``val`` clips (``vos_jf``: first and last frame not
scored) and ``tiny_rvos`` on the ``val`` expressions (``vos_jf_all``), clean, under each static
perturbation of the demo suites at levels 1, 3, 5 (drawn once per clip), the dynamic mixture
(a perturbation and level per frame) and the temporal family, applied to the ``Video`` field
directly (no plugin, no task): what the suites will report once the ``vos`` and ``rvos``
tasks run them. A clip's seed is its index.

Costs: CPU time of one thread (``time.thread_time``) per clip frame of the bare model and of
each perturbation, in interleaved rounds (the minimum over rounds is printed; load from other
processes disturbs it least).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch

from pytest_segrobust.core.types import SampleIndex, VideoMasks
from pytest_segrobust.corruptions import REGISTRY, Corruption
from pytest_segrobust.corruptions.dynamic import dynamic
from pytest_segrobust.data.demo_video import DemoClips, DemoReferringClips, given_masks, stack_clips
from pytest_segrobust.metrics.base import MetricContext
from pytest_segrobust.metrics.video import RegionAndBoundary, RegionAndBoundaryAllFrames, VideoObjectMetric
from pytest_segrobust.models.demo_video import tiny_rvos, tiny_vos

STATIC = ("gaussian_noise", "defocus_blur", "jpeg_compression", "rotate")
TEMPORAL = ("frame_freeze", "frame_sampling", "reverse_sampling", "jumble", "box_jumble")
LEVELS = (1, 3, 5)
Batch = dict[str, Any]


def batches_of(samples: list[Any], size: int, named_only: bool) -> list[Batch]:
    out = []
    for start in range(0, len(samples), size):
        chunk = samples[start : start + size]
        video, masks, _ = stack_clips(chunk, named_only=named_only)
        batch: Batch = {
            "video": video,
            "objects": masks,
            "index": SampleIndex(tuple(range(start, start + len(chunk))), tuple(s.sample_id for s in chunk)),
        }
        if named_only:
            batch["texts"] = [s.field("expression").text for s in chunk]
        out.append(batch)
    return out


def shown_reference(masks: VideoMasks) -> torch.Tensor:
    """Each object's mask in the first position that shows it, as the ``vos`` task gives it."""
    references = []
    for clip, objects in zip(masks.data, masks.object_ids, strict=True):
        firsts = []
        for object_id in objects:
            shown = (clip == object_id).flatten(1).any(dim=1).nonzero()
            firsts.append(int(shown[0, 0]) if len(shown) else 0)
        references.append(given_masks(clip, objects, firsts))
    return torch.stack(references)


def perturbed(batch: Batch, corruption: Corruption[Any] | None, severity: int) -> Batch:
    if corruption is None:
        return batch
    fields = {k: v for k, v in batch.items() if k != "texts"}
    out = dict(corruption(fields, severity, list(batch["index"].positions)))
    if "texts" in batch:
        out["texts"] = batch["texts"]
    return out


def score(
    metric: VideoObjectMetric, predict: Callable[[Batch], torch.Tensor], batches: list[Batch]
) -> dict[str, float]:
    metric.reset()
    for batch in batches:
        metric.update(predict(batch), batch)
    result = metric.compute()
    return {"J": result.details["j_mean"], "F": result.details["f_mean"], "J&F": result.score}


def cells(parts: tuple[str, ...], temporal: tuple[str, ...]) -> list[tuple[str, Corruption[Any] | None, int]]:
    found: list[tuple[str, Corruption[Any] | None, int]] = [("clean", None, 0)]
    found += [(f"{name}@{level}", REGISTRY.get(name), level) for name in parts for level in LEVELS]
    mixture = dynamic([REGISTRY.get(name) for name in parts])
    found.append((mixture.name, mixture, 1))
    found += [(f"{name}@{level}", REGISTRY.get(name, "video-temporal"), level) for name in temporal for level in LEVELS]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-scores", action="store_true")
    parser.add_argument("--models", default="tiny-vos,tiny-rvos", help="which of tiny-vos, tiny-rvos to run")
    args = parser.parse_args()
    torch.set_num_threads(1)
    vos_data, rvos_data = DemoClips("val"), DemoReferringClips("val")
    vos_batches = batches_of([vos_data[i] for i in range(len(vos_data))], 8, named_only=False)
    rvos_batches = batches_of([rvos_data[i] for i in range(len(rvos_data))], 16, named_only=True)
    chosen = set(args.models.split(","))
    vos = tiny_vos() if "tiny-vos" in chosen else None
    rvos = tiny_rvos() if "tiny-rvos" in chosen else None

    @torch.no_grad()
    def predict_vos(batch: Batch) -> torch.Tensor:
        assert vos is not None
        return vos(batch["video"].data, shown_reference(batch["objects"]))

    @torch.no_grad()
    def predict_rvos(batch: Batch) -> torch.Tensor:
        assert rvos is not None
        return (rvos(batch["video"].data, batch["texts"]) > 0).long()

    if not args.skip_scores:
        context = MetricContext(DemoClips.class_names, DemoClips.ignore_index)
        runs = (
            ("tiny-vos", RegionAndBoundary(context), predict_vos, vos_batches, STATIC),
            ("tiny-rvos", RegionAndBoundaryAllFrames(context), predict_rvos, rvos_batches, STATIC[:2] + STATIC[3:]),
        )
        for model, metric, predict, batches, parts in runs:
            if model not in chosen:
                continue
            print(f"\n{model}: {sum(b['video'].batch_size() for b in batches)} samples")
            print(f"{'cell':<62} {'J':>6} {'F':>6} {'J&F':>6}")
            for name, corruption, level in cells(parts, TEMPORAL):
                values = score(metric, predict, [perturbed(b, corruption, level) for b in batches])
                print(f"{name:<62} {values['J']:6.1f} {values['F']:6.1f} {values['J&F']:6.1f}")

    frames = sum(b["video"].batch_size() * b["video"].frames() for b in vos_batches)
    rvos_frames = sum(b["video"].batch_size() * b["video"].frames() for b in rvos_batches)
    work: dict[str, Callable[[], object]] = {}
    if vos is not None:
        work["tiny-vos inference (val clips)"] = lambda: [predict_vos(b) for b in vos_batches]
    if rvos is not None:
        work["tiny-rvos inference (val expressions)"] = lambda: [predict_rvos(b) for b in rvos_batches]
    for name, corruption, level in cells(STATIC, ("frame_freeze", "jumble"))[1:]:
        if level in (0, 1, 5):
            work[f"{name} (val clips)"] = lambda c=corruption, s=level: [perturbed(b, c, s) for b in vos_batches]
    best = {name: float("inf") for name in work}
    for _ in range(args.rounds):  # interleaved: each round runs every entry once
        for name, run in work.items():
            began = time.thread_time()
            run()
            best[name] = min(best[name], time.thread_time() - began)
    print(f"\n{'work':<62} {'ms per clip frame':>18}")
    for name, seconds in best.items():
        count = rvos_frames if "rvos" in name else frames
        print(f"{name:<62} {1000 * seconds / count:18.3f}")


if __name__ == "__main__":
    main()
