"""pytest hooks: each one forwards an event to the run's :class:`SegRobustSession`.

pytest loads this module in every project where the package is installed, so it imports
nothing heavy: torch, the corruption catalogue and the session load only when ``--segrobust``
is given or a test requests the ``segrobust`` fixture. Without either, every hook returns at once.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_segrobust import backends
from pytest_segrobust.backends.shard_environment import parse_shard
from pytest_segrobust.backends.shard_plan import SHARD_FLAG
from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.wording import plural
from pytest_segrobust.run import hookspecs
from pytest_segrobust.run.junit import CACHED_PROPERTY, JunitClassnames
from pytest_segrobust.run.stash import PAYLOAD_KEY, REGISTRY_KEY, SESSION_KEY
from pytest_segrobust.runtime import allocator, arguments, threads
from pytest_segrobust.runtime.devices import parse_device, worker_index

# ``--segrobust-figures``: every figure and picture of the report, or none of them (the tables alone).
FIGURE_CHOICES = ("all", "none")
DEFAULT_CACHE_SIZE_MB = 2048  # what the result cache may hold (--segrobust-cache-size, ini segrobust_cache_size)

if TYPE_CHECKING:
    from pytest_segrobust.corruptions import CorruptionRegistry
    from pytest_segrobust.run.fixture import Harness
    from pytest_segrobust.run.items import SuiteFile
    from pytest_segrobust.run.session import SegRobustSession


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("segrobust", "segmentation robustness gate")
    switch = functools.partial(group.addoption, action="store_true")  # an on/off flag
    switch("--segrobust", help="run the robustness suites (YAML in the suites folder)")
    switch(
        "--segrobust-update-baselines",
        help="accept the current numbers as the new baselines (written once, at the end)",
    )
    switch(
        "--segrobust-prune",
        help="remove baseline entries (models, splits, corruptions, severities) the suites no longer have",
    )
    group.addoption(
        "--segrobust-report",
        metavar="PATH",
        help="report path without suffix: PATH.md and PATH.json are written (out/run.1 -> out/run.1.md; "
        "a final .md, .json or .html is dropped)",
    )
    switch(
        "--segrobust-report-html",
        help="also write the report as one self-contained HTML page beside the .md (sortable tables, figures embedded)",
    )
    group.addoption(
        "--segrobust-figures",
        choices=FIGURE_CHOICES,
        default="all",
        help="all (default): the report's figures, galleries and worst images; none: the tables, JSON and "
        "markdown alone (no PNG, no pictures measured; faster)",
    )
    group.addoption(
        "--segrobust-device",
        type=parse_device,
        default=parse_device("auto"),
        metavar="DEVICE",
        help="auto (default: cuda if available), cpu, mps, cuda (xdist workers spread over GPUs) or cuda:N",
    )
    group.addoption(
        "--segrobust-no-cache",
        action="store_true",
        help="measure every clean result and cell instead of reading the result cache (and store none)",
    )
    group.addoption(
        "--segrobust-cache-dir",
        metavar="DIR",
        help="folder of the result cache (clean results and cells), relative to rootdir; shareable between CI "
        "jobs (default: pytest's cache folder, .pytest_cache/d/segrobust-results)",
    )
    group.addoption(
        "--segrobust-cache-size",
        type=arguments.positive_integer,
        metavar="MB",
        help=f"MiB the result cache may hold; at the end of a run the entries used longest ago are removed until "
        f"it fits (default {DEFAULT_CACHE_SIZE_MB})",
    )
    group.addoption(
        "--segrobust-amp", action="store_true", help="run torch modules under autocast (float16 on CUDA, bfloat16 on CPU)"
    )
    group.addoption(
        "--segrobust-batch-size", type=arguments.positive_integer, metavar="N", help="images per forward pass (overrides the suites)"
    )
    group.addoption(
        "--segrobust-loader-workers",
        type=arguments.non_negative_integer,
        default=0,
        metavar="N",
        help="processes reading samples ahead of the model (default 0: read inline)",
    )
    group.addoption(
        "--segrobust-sample-cache",
        type=arguments.non_negative_integer,
        default=None,
        metavar="MB",
        help="MiB of decoded samples each process keeps across a dataset's cells (default: an eighth of the "
        "machine's memory over the xdist workers, at most 1024; 0: decode in every cell)",
    )
    group.addoption(
        "--segrobust-timeout",
        type=arguments.seconds,
        metavar="SECONDS",
        help="fail a cell that runs longer than this (overrides the suites' 'timeout'; default: no limit)",
    )
    group.addoption(
        SHARD_FLAG,
        type=parse_shard,
        metavar="K/N|auto",
        help="run shard K of N of the cells and write <report>-shard-K-of-N.json instead of the report "
        "and the baselines; `segrobust merge` turns the N files into the report. auto (or auto/N): K and N "
        "from a Kubernetes Indexed Job, Slurm array, GitLab parallel: or CircleCI job's environment",
    )
    group.addoption(
        "--segrobust-dist",
        choices=("model", "load"),
        default="model",
        help="how -n spreads cells over xdist workers: model (default: a model's cells on one worker, which "
        "builds it once; a large model's cells in a few runs) or load (xdist's own --dist load); "
        "another --dist mode is left to xdist",
    )
    group.addoption(
        "--segrobust-malloc",
        choices=allocator.CHOICES,
        default=allocator.DEFAULT,
        help="tuned (default): on glibc, large blocks from the heap and freed memory kept for reuse, which saves "
        "the page faults of every batch for about 10%% more peak memory; system: malloc as the C library set it",
    )
    group.addoption(
        threads.FLAG,
        type=threads.parse,
        metavar="N|auto",
        help="threads each process computes on (torch, OpenCV, ONNX Runtime): N, or auto (the default): "
        "OMP_NUM_THREADS if set, else the cores shared out between the xdist workers (cores // N under -n N)",
    )
    backends.add_options(group)
    parser.addini("segrobust_threads", f"default of {threads.FLAG}: N or auto", default=threads.AUTO)
    parser.addini("segrobust_suites", "folder of robustness suites, relative to rootdir", default="suites")
    parser.addini("segrobust_baselines", "folder of baseline files, relative to rootdir", default="baselines")
    parser.addini("segrobust_report", "report path without suffix, relative to rootdir", default="segrobust-report")
    parser.addini("segrobust_cache_dir", "default of --segrobust-cache-dir (relative to rootdir)", default="")
    parser.addini("segrobust_cache_size", "default of --segrobust-cache-size (MiB)", default=str(DEFAULT_CACHE_SIZE_MB))





def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "segrobust: a robustness cell collected from a suite file")
    if _enabled(config):
        segrobust = start_session(config)
        config.stash[_WATCH_KEY] = watch = _InterruptWatch()
        config.pluginmanager.register(watch, "segrobust-interrupt-watch")
        is_cell = lambda nodeid: segrobust.is_suite_file(config.rootpath / nodeid.split("::")[0])
        config.pluginmanager.register(JunitClassnames(config, is_cell), "segrobust-junit-classnames")
        # `pytest --segrobust` with no paths means "run the gate": collect the suites folder.
        if config.args_source != pytest.Config.ArgsSource.ARGS:
            config.args = [str(segrobust.options.suites_dir)]
        else:
            segrobust.collect_explicitly(config.args, config.invocation_params.dir)
        under_xdist = hasattr(config, "workerinput") or _is_xdist_controller(config)
        segrobust.backend = backends.create(config, segrobust.runner, under_xdist=under_xdist)
        if (shard := config.getoption("segrobust_shard")) is not None:
            from pytest_segrobust.backends.shards import ShardBackend

            segrobust.backend = ShardBackend.around(segrobust.backend, shard, config, segrobust.runner)


def _enabled(config: pytest.Config) -> bool:
    return bool(
        config.getoption("segrobust")
        or config.getoption("segrobust_update_baselines")
        or config.getoption("segrobust_prune")
        or config.getoption("segrobust_shard")
    )


def _session(config: pytest.Config) -> SegRobustSession | None:
    """The run's session, if the gate is on or the fixture started one."""
    return config.stash.get(SESSION_KEY, None)


