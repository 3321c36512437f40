"""Train the demo referring model on the demo referring expressions and write its weights.

Usage::

    python scripts/train_demo_referring.py                     # writes the packaged weights
    python scripts/train_demo_referring.py --steps 50 --out /tmp/tiny_referring.pt

The image side is the demo TinyUNet (``models/weights/tiny_unet.pt``), frozen, so the
candidate regions of each training scene are computed once and only the text reader and the
region scorer learn: a region's target is whether most of its pixels lie in the named
object's mask. Training sees clean images and clean expressions only, and no
geometric augmentation (a flip would turn "leftmost" into a lie). The run is reproducible
on one machine: fixed seeds, deterministic algorithms, fixed thread count.

At the end it reports the validation metrics through :func:`pytest_segrobust.engine.evaluation.evaluate`
(clean, and unless ``--no-robustness`` under visual corruptions and text perturbations at
severities 1, 3 and 5).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.base import ReferringTarget, Sample
from pytest_segrobust.data.demo_referring import DemoReferring
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.models.demo import WEIGHTS_PATH as UNET_WEIGHTS_PATH
from pytest_segrobust.models.demo_referring import Regions, TinyReferringNet
from pytest_segrobust.models.torch_module import TorchModuleReferringSegmenter
from pytest_segrobust.text import TEXT_PERTURBATIONS, TextPerturbation

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_segrobust" / "models"
DEFAULT_OUT = PACKAGE / "weights" / "tiny_referring.pt"
DEFAULT_ENCODER = PACKAGE.joinpath(*UNET_WEIGHTS_PATH)
METRICS = ["referring_miou", "referring_oiou", "referring_p50"]
VISUAL = ("gaussian_noise", "defocus_blur", "jpeg_compression", "contrast")
TEXT = ("misspelling", "mispunctuation", "grammar_error", "character_missing")


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4000, help="optimiser steps")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--eval-every", type=int, default=1000, help="steps between validation reports")
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate of the one-cycle schedule")
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--train-scenes", type=int, default=None, help="training scenes (default: the split's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--encoder", type=Path, default=DEFAULT_ENCODER, help="TinyUNet state dict of the image side")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the state dict")
    parser.add_argument("--no-robustness", action="store_true", help="report clean validation metrics only")
    return parser.parse_args()


@torch.no_grad()
def encode_scenes(model: TinyReferringNet, dataset: DemoReferring, batch_size: int = 32) -> Regions:
    """The candidate regions of every scene of ``dataset`` (:meth:`TinyReferringNet.encode`)."""
    parts: list[Regions] = []
    for start in range(0, dataset.scenes, batch_size):
        chosen = range(start, min(start + batch_size, dataset.scenes))
        pixels = torch.stack([torch.from_numpy(dataset.scene(i).pixels) for i in chosen])
        parts.append(model.encode(pixels.float() / 255.0))
    return Regions(
        torch.cat([p.features for p in parts]),
        torch.cat([p.padding for p in parts]),
        torch.cat([p.region_map for p in parts]),
    )


def region_targets(region_map: torch.Tensor, mask: torch.Tensor, slots: int) -> torch.Tensor:
    """Which regions belong to the named object: more than half of their pixels lie in its mask.

    Shape:
        region_map, mask: ``(H, W)``; return: ``(slots,)`` float.
    """
    inside = region_map >= 0
    area = torch.zeros(slots).index_add_(0, region_map[inside], torch.ones(int(inside.sum())))
    overlap = torch.zeros(slots).index_add_(0, region_map[inside], mask[inside].float())
    return (overlap > 0.5 * area.clamp(min=1)).float()


class PerturbedExpressions:
    """A referring dataset with every expression perturbed as the text cells will perturb it.

    Args:
        dataset: The clean dataset.
        perturbation: A text perturbation of ``TEXT_PERTURBATIONS``.
        severity: 1 to 5.
        seed: Global seed; with the sample id it fixes every edit.
    """

    def __init__(self, dataset: DemoReferring, perturbation: TextPerturbation, severity: int, seed: int = 0) -> None:
        self.dataset = dataset
        self.class_names, self.ignore_index = dataset.class_names, dataset.ignore_index
        self.name = f"{dataset.name}+{perturbation.name}@{severity}"
        self._texts = perturbation.perturb(
            list(dataset.expressions), list(dataset.sample_ids), severity=severity, seed=seed
        )
        self._fingerprint = f"{dataset.fingerprint()}:text={perturbation.name}:severity={severity}:seed={seed}"

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Sample:
        sample = self.dataset[index]
        assert sample.referring is not None
        return Sample(
            sample.sample_id, sample.image, referring=ReferringTarget(self._texts[index], sample.referring.mask)
        )

    def fingerprint(self) -> str:
        return self._fingerprint


def report(module: TinyReferringNet, val_set: DemoReferring, robustness: bool) -> None:
    """Print the validation metrics: clean, then per perturbation and severity (mIoU, and its change)."""
    model = TorchModuleReferringSegmenter(module, device="cpu")
    clean = evaluate(model, val_set, settings=EvalSettings.of(task="referring", metrics=METRICS))
    numbers = {name: clean.metrics[name].score for name in METRICS}
    print("val clean  " + "  ".join(f"{name} {value:.1f}" for name, value in numbers.items()), flush=True)
    if not robustness:
        return
    baseline = numbers["referring_miou"]
    print(f"{'perturbation':<22}{'sev 1':>8}{'sev 3':>8}{'sev 5':>8}   (referring mIoU; clean {baseline:.1f})")
    for name in VISUAL:
        corruption = REGISTRY.get(name)
        row = [
            evaluate(model, val_set, corruption, s, settings=EvalSettings.of(task="referring", metrics=METRICS)).score
            for s in (1, 3, 5)
        ]
        print(f"{'visual ' + name:<22}" + "".join(f"{v:8.1f}" for v in row), flush=True)
    for name in TEXT:
        perturbation = TEXT_PERTURBATIONS.get(name)
        row = [
            evaluate(
                model,
                PerturbedExpressions(val_set, perturbation, s),
                settings=EvalSettings.of(task="referring", metrics=METRICS),
            ).score
            for s in (1, 3, 5)
        ]
        print(f"{'text ' + name:<22}" + "".join(f"{v:8.1f}" for v in row), flush=True)


def main() -> None:
    """Train, save and report."""
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    generator = torch.Generator().manual_seed(args.seed)

    started = time.perf_counter()
    train_set, val_set = DemoReferring("train", scenes=args.train_scenes), DemoReferring("val")
    model = TinyReferringNet()
    model.semantic.load_state_dict(torch.load(args.encoder, map_location="cpu", weights_only=True))
    model.semantic.requires_grad_(False)
    model.eval()
    regions = encode_scenes(model, train_set)
    scene_of = torch.tensor([int(i.split("/")[2]) for i in train_set.sample_ids])
    texts = list(train_set.expressions)
    targets = torch.stack(
        [
            region_targets(regions.region_map[int(scene_of[i])], train_set[i].referring.mask, model.max_regions)  # type: ignore[union-attr]
            for i in range(len(train_set))
        ]
    )
    print(
        f"{len(train_set)} train expressions on {train_set.scenes} scenes, {len(val_set)} val expressions; "
        f"regions in {time.perf_counter() - started:.1f}s",
        flush=True,
    )

    trainable = [p for p in model.parameters() if p.requires_grad]
    print(f"{sum(p.numel() for p in model.parameters())} parameters, {sum(p.numel() for p in trainable)} trained")
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=args.weight_decay)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr, total_steps=args.steps, pct_start=0.1)
    order = torch.randperm(len(texts), generator=generator)
    cursor, total_loss = 0, 0.0
    for step in range(1, args.steps + 1):
        if cursor + args.batch_size > len(order):  # a new pass over the expressions
            order, cursor = torch.randperm(len(texts), generator=generator), 0
        chosen = order[cursor : cursor + args.batch_size]
        cursor += args.batch_size
        model.train()
        model.semantic.eval()  # frozen, BatchNorm statistics included
        scenes = scene_of[chosen]
        padding = regions.padding[scenes]
        logits = model.score_regions(regions.features[scenes], padding, [texts[i] for i in chosen])
        loss = F.binary_cross_entropy_with_logits(logits[~padding], targets[chosen][~padding])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        total_loss += loss.item()
        if step % args.eval_every == 0 or step == args.steps:
            model.eval()
            val = evaluate(
                TorchModuleReferringSegmenter(model, device="cpu"),
                val_set,
                settings=EvalSettings.of(task="referring", metrics=METRICS),
            )
            print(
                f"step {step}/{args.steps}  loss {total_loss / args.eval_every:.4f}  "
                f"val mIoU {val.score:.1f}  ({time.perf_counter() - started:.0f}s)",
                flush=True,
            )
            total_loss = 0.0

    model.eval()
    state = {name: tensor.detach().clone().contiguous() for name, tensor in model.state_dict().items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB) after {time.perf_counter() - started:.0f}s")
    report(model, val_set, robustness=not args.no_robustness)


if __name__ == "__main__":
    main()
