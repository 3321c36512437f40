"""Peak memory against dataset size: streaming keeps it flat, the decoded-sample cache grows to its budget.

Each size runs in a fresh process (``ru_maxrss`` only grows), evaluating the demo model on
the demo scenes under one corruption; the table shows peak RSS per dataset size. With
``--cells 2`` (the default) the process evaluates the clean cell and then the corrupted
one through one decoded-sample cache, as a worker of the gate does; the cache's budget is
the default one (:func:`pytest_segrobust.data.sample_cache.default_budget`; 1 GiB in
versions without it) and the table says how much it held. ``--cells 1`` evaluates the
corrupted cell alone, without the cache.

    python benchmarks/memory.py [--sizes 64 256 1024] [--cells 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = """
import json, resource, sys, time
import torch
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.demo import DemoScenes
from pytest_segrobust.engine.evaluation import evaluate
from pytest_segrobust.models import as_segmentation_model
from pytest_segrobust.models.demo import tiny_unet
from pytest_segrobust.data.sample_cache import SampleCache
try:
    from pytest_segrobust.data.sample_cache import default_budget
except ImportError:  # before the budget followed the machine: 1 GiB per process
    default_budget = lambda: 2**30
torch.set_num_threads(2)
size, cells = int(sys.argv[1]), int(sys.argv[2])
model, dataset = as_segmentation_model(tiny_unet()), DemoScenes("val", size=size)
cache = SampleCache(default_budget()) if cells > 1 else None
start = time.perf_counter()
try:
    from pytest_segrobust.engine.evaluation import EvalHooks
    cached = {"hooks": EvalHooks(sample_cache=cache)}
except ImportError:  # before evaluate() took its hooks as one value
    cached = {"sample_cache": cache}
if cache is not None:
    evaluate(model, dataset, None, 0, **cached)
result = evaluate(model, dataset, REGISTRY.get("gaussian_noise"), 3, **cached)
print(json.dumps({"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "seconds": time.perf_counter() - start, "miou": result.score,
                  "cache_mb": cache.used / 2**20 if cache is not None else 0.0}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--cells", type=int, choices=(1, 2), default=2, help="2: clean then corrupted, cached")
    args = parser.parse_args()
    print("| images | peak RSS MiB | sample cache MiB | seconds | mIoU under gaussian_noise::3 |")
    print("|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        command = [sys.executable, "-c", CHILD, str(size), str(args.cells)]
        out = subprocess.run(command, capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {size} | {row['rss_mb']:.0f} | {row['cache_mb']:.0f} | {row['seconds']:.1f} | {row['miou']:.2f} |")


if __name__ == "__main__":
    main()
