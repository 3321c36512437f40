"""PNG figures for the report, drawn with matplotlib when it is installed (never required).

Figures keep a bounded size however many models and corruptions a suite has: panels wrap
into rows, the legend sits outside the panels, and the page never grows past a cap.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_segrobust.scores import mean

if TYPE_CHECKING:
    from pytest_segrobust.records import CellRecord

# Severity plot: panels per row, the size of one panel, and the figure's largest size (inches).
PANELS_PER_ROW = 4
PANEL_SIZE = (3.4, 2.6)
MAX_FIGURE = (16.0, 18.0)
LEGEND_WIDTH = 2.4
# Pixels per inch of the PNGs: a 7-inch plot is 700 pixels, as wide as a report page shows it.
DPI = 100
_LINE_STYLES = ("-", "--", ":", "-.")


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
    """One small panel per model (wrapped, shared axes): score against severity, a line per corruption.

    A corruption keeps its colour and line style in every panel, and one legend outside the
    panels names them all. The figure grows with the number of models up to
    :data:`MAX_FIGURE`, then its panels shrink instead.
    """
    plt = _pyplot()
    if plt is None:
        return None
    names = list(dict.fromkeys(r.corruption for records in models.values() for r in records if r.severity > 0))
    columns = min(PANELS_PER_ROW, max(1, len(models)))
    rows = -(-len(models) // columns)
    width = min(MAX_FIGURE[0], columns * PANEL_SIZE[0] + LEGEND_WIDTH)
    height = min(MAX_FIGURE[1], rows * PANEL_SIZE[1] + 0.8)
    fig, axes = plt.subplots(rows, columns, figsize=(width, height), squeeze=False, sharex=True, sharey=True)
    colours = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    small = 7 if rows * columns > 8 else 8
    for ax, (model, records) in zip(axes.flat, models.items()):
        clean = records[0].clean_score if records else math.nan
        for index, name in enumerate(names):
            points = sorted((r.severity, r.score) for r in records if r.corruption == name and r.severity > 0)
            if not points:
                continue
            style = _LINE_STYLES[(index // colours.N) % len(_LINE_STYLES)]
            xs, ys = [0, *(s for s, _ in points)], [clean, *(v for _, v in points)]
            ax.plot(xs, ys, marker="o", markersize=2.5, linewidth=1.2, color=colours(index % colours.N), linestyle=style, label=name)
        ax.set_title(model, fontsize=small + 1)
        ax.set_xticks(range(0, 6))
        ax.tick_params(labelsize=small)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(models) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel(metric, fontsize=small)
    for column in range(columns):
        # The lowest visible panel of each column carries the x label.
        visible = [axes[r][column] for r in range(rows) if axes[r][column].get_visible()]
        if visible:
            visible[-1].set_xlabel("severity (0 = clean)", fontsize=small)
            visible[-1].xaxis.set_tick_params(labelbottom=True)
    handles, labels = next(((h, lab) for h, lab in (ax.get_legend_handles_labels() for ax in axes.flat) if h), ([], []))
    legend_share = LEGEND_WIDTH / width
    fig.tight_layout(rect=(0, 0, 1 - legend_share, 1))
    if handles:
        fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1 - legend_share + 0.01, 0.5), fontsize=small, frameon=False)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def heatmap(models: dict[str, list[CellRecord]], path: Path, near_chance: Collection[str] = ()) -> Path | None:
    """Mean relative robustness γr per model (rows) and corruption (columns).

    The colour scale is centred on γr = 1 (the corrupted score equals the clean one) and is
    not capped there: red below, blue above, equally strong at equal distances, so a model
    that gains under a corruption is told apart from a robust one instead of showing as the
    best. Models in ``near_chance`` are marked in their label: their γr compares noise with noise.
    """
    plt = _pyplot()
    if plt is None:
        return None
    from matplotlib.colors import Normalize

    names = list(dict.fromkeys(r.corruption for records in models.values() for r in records if r.severity > 0))
    grid = [
        [mean(r.gamma_r for r in records if r.corruption == name and r.gamma_r is not None) for name in names]
        for records in models.values()
    ]
    finite = [v for row in grid for v in row if math.isfinite(v)]
    # Symmetric about 1, so a gain and a loss of one size look equally strong; it reaches at
    # least 0 (all lost) and 2, and further where a value lies beyond.
    reach = max([1.0, *(abs(v - 1.0) for v in finite)])
    norm = Normalize(vmin=1.0 - reach, vmax=1.0 + reach)
    width = min(MAX_FIGURE[0], max(4.0, 0.55 * len(names) + 3.0))
    height = min(MAX_FIGURE[1], 0.4 * len(models) + 2.2)
    fig, ax = plt.subplots(figsize=(width, height))
    image = ax.imshow(grid, cmap="RdBu", norm=norm, aspect="auto")
    labels = [f"{m} (near chance)" if m in near_chance else m for m in models]
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(models)), labels, fontsize=8)
    if len(names) * len(models) <= 400:  # beyond that the numbers cannot be read: the colour says it
        for i, row in enumerate(grid):
            for j, value in enumerate(row):
                # Dark ink on pale cells, white on the saturated ends of the scale.
                ink = "white" if math.isfinite(value) and abs(float(norm(value)) - 0.5) > 0.35 else "black"
                ax.text(j, i, "–" if math.isnan(value) else f"{value:.2f}", ha="center", va="center", fontsize=7, color=ink)
    fig.colorbar(image, ax=ax, label="mean γr over severities")
    ax.set_title("Relative robustness γr (1 = unchanged)")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
