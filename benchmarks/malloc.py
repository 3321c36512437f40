"""What glibc's default ``malloc`` costs the gate, and what ``--segrobust-malloc tuned`` saves.

glibc serves each large block (a model's activations, a batch) with a fresh ``mmap`` and
gives memory back on ``free``, so every batch faults its pages in again and the kernel
zeroes them (see :mod:`pytest_segrobust.runtime.allocator`). Each workload runs in fresh processes,
one per setting and round, the settings in alternating order (forwards, then backwards) so
that a slow phase of a shared machine hits them alike:

* ``gate``: ``pytest --segrobust suites/demo.yaml -k EXPR -p no:cacheprovider`` with
  ``--segrobust-malloc system`` and ``tuned``: the process's wall time, the sum of its cells'
  seconds (from the report), its minor page faults, kernel CPU time and peak RSS. The reports
  must be identical less their timing (:func:`~pytest_segrobust.report.without_timing`):
  the setting must not change a number.
* ``predict``: the adapted model's ``predict`` on decoded batches (``--model``, as in
  ``benchmarks/overhead.py``, whose data and models it uses), one warm-up pass, then
  ``--passes`` timed passes: milliseconds and page faults per image in the timed passes, and
  the process's peak RSS.

``--settings env`` adds the ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``
environment variables (set before the interpreter starts) with ``system``: the in-process
``tuned`` should match them.

    python benchmarks/malloc.py [--workloads gate predict] [--rounds 3] [-k "tiny-unet and rotate"]
                                [--model segformer-b0] [--images 8] [--size 512] [--batch 8] [--passes 2]
                                [--settings system tuned env]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# What the environment-variable remedy sets: the same values as ``tuned``.
ENV_TUNING = {"MALLOC_MMAP_THRESHOLD_": str(2**31 - 1), "MALLOC_TRIM_THRESHOLD_": str(2**63 - 1)}


def child_predict(args: argparse.Namespace) -> None:
    """In a fresh process: time ``predict`` under ``args.malloc`` and print one JSON line."""
    import resource

    from pytest_segrobust.runtime import allocator

    allocator.configure(args.malloc)  # first, as the plugin does: before the model allocates
    import torch
    from overhead import build_model, write_dataset  # this folder's overhead benchmark

    with tempfile.TemporaryDirectory() as tmp:
        dataset = write_dataset(Path(tmp), args.images, args.size)
        model = build_model(args.model, torch.device("cpu"), Path(tmp))
        starts = range(0, args.images, args.batch)
        batches = [
            torch.stack([dataset[j].image for j in range(i, min(i + args.batch, args.images))]).float() / 255 for i in starts
        ]
        with torch.inference_mode():
            for batch in batches:  # warm-up: first-call kernels, and the heap grown once
                model.predict(batch)
            before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            for _ in range(args.passes):
                for batch in batches:
                    model.predict(batch)
            seconds, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    images = args.images * args.passes
    print(json.dumps({
        "ms_per_image": 1000 * seconds / images,
        "faults_per_image": (after.ru_minflt - before.ru_minflt) / images,
        "kernel_ms_per_image": 1000 * (after.ru_stime - before.ru_stime) / images,
    }))


def run_child(command: list[str], env: dict[str, str]) -> tuple[float, Any, str]:
    """Wall seconds, resource usage and stdout of ``command`` run to its end in a fresh process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage, out


def environment(setting: str) -> tuple[str, dict[str, str]]:
    """The ``--segrobust-malloc`` choice and the environment a child runs ``setting`` with."""
    env = {key: value for key, value in os.environ.items() if key not in ENV_TUNING}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    if setting == "env":
        return "system", {**env, **ENV_TUNING}
    return setting, env


def measure_gate(setting: str, args: argparse.Namespace, folder: Path) -> tuple[dict[str, float], dict[str, Any]]:
    """One gate run: its figures, and its report less timing."""
    from pytest_segrobust.report import without_timing

    choice, env = environment(setting)
    folder.mkdir()
    command = [
        sys.executable, "-m", "pytest", "--segrobust", args.suite, "-k", args.k, "-p", "no:cacheprovider", "-q",
        "--segrobust-report", str(folder / "report"), "--segrobust-malloc", choice,
    ]
    wall, usage, out = run_child(command, env)
    report_file = folder / "report.json"
    if not report_file.exists():
        report_file = folder / "report-partial.json"  # a -k selection is a partial run
    if not report_file.exists():
        raise SystemExit(f"gate run ({setting}) wrote no report:\n{out[-3000:]}")
    report = json.loads(report_file.read_text())
    cells = [cell for suite in report["suites"].values() for model in suite["models"].values() for cell in model["cells"]]
    figures = {
        "wall s": wall,
        "cells s": sum(cell["seconds"] for cell in cells),
        "minor faults": usage.ru_minflt,
        "kernel CPU s": usage.ru_stime,
        "user CPU s": usage.ru_utime,
        "peak RSS MiB": usage.ru_maxrss / 1024,
    }
    return figures, without_timing(report)


