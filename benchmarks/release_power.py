"""What the aggregate gate confirms that no cell can: detectable margins per cell against per aggregate.

    python benchmarks/release_power.py [--sidecar baselines/demo.stats.npz] [--base tiny-unet]
        [--candidate tiny-unet-smoothed] [--worse]

Part 1 reads a suite's stored per-image statistics and treats one model as the baseline of
another (the demo's two networks, as if a release changed the one into the other), then prints,
at the demo suite's Bonferroni level, the smallest margin an unchanged model would be confirmed
within at 80% power (``detectable``): for each cell's score and gamma_r (median, min and max over
cells), and for each aggregate the model's ``aggregates`` item gates (mPC, rPC, mean gamma_r,
mean gamma_r per category), paired over the same image resamples. Nothing runs a model.

Part 2 (``--worse``) runs the gate itself: it records the demo network's baselines on the noise
cells of the demo data, then gates a release of it that is worse on noisy images (the network
behind a mild unsharp mask, which amplifies noise and leaves the clean images nearly alone), and
prints each cell's gamma_r change with its interval and outcome, then the aggregates item's.
Takes a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

from pytest_segrobust.core.statistics import RunScores, paired_change, paired_gamma_r_change, resample_weights
from pytest_segrobust.gate.release import CellEvidence, cell_level, family_size, model_checks
from pytest_segrobust.metrics.miou import MeanIoU
from pytest_segrobust.store.records import CellRecord
from pytest_segrobust.store.sidecar import pack, read_sidecar
from pytest_segrobust.suite.schema import load_suite

ROOT = Path(__file__).resolve().parents[1]


def paired_cells(sidecar: Path, base: str, candidate: str, suite_file: Path) -> None:
    suite = load_suite(suite_file)
    cells = {cell: metrics[suite.metric] for cell, metrics in read_sidecar(sidecar).items() if suite.metric in metrics}
    level = cell_level(suite)
    categories = {name: suite.corruption(name).category.value for name in suite.corruptions}
    statistic = MeanIoU.resampled_scores
    evidence, per_cell = [], {"score": [], "gamma_r": []}
    weights = None
    for corruption in suite.corruptions:
        for severity in suite.severities:
            mine = cells.get(f"{candidate}::{corruption}::{severity}")
            theirs = cells.get(f"{base}::{corruption}::{severity}")
            if mine is None or theirs is None:
                continue
            if weights is None:
                weights = resample_weights(mine.images, suite.gate.resamples, seed=0)
            runs = [
                RunScores.of(array, statistic, weights)
                for array in (theirs.clean, theirs.corrupted, mine.clean, mine.corrupted)
            ]
            base_clean, base_corrupted, clean, corrupted = runs
            for number, change in (
                ("score", paired_change(base_corrupted, corrupted)),
                ("gamma_r", paired_gamma_r_change(*runs)),
            ):
                per_cell[number].append(change.detectable(level))
            record = CellRecord(
                nodeid=f"{candidate}::{corruption}[{severity}]",
                suite=suite.name,
                model=candidate,
                corruption=corruption,
                category=categories[corruption],
                severity=severity,
                score=corrupted.observed,
                clean_score=clean.observed,
                gamma_r=corrupted.observed / clean.observed,
                gamma_a=None,
                per_class=[],
                class_names=[],
                num_images=mine.images,
                seconds=0.0,
                status="passed",  # type: ignore[arg-type]
                baseline={"score": base_corrupted.observed, "gamma_r": base_corrupted.observed / base_clean.observed},
            )
            paired = {
                "images": mine.images,
                "clean": pack(np.stack([clean.resampled, base_clean.resampled]).astype(np.float32)),
                "corrupted": pack(np.stack([corrupted.resampled, base_corrupted.resampled]).astype(np.float32)),
            }
            evidence.append(CellEvidence(record, clean.resampled, corrupted.resampled, mine.images, paired))
    _, aggregates, notes = model_checks(suite, candidate, {None: evidence})
    print(
        f"{suite.name}: {len(evidence)} corrupted cells of {evidence[0].images} images, {candidate} gated against {base}"
    )
    print(f"family of {family_size(suite)} numbers: each interval at {level:.6f} (two-sided)\n")
    print("| number | cells | detectable at 80% power (median, min..max over cells / the aggregate) |")
    print("|---|---:|---|")
    for number, values in per_cell.items():
        shown = f"{statistics.median(values):.4f} ({min(values):.4f}..{max(values):.4f})"
        print(f"| one cell's {number} | 1 | {shown} |")
    counts = {category: sum(e.record.category == category for e in evidence) for category in categories.values()}
    for check in aggregates:
        detectable = "-" if check.detectable is None else f"{check.detectable:.4f}"
        category = check.metric.partition("(")[2].rstrip(")")
        print(f"| {check.metric} | {counts.get(category, len(evidence))} | {detectable} |")
    for note in notes:
        print(f"note: {note}")


WORSE = '''
import torch
import torch.nn.functional as F

from pytest_segrobust.models.demo import tiny_unet


class Sharpened(torch.nn.Module):
    """The demo network behind an unsharp mask of ``amount``: noise is amplified, edges a little."""

    def __init__(self, amount):
        super().__init__()
        self.net, self.amount = tiny_unet(), amount
        kernel = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0])
        kernel = torch.outer(kernel, kernel) / 256
        self.register_buffer("kernel", kernel.expand(3, 1, 5, 5).clone())

    def forward(self, images):
        blurred = F.conv2d(F.pad(images, (2, 2, 2, 2), mode="replicate"), self.kernel, groups=3)
        return self.net((images + self.amount * (images - blurred)).clamp(0, 1))


def release(amount=0.0):
    return tiny_unet() if amount == 0 else Sharpened(amount).eval()
'''

SUITE = """\
name: noise
dataset: {{factory: pytest_segrobust.data.demo:demo_dataset, kwargs: {{split: val}}}}
models:
  - {{name: tiny-unet, factory: variants:release, kwargs: {{amount: {amount}}}}}
