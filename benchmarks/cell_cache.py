"""What the result cache saves: the demo gate run twice, with an empty cache, then unchanged.

The first run measures every clean result and corrupted cell and stores each; the second
changes nothing (a retried CI job, a pull request that touches no model, data or
perturbation), so it reads every cell from the cache, gates it against the baselines as
usual and writes the report. Each run is its own ``pytest --segrobust`` process, in one
process (no xdist), with pytest's cache off and the result cache in a fresh temporary folder
(``--segrobust-cache-dir``); the report goes to that folder too, so the project is left as
it was. CPU seconds are the process's and its children's (``getrusage``), which a busy
machine disturbs less than wall time.

    python benchmarks/cell_cache.py [SUITE.yaml ...] [--figures all|none]

Without suites, every suite of the project's ``suites/`` folder (the demo gate).
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CELL_LINE = re.compile(r"^corrupted cells: (?P<measured>\d+) measured, (?P<read>\d+) from cache$", re.MULTILINE)
CLEAN_LINE = re.compile(r"^clean results: (?P<measured>\d+) computed, (?P<read>\d+) from cache", re.MULTILINE)


@dataclass(frozen=True)
class Timed:
    """One gate run: its wall and CPU seconds, and its cells measured and read (clean results first)."""

    wall: float
    cpu: float
    clean: tuple[int, int]
    cells: tuple[int, int]
    exit_code: int


def gate(suites: list[str], cache: Path, report: Path, figures: str) -> Timed:
    """One ``pytest --segrobust`` process over ``suites`` with the result cache in ``cache``."""
    command = [
        sys.executable, "-m", "pytest", "--segrobust", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist",
        "--segrobust-cache-dir", str(cache), "--segrobust-report", str(report), f"--segrobust-figures={figures}",
        *suites,
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cells, clean = CELL_LINE.search(done.stdout), CLEAN_LINE.search(done.stdout)
    if cells is None or clean is None:
        raise SystemExit(f"no cache summary in the run's output:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return Timed(
        wall,
        cpu,
        (int(clean["measured"]), int(clean["read"])),
        (int(cells["measured"]), int(cells["read"])),
        done.returncode,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suites", nargs="*", help="suite files (default: the project's suites folder)")
    parser.add_argument(
        "--figures", choices=("all", "none"), default="all", help="the report's figures (default all, as the demo gate)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="segrobust-cell-cache-") as folder:
        cache, report = Path(folder) / "cache", Path(folder) / "report"
        first = gate(args.suites, cache, report, args.figures)
        second = gate(args.suites, cache, report, args.figures)
        stored = sum(path.stat().st_size for path in cache.glob("*.json"))
    print(f"suites: {' '.join(args.suites) or 'suites/ (the demo gate)'}; figures: {args.figures}; one process")
    print(f"{'run':<18} {'wall s':>8} {'CPU s':>8} {'clean computed/read':>20} {'cells measured/read':>20} {'exit':>5}")
    for name, timed in (("first (empty)", first), ("unchanged re-run", second)):
        clean, cells = f"{timed.clean[0]}/{timed.clean[1]}", f"{timed.cells[0]}/{timed.cells[1]}"
        print(f"{name:<18} {timed.wall:>8.1f} {timed.cpu:>8.1f} {clean:>20} {cells:>20} {timed.exit_code:>5}")
    print(
        f"re-run / first: {second.cpu / first.cpu:.3f} of the CPU seconds, {second.wall / first.wall:.3f} of the wall time"
    )
    print(f"cache: {stored / (1 << 20):.1f} MiB in {first.clean[0] + first.cells[0]} entries")


if __name__ == "__main__":
    main()