def measure_predict(setting: str, args: argparse.Namespace) -> dict[str, float]:
    """One ``predict`` run in a fresh process."""
    choice, env = environment(setting)
    command = [
        sys.executable, __file__, "--child-predict", "--malloc", choice, "--model", args.model,
        "--images", str(args.images), "--size", str(args.size), "--batch", str(args.batch), "--passes", str(args.passes),
    ]
    _, usage, out = run_child(command, env)
    try:
        row = json.loads(out.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise SystemExit(f"predict run ({setting}) failed:\n{out[-3000:]}") from None
    return {
        "ms/img": row["ms_per_image"],
        "faults/img": row["faults_per_image"],
        "kernel ms/img": row["kernel_ms_per_image"],
        "peak RSS MiB": usage.ru_maxrss / 1024,
    }


def number(value: float) -> str:
    """``1,234`` for counts and large figures, ``12.3`` for the rest."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.1f}"


def print_table(title: str, runs: dict[str, list[dict[str, float]]], baseline: str = "system") -> None:
    """Min and median of each figure per setting, and each median's change from ``baseline``'s."""
    names = list(next(iter(runs.values()))[0])
    print(f"{title}\n")
    print(f"| setting | {' | '.join(f'{n} min | {n} median' for n in names)} |")
    print(f"|---|{'---:|---:|' * len(names)}")
    medians = {s: {n: statistics.median(r[n] for r in rows) for n in names} for s, rows in runs.items()}
    for setting, rows in runs.items():
        cells = []
        for name in names:
            low, mid = min(r[name] for r in rows), medians[setting][name]
            change = ""
            if setting != baseline and baseline in medians and medians[baseline][name]:
                change = f" ({100 * (mid - medians[baseline][name]) / medians[baseline][name]:+.0f}%)"
            cells.append(f"{number(low)} | {number(mid)}{change}")
        print(f"| {setting} | {' | '.join(cells)} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", choices=("gate", "predict"), default=["gate", "predict"])
    parser.add_argument("--settings", nargs="+", choices=("system", "tuned", "env"), default=["system", "tuned"])
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per setting and workload")
    parser.add_argument("--suite", default="suites/demo.yaml")
    parser.add_argument("-k", default="tiny-unet and rotate", help="the gate run's cells (pytest -k)")
    parser.add_argument("--model", choices=("tiny", "wide", "segformer-b0"), default="segformer-b0")
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--passes", type=int, default=2, help="timed passes over the images in each predict run")
    parser.add_argument("--child-predict", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--malloc", default="system", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_predict:
        child_predict(args)
        return

    gate: dict[str, list[dict[str, float]]] = {s: [] for s in args.settings}
    predict: dict[str, list[dict[str, float]]] = {s: [] for s in args.settings}
    reports: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for setting in args.settings if round_ % 2 == 0 else reversed(args.settings):
                if "gate" in args.workloads:
                    figures, report = measure_gate(setting, args, Path(tmp) / f"{setting}-{round_}")
                    gate[setting].append(figures)
                    reports[f"{setting}-{round_}"] = json.dumps(report, sort_keys=True)
                if "predict" in args.workloads:
                    predict[setting].append(measure_predict(setting, args))
    print(f"{args.rounds} rounds, settings interleaved in alternating order, one fresh process per run; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end\n")
    if "gate" in args.workloads:
        print_table(f"gate: pytest --segrobust {args.suite} -k {args.k!r} -p no:cacheprovider (whole process)", gate)
        same = len(set(reports.values())) == 1
        print(f"reports less timing identical across all {len(reports)} runs: {'yes' if same else 'NO'}\n")
    if "predict" in args.workloads:
        print_table(
            f"predict: {args.model} on {args.images} images of {args.size}x{args.size}, batch {args.batch}, "
            f"{args.passes} timed passes after one warm-up", predict,
        )
    if "gate" in args.workloads and len(set(reports.values())) != 1:
        raise SystemExit("the malloc setting changed the report")


if __name__ == "__main__":
    main()
