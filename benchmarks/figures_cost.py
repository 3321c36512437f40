"""What the report's figures and pictures cost a small run, before and after, by CPU time.

Runs ``pytest --segrobust`` in two small projects, each against two copies of the plugin (the
working tree and ``--compare-tree DIR``, a ``git archive`` of another commit), interleaved
round by round so that load on a shared machine drifts alike over both:

* ``bands``: the test suite's 5-cell project (tests/plugin_project.py, tests/fakes.py), its
  baselines recorded once per copy, then compared;
* ``vos``: a 5-cell video project (``--vos DIR``, a folder with ``suites/`` and its modules).

Each run is a subprocess; its CPU seconds are its children's (``getrusage``), every thread.
The working tree is also run with ``--segrobust-figures=none`` where it has the option.
``--tests FILE ...`` times those test files once per copy (``pytest -p no:cacheprovider``,
the copy on ``PYTHONPATH``), interleaved too.

    python benchmarks/figures_cost.py --compare-tree /tmp/before [--vos DIR] [--rounds 3] [--tests tests/test_plugin.py]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _cpu_of(command: list[str], cwd: Path, tree: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds (children, every thread) of ``command``, with ``tree`` importable first."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if done.returncode not in (0, 1):
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
    return wall, cpu, done.returncode


def bands_project(into: Path) -> Path:
    from tests.fakes import FAKES_SOURCE
    from tests.plugin_project import SUITE

    (into / "suites").mkdir(parents=True)
    (into / "segrobust_fakes.py").write_text(FAKES_SOURCE)
    (into / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (into / "suites" / "bands.yaml").write_text(SUITE.format(smoothing=5))
    return into


def vos_project(source: Path, into: Path) -> Path:
    shutil.copytree(source, into, ignore=shutil.ignore_patterns("segrobust-report*", "__pycache__", ".pytest_cache"))
    return into


def _clear(project: Path) -> None:
    for old in project.glob("segrobust-report*"):
        shutil.rmtree(old) if old.is_dir() else old.unlink()


def gate(project: Path, tree: Path, *extra: str) -> tuple[float, float, int]:
    _clear(project)
    return _cpu_of(
        [sys.executable, "-m", "pytest", "--segrobust", "-p", "no:cacheprovider", "-q", *extra], project, tree
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare-tree", metavar="DIR", type=Path, required=True, help="the other copy of the project")
    parser.add_argument("--vos", metavar="DIR", type=Path, help="a 5-cell vos project (suites/ and its modules)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tests", nargs="*", default=[], help="test files or folders to time once per copy")
    args = parser.parse_args()
    trees = {"before": args.compare_tree.resolve(), "after": ROOT}
    rows: dict[str, list[tuple[float, float, int]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        projects: dict[str, dict[str, Path]] = {}
        for name, tree in trees.items():
            projects[name] = {"bands": bands_project(Path(folder, name, "bands"))}
            if args.vos:
                projects[name]["vos"] = vos_project(args.vos, Path(folder, name, "vos"))
            for project in projects[name].values():  # baselines recorded once by each copy
                gate(project, tree, "--segrobust-update-baselines")
        for _ in range(args.rounds):
            for project_name in projects["after"]:
                for name, tree in trees.items():
                    runs = [(f"{project_name}, {name}", ())]
                    if name == "after":
                        runs.append(
                            (f"{project_name}, {name}, --segrobust-figures=none", ("--segrobust-figures=none",))
                        )
                    for label, extra in runs:
                        rows.setdefault(label, []).append(gate(projects[name][project_name], tree, *extra))
                        print(f"done: {label}: {rows[label][-1]}", flush=True)
        for target in args.tests:
            for name, tree in trees.items():
                command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x", str(tree / target)]
                rows.setdefault(f"tests {target}, {name}", []).append(_cpu_of(command, tree, tree))
                print(f"done: tests {target}, {name}: {rows[f'tests {target}, {name}'][-1]}", flush=True)
    print("\nCPU seconds (children, every thread) per run; min over rounds, then each round; exit status")
    print("| run | CPU s (min) | CPU s (rounds) | wall s (min) | exit |")
    print("|---|---:|---|---:|---|")
    for label, runs in rows.items():
        cpus = " / ".join(f"{cpu:.1f}" for _, cpu, _ in runs)
        exits = ",".join(str(code) for *_, code in runs)
        print(f"| {label} | {min(c for _, c, _ in runs):.1f} | {cpus} | {min(w for w, _, _ in runs):.1f} | {exits} |")


if __name__ == "__main__":
    main()
