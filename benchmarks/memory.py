"""Peak memory against dataset size: streaming keeps it flat.

Each size runs in a fresh process (``ru_maxrss`` only grows), evaluating the demo model on
the demo scenes under one corruption; the table shows peak RSS per dataset size.

    python benchmarks/memory.py [--sizes 64 256 1024]
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
from pytest_segrobust.evaluation import evaluate
from pytest_segrobust.models import as_segmentation_model
from pytest_segrobust.models.demo import tiny_unet
torch.set_num_threads(2)
size = int(sys.argv[1])
start = time.perf_counter()
result = evaluate(as_segmentation_model(tiny_unet()), DemoScenes("val", size=size), REGISTRY.get("gaussian_noise"), 3)
print(json.dumps({"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "seconds": time.perf_counter() - start, "miou": result.score}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024])
    args = parser.parse_args()
    print("| images | peak RSS MiB | seconds | mIoU under gaussian_noise::3 |")
    print("|---:|---:|---:|---:|")
    for size in args.sizes:
        out = subprocess.run([sys.executable, "-c", CHILD, str(size)], capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {size} | {row['rss_mb']:.0f} | {row['seconds']:.1f} | {row['miou']:.2f} |")


if __name__ == "__main__":
    main()
