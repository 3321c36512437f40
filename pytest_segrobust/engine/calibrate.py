"""``segrobust calibrate``: how much a suite's numbers move when only the execution changes.

A gate's margin means something only above the numeric noise of the model it gates. This
re-runs a suite's cells under every execution the run could see (batch sizes, autocast on
and off, TF32 on and off where CUDA has it, every available device) and reports, per cell,
the largest change of the score and of gamma_r from the reference execution (the suite's
batch size, float32, TF32 off, the first device). A margin (``gate.margin``, or the
``tolerance`` of a point-value suite) below a cell's noise is named: that gate would fail or
be inconclusive on a model that did not change.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch

from pytest_segrobust.core.wording import decimals, plural
from pytest_segrobust.engine.evaluation import CLEAN, CellResult
from pytest_segrobust.engine.workbench import Workbench
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.suite.schema import Suite


@dataclass(frozen=True)
class Execution:
    """One way to run a suite's model."""

    device: torch.device
    batch_size: int
    amp: bool = False
    tf32: bool = False

    @property
    def label(self) -> str:
        parts = [str(self.device), f"batch {self.batch_size}"]
        parts += ["autocast"] if self.amp else []
        parts += ["TF32"] if self.tf32 else []
        return ", ".join(parts)


@dataclass(frozen=True)
class CellNoise:
    """How far one cell's numbers moved from the reference execution, at most.

    Attributes:
        score, gamma_r: The reference execution's numbers (``gamma_r`` ``None`` for clean).
        score_noise, gamma_r_noise: The largest absolute change over the other executions.
        worst: The execution of the largest score change.
    """

    key: CellKey
    score: float
    gamma_r: float | None
    score_noise: float
    gamma_r_noise: float
    worst: str


