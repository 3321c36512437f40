"""The embedded demo models with channels-last weights against the default layout.

Each demo suite's clean cell is evaluated (``evaluate()``, the suite's task, metrics and batch
size, no statistics) with its model built as the suite builds it (channels-last convolution
weights, :func:`pytest_segrobust.models.demo.load_weights`) and with a copy of that model
moved back to the default (contiguous) layout. The two runs alternate, ``--rounds`` times,
in one process on one torch thread; the table gives CPU milliseconds per sample (minimum and
median over rounds: load from other processes only ever adds time) and the largest
difference between the two runs' metric values, which must stay far below the 6 digits the
baselines keep.

    python benchmarks/demo_models.py [--rounds 5] [--suites demo demo-referring ...]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path

import torch

from pytest_segrobust.engine.evaluation import EvalResult, EvalSettings, evaluate
from pytest_segrobust.models import adapt_model
from pytest_segrobust.suite.factories import load_object
from pytest_segrobust.suite.model_sources import build_model
from pytest_segrobust.suite.schema import load_suite
from pytest_segrobust.tasks import get_task

SUITES = Path(__file__).resolve().parent.parent / "suites"


def largest_difference(a: EvalResult, b: EvalResult) -> float:
    return max(abs(a.metrics[name].score - b.metrics[name].score) for name in a.metrics)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--suites", nargs="*", default=None, help="suite file stems (default: every demo suite)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    paths = sorted(SUITES.glob("demo*.yaml"))
    if args.suites:
        paths = [SUITES / f"{stem}.yaml" for stem in args.suites]

    print("| suite | model | samples | channels-last ms/sample | default ms/sample | speed-up | max metric diff |")
    print("|---|---|---|---|---|---|---|")
    for path in paths:
        suite = load_suite(path)
        task = get_task(suite.task)
        spec = suite.dataset_spec(suite.splits[0])
        dataset = load_object(spec.target)(**spec.kwargs)
        for model_spec in suite.models:
            built = build_model(model_spec, torch.device("cpu"), suite.task)
            layouts = {
                "channels-last": adapt_model(built, task, "cpu"),
                "default": adapt_model(copy.deepcopy(built).to(memory_format=torch.contiguous_format), task, "cpu"),
            }
            times: dict[str, list[float]] = {name: [] for name in layouts}
            results: dict[str, EvalResult] = {}
            for round_ in range(args.rounds):
                order = list(layouts) if round_ % 2 == 0 else list(reversed(layouts))
                for name in order:
                    start = time.process_time()
                    results[name] = evaluate(
                        layouts[name],
                        dataset,
                        settings=EvalSettings.of(
                            task=task,
                            metrics=suite.metrics,
                            seed=suite.seed,
                            batch_size=suite.batch_size,
                            limit=suite.limit,
                            statistics=False,
                        ),
                    )
                    times[name].append((time.process_time() - start) / results[name].num_images * 1e3)
            fast, slow = (min(times[name]) for name in layouts)
            cells = " | ".join(f"{min(times[n]):.2f} / {statistics.median(times[n]):.2f}" for n in layouts)
            difference = largest_difference(results["channels-last"], results["default"])
            print(
                f"| {suite.name} | {model_spec.name} | {results['default'].num_images} | {cells} "
                f"| {slow / fast:.2f}x | {difference:.1e} |"
            )


if __name__ == "__main__":
    main()