def run_registry(config: pytest.Config) -> CorruptionRegistry:
    """The run's corruptions: the built-in presets, then installed plugins, then conftest hooks.

    Built on the first call and kept in ``config.stash``, so each run (each in-process
    pytester run too) has its own and nothing registered in one is seen by another.
    """
    registry = config.stash.get(REGISTRY_KEY, None)
    if registry is not None:
        return registry
    from pytest_segrobust.corruptions import CorruptionRegistry

    registry = config.stash[REGISTRY_KEY] = CorruptionRegistry.builtin()
    registry.load_entry_points()
    # Historic: a conftest.py loaded later (in a sub-folder, during collection) still registers.
    config.hook.pytest_segrobust_register_corruptions.call_historic(kwargs={"registry": registry})
    return registry


def start_session(config: pytest.Config) -> SegRobustSession:
    """Load torch and the catalogue, build the run's corruption registry and create the session.

    Also how ``segrobust merge`` builds the session of a run from the rootdir's configuration.
    """
    import torch

    from pytest_segrobust.engine.runner import CellRunner
    from pytest_segrobust.report.paths import report_base
    from pytest_segrobust.run.session import SegRobustSession
    from pytest_segrobust.runtime.options import Options

    root = config.rootpath
    enabled = _enabled(config)
    choice = config.getoption("segrobust_device")
    try:
        device = choice.resolve(worker_index(getattr(config, "workerinput", {}).get("workerid")))
    except SegRobustError as exc:
        if enabled:
            raise pytest.UsageError(str(exc)) from None
        device = torch.device("cpu")  # the gate is off: the fixture falls back to the CPU
    cache = getattr(config, "cache", None)  # absent under -p no:cacheprovider
    options = Options(
        enabled=enabled,
        update_baselines=config.getoption("segrobust_update_baselines"),
        suites_dir=root / config.getini("segrobust_suites"),
        baselines_dir=root / config.getini("segrobust_baselines"),
        report_path=report_base(root / (config.getoption("segrobust_report") or config.getini("segrobust_report"))),
        report_html=config.getoption("segrobust_report_html"),
        figures=config.getoption("segrobust_figures") != "none",
        device=device,
        cache_dir=_cache_dir(config),
        cache_size_mb=_cache_size(config),
        statistics_dir=None if cache is None else cache.mkdir("segrobust-statistics"),
        amp=config.getoption("segrobust_amp"),
        batch_size=config.getoption("segrobust_batch_size"),
        loader_workers=config.getoption("segrobust_loader_workers"),
        sample_cache_mb=config.getoption("segrobust_sample_cache"),
        timeout=config.getoption("segrobust_timeout"),
        prune=config.getoption("segrobust_prune"),
        malloc=config.getoption("segrobust_malloc"),
        threads=_thread_choice(config),
    )
    if enabled:  # the process that runs the gate; plain pytest and the fixture alone leave malloc alone
        allocator.configure(options.malloc)
    runner = CellRunner(options, root, registry=run_registry(config), adapt_hook=config.hook.pytest_segrobust_adapt_model)
    segrobust = config.stash[SESSION_KEY] = SegRobustSession(runner)
    config.stash[_THREADS_BEFORE_KEY] = threads.count()
    threads.apply(threads.choose(options.threads, workers=_xdist_workers(config)))
    return segrobust


