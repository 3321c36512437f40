"""What the end of a demo run costs: the report phase (pictures, figures, HTML, baselines) against the whole run.

Runs ``pytest --segrobust --segrobust-report-html`` on the demo in fresh copies of the
project (the working tree, and with ``--compare REV`` that commit too), interleaved, once per
``-n`` given, and prints per copy and mode: the whole run's wall and CPU seconds, the end
phase's (``SegRobustSession.finish``) and its parts', the figure files written and the
HTML's size. CPU seconds are the process's (every thread; the run's children for the whole
run), which load on a shared machine disturbs less than wall time.

    python benchmarks/report_phase.py [--compare REV | --compare-tree DIR] [-n 0 -n 2] [--rounds 1]

``--report-only REPORT.json`` measures the report phase alone, on one thread, from a demo run's
JSON report: the pictures (galleries, each model's worst images, run again), the documents and
figures, and the HTML page, each copy in its own process; the run's cells are not evaluated
(their seconds, summed in the JSON, stand for the run's compute).

``--compare-tree`` takes a folder holding another copy of the project (``git archive REV``
unpacked), for a machine without the repository's history; ``--load-plugin`` loads the plugin
with ``-p`` where it is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Loaded into the measured run with ``-p``: times the end phase's steps (whichever exist in the copy).
TIMER = """
import json, os, time
import pytest

_times = {}

