"""Wall time of a demo suite's run on the local backend and on Ray, and whether the reports agree.

Each round runs ``pytest --segrobust SUITE`` twice in a fresh copy of the suite and its
baselines, once per backend (``--segrobust-backend local``, then ``ray`` starting its own local
Ray instance), alternating so that a load change on the machine hits both alike. The table
shows each run's wall time (the pytest process, from start to exit) and whether its report
equals the first local run's, timing fields aside. Needs Ray (``pip install "pytest-segrobust[ray]"``).

    python benchmarks/backends.py [--suite suites/demo-instance.yaml] [--rounds 2] [--cpus 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_segrobust.report import without_timing

REPO = Path(__file__).resolve().parents[1]


def run(suite: Path, backend: str, cpus: str) -> tuple[float, Any, str]:
    """One run in a fresh project: (wall seconds, report without timing, pytest's last line)."""
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "suites").mkdir()
        shutil.copy(suite, project / "suites")
        shutil.copytree(REPO / "baselines", project / "baselines")
        (project / "pytest.ini").write_text("[pytest]\n")
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--segrobust"]
        command += ["--segrobust-backend", backend, "--segrobust-ray-cpus", cpus]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        lines = done.stdout.strip().splitlines()
        report = project / "segrobust-report.json"
        return seconds, without_timing(json.loads(report.read_text())) if report.exists() else None, lines[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, default=REPO / "suites" / "demo-instance.yaml")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cpus", default="1", help="--segrobust-ray-cpus: cores per actor")
    args = parser.parse_args()
    print(f"suite {args.suite.name}, {os.cpu_count()} cores, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}")
    times: dict[str, list[float]] = {"local": [], "ray": []}
    reference = None
    print(f"{'round':>5}  {'backend':<7}  {'wall s':>7}  {'report':<9}  pytest")
    for round_ in range(1, args.rounds + 1):
        for backend in ("local", "ray"):
            seconds, report, last = run(args.suite, backend, args.cpus)
            reference = report if reference is None else reference
            same = "missing" if report is None else ("same" if report == reference else "DIFFERS")
            times[backend].append(seconds)
            print(f"{round_:>5}  {backend:<7}  {seconds:7.1f}  {same:<9}  {last}", flush=True)
    for backend, values in times.items():
        print(f"{backend}: min {min(values):.1f} s, median {statistics.median(values):.1f} s")


if __name__ == "__main__":
    main()