def _cache_dir(config: pytest.Config) -> Path | None:
    """The result cache's folder: ``--segrobust-cache-dir`` (or its ini value) under the rootdir, else
    pytest's cache folder; ``None`` under ``--segrobust-no-cache`` or without either."""
    if config.getoption("segrobust_no_cache"):
        return None
    named = config.getoption("segrobust_cache_dir") or str(config.getini("segrobust_cache_dir"))
    if named:
        return config.rootpath / Path(named).expanduser()
    cache = getattr(config, "cache", None)  # absent under -p no:cacheprovider
    return None if cache is None else cache.mkdir("segrobust-results")


def _cache_size(config: pytest.Config) -> int:
    """``--segrobust-cache-size``, else the ``segrobust_cache_size`` ini value (checked as the flag is)."""
    chosen = config.getoption("segrobust_cache_size")
    if chosen is not None:
        return int(chosen)
    try:
        return arguments.positive_integer(str(config.getini("segrobust_cache_size")))
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option segrobust_cache_size: {exc} (MiB the result cache may hold)") from None


def _thread_choice(config: pytest.Config) -> int | str:
    """``--segrobust-threads``, else the ``segrobust_threads`` ini value (checked as the flag is)."""
    chosen = config.getoption("segrobust_threads")
    if chosen is not None:
        return chosen
    text = str(config.getini("segrobust_threads"))
    try:
        return threads.parse(text)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option segrobust_threads: {exc}") from None