def _wrap(owner, name, label):
    original = getattr(owner, name, None)
    if original is None:
        return
    def timed(*args, **kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            entry = _times.setdefault(label, [0.0, 0.0])
            entry[0] += time.perf_counter() - wall
            entry[1] += time.process_time() - cpu
    setattr(owner, name, timed)

@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    from pytest_segrobust.run import session
    cls = session.SegRobustSession
    _wrap(cls, "finish", "end phase (finish)")
    _wrap(cls, "_flush_baselines", "  baselines")
    _wrap(cls, "_galleries", "  galleries")
    _wrap(cls, "_describe_run", "  worst images, frames")
    _wrap(session, "write_report", "  documents and figures")
    _wrap(session, "write_html", "  HTML")

def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        with open(os.environ["SEGROBUST_PHASE_TIMES"], "w") as out:
            json.dump(_times, out)
"""


# Run in a copy with ``PYTHONPATH`` at it: the end phase of a run whose cells are the JSON report's.
PHASE_ONLY = """
import json, sys, time
from pathlib import Path
import torch
torch.set_num_threads(1)
from pytest_segrobust.engine.runner import CellRunner
from pytest_segrobust.run.session import SegRobustSession
from pytest_segrobust.runtime.options import Options
from pytest_segrobust.report import write_report
from pytest_segrobust.report.html import write_html

root = Path.cwd()
options = Options(enabled=True, update_baselines=False, suites_dir=root / "suites", baselines_dir=root / "baselines",
                  report_path=root / "segrobust-report", report_html=True)
session = SegRobustSession(CellRunner(options, root))
for path in sorted((root / "suites").glob("*.yaml")):
    session.suite(path)
report = json.loads(Path(sys.argv[1]).read_text())
for key in ("warnings", "environment"):
    report.pop(key, None)
for suite in report["suites"].values():
    for key in ("figures", "worst_images", "worst_expressions", "frame_kept"):
        suite.pop(key, None)
session.report = report
times = {}
def timed(label, work):
    cpu = time.process_time()
    result = work()
    times[label] = time.process_time() - cpu
    return result
galleries = timed("galleries", session._galleries)
pictures = timed("worst images, frames (models run again)", session._describe_run)
written = timed("documents and figures", lambda: write_report(report, root / "segrobust-report", galleries, pictures))
page = timed("HTML", lambda: write_html(report, root / "segrobust-report"))
times["figures"] = sum(1 for p in written if p.suffix == ".png")
times["HTML MB"] = page.stat().st_size / 1e6
times["PNG MB"] = sum(p.stat().st_size for p in written if p.suffix == ".png") / 1e6
print(json.dumps(times))
"""


def phase_only(tree: Path, report_json: Path) -> dict[str, float]:
    for old in tree.glob("segrobust-report*"):
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", PHASE_ONLY, str(report_json)],
        check=True,
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def copy_tree(revision: str | None, into: Path, source: Path | None = None) -> Path:
    """The project's files at ``revision`` (``None``: the working tree, untracked files too; or the
    folder ``source``) in ``into``."""
    if source is not None:
        shutil.copytree(source, into)
    elif revision is not None:
        into.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", revision], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    else:
        try:
            listed = subprocess.run(
                ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True, capture_output=True
            ).stdout.decode()
        except (OSError, subprocess.CalledProcessError):  # a copy without the repository: its files, less outputs
            ignored = shutil.ignore_patterns(".git", "segrobust-report*", "__pycache__", "bench-*", ".whl")
            shutil.copytree(ROOT, into, ignore=ignored)
        else:
            into.mkdir(parents=True)
            for name in filter(None, listed.split("\0")):
                source_file = ROOT / name
                if source_file.is_file() and not name.startswith("bench-"):
                    (into / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source_file, into / name)
    (into / "segrobust_phase_timer.py").write_text(TIMER)
    return into


def measure(tree: Path, workers: int, extra: list[str]) -> dict[str, object]:
    for old in tree.glob("segrobust-report*"):
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    times = tree / "phase-times.json"
    env = {**os.environ, "PYTHONPATH": str(tree), "SEGROBUST_PHASE_TIMES": str(times)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--segrobust",
            "--segrobust-report-html",
            "-n",
            str(workers),
            "-p",
            "no:cacheprovider",
            "-p",
            "segrobust_phase_timer",
            "--segrobust-device",
            "cpu",
            *extra,
        ],
        check=False,
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
    pngs = [p for p in tree.rglob("*.png") if "segrobust-report" in str(p.relative_to(tree))]
    html = tree / "segrobust-report.html"
    return {
        "exit": done.returncode,
        "run": (wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)),
        "phases": json.loads(times.read_text()) if times.exists() else {},
        "figures": len(pngs),
        "in root": sum(1 for p in pngs if p.parent == tree),
        "html MB": html.stat().st_size / 1e6 if html.exists() else float("nan"),
        "wrote lines": sum(1 for line in done.stdout.splitlines() if line.startswith("wrote ")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", metavar="REV", help="also measure the project at this commit")
    parser.add_argument(
        "-n", dest="workers", type=int, action="append", help="xdist workers (repeatable; default 0 and 2)"
    )
    parser.add_argument("--compare-tree", metavar="DIR", type=Path, help="also measure the project copy in DIR")
    parser.add_argument("--load-plugin", action="store_true", help="load the plugin with -p (not installed)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--report-only", metavar="REPORT_JSON", type=Path, help="time the report phase alone")
    args = parser.parse_args()
    extra = ["-p", "pytest_segrobust.plugin"] if args.load_plugin else []
    with tempfile.TemporaryDirectory() as folder:
        trees = {"working tree": copy_tree(None, Path(folder, "now"))}
        if args.compare:
            trees = {args.compare: copy_tree(args.compare, Path(folder, "before")), **trees}
        elif args.compare_tree:
            trees = {str(args.compare_tree): copy_tree(None, Path(folder, "before"), args.compare_tree), **trees}
        if args.report_only:
            phases: dict[str, list[dict[str, float]]] = {}
            for _ in range(args.rounds):
                for name, tree in trees.items():  # interleaved
                    phases.setdefault(name, []).append(phase_only(tree, args.report_only.resolve()))
                    print(f"done: {name}: {phases[name][-1]}", flush=True)
            report = json.loads(args.report_only.read_text())
            compute = sum(
                c["seconds"] for s in report["suites"].values() for m in s["models"].values() for c in m["cells"]
            )
            print(f"\nreport phase alone, CPU seconds on one thread; the run's cells took {compute:.0f} s of compute")
            print("| step | " + " | ".join(phases) + " |")
            print("|---|" + "---:|" * len(phases))
            for step in next(iter(phases.values()))[0]:
                print(
                    f"| {step} | "
                    + " | ".join(" / ".join(f"{run[step]:.2f}" for run in runs) for runs in phases.values())
                    + " |"
                )
            return
        results: dict[tuple[str, int], list[dict[str, object]]] = {}
        for _ in range(args.rounds):
            for workers in args.workers or [0, 2]:
                for name, tree in trees.items():  # interleaved: load drifts alike over both
                    results.setdefault((name, workers), []).append(measure(tree, workers, extra))
                    print(f"done: {name}, -n {workers}: {results[(name, workers)][-1]}", flush=True)
    print(f"demo, pytest --segrobust --segrobust-report-html, {args.rounds} round(s); seconds wall / CPU")
    for (name, workers), runs in results.items():
        print(f"\n{name}, -n {workers}")
        print("| step | wall s | CPU s |")
        print("|---|---:|---:|")
        for run in runs:
            print(f"| whole run (exit {run['exit']}) | {run['run'][0]:.1f} | {run['run'][1]:.1f} |")
            for label, (wall, cpu) in run["phases"].items():
                print(f"| {label} | {wall:.1f} | {cpu:.1f} |")
            print(
                f"| figures written: {run['figures']} ({run['in root']} in the root); HTML {run['html MB']:.2f} MB; "
                f"{run['wrote lines']} `wrote` lines in the terminal | | |"
            )


if __name__ == "__main__":
    main()
