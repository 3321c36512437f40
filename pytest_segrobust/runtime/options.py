"""The run's settings, parsed once from the command line and the ini file: what every process
that evaluates cells is told about the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch


@dataclass(frozen=True)
class Options:
    """The command-line and ini settings of a run, parsed once.

    Attributes:
        device: Where models, corruptions and metrics run in this process.
        cache_dir: Folder of the result cache (clean results and corrupted cells,
            :mod:`pytest_segrobust.engine.result_cache`); ``None`` disables it.
        cache_size_mb: MiB the result cache may hold once the run has ended (its entries used
            longest ago are removed first); ``None``: never pruned by this run.
        statistics_dir: Folder of the statistics files of suites with ``gate: {statistics:
            cache}`` (in pytest's cache, kept with ``--segrobust-no-cache`` too); ``None``
            without pytest's cache.
        amp: Run ``nn.Module`` models under autocast.
        batch_size: Overrides every suite's batch size when set.
        loader_workers: Processes reading samples ahead of the model.
        sample_cache_mb: MiB of decoded samples each process keeps across a dataset's cells
            (0: every cell reads and decodes its dataset again; None: sized from the machine's
            memory and the worker count, :func:`~pytest_segrobust.data.sample_cache.default_budget`).
        timeout: Seconds a cell may take; overrides every suite's ``timeout`` when set.
        prune: Remove the baseline entries the suites no longer have (``--segrobust-prune``).
        report_html: Also write the report as one self-contained HTML page beside the markdown.
        figures: Draw the report's figures and measure its pictures (galleries, worst images);
            ``False`` (``--segrobust-figures=none``): the tables, JSON and markdown alone.
        malloc: What the processes that evaluate cells do to glibc's ``malloc``
            (:mod:`pytest_segrobust.runtime.allocator`): the plugin applies it in its own process,
            a Ray actor in its own.
        threads: ``--segrobust-threads``: ``auto`` or the count each process that evaluates
            cells computes on (:mod:`pytest_segrobust.runtime.threads`).
    """

    enabled: bool
    update_baselines: bool
    suites_dir: Path
    baselines_dir: Path
    report_path: Path
    report_html: bool = False
    figures: bool = True
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    cache_dir: Path | None = None
    cache_size_mb: int | None = None
    statistics_dir: Path | None = None
    amp: bool = False
    batch_size: int | None = None
    loader_workers: int = 0
    sample_cache_mb: int | None = None
    timeout: float | None = None
    prune: bool = False
    malloc: str = "system"
    threads: int | str = "auto"
