"""Where the test suite's time goes, in CPU seconds, which a loaded machine disturbs least.

pytest's ``--durations`` gives wall time, which on a shared machine says more about the other
jobs than about a test. This is a pytest plugin that records, per test (setup, call and
teardown together), its wall time, its process's CPU time and the CPU time of the child
processes it waited for (pytester's ``-n 2`` workers and subprocesses), one JSON line each:

    PYTHONPATH=$PWD python -m pytest -p benchmarks.suite_times -n 2 --dist loadgroup -q
    python benchmarks/suite_times.py suite-times.jsonl                    # the 30 slowest, per file
    python benchmarks/suite_times.py before.jsonl suite-times.jsonl      # side by side

``SUITE_TIMES`` names the file (default ``suite-times.jsonl`` in the current folder); each
xdist worker appends to it. CPU time of a process counts all its threads.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

OUTPUT = Path(os.environ.get("SUITE_TIMES", "suite-times.jsonl"))


def _children_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    wall, cpu, children = time.perf_counter(), time.process_time(), _children_seconds()
    yield
    row = {
        "id": item.nodeid,
        "wall": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu,
        "children": _children_seconds() - children,
    }
    with OUTPUT.open("a") as out:
        out.write(json.dumps(row) + "\n")


def read(path: str) -> dict[str, float]:
    """CPU seconds (own and children's) per test id."""
    rows = (json.loads(line) for line in Path(path).read_text().splitlines() if line.strip())
    return {row["id"]: row["cpu"] + row["children"] for row in rows}


def main(paths: list[str], top: int = 30) -> None:
    runs = [read(path) for path in paths]
    last = runs[-1]
    header = "  ".join(f"{Path(p).stem[:12]:>12}" for p in paths)
    print(f"{header}  test (CPU seconds: own + waited-for children)")
    for test in sorted(last, key=last.get, reverse=True)[:top]:
        print("  ".join(f"{run.get(test, float('nan')):12.1f}" for run in runs), "", test)
    print(
        "  ".join(f"{sum(run.values()):12.1f}" for run in runs),
        "",
        "total",
        "/".join(str(len(run)) for run in runs),
        "tests",
    )
    files = [Counter() for _ in runs]
    for counter, run in zip(files, runs, strict=True):
        for test, seconds in run.items():
            counter[test.split("::")[0]] += seconds
    print(f"\n{header}  file")
    for name, _ in files[-1].most_common(top):
        print("  ".join(f"{counter.get(name, float('nan')):12.1f}" for counter in files), "", name)


if __name__ == "__main__":
    main(sys.argv[1:] or [str(OUTPUT)])
