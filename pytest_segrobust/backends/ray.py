"""Evaluate a run's cells on a Ray cluster: ``pytest --segrobust --segrobust-backend ray``.

The pytest process stays the controller: it collects, selects (``-k``, ``--lf``...), gates,
reports and writes baselines, as without Ray. Only the evaluations move. Once the run's cells
are known, each (suite, model) gets one actor, a :class:`CellWorker` that builds the model and
the datasets once and evaluates its cells in the order pytest will run them; each cell's
:class:`~pytest_segrobust.engine.runner.Measurement` comes back as soon as it is done, and the
cell's item waits for it and gates it (:meth:`RayBackend.measurement`). With
``--segrobust-ray-split N``, each (suite, model) gets N actors instead, and each corrupted
cell's samples are cut into N pieces evaluated side by side, which the first actor merges
exactly (:mod:`pytest_segrobust.engine.pieces`).

An actor whose process dies is restarted once and the cell it was evaluating is retried (Ray's
``max_restarts`` and ``max_task_retries``); if it dies again, each of its cells without a result
fails, naming the cell and the actor. When the run stops early (``-x``, Ctrl-C), the actors are
killed and their outstanding cells dropped, so the report lists them as not run.

Ray is imported here, and only when the backend is chosen and the run starts
(:meth:`RayBackend.start`). Once the actors of a (suite, model) have measured their last cell,
the first of them draws the report's pictures of its cells (:mod:`pytest_segrobust.engine.report_pictures`)
before it goes.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_segrobust.backends import Backend, register_backend
from pytest_segrobust.backends.shard_plan import SHARD_FLAG
from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.wording import plural
from pytest_segrobust.runtime import arguments
from pytest_segrobust.runtime.devices import DeviceChoice

if TYPE_CHECKING:
    from pytest_segrobust.corruptions import CorruptionRegistry
    from pytest_segrobust.engine.pieces import Piece
    from pytest_segrobust.engine.runner import CellRunner, Measurement
    from pytest_segrobust.pictures.values import RunPictures
    from pytest_segrobust.runtime.options import Options
    from pytest_segrobust.store.baselines import CellKey
    from pytest_segrobust.suite.schema import Suite

logger = logging.getLogger("pytest_segrobust")

# A dead actor is started again once, and the cell it was running evaluated once more.
RESTARTS = 1
INSTALL_HINT = 'pip install "pytest-segrobust[ray]"'
# Where ray.init looks for a running cluster when it is given no address.
ADDRESS_VARIABLE = "RAY_ADDRESS"
# Seconds a stopped run waits for an actor's pictures (it may still finish the cell it was measuring).
PICTURES_TIMEOUT = 60.0


def _add_options(group: pytest.OptionGroup) -> None:
    """The backend's command-line options, in the plugin's option group."""
    group.addoption(
        "--segrobust-ray-address",
        metavar="ADDRESS",
        help="the Ray cluster of --segrobust-backend ray: auto (the running one), ray://HOST:PORT; "
        "default: start a local Ray instance for the run",
    )
    group.addoption(
        "--segrobust-ray-cpus",
        type=arguments.positive_number,
        default=1.0,
        metavar="N",
        help="CPU cores Ray reserves for each actor (default 1)",
    )
    group.addoption(
        "--segrobust-ray-gpus",
        type=arguments.non_negative_number,
        metavar="N",
        help="GPUs Ray reserves for each actor (default: 1 if the device resolves to cuda here, else 0)",
    )
    group.addoption(
        "--segrobust-ray-split",
        type=arguments.positive_integer,
        default=1,
        metavar="N",
        help="N actors per suite and model, each corrupted cell's samples cut into N consecutive ranges "
        "evaluated side by side and merged exactly (default 1: no split)",
    )


def _refuse(config: pytest.Config, *, under_xdist: bool) -> None:
    """Refuse what the backend cannot do, before anything runs.

    Args:
        config: The run's configuration (the gate is on).
        under_xdist: Whether this process is an xdist controller or worker.

    Raises:
        pytest.UsageError: under xdist, with ``--segrobust-shard`` or without Ray installed.
    """
    if under_xdist:
        raise pytest.UsageError(
            "--segrobust-backend ray spreads the cells over Ray actors itself: it cannot run under "
            "pytest-xdist (-n); drop -n, or use the local backend"
        )
    if config.getoption("segrobust_shard") is not None:
        raise pytest.UsageError(
            f"--segrobust-backend ray runs the whole run on one cluster: it cannot be combined with {SHARD_FLAG}; "
            "run the shards with the local backend"
        )
    if importlib.util.find_spec("ray") is None:
        raise pytest.UsageError(f"--segrobust-backend ray needs Ray, which is not installed: {INSTALL_HINT}")


@dataclass(frozen=True)
class RaySettings:
    """Where and with what each actor runs, parsed from the command line.

    Attributes:
        address: The cluster to join (``auto``, ``ray://host:10001``...); ``None`` starts a
            local Ray instance for the run (unless this process is already connected to one).
        cpus: CPU cores Ray reserves for each actor (its threads under ``--segrobust-threads auto``).
        gpus: GPUs Ray reserves for each actor; the model goes to ``cuda`` in the actor.
        device: The run's ``--segrobust-device``, resolved in each actor, on its own machine.
        split: Actors per (suite, model); each corrupted cell is cut into this many pieces.
    """

    address: str | None
    cpus: float
    gpus: float
    device: DeviceChoice
    split: int = 1

    def join(self) -> str | None:
        """The address for ``ray.init``: the option's, else ``None`` where ``RAY_ADDRESS`` names one
        (Ray reads it), else ``local``: a new instance, never the cluster a ``ray start`` on this
        machine left its address for, which ``ray.init`` would join given no address."""
        if self.address:
            return self.address
        return None if os.environ.get(ADDRESS_VARIABLE) else "local"

    def cluster(self) -> str:
        """The cluster the run joins, in words: the option's, else the one ``RAY_ADDRESS`` names
        (as ``ray.init`` reads it), else a local instance started for the run."""
        if self.address:
            return f"the Ray cluster at {self.address} (--segrobust-ray-address)"
        if os.environ.get(ADDRESS_VARIABLE):
            return f"the Ray cluster at {os.environ[ADDRESS_VARIABLE]} ({ADDRESS_VARIABLE})"
        return "a local Ray instance"

    @classmethod
    def of(cls, config: pytest.Config, runner: CellRunner) -> RaySettings:
        """The settings the command line gives, GPUs defaulting to the device resolved here."""
        gpus = config.getoption("segrobust_ray_gpus")
        return cls(
            address=config.getoption("segrobust_ray_address"),
            cpus=config.getoption("segrobust_ray_cpus"),
            gpus=gpus if gpus is not None else float(runner.options.device.type == "cuda"),
            device=config.getoption("segrobust_device"),
            split=config.getoption("segrobust_ray_split"),
        )


class CellWorker:
    """The body of one actor: one suite's model, built once, evaluating that model's cells.

    Args:
        options: The run's settings; the device is chosen again here, where the model runs.
        device: The run's device choice.
        rootpath: The project's rootdir (the same path on every node: a shared file system).
        registry: The run's corruptions, as the controller built them.
        cpus: The CPUs Ray reserved for this actor: its threads under ``--segrobust-threads auto``.
    """

    def __init__(
        self, options: Options, device: DeviceChoice, rootpath: Path, registry: CorruptionRegistry, cpus: float = 1.0
    ) -> None:
        from pytest_segrobust.engine.runner import CellRunner
        from pytest_segrobust.runtime import allocator, threads

        allocator.configure(options.malloc)  # the allocator is this process's: the controller's setting is not inherited
        threads.apply(threads.choose(options.threads, reserved_cpus=cpus))
        local = replace(options, device=device.resolve(None))
        self.runner = CellRunner(local, rootpath, registry=registry)

    def measure(self, suite_path: Path, key: CellKey, nodeid: str, pieces: Sequence[Any] = ()) -> Measurement:
        """Evaluate one cell; a failure comes back inside the measurement, never as an exception.

        Args:
            suite_path: The cell's suite file.
            key: The cell.
            nodeid: Its pytest node id.
            pieces: For a split cell, the references of its pieces but the first, which the
                model's other actors evaluate meanwhile; this actor evaluates the first and
                merges them (:mod:`pytest_segrobust.engine.pieces`).
        """
        from pytest_segrobust.engine.pieces import Split

        if not pieces:
            return self.runner.measure_remote(suite_path, key, nodeid)
        fetched: list[Piece] = []

        def others() -> list[Piece]:
            fetched.extend(_fetch(pieces, nodeid))
            return fetched

        measurement = self.runner.measure_remote(suite_path, key, nodeid, Split(1 + len(pieces), others))
        counts = Counter(measurement.cache_counts)  # the other actors' model builds count too
        for piece in fetched:
            counts.update(piece.cache_counts)
        return replace(measurement, cache_counts=dict(counts))

    def piece(self, suite_path: Path, key: CellKey, index: int, count: int) -> Piece:
        """Evaluate piece ``index`` of ``count`` of a split cell, for the actor that merges it."""
        return self.runner.piece(suite_path, key, index, count)

    def pictures(self, only: Sequence[str] | None = None) -> RunPictures:
        """The report's pictures of this actor's cells (of ``only``, those the controller recorded,
        where given), made while its model is still built."""
        return self.runner.pictures(None if only is None else set(only))


def _fetch(refs: Sequence[Any], nodeid: str) -> list[Piece]:
    """The pieces of a split cell, in order; the first that failed raises its own error, as the
    unsplit cell would have (the first failing sample's)."""
    import ray

    pieces = []
    for number, ref in enumerate(refs, start=2):
        try:
            pieces.append(ray.get(ref))
        except ray.exceptions.RayTaskError as exc:
            raise exc.cause from None
        except ray.exceptions.RayError as exc:
            raise SegRobustError(
                f"{nodeid}: the Ray actor evaluating piece {number} of {len(refs) + 1} of the cell gave no result: "
                f"{_summary(exc)}"
            ) from None
    return pieces


def _summary(exc: BaseException) -> str:
    """A Ray error in one line: its type and the first line of its message (Ray's run to many)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else 'no detail'}"


@dataclass
class _Cell:
    """A submitted cell: its result's reference, its other pieces' and the actors' (suite, model)."""

    ref: Any
    actor: tuple[str, str]
    nodeid: str
    pieces: list[Any]


@register_backend
class RayBackend(Backend):
    """The run's actors and the references of the cells they evaluate, by node id.

    :meth:`start` creates the actors and submits the cells; :meth:`measure` hands each item its
    cell's measurement and :meth:`close` kills what is left.

    Args:
        config: The run's configuration (the adapters its hook has, checked at the start).
        runner: The controller's cell runner: its options, rootdir, corruptions and progress bar.
        settings: The cluster and each actor's resources.
    """

    name = "ray"
    summary = "one Ray actor per suite and model; this process gates and reports"

    def __init__(self, config: pytest.Config, runner: CellRunner, settings: RaySettings) -> None:
        self._config = config
        self._runner = runner
        self.settings = settings
        self._ray: Any = None
        self._started_ray = False
        self._cells: dict[str, _Cell] = {}
        self._actors: dict[tuple[str, str], list[Any]] = {}
        self._groups: dict[tuple[str, str], Any] = {}  # placement groups of split models
        self._remaining: dict[tuple[str, str], int] = {}
        self._total = 0
        self._taken = 0
        self._taken_by: dict[tuple[str, str], list[str]] = {}  # the cells items took, by (suite, model)
        self._pictures: RunPictures | None = None  # each (suite, model)'s, asked of its actor after its last cell

    @classmethod
    def add_options(cls, group: pytest.OptionGroup) -> None:
        _add_options(group)

    @classmethod
    def create(cls, config: pytest.Config, runner: CellRunner, *, under_xdist: bool) -> RayBackend:
        _refuse(config, under_xdist=under_xdist)
        return cls(config, runner, RaySettings.of(config, runner))

    def header(self) -> list[str]:
        from pytest_segrobust.runtime import threads

        settings = self.settings
        cluster = settings.cluster()
        resources = f"{plural(float(settings.cpus), 'CPU')}, {plural(float(settings.gpus), 'GPU')} each"
        chosen = threads.choose(self._runner.options.threads, reserved_cpus=settings.cpus).describe()
        lines = [
            f"segrobust: cells evaluated on {cluster}, one actor per suite and model ({resources}); gated and reported here",
            f"segrobust: Ray actors: {chosen}",
        ]
        if settings.split > 1:
            lines.append(
                f"segrobust: --segrobust-ray-split {settings.split}: {settings.split} actors per suite and model, "
                "each corrupted cell's samples split over them"
            )
        return lines

    def start(self, cells: Sequence[tuple[str, Suite, CellKey]]) -> None:
        """Connect to Ray (or start it), create the actors of each (suite, model) and submit every
        cell; a model's aggregates item is decided here, from its cells' measurements.

        With ``settings.split`` N above 1, each (suite, model) has N actors: the first
        evaluates the clean cells and, of each corrupted cell, the first piece, which it
        merges with the N - 1 others, each evaluated by another actor.

        Raises:
            pytest.UsageError: for a run whose adapters the actors cannot call, or a cluster
                that does not start.
        """
        from pytest_segrobust.suite.requirements import MODEL_ITEM

        adapters = [impl.plugin_name for impl in self._config.hook.pytest_segrobust_adapt_model.get_hookimpls()]
        if adapters:
            raise pytest.UsageError(
                "--segrobust-backend ray: the actors cannot call the pytest_segrobust_adapt_model hook of "
                f"{', '.join(adapters)}; register the adapter with pytest_segrobust.models.adapters.register_adapter "
                "in a module the factory imports instead, "
                "or use the local backend"
            )
        cells = [(nodeid, suite, key) for nodeid, suite, key in cells if key.corruption != MODEL_ITEM]
        if cells:
            try:
                self._submit(cells)
            except SegRobustError as exc:
                raise pytest.UsageError(str(exc)) from None

    def _submit(self, cells: Sequence[tuple[str, Suite, CellKey]]) -> None:
        try:
            import ray
        except ImportError:
            raise SegRobustError(f"--segrobust-backend ray needs Ray, which is not installed: {INSTALL_HINT}") from None
        settings = self.settings
        self._ray, self._started_ray, self._total = ray, not ray.is_initialized(), len(cells)
        if self._started_ray:
            try:
                ray.init(address=settings.join(), include_dashboard=False, configure_logging=False)
            except Exception as exc:  # noqa: BLE001 - whatever Ray raised, say which cluster
                self._started_ray = False
                raise SegRobustError(
                    f"--segrobust-backend ray: Ray could not start or join {settings.cluster()}: {type(exc).__name__}: {exc}"
                ) from None
        try:
            worker = ray.remote(CellWorker)
            options = {
                "num_cpus": settings.cpus,
                "num_gpus": settings.gpus,
                "max_restarts": RESTARTS,
                "max_task_retries": RESTARTS,
                "runtime_env": {"env_vars": {"PYTHONPATH": _project_path(self._runner)}},
            }
            for nodeid, suite, key in cells:
                group = (str(suite.path), key.model)
                if group not in self._actors:
                    self._actors[group] = self._create(worker, options, group)
                lead, *others = self._actors[group]
                split = others if key.severity > 0 else []  # a clean cell is the model's clean result: not split
                pieces = [actor.piece.remote(suite.path, key, index, settings.split) for index, actor in enumerate(split, 1)]
                ref = lead.measure.remote(suite.path, key, nodeid, pieces)
                self._cells[nodeid] = _Cell(ref, group, nodeid, pieces)
                self._remaining[group] = self._remaining.get(group, 0) + 1
        except BaseException:
            self.close()
            raise
        actors = sum(map(len, self._actors.values()))
        logger.info("segrobust: %d cells submitted to %d Ray actors", len(cells), actors)

    def measure(self, suite: Suite, key: CellKey, nodeid: str) -> Measurement:
        """The cell's measurement by its actor (:meth:`measurement`)."""
        __tracebackhide__ = True
        return self.measurement(nodeid)

    def pictures(self) -> RunPictures | None:
        from pytest_segrobust.pictures.values import RunPictures

        return self._pictures or RunPictures()

    def _create(self, worker: Any, options: dict[str, Any], group: tuple[str, str]) -> list[Any]:
        """The actors of one (suite, model): one, or ``settings.split`` started together.

        A split model's actors wait for each other's pieces, so they are reserved as one
        placement group: all of them start or none does (two models each holding some of
        their actors, and waiting for the rest, would wait forever).
        """
        settings, runner = self.settings, self._runner
        arguments = (runner.options, settings.device, runner.rootpath, runner.registry, settings.cpus)
        if settings.split == 1:
            return [worker.options(**options).remote(*arguments)]
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle = {"CPU": settings.cpus} | ({"GPU": settings.gpus} if settings.gpus else {})
        self._groups[group] = reserved = placement_group([bundle] * settings.split, strategy="SPREAD")
        return [
            worker.options(**options, scheduling_strategy=PlacementGroupSchedulingStrategy(reserved, index)).remote(*arguments)
            for index in range(settings.split)
        ]

    def _release(self, group: tuple[str, str]) -> None:
        """Kill the actors of one (suite, model) and free what they reserved."""
        for actor in self._actors.pop(group):
            self._ray.kill(actor, no_restart=True)
        if group in self._groups:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self._groups.pop(group))

    def measurement(self, nodeid: str) -> Measurement:
        """Wait for the cell's measurement, showing the run's progress; the actor is released after its last cell.

        Raises:
            SegRobustError: when the cell was never submitted, or its actor died twice
                (once restarted and the cell retried) or could not start.
        """
        __tracebackhide__ = True
        cell = self._cells.pop(nodeid, None)
        if cell is None:
            raise SegRobustError(f"{nodeid}: the cell was not submitted to Ray when the run started")
        try:
            self._wait(cell)
            return self._ray.get(cell.ref)
        except self._ray.exceptions.RayError as exc:
            raise SegRobustError(
                f"{cell.nodeid}: the Ray actor of this model gave no result for the cell: {_summary(exc)} "
                "(an actor that dies is restarted once and the cell retried)"
            ) from None
        finally:
            self._taken += 1
            self._taken_by.setdefault(cell.actor, []).append(cell.nodeid)
            self._remaining[cell.actor] -= 1
            if self._remaining[cell.actor] == 0:  # their GPUs or cores go to the actors still waiting
                self._collect_pictures(cell.actor)
                self._release(cell.actor)

    def _collect_pictures(self, group: tuple[str, str], timeout: float | None = None) -> None:
        """The pictures of a (suite, model)'s measured cells, from its first actor; an actor that
        cannot send them (within ``timeout`` seconds) leaves its model's worst images out of the
        report, which says so."""
        from pytest_segrobust.pictures.values import RunPictures

        try:
            only = None if self._remaining.get(group, 0) == 0 else self._taken_by.get(group, [])
            made = self._ray.get(self._actors[group][0].pictures.remote(only), timeout=timeout)
            self._pictures = self._pictures or RunPictures()
            self._pictures.absorb(made)
        except (self._ray.exceptions.RayError, TimeoutError) as exc:
            logger.warning("segrobust: the Ray actor of %s sent no pictures for the report: %s", group[1], _summary(exc))

    def _wait(self, cell: _Cell) -> None:
        """Block until the cell is done, drawing how many of the run's cells are (on a terminal)."""
        bar, begun = self._runner.bench.progress_bar, False
        while not self._ray.wait([cell.ref], timeout=0.5)[0]:
            if bar is not None:
                if not begun:
                    bar.begin(f"{cell.nodeid} on Ray: cells done")
                    begun = True
                outstanding = [c.ref for c in self._cells.values()]
                ready, _ = self._ray.wait(outstanding, num_returns=len(outstanding), timeout=0) if outstanding else ([], [])
                bar.update(self._taken + len(ready), self._total)
        if bar is not None and begun:
            bar.close()

    def close(self) -> None:
        """Drop the cells no item took (the run stopped) and kill the actors; leave Ray as found."""
        for cell in self._cells.values():
            for ref in (cell.ref, *cell.pieces):
                try:
                    self._ray.cancel(ref)
                except Exception:  # noqa: BLE001,S110 - the actor is killed next: what it still runs stops too
                    pass
        self._cells.clear()
        for group in list(self._actors):
            # The run stopped (-x, Ctrl-C): the pictures of the cells the actor did measure, once it is free.
            self._collect_pictures(group, timeout=PICTURES_TIMEOUT)
            self._release(group)
        if self._started_ray and self._ray is not None:
            self._ray.shutdown()
            self._started_ray = False


def _project_path(runner: CellRunner) -> str:
    """``PYTHONPATH`` for the actors: what makes the project's modules importable here.

    The rootdir and the suites folder (as the session adds them), every import path under
    the rootdir (pytest's ``pythonpath``, conftest folders) and the caller's own ``PYTHONPATH``,
    so a factory, a dataset or a corruption registered in the project imports in the actor.
    """
    root = runner.rootpath.resolve()
    inside = [entry for entry in sys.path if entry and Path(entry).resolve().is_relative_to(root)]
    folders = [str(root), str(runner.options.suites_dir.resolve()), *inside]
    folders += [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    return os.pathsep.join(dict.fromkeys(folders))