def available_devices() -> list[torch.device]:
    """The CPU, then each CUDA device and MPS where present."""
    devices = [torch.device("cpu")]
    devices += [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        devices.append(torch.device("mps"))
    return devices


def executions(batch_size: int, devices: Sequence[torch.device]) -> list[Execution]:
    """The reference (first device, ``batch_size``, float32), then every variation of one thing at a time:
    batch 1 and twice the size, autocast, TF32 (CUDA), and each other device."""
    first = devices[0]
    reference = Execution(first, batch_size)
    variants = [reference, replace(reference, batch_size=1), replace(reference, batch_size=2 * batch_size)]
    variants.append(replace(reference, amp=True))
    variants += [replace(reference, device=d) for d in devices[1:]]
    variants += [Execution(d, batch_size, tf32=True) for d in devices if d.type == "cuda"]
    return variants


@contextmanager
def _tf32(enabled: bool) -> Iterator[None]:
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def measure(
    bench_for: Callable[[Execution], Workbench],
    suite: Suite,
    cells: Sequence[CellKey],
    variants: Sequence[Execution],
    progress: Callable[[str], None] | None = None,
) -> list[CellNoise]:
    """Evaluate ``cells`` under each execution; the noise of each cell against the first.

    Args:
        bench_for: Makes the :class:`Workbench` of an execution.
        progress: Called with a line per execution as it starts.
    """
    results: dict[Execution, dict[CellKey, CellResult]] = {}
    for execution in variants:
        if progress is not None:
            progress(f"{suite.name}: {execution.label}")
        bench = bench_for(execution)
        with _tf32(execution.tf32):
            results[execution] = {key: bench.cell(suite, key)[0] for key in cells}
    reference, others = variants[0], variants[1:]
    noises = []
    for key in cells:
        base = results[reference][key]
        gamma = None if key.severity == 0 else base.gamma_r
        worst, score_noise, gamma_noise = reference.label, 0.0, 0.0
        for execution in others:
            other = results[execution][key]
            change = abs(other.score - base.score)
            if not math.isfinite(change) or change > score_noise:
                worst, score_noise = execution.label, change
            if gamma is not None:
                moved = abs(other.gamma_r - gamma)
                gamma_noise = max(gamma_noise, moved if math.isfinite(moved) else math.inf)
        noises.append(CellNoise(key, base.score, gamma, score_noise, gamma_noise, worst))
    return noises


def margins(suite: Suite) -> tuple[str, float, float]:
    """What the suite's gate allows the headline metric: ``(kind, score, gamma_r)``."""
    kind, allowed = ("gate.margin", suite.gate.margin) if suite.gate is not None else ("tolerance", suite.tolerance)
    return kind, allowed.score_of(suite.metric), allowed.gamma_r_of(suite.metric)


def report_lines(suite: Suite, noises: Sequence[CellNoise]) -> tuple[list[str], list[str]]:
    """The table of a suite's noise, and a warning per cell whose noise reaches the margin."""
    kind, score_margin, gamma_margin = margins(suite)
    lines = [
        f"suite {suite.name}: numeric noise per cell (largest change from the reference execution)",
        f"  {'cell':<44} {'score':>8} {'±score':>9} {'γr':>7} {'±γr':>9}  largest score change under",
    ]
    warnings = []
    for n in noises:
        cell = n.key.label.removeprefix(f"{suite.name}::")
        gamma = "–" if n.gamma_r is None else decimals(n.gamma_r, 4)
        gamma_noise = "–" if n.gamma_r is None else f"{n.gamma_r_noise:.2e}"
        lines.append(f"  {cell:<44} {n.score:>8.3f} {n.score_noise:>9.2e} {gamma:>7} {gamma_noise:>9}  {n.worst}")
        if _reaches(n.score_noise, score_margin) or (n.gamma_r is not None and _reaches(n.gamma_r_noise, gamma_margin)):
            warnings.append(
                f"{n.key.label}: numeric noise (score ±{n.score_noise:.3g}, γr ±{n.gamma_r_noise:.3g}) reaches the "
                f"suite's {kind} (score {score_margin:g}, γr {gamma_margin:g}); an unchanged model can fail it"
            )
    return lines, warnings


def _reaches(noise: float, margin: float) -> bool:
    """Whether a cell's noise reaches a margin; a NaN noise (a number that broke) reaches any."""
    return not noise < margin


def calibration_verdict(suite: Suite, noises: Sequence[CellNoise]) -> tuple[bool, str]:
    """Whether every margin of the suite stands above the noise, and the line that says so, last:
    ``FAIL · noise reaches gate.margin.gamma_r 0.001 in 2 of 6 cells (largest ±0.0031, s::m::rotate::3)``."""
    kind, score_margin, gamma_margin = margins(suite)
    numbers = [
        ("score", score_margin, [(n.score_noise, n) for n in noises]),
        ("gamma_r", gamma_margin, [(n.gamma_r_noise, n) for n in noises if n.gamma_r is not None]),
    ]
    reached, below = [], []
    for number, margin, found in numbers:
        if not found:
            continue
        worst, cell = max(found, key=lambda pair: (not math.isfinite(pair[0]), pair[0]))
        over = [n for noise, n in found if _reaches(noise, margin)]
        name = f"{kind}.{number} {margin:g}"
        if over:
            where = f"largest ±{worst:.3g}, {cell.key.label}"
            reached.append(f"{name} in {len(over)} of {plural(len(found), 'cell')} ({where})")
        else:
            below.append(f"{name} (largest noise ±{worst:.3g})")
    cells = plural(len(noises), "cell")
    if reached:
        return False, f"FAIL · {cells}: the numeric noise reaches {' and '.join(reached)}; an unchanged model can fail"
    return True, f"PASS · {cells}: every margin stands above the numeric noise: {', '.join(below)}"


def cells_at(suite: Suite, severities: Sequence[int] | None) -> list[CellKey]:
    """Each model's clean cell and every corruption at ``severities`` (default: the suite's middle one);
    a cell that draws its own levels (a dynamic mixture) at the one severity it runs at."""
    chosen = list(severities) if severities else [suite.severities[len(suite.severities) // 2]]
    corrupted = [
        (c, s)
        for c in suite.corruptions
        for s in (chosen if suite.cell_severities(c) == suite.severities else suite.cell_severities(c))
    ]
    return [
        CellKey(suite.name, model.name, corruption, severity, split)
        for model in suite.models
        for split in suite.splits
        for corruption, severity in [(CLEAN, 0), *corrupted]
    ]