def _xdist_workers(config: pytest.Config) -> int:
    """The xdist workers that evaluate side by side (0 without xdist), in a worker and in the controller alike.

    N workers each running torch's default of one thread per core oversubscribe the CPU
    N-fold, which made ``-n 2`` twice as slow as ``-n 0`` on two cores.
    """
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return int(workerinput.get("workercount", 1))
    numprocesses = getattr(config.option, "numprocesses", None)
    return numprocesses if isinstance(numprocesses, int) else 0


_THREADS_BEFORE_KEY = pytest.StashKey[int]()


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    segrobust = _session(config)
    if segrobust is None:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    xdist = hasattr(config, "workerinput") or _is_xdist_controller(config)
    if reporter is None or capture is None or xdist or not reporter.isatty or config.get_verbosity() < 0:
        return
    from pytest_segrobust.runtime.progress import TerminalProgress

    writer = config.get_terminal_writer()
    segrobust.progress_bar = TerminalProgress(
        writer, capture.global_and_fixture_disabled, room=lambda: writer.fullwidth - writer.width_of_current_line
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    if (segrobust := _session(config)) is not None:
        segrobust.close()
    if (before := config.stash.get(_THREADS_BEFORE_KEY, None)) is not None:
        import torch

        torch.set_num_threads(before)  # the count is the run's: an in-process run (pytester) leaves its host as it was


def pytest_report_header(config: pytest.Config) -> list[str]:
    segrobust = _session(config)
    if segrobust is None or not segrobust.options.enabled:
        return []
    options = segrobust.options
    mode = "updating baselines" if options.update_baselines else "comparing with baselines"
    cache = (
        f"clean results cached in {options.cache_dir} (--segrobust-no-cache to recompute)"
        if options.cache_dir
        else "clean results not cached"
    )
    if options.cache_dir:
        cache += f"; cells too, up to {options.cache_size_mb} MiB (--segrobust-cache-size)"
    lines = [
        f"segrobust: suites in {options.suites_dir}, {mode} in {options.baselines_dir}",
        f"segrobust: device {options.device}{' (autocast)' if options.amp else ''}; {cache}",
    ]
    if (setting := allocator.current()) is not None:
        lines.append(f"segrobust: malloc {setting.describe()}")
    if (chosen := threads.current()) is not None:
        lines.append(f"segrobust: {chosen.describe()}")
    return lines + segrobust.backend.header()


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, object, object]:
    """The backend holds its workers from the selected cells' submission until the last one
    (or ``-x``, or Ctrl-C)."""
    config = session.config
    segrobust = _session(config)
    if segrobust is None or not segrobust.options.enabled:
        return (yield)
    collection_failed = session.testsfailed and not config.option.continue_on_collection_errors
    if not (config.getoption("collectonly") or collection_failed):  # pytest's loop runs nothing then
        from pytest_segrobust.run.items import SuiteItem

        segrobust.backend.start([(i.nodeid, i.suite, i.key) for i in session.items if isinstance(i, SuiteItem)])
    try:
        return (yield)
    finally:
        segrobust.stop_backend()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> SuiteFile | None:
    segrobust = _session(parent.config)
    if segrobust is not None and segrobust.options.enabled and segrobust.is_suite_file(file_path):
        from pytest_segrobust.run.items import SuiteFile

        return SuiteFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(trylast=True)  # after -k, -m and --deselect: a backend (the shards) selects from what they selected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    segrobust = _session(config)
    if segrobust is None or not segrobust.options.enabled:
        return
    from pytest_segrobust.run.items import ROBUSTNESS_ITEMS

    cells = [item for item in items if isinstance(item, ROBUSTNESS_ITEMS)]
    ours = set(segrobust.backend.select([(item.nodeid, item.suite, item.key) for item in cells]))
    others = [item for item in cells if item.nodeid not in ours]
    if others:
        items[:] = [item for item in items if not isinstance(item, ROBUSTNESS_ITEMS) or item.nodeid in ours]
        config.hook.pytest_deselected(items=others)


