"""What the installed plugin costs plain ``pytest`` in a project that does not use it.

Runs ``pytest`` on a one-test project with the plugin and with ``-p no:segrobust``,
interleaved, and prints the median wall time of each (whole process: interpreter start,
plugin loading, collection, one test).

    python benchmarks/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    variants = {"with the plugin": [], "-p no:segrobust": ["-p", "no:segrobust"]}
    times: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "test_one.py").write_text("def test_one():\n    assert True\n")
        Path(folder, "pytest.ini").write_text("[pytest]\n")
        for _ in range(args.runs):
            for name, extra in variants.items():
                start = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
                    cwd=folder,
                    check=True,
                    capture_output=True,
                )
                times[name].append(time.perf_counter() - start)
    print(f"plain pytest on a one-test project, median of {args.runs} runs")
    print("| variant | seconds |")
    print("|---|---:|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.3f} |")


if __name__ == "__main__":
    main()
