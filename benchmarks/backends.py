"""The demo suites run three ways, single process, 4 shards merged and Ray, and whether their reports agree.

For each suite (default: every ``suites/demo*.yaml``), each way runs in a fresh copy of the
suite and the committed baselines, with pytest's cache on (so the clean-results line counts
the model builds) and empty:

* ``single``: ``pytest --segrobust``;
* ``shards``: ``pytest --segrobust --segrobust-shard K/4`` for K = 1..4, one after the other,
  then ``segrobust merge`` of the four shard files;
* ``ray``: ``pytest --segrobust --segrobust-backend ray`` (a local Ray instance started by the
  run), with ``--segrobust-ray-split N`` when ``--split`` is given.

The table shows each way's wall time (shards: the four runs and the merge in a row, and the
longest shard, what a matrix of four machines would wait for), its model builds (summed over
the shards) and whether its report JSON, less :func:`~pytest_segrobust.report.without_timing`,
is byte-identical (as canonical JSON) to the single run's. Rounds alternate the ways, so that a
load change on the machine hits them alike. Exits 1 when a report differs or is missing. Ray is
needed (``pip install "pytest-segrobust[ray]"``).

    python benchmarks/backends.py [--suite suites/demo.yaml ...] [--rounds 1] [--cpus 1] [--split 1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_segrobust.report import without_timing

REPO = Path(__file__).resolve().parents[1]
SHARDS = 4
BUILDS = re.compile(r"; (\d+) model builds")
MERGE = "import sys; from pytest_segrobust.cli import main; sys.exit(main(sys.argv[1:]))"


@dataclass(frozen=True)
class Outcome:
    """One way's run of one suite.

    Attributes:
        seconds: Wall time of every process the way ran, one after the other.
        longest: The longest of them (a shard's, for the shards).
        builds: Model builds the runs counted.
        report: The report JSON less its timing fields, canonical; ``None`` when none was written.
        last: The last run's summary line (pytest's, or the merge's last line), for a glance at the verdict.
    """

    seconds: float
    longest: float
    builds: int
    report: str | None
    last: str


def pytest_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "--segrobust", *args]


def in_project(suite: Path, commands: list[list[str]]) -> Outcome:
    """Run ``commands`` one after the other in a fresh project holding ``suite`` and the baselines."""
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "suites").mkdir()
        shutil.copy(suite, project / "suites")
        shutil.copytree(REPO / "baselines", project / "baselines")
        (project / "pytest.ini").write_text("[pytest]\n")
        seconds, longest, builds, last = 0.0, 0.0, 0, ""
        for command in commands:
            start = time.perf_counter()
            done = subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
            took = time.perf_counter() - start
            seconds, longest = seconds + took, max(longest, took)
            builds += sum(int(count) for count in BUILDS.findall(done.stdout))
            lines = done.stdout.strip().splitlines()
            summary = [line for line in lines if line.startswith("=")]  # pytest's last line; the merge has none
            last = (summary or lines or [f"exit status {done.returncode}"])[-1]
        path = project / "segrobust-report.json"
        report = json.dumps(without_timing(json.loads(path.read_text())), sort_keys=True) if path.exists() else None
        return Outcome(seconds, longest, builds, report, last)


def ways(cpus: str, split: str) -> dict[str, Callable[[Path], Outcome]]:
    shard_files = [f"segrobust-report-shard-{k}-of-{SHARDS}.json" for k in range(1, SHARDS + 1)]
    merge = [sys.executable, "-c", MERGE, "merge", *shard_files, "--rootdir", "."]
    ray = ["--segrobust-backend", "ray", "--segrobust-ray-cpus", cpus, "--segrobust-ray-split", split]
    return {
        "single": lambda suite: in_project(suite, [pytest_command()]),
        "shards": lambda suite: in_project(
            suite, [*(pytest_command("--segrobust-shard", f"{k}/{SHARDS}") for k in range(1, SHARDS + 1)), merge]
        ),
        "ray": lambda suite: in_project(suite, [pytest_command(*ray)]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, action="append", help="a suite file (repeatable; default: suites/demo*.yaml)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cpus", default="1", help="--segrobust-ray-cpus: cores per actor (default 1)")
    parser.add_argument("--split", default="1", help="--segrobust-ray-split: actors per model (default 1)")
    args = parser.parse_args()
    suites = args.suite or sorted((REPO / "suites").glob("demo*.yaml"))
    threads = os.environ.get("OMP_NUM_THREADS", "(unset)")
    print(f"{os.cpu_count()} cores, OMP_NUM_THREADS={threads}; shards: {SHARDS} in a row, then merged")
    print(f"{'suite':<20}  {'round':>5}  {'way':<6}  {'wall s':>7}  {'longest':>7}  {'builds':>6}  {'report':<9}  last line")
    failed = False
    for suite in suites:
        for round_ in range(1, args.rounds + 1):
            reference = None
            for name, way in ways(args.cpus, args.split).items():
                outcome = way(suite)
                reference = outcome.report if name == "single" else reference
                same = "missing" if outcome.report is None else ("same" if outcome.report == reference else "DIFFERS")
                failed |= same != "same"
                print(
                    f"{suite.name:<20}  {round_:>5}  {name:<6}  {outcome.seconds:7.1f}  {outcome.longest:7.1f}  "
                    f"{outcome.builds:>6}  {same:<9}  {outcome.last}",
                    flush=True,
                )
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