def pytest_collection_finish(session: pytest.Session) -> None:
    segrobust = _session(session.config)
    if segrobust is not None and segrobust.options.enabled and not _is_xdist_controller(session.config):
        from pytest_segrobust.run.items import ROBUSTNESS_ITEMS

        segrobust.scope.expect([i.nodeid for i in session.items if isinstance(i, ROBUSTNESS_ITEMS)], collected_here=True)


def pytest_deselected(items: list[pytest.Item]) -> None:
    segrobust = _session(items[0].config) if items else None
    if segrobust is not None and segrobust.options.enabled:
        from pytest_segrobust.run.items import ROBUSTNESS_ITEMS

        segrobust.scope.deselect([i.nodeid for i in items if isinstance(i, ROBUSTNESS_ITEMS)])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    segrobust = _session(node.config)
    if segrobust is not None and segrobust.options.enabled:
        segrobust.scope.expect([nodeid for nodeid in ids if segrobust.is_suite_file(node.config.rootpath / nodeid.split("::")[0])])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    payload = getattr(item, "segrobust_payload", None)
    if call.when == "call" and payload is not None:
        report.segrobust = payload  # type: ignore[attr-defined]
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    try:
        return (yield)
    finally:
        # As record_property would: JUnit XML (--junitxml) shows them, xdist ships them with the report.
        if (segrobust := _session(item.config)) is not None:
            item.user_properties.extend(segrobust.cell_properties(item.nodeid))


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    """A cell whose numbers came from the result cache shows ``PASSED (cached)`` (or failed...) under ``-v``."""
    if report.when != "call" or (CACHED_PROPERTY, True) not in report.user_properties:
        return None
    letters = {"passed": ".", "failed": "F", "skipped": "s"}
    return report.outcome, letters.get(report.outcome, "?"), f"{report.outcome.upper()} (cached)"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # On the xdist controller, reports arrive from workers (decorated with the worker node).
    payload = getattr(report, "segrobust", None)
    node = getattr(report, "node", None)
    if node is None or (segrobust := _session(node.config)) is None:
        return
    if payload is not None:
        segrobust.absorb_cell(payload)
    elif report.failed:  # xdist's report for the cell a worker was running when it died
        lines = report.longreprtext.strip().splitlines()
        segrobust.fail_without_result(report.nodeid, lines[-1] if lines else "failed without a result")


