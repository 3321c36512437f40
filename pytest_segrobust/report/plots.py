"""PNG figures for the report, drawn with matplotlib when it is installed (never required).

Figures keep a bounded size however many models and corruptions a suite has: panels wrap
into rows, the legend sits outside the panels, and the page never grows past a cap.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_segrobust.metrics.robustness import mean

if TYPE_CHECKING:
    from pytest_segrobust.store.records import CellRecord

# Severity plot: panels per row, the size of one panel, and the figure's largest size (inches).
PANELS_PER_ROW = 4
PANEL_SIZE = (3.4, 2.6)
MAX_FIGURE = (16.0, 18.0)
LEGEND_WIDTH = 2.4
# Pixels per inch of the PNGs: a 7-inch plot is 700 pixels, as wide as a report page shows it.
DPI = 100
# zlib's level for the PNGs: 1 compresses a plot's flat colours almost as well as the default 6
# (a few percent larger) at a fraction of the time.
PNG_COMPRESSION = 1
_LINE_STYLES = ("-", "--", ":", "-.")
# Width of one character of an 8-point label, in inches: margins are laid out from the labels'
# lengths instead of by tight_layout, which draws the figure once more to measure them.
_CHARACTER = 0.075


def _matplotlib():  # type: ignore[no-untyped-def]
    """matplotlib's ``Figure`` and Agg canvas, or ``None`` where matplotlib is not installed.

    Figures are drawn on their own Agg canvas: no pyplot, so no global figure registry to
    close and nothing shared between figures or with the user's pyplot state.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure, FigureCanvasAgg


def available() -> bool:
    return _matplotlib() is not None


def _new_figure(size: tuple[float, float]):  # type: ignore[no-untyped-def]
    drawing = _matplotlib()
    if drawing is None:
        return None
    figure_class, canvas_class = drawing
    fig = figure_class(figsize=size, dpi=DPI)
    canvas_class(fig)
    return fig


def _save(fig, path: Path) -> Path:  # type: ignore[no-untyped-def]
    fig.savefig(path, dpi=DPI, pil_kwargs={"compress_level": PNG_COMPRESSION})
    return path


def severity_plot(models: dict[str, list[CellRecord]], metric: str, path: Path) -> Path | None:
    """One small panel per model (wrapped, shared axes): score against severity, a line per corruption.

    A corruption keeps its colour and line style in every panel, and one legend outside the
    panels names them all. The figure grows with the number of models up to
    :data:`MAX_FIGURE`, then its panels shrink instead.
    """
    if _matplotlib() is None:
        return None
    from matplotlib import colormaps

    names = list(dict.fromkeys(r.corruption for records in models.values() for r in records if r.severity > 0))
    columns = min(PANELS_PER_ROW, max(1, len(models)))
    rows = -(-len(models) // columns)
    width = min(MAX_FIGURE[0], columns * PANEL_SIZE[0] + LEGEND_WIDTH)
    height = min(MAX_FIGURE[1], rows * PANEL_SIZE[1] + 0.8)
    fig = _new_figure((width, height))
    # A fixed layout (inches): the y label and ticks on the left, the x label and ticks below, each
    # panel's title above it, the legend in its own strip on the right.
    panel_height = (height - 0.95) / rows
    fig.subplots_adjust(
        left=0.75 / width,
        right=1 - LEGEND_WIDTH / width,
        bottom=0.6 / height,
        top=1 - 0.35 / height,
        wspace=0.12,
        hspace=min(0.8, 0.75 / max(panel_height - 0.75, 0.5)),
    )
    axes = fig.subplots(rows, columns, squeeze=False, sharex=True, sharey=True)
    colours = colormaps["tab10" if len(names) <= 10 else "tab20"]
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
        ax.set_xticks(range(6))
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
    if handles:
        legend_share = LEGEND_WIDTH / width
        fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1 - legend_share + 0.01, 0.5), fontsize=small, frameon=False)
    return _save(fig, path)


def heatmap(models: dict[str, list[CellRecord]], path: Path, near_chance: Collection[str] = ()) -> Path | None:
    """Mean relative robustness γr per model (rows) and corruption (columns).

    The colour scale is centred on γr = 1 (the corrupted score equals the clean one) and is
    not capped there: red below, blue above, equally strong at equal distances, so a model
    that gains under a corruption is told apart from a robust one instead of showing as the
    best. Models in ``near_chance`` are marked in their label: their γr compares noise with noise.
    """
    if _matplotlib() is None:
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
    labels = [f"{m} (near chance)" if m in near_chance else m for m in models]
    # Margins from the labels' lengths: the corruptions' names run down at 45 degrees below the
    # grid, the models' names left of it; the colour bar and its label on the right.
    below = 0.3 + 0.6 * _CHARACTER * max((len(n) for n in names), default=0)
    left = 0.25 + _CHARACTER * max((len(m) for m in labels), default=0)
    width = min(MAX_FIGURE[0], max(4.0, 0.55 * len(names) + 3.0, left + 0.55 * len(names) + 1.6))
    height = min(MAX_FIGURE[1], max(0.4 * len(models) + 2.2, below + 0.4 * len(models) + 0.6))
    fig = _new_figure((width, height))
    fig.subplots_adjust(
        left=min(0.45, left / width), right=1 - 0.15 / width, bottom=min(0.6, below / height), top=1 - 0.4 / height
    )
    ax = fig.subplots()
    image = ax.imshow(grid, cmap="RdBu", norm=norm, aspect="auto")
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
    return _save(fig, path)
