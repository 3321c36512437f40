"""What ``--segrobust-threads`` does to a serial gate: wall time and CPU time per thread count.

Runs ``pytest --segrobust suites/demo.yaml -k EXPR -p no:cacheprovider`` (no xdist, clean
results recomputed) in fresh processes, once per setting and round, the settings in
alternating order (forwards, then backwards) so that a slow phase of a shared machine hits
them alike. For each: the process's wall time and its CPU time (user + system, from
``getrusage`` of the child), and the header's thread line. ``torch-default`` passes no flag
and sets ``OMP_NUM_THREADS`` nowhere: what the main process ran on before the option
(``auto`` gives the same count where no other rule applies: all cores, no xdist).

    python benchmarks/threads.py [--rounds 2] [-k "tiny-unet and (clean or gaussian_noise)"]
                                 [--settings 1 auto 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_gate(setting: str, expression: str, report: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, the header's thread line) of one serial gate run."""
    command = [sys.executable, "-m", "pytest", "--segrobust", "suites/demo.yaml", "-k", expression]
    command += ["-p", "no:cacheprovider", "-q", "--segrobust-report", str(report)]
    if setting != "torch-default":
        command += ["--segrobust-threads", setting]
    command += ["-o", "console_output_style=classic", "--segrobust-malloc", "tuned"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{setting}: pytest exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    header = next((line for line in done.stdout.splitlines() if "per process" in line), "-")
    return wall, cpu, header.removeprefix("segrobust: ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("-k", default="tiny-unet and (clean or gaussian_noise)")
    parser.add_argument("--settings", nargs="+", default=["1", "auto", "torch-default"])
    args = parser.parse_args()
    walls: dict[str, list[float]] = {s: [] for s in args.settings}
    cpus: dict[str, list[float]] = {s: [] for s in args.settings}
    headers: dict[str, str] = {}
    print(f"cores: {len(os.sched_getaffinity(0))}, load average at start: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(args.rounds):
            order = args.settings if round_index % 2 == 0 else list(reversed(args.settings))
            for setting in order:
                wall, cpu, headers[setting] = run_gate(setting, args.k, Path(tmp) / f"report-{setting}")
                walls[setting].append(wall)
                cpus[setting].append(cpu)
                print(f"  round {round_index + 1} {setting}: wall {wall:.1f} s, cpu {cpu:.1f} s", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    print(f"\n{'setting':<15} {'wall s (median)':>16} {'cpu s (median)':>15}  threads (header)")
    for setting in args.settings:
        print(
            f"{setting:<15} {statistics.median(walls[setting]):>16.1f} {statistics.median(cpus[setting]):>15.1f}  "
            f"{headers[setting]}"
        )


if __name__ == "__main__":
    main()
