"""What the gate's trust checks cost next to the work they guard, side by side in one run.

* the NaN/infinity check on a batch's logits (every batch) against that batch's forward pass,
  for the demo's tiny U-Net and one 8x wider (a stand-in for a real-size network);
* the identity of the model's code (once per model per run) against the clean evaluation
  it keys.

    python benchmarks/trust_checks.py [--batch 16] [--size 128] [--repeats 10]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from pytest_segrobust.data.demo import DemoScenes
from pytest_segrobust.engine.evaluation import evaluate
from pytest_segrobust.models import as_segmentation_model
from pytest_segrobust.models.demo import DEFAULT_WIDTHS, TinyUNet, tiny_unet
from pytest_segrobust.models.torch_module import require_finite
from pytest_segrobust.provenance.identity import code_identity
from pytest_segrobust.suite.factories import load_object


def median_ms(work, repeats: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.manual_seed(0)
    images = torch.rand(args.batch, 3, args.size, args.size)
    networks = {"tiny": tiny_unet(), "wide (8x)": TinyUNet(widths=tuple(8 * w for w in DEFAULT_WIDTHS)).eval()}

    print(f"NaN/inf check per batch ({args.batch} x 3 x {args.size} x {args.size}, CPU, {torch.get_num_threads()} threads)")
    print("| network | forward ms | check ms | check / forward |")
    print("|---|---:|---:|---:|")
    for name, network in networks.items():
        with torch.inference_mode():
            logits = network(images)
            forward = median_ms(lambda network=network: network(images), args.repeats)
            check = median_ms(lambda logits=logits: require_finite(logits, "logits"), args.repeats)
        print(f"| {name} | {forward:.2f} | {check:.3f} | {100 * check / forward:.2f}% |")

    factory = load_object("pytest_segrobust.models.demo:tiny_unet")
    model = as_segmentation_model(factory())
    start = time.perf_counter()
    code_identity(factory, model)
    first = time.perf_counter() - start
    again = median_ms(lambda: code_identity(factory, model), 5)
    dataset = DemoScenes(split="val")
    start = time.perf_counter()
    evaluate(model, dataset)
    clean = time.perf_counter() - start
    print()
    print("Identity of the model's code (once per model per run)")
    print("| first call ms | later calls ms | clean evaluation ms (64 demo images) | first / clean |")
    print("|---:|---:|---:|---:|")
    print(f"| {1000 * first:.1f} | {again:.1f} | {1000 * clean:.0f} | {100 * first / clean:.1f}% |")


if __name__ == "__main__":
    main()