corruptions: [gaussian_noise, shot_noise]
severities: [1, 2, 3, 4, 5]
gate:
  margin: {{gamma_r: 0.01, score: 1.0}}
  inconclusive: warn
  aggregates: {{mpc: {mpc_margin}, mean_gamma_r: {gamma_margin}}}
batch_size: 16
"""


def worse_release(amount: float, gamma_margin: float, mpc_margin: float) -> None:
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "variants.py").write_text(textwrap.dedent(WORSE))
        (project / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
        (project / "suites").mkdir()
        suite = project / "suites" / "noise.yaml"
        command = [sys.executable, "-m", "pytest", "--segrobust", "-q", "-p", "no:randomly", "-n", "2"]
        margins = {"gamma_margin": gamma_margin, "mpc_margin": mpc_margin}
        suite.write_text(SUITE.format(amount=0.0, **margins))
        subprocess.run([*command, "--segrobust-update-baselines"], cwd=project, capture_output=True, check=True)
        suite.write_text(SUITE.format(amount=amount, **margins))
        done = subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
        report = json.loads((project / "segrobust-report.json").read_text())
    entry = report["suites"]["noise"]
    print(
        f"\nA release behind an unsharp mask of {amount} (exit {done.returncode}), gated against the demo network "
        f"(cells: margin 0.01 of gamma_r; aggregates: {gamma_margin} of mean gamma_r, {mpc_margin} of mPC):\n"
    )
    print("| cell | γr baseline | γr release | Δγr | interval | outcome |")
    print("|---|---:|---:|---:|---|---|")
    drops = []
    for cell in entry["models"]["tiny-unet"]["cells"]:
        check = next((c for c in cell["checks"] if c["metric"] == "gamma_r"), None)
        if check is None:
            continue
        drops.append(check["observed"] - check["baseline"])
        print(
            f"| {cell['corruption']}[{cell['severity']}] | {check['baseline']:.4f} | {check['observed']:.4f} | "
            f"{drops[-1]:+.4f} | [{check['low']:+.4f}, {check['high']:+.4f}] | {check['outcome']} |"
        )
    print(f"\nmean Δγr over the noise cells: {statistics.mean(drops):+.4f}")
    (model,) = entry["release"]["models"]
    print(f"aggregates item: {model['status']}")
    for check in model["checks"]:
        print(
            f"  {check['metric']}: Δ {check['observed'] - check['baseline']:+.4f}, interval "
            f"[{check['low']:+.4f}, {check['high']:+.4f}], margin -{check['margin']}, {check['outcome']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sidecar", type=Path, default=ROOT / "baselines" / "demo.stats.npz")
    parser.add_argument("--suite", type=Path, default=ROOT / "suites" / "demo.yaml")
    parser.add_argument("--base", default="tiny-unet")
    parser.add_argument("--candidate", default="tiny-unet-smoothed")
    parser.add_argument("--worse", action="store_true", help="also gate a release that is worse on noisy images")
    parser.add_argument("--amount", type=float, default=0.03, help="the worse release's unsharp mask")
    parser.add_argument("--gamma-margin", type=float, default=0.005, help="gate.aggregates' mean_gamma_r margin")
    parser.add_argument("--mpc-margin", type=float, default=0.5, help="gate.aggregates' mpc margin")
    args = parser.parse_args()
    paired_cells(args.sidecar, args.base, args.candidate, args.suite)
    if args.worse:
        worse_release(args.amount, args.gamma_margin, args.mpc_margin)


if __name__ == "__main__":
    main()
