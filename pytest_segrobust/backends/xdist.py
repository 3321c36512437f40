"""Under pytest-xdist, keep a model's cells on one worker, so that the worker builds it once.

xdist's default ``load`` scheduler hands each worker runs of consecutive tests, a few at a
time, so under ``-n 2`` both workers end up building most models, computing their clean
results and decoding the same samples. With ``--segrobust`` and xdist's ``load`` mode (what
``-n`` alone means), the plugin schedules with :class:`ModelGroupScheduling` instead:

* The cells of one model of one suite (every split of a natural-shift suite: the model is
  built once for all of them) form a unit, sent to one worker whole.
* A model with more cells than the ideal share of a worker (``ceil(cells / workers)``) is
  cut (unless it has an ``aggregates`` item, which decides from the cells its worker ran) into the fewest near-equal runs of consecutive cells within that share
  (:func:`~pytest_segrobust.backends.shard_plan.cut`, as the shards are), so that one large model
  cannot leave the other workers idle; each run may go to another worker.
* Units go out largest first, each to the next worker that is about to run out of work:
  one unit at a time, and the next one while the worker runs its unit's last cell (an xdist
  worker starts a test only once it knows the test after it).
* Other tests of the run are units of one test each, after the cells, in collection order.
* A worker that crashes loses only the cell it was running (xdist reports it failed): the
  cells sent to it that had not started go back to the front of the queue, as their units.
  xdist's ``loadscope``, which this resembles, re-queues the crashed test with them, so
  a worker replacing the crashed one runs it again.

``--segrobust-dist load`` keeps xdist's own scheduler; an explicit other ``--dist`` mode
(``loadscope``, ``loadfile``, ``loadgroup``, ``worksteal``, ``each``) is always left to xdist.

Only the plugin's ``pytest_xdist_make_scheduler`` imports this module (it imports xdist).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence

import pytest
from xdist.remote import Producer
from xdist.report import report_collection_diff
from xdist.workermanage import WorkerController, parse_tx_spec_config

from pytest_segrobust.backends.shard_plan import cut
from pytest_segrobust.suite.requirements import MODEL_ITEM

# A worker runs a test only once it has been sent the next one (or told to shut down), so
# it is refilled while it still holds two: the one it runs and the one after it.
_LOW_WATER = 2


def plan_units(collection: Sequence[str], is_cell: Callable[[str], bool], workers: int) -> list[list[int]]:
    """The run's work units, in the order they are handed out: lists of indices into ``collection``.

    A model's cells (node ids ``<suite file>::<model>::...``) form one unit, or a few units of
    consecutive cells when they exceed ``ceil(cells / workers)``; every other test is a unit
    of its own. The cells' units come first, largest first, then by their first cell's place
    in the collection; the other tests follow in collection order. A pure function of the
    collection.

    Args:
        collection: Every test's node id, as the workers collected them.
        is_cell: Whether a node id is a segrobust cell.
        workers: The number of workers, at least 1.

    Returns:
        Every index of ``collection`` exactly once, grouped into units.
    """
    models: dict[str, list[int]] = {}
    others: list[list[int]] = []
    for index, nodeid in enumerate(collection):
        if is_cell(nodeid):
            suite_file, model = nodeid.split("::")[:2]
            models.setdefault(f"{suite_file}::{model}", []).append(index)
        else:
            others.append([index])
    cells = sum(len(indices) for indices in models.values())
    share = max(1, math.ceil(cells / max(1, workers)))
    # A model with an aggregates item stays whole: the item decides from the cells its worker ran.
    units = [
        piece
        for indices in models.values()
        for piece in ([indices] if any(collection[i].endswith(f"::{MODEL_ITEM}") for i in indices) else cut(indices, share))
    ]
    return sorted(units, key=lambda unit: (-len(unit), unit[0])) + others


class ModelGroupScheduling:
    """xdist's scheduler protocol (``xdist.scheduler.Scheduling``) handing out :func:`plan_units`.

    Args:
        config: The controller's pytest config.
        log: xdist's log producer.
        is_cell: Whether a node id is a segrobust cell (the others are scheduled one by one).
    """

    def __init__(self, config: pytest.Config, log: Producer, is_cell: Callable[[str], bool]) -> None:
        self.numnodes = len(parse_tx_spec_config(config))
        self.log = log.modelgroupsched
        self.config = config
        self.is_cell = is_cell
        self.node2collection: dict[WorkerController, list[str]] = {}
        self.node2pending: dict[WorkerController, list[int]] = {}
        self.collection: list[str] | None = None
        self.queue: deque[list[int]] = deque()
        self.unit_of: dict[int, int] = {}  # test index -> its unit's number, to re-queue a crashed worker's units

    @property
    def nodes(self) -> list[WorkerController]:
        """The workers in the scheduler."""
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        """Every worker started with has reported its collection."""
        return len(self.node2collection) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        """Nothing left to send, and every worker runs its last test (it holds fewer than two)."""
        if not self.collection_is_completed or self.queue:
            return False
        return all(len(pending) < _LOW_WATER for pending in self.node2pending.values())

    @property
    def has_pending(self) -> bool:
        """Tests wait to be sent or to be run."""
        return bool(self.queue) or any(self.node2pending.values())

    def add_node(self, node: WorkerController) -> None:
        """A worker is ready; it is sent work once its collection is in."""
        assert node not in self.node2pending
        self.node2pending[node] = []

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        """Keep a worker's collection; a replacement that collected other tests is shut down unused."""
        assert node in self.node2pending
        if self.collection_is_completed:
            assert self.collection is not None
            if list(collection) != self.collection:
                other = next(iter(self.node2collection))
                self.log(report_collection_diff(self.collection, collection, other.gateway.id, node.gateway.id))
                node.shutdown()
                return
        self.node2collection[node] = list(collection)

    def schedule(self) -> None:
        """Plan the units once every worker has collected, and give each worker its first unit.

        Called again when a replacement worker has collected: then it only refills the workers.
        """
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self.check_schedule(node)
            return
        if not self._same_collections():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = next(iter(self.node2collection.values()))
        units = plan_units(self.collection, self.is_cell, len(self.nodes))
        self.queue.extend(units)
        self.unit_of = {index: number for number, unit in enumerate(units) for index in unit}
        for node in self.nodes:
            self.check_schedule(node)

    def check_schedule(self, node: WorkerController, duration: float = 0) -> None:
        """Send ``node`` whole units until it holds two tests; shut it down when none are left."""
        if node.shutting_down or node not in self.node2collection:
            return
        pending = self.node2pending[node]
        while len(pending) < _LOW_WATER and self.queue:
            unit = self.queue.popleft()
            pending.extend(unit)
            node.send_runtest_some(unit)
        if not self.queue:
            node.shutdown()  # after the tests it holds
        self.log("units waiting:", len(self.queue))

    def mark_test_complete(self, node: WorkerController, item_index: int, duration: float = 0) -> None:
        """A worker finished a test: refill it if it is about to run out."""
        self.node2pending[node].remove(item_index)
        self.check_schedule(node, duration=duration)

    def mark_test_pending(self, item: str) -> None:
        """Run ``item`` again (a plugin asked to, e.g. a rerun): first, as a unit of its own."""
        assert self.collection is not None
        self.queue.appendleft([self.collection.index(item)])
        for node in self.nodes:
            self.check_schedule(node)

    def remove_pending_tests_from_node(self, node: WorkerController, indices: Sequence[int]) -> None:
        """Only for schedulers that steal work from workers; this one never asks a worker to give any back."""
        raise NotImplementedError

    def remove_node(self, node: WorkerController) -> str | None:
        """A worker finished or crashed; return the test it crashed in, if it did.

        A worker runs its tests in the order sent and each finished one is removed, so the
        first of those it still holds is the one it crashed in: xdist reports it failed. The
        others never started; they go back to the front of the queue, grouped as their units
        were, for the other workers or the crashed worker's replacement.
        """
        pending = self.node2pending.pop(node)
        if not pending:
            return None
        assert self.collection is not None
        crashed, unstarted = pending[0], pending[1:]
        units: dict[int, list[int]] = {}
        for index in unstarted:
            units.setdefault(self.unit_of.get(index, -1), []).append(index)
        self.queue.extendleft(reversed(list(units.values())))
        for other in self.nodes:
            self.check_schedule(other)
        return self.collection[crashed]

    def _same_collections(self) -> bool:
        """Whether every worker collected the same tests; a difference is reported as a collection error."""
        (first, reference), *rest = self.node2collection.items()
        same = True
        for node, collection in rest:
            message = report_collection_diff(reference, collection, first.gateway.id, node.gateway.id)
            if message:
                same = False
                self.log(message)
                report = pytest.CollectReport(nodeid=node.gateway.id, outcome="failed", longrepr=message, result=[])
                self.config.hook.pytest_collectreport(report=report)
        return same