def _is_xdist_controller(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    # Asked before xdist's own (trylast); None leaves the choice to xdist.
    segrobust = _session(config)
    if segrobust is None or not segrobust.options.enabled or config.getvalue("dist") != "load":
        return None
    if config.getoption("segrobust_dist") != "model":
        return None
    from pytest_segrobust.backends.xdist import ModelGroupScheduling

    return ModelGroupScheduling(config, log, is_cell=lambda nodeid: segrobust.is_suite_file(config.rootpath / nodeid.split("::")[0]))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    payload = getattr(node, "workeroutput", {}).get(PAYLOAD_KEY)
    if payload is not None and (segrobust := _session(node.config)) is not None:  # type: ignore[attr-defined]
        segrobust.absorb(payload)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    segrobust = _session(config)
    if segrobust is None:
        return
    segrobust.interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
    if hasattr(config, "workerinput"):
        config.workeroutput[PAYLOAD_KEY] = segrobust.payload()  # type: ignore[attr-defined]
        return
    if segrobust.backend.writes_later and config.getoption("collectonly"):
        return  # a shard that evaluated nothing must not overwrite its file from a real run
    segrobust.scope.selection = _selection(config)
    segrobust.scope.stop_reason = _why_stopped(session, config.stash.get(_WATCH_KEY, None))
    segrobust.finish()
    segrobust.prune_cache()  # after every worker has written its entries
    if segrobust.problems and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # what was not written must not go unnoticed


class _InterruptWatch:
    """Keeps why the run was interrupted: Ctrl-C, or xdist stopping it for ``-x`` or ``--sw``.

    A plugin object, because ``pytest_keyboard_interrupt`` is given no config to keep it on.
    """

    def __init__(self) -> None:
        self.message: str | None = None

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self.message = str(excinfo.value)


_WATCH_KEY = pytest.StashKey[_InterruptWatch]()


def _why_stopped(session: pytest.Session, watch: _InterruptWatch | None) -> str | None:
    """Why the selected cells still without a result never ran, in the user's terms; ``None`` if the run did not stop."""
    config = session.config
    interrupt = watch.message if watch is not None else None
    text = str(session.shouldfail or session.shouldstop or interrupt or "")
    if session.shouldfail or text.startswith("stopping after"):  # pytest's and xdist's words for -x / --maxfail
        maxfail = config.getoption("maxfail", 0) or 1
        flag = "-x" if maxfail == 1 else f"--maxfail={maxfail}"
        return f"the run stopped after {plural(maxfail, 'failure')} ({flag})"
    if config.getoption("stepwise", False) and text:
        return "--sw stopped the run at the first failure; the next --sw run starts from it"
    if interrupt is not None or session.shouldstop or session.exitstatus == pytest.ExitCode.INTERRUPTED:
        return "the run was interrupted" + (f" ({text})" if text and text != "True" else "")
    return None


def _selection(config: pytest.Config) -> list[str]:
    """The options that selected cells, as the user typed them (shown beside the deselected cells)."""
    parts = [f"{flag} {shlex.quote(value)}" for flag, name in (("-k", "keyword"), ("-m", "markexpr")) if (value := config.getoption(name, ""))]
    parts += [f"--deselect {shlex.quote(value)}" for value in config.getoption("deselect", None) or []]
    parts += [flag for flag, name in (("--lf", "lf"), ("--sw", "stepwise")) if config.getoption(name, False)]
    return parts


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    segrobust = _session(config)
    if segrobust is None:
        return
    # A run that selected cells and evaluated none writes nothing, and says so (--co is silent).
    nothing = (
        segrobust.options.enabled
        and not segrobust.backend.writes_later
        and not (segrobust.records or segrobust.errors or segrobust.model_outcomes)
        and not config.getoption("collectonly")
    )
    if not (segrobust.report or segrobust.written or segrobust.problems or segrobust.baseline_summary or nothing):
        return
    from pytest_segrobust.report import terminal_summary

    terminalreporter.section("segrobust")
    if nothing:
        terminalreporter.write_line("no cell was evaluated: no report written, the last one is left as it was")
    for problem in segrobust.problems:
        terminalreporter.write_line(f"error: {problem}", red=True, bold=True)
    for warning in segrobust.warnings:  # what the report could not show; the run's outcome stands
        terminalreporter.write_line(f"warning: {warning}", yellow=True)
    # -q: the verdict, what went wrong and where the report is; not the tables or every file.
    brief = config.get_verbosity() < 0
    for line in terminal_summary(segrobust.report, brief=brief) if segrobust.report else []:
        terminalreporter.write_line(line)
    for line in segrobust.device_notices():
        terminalreporter.write_line(line, yellow=True)
    for line in [] if brief else segrobust.cache_summary():
        terminalreporter.write_line(line)
    for line in segrobust.baseline_summary:
        if not (brief and line.startswith(" ")):  # a changed cell's old -> new line
            terminalreporter.write_line(line)
    for line in written_lines(segrobust.written):
        terminalreporter.write_line(line)
    # The section's last line, where a reviewer looks: the run's verdict, or a shard's on its own cells.
    concluded = segrobust.conclusion
    if concluded is not None and concluded.verdict is not None and concluded.line:
        passed = concluded.verdict.passed
        terminalreporter.write_line(concluded.line, bold=True, green=passed, red=not passed)
    elif (last := segrobust.last_verdict()) is not None:
        terminalreporter.write_line(last.line(), bold=True, green=last.passed, red=not last.passed)


def written_lines(written: list[Path]) -> list[str]:
    """One ``wrote`` line per document (baselines, report), and one for all the figures, per folder."""
    documents = [path for path in written if path.suffix != ".png"]
    folders: dict[Path, int] = {}
    for path in written:
        if path.suffix == ".png":
            folders[path.parent] = folders.get(path.parent, 0) + 1
    lines = [f"wrote {path}" for path in documents]
    lines += [f"wrote {plural(count, 'figure')} to {folder}{os.sep}" for folder, count in folders.items()]
    return lines


@pytest.fixture
def segrobust(request: pytest.FixtureRequest) -> Harness:
    """Evaluate a model under a named corruption: ``segrobust.evaluate(model, dataset, corruption, severity)``."""
    from pytest_segrobust.run.fixture import Harness

    return Harness(_session(request.config) or start_session(request.config))
