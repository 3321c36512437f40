"""PNG figures for the report, drawn with matplotlib when it is installed (never required)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_segrobust.scores import mean

if TYPE_CHECKING:
    from pytest_segrobust.records import CellRecord


def _pyplot():  # type: ignore[no-untyped-def]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def available() -> bool:
    return _pyplot() is not None


def severity_plot(models: dict[str, list[CellRecord]], metric: str, path: Path) -> Path | None:
    """One panel per model: score against severity 0..5, a line per corruption."""
    plt = _pyplot()
    if plt is None:
        return None
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.2), squeeze=False, sharey=True)
    for ax, (model, records) in zip(axes[0], models.items()):
        clean = records[0].clean_score
        names = list(dict.fromkeys(r.corruption for r in records if r.severity > 0))
        for index, name in enumerate(names):
            points = sorted((r.severity, r.score) for r in records if r.corruption == name and r.severity > 0)
            xs, ys = [0, *(s for s, _ in points)], [clean, *(v for _, v in points)]
            ax.plot(xs, ys, marker="o", markersize=3, label=name, linestyle="-" if index < 10 else "--")
        ax.set_title(model)
        ax.set_xlabel("severity")
        ax.set_xticks(range(0, 6))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(metric)
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def heatmap(models: dict[str, list[CellRecord]], path: Path) -> Path | None:
    """Mean relative robustness γr per model (rows) and corruption (columns)."""
    plt = _pyplot()
    if plt is None:
        return None
    names = list(dict.fromkeys(r.corruption for records in models.values() for r in records if r.severity > 0))
    grid = [
        [mean(r.gamma_r for r in records if r.corruption == name and r.gamma_r is not None) for name in names]
        for records in models.values()
    ]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * len(names) + 2), 0.6 * len(models) + 1.8))
    lowest = min([0.0, *(v for row in grid for v in row if math.isfinite(v))])
    image = ax.imshow(grid, cmap="RdYlGn", vmin=lowest, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(models)), list(models), fontsize=8)
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            ax.text(j, i, "–" if math.isnan(value) else f"{value:.2f}", ha="center", va="center", fontsize=7)
    fig.colorbar(image, ax=ax, label="mean γr over severities")
    ax.set_title("Relative robustness γr")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
