"""Collection nodes: suite file -> model [-> split] -> one item per cell.

A cell's node id is a path pytest parses back, so every id the run prints can be pasted
into the next command line, and ``--lf``, ``--ff``, ``--sw``, ``-k`` and ``--deselect`` treat
cells as ordinary tests::

    suites/demo.yaml::tiny-unet::clean
    suites/demo.yaml::tiny-unet::rotate[5]
    suites/demo-shift.yaml::tiny-unet::ood-hard::gaussian_noise[1]

Severity is the item's parameter, as for a parametrized test: ``...::tiny-unet::rotate``
selects every severity of ``rotate``, ``...::tiny-unet`` every cell of the model.

A suite that requires aggregates of its models (``require: {aggregates: ...}``, a split's
``delta_pct``) or gates them (``gate: {aggregates: ...}``) gives each model one more item, after
its cells, that decides them (:mod:`pytest_segrobust.gate.release`)::

    suites/demo.yaml::tiny-unet::aggregates
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.engine.evaluation import CLEAN
from pytest_segrobust.engine.runner import RemoteCellError
from pytest_segrobust.gate.gatekeeper import CellFailure
from pytest_segrobust.run.stash import SESSION_KEY
from pytest_segrobust.runtime.logs import libraries_left_out
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.suite.requirements import MODEL_ITEM
from pytest_segrobust.suite.schema import Suite


def cell_name(key: CellKey) -> str:
    """The item's name: ``clean``, or the corruption with its severity as parameter, ``rotate[5]``."""
    return CLEAN if key.severity == 0 else f"{key.corruption}[{key.severity}]"


class SuiteFile(pytest.File):
    """A suite YAML file; a malformed one is a collection error naming file and field."""

    def collect(self) -> Iterator[CellGroup]:
        session = self.config.stash[SESSION_KEY]
        try:
            suite = session.suite(self.path)
        except SegRobustError as exc:
            raise self.CollectError(explain(self.config, exc)) from None
        cells = session.cells(suite)
        for model in dict.fromkeys(key.model for key in cells):
            keys = [key for key in cells if key.model == model]
            yield ModelCells.from_parent(self, name=model, suite=suite, keys=keys, by_split=suite.shifts is not None)


def explain(config: pytest.Config, exc: BaseException) -> str:
    """Our error's one line; under ``-v`` or ``--tb=long``, followed by the traceback of what caused it
    (the harness's own frames, and pytest's, would only bury it)."""
    if config.get_verbosity() > 0 or config.option.tbstyle == "long":
        cause = exc.__cause__ or exc
        return f"{exc}\n\n{''.join(traceback.format_exception(cause)).rstrip()}"
    return str(exc)


def cell_nodeid(model_nodeid: str, key: CellKey) -> str:
    """The node id of ``key``'s item under its model's node id."""
    split = "" if key.split is None else f"{key.split}::"
    return f"{model_nodeid}::{split}{cell_name(key)}"


class CellGroup(pytest.Collector):
    """The cells of one model, or of one model on one split of a natural-shift suite.

    Args:
        suite: The suite the cells belong to.
        keys: The cells, in suite order.
        by_split: Group the cells one level further, by split (a model of a natural-shift suite).
    """

    def __init__(self, *, suite: Suite, keys: Sequence[CellKey], by_split: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite
        self.keys = list(keys)
        self.by_split = by_split

    def collect(self) -> Iterator[CellGroup | pytest.Item]:
        if self.by_split:
            for split in dict.fromkeys(key.split for key in self.keys):
                keys = [key for key in self.keys if key.split == split]
                yield SplitCells.from_parent(self, name=str(split), suite=self.suite, keys=keys)
        else:
            for key in self.keys:
                yield SuiteItem.from_parent(self, name=cell_name(key), suite=self.suite, key=key)
        yield from self.model_gate()

    def model_gate(self) -> Iterator[pytest.Item]:
        return iter(())


class ModelCells(CellGroup):
    """A model's cells: ``suites/demo.yaml::tiny-unet``, and its ``aggregates`` item where the suite has one."""

    def model_gate(self) -> Iterator[pytest.Item]:
        if not self.suite.gates_models:
            return
        cells = model_gate_cells(self.suite, self.name, self.nodeid, self.keys)
        yield ModelGateItem.from_parent(self, name=MODEL_ITEM, suite=self.suite, model=self.name, cells=cells)


def model_gate_cells(suite: Suite, model: str, model_nodeid: str, keys: Sequence[CellKey]) -> list[tuple[CellKey, str]]:
    """Every cell a model's aggregates item needs, with its node id: the model's (``keys``, under
    ``model_nodeid``), and the ``cd`` reference model's for mCE."""
    cells = [(key, cell_nodeid(model_nodeid, key)) for key in keys]
    requirements = suite.requirements
    reference = suite.degradation.reference if suite.degradation is not None else None
    if requirements is not None and reference not in (None, model) and {"mce", "rmce"} & set(requirements.aggregates):
        file_nodeid = model_nodeid.rsplit("::", 1)[0]
        ref_keys = [CellKey(key.suite, reference, key.corruption, key.severity, key.split) for key in keys]  # type: ignore[arg-type]
        cells += [(key, cell_nodeid(f"{file_nodeid}::{reference}", key)) for key in ref_keys]
    return cells


class SplitCells(CellGroup):
    """A model's cells on one split of a natural-shift suite: ``suites/demo-shift.yaml::tiny-unet::ood-hard``."""


class _SuiteFileItem(pytest.Item):
    """What every item of a suite file shares: its suite, the ``segrobust`` marker, the payload its
    report carries to the xdist controller, and failures told in the plugin's own words."""

    def __init__(self, *, suite: Suite, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite
        self.add_marker(pytest.mark.segrobust)
        # Read by the plugin into this item's report, which carries it to the xdist controller.
        self.segrobust_payload: str | None = None

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | Any:
        # Our own failures carry the whole story; a traceback through the harness would bury it.
        if isinstance(excinfo.value, RemoteCellError):
            return excinfo.value.failure
        if isinstance(excinfo.value, CellFailure):
            return str(excinfo.value)
        if isinstance(excinfo.value, SegRobustError):
            return explain(self.config, excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        # The headline of the item's failure section: its node id, as every message names it. Never
        # a suffix of the printed id, though, or pytest would rewrite the dots of that suffix into
        # '::' when it prints the id (`-v`): `suites/demo::yaml::...`. A trailing space keeps it apart.
        return self.path, None, f"{self.nodeid} "


class SuiteItem(_SuiteFileItem):
    """One cell of a suite: evaluate, compare with the baseline, record."""

    def __init__(self, *, suite: Suite, key: CellKey, **kwargs: Any) -> None:
        # Spelled out as text so that pytest parses ``rotate[5]`` as name and parameter, as it
        # does an id read back from its cache: ``--lf`` and ``--sw`` compare the two (pytest 9.2).
        kwargs.setdefault("nodeid", f"{kwargs['parent'].nodeid}::{kwargs['name']}")
        super().__init__(suite=suite, **kwargs)
        self.key = key

    def runtest(self) -> None:
        session = self.config.stash[SESSION_KEY]
        try:
            with libraries_left_out(self.config):
                session.run_cell(self.suite, self.key, self.nodeid)
        finally:
            self.segrobust_payload = session.cell_payload(self.nodeid)


class ModelGateItem(_SuiteFileItem):
    """A model's aggregates: its aggregate requirements and aggregate margins, decided from its cells.

    Args:
        suite: The suite.
        model: The model whose aggregates it decides.
        cells: Every cell it needs (the model's, and the ``cd`` reference's for mCE), with their node ids.
    """

    def __init__(self, *, suite: Suite, model: str, cells: Sequence[tuple[CellKey, str]], **kwargs: Any) -> None:
        super().__init__(suite=suite, **kwargs)
        self.model = model
        self.cells = list(cells)
        # A stand-in key, for what groups items by suite and model (shards).
        self.key = CellKey(suite.name, model, MODEL_ITEM, 0, None)

    def runtest(self) -> None:
        session = self.config.stash[SESSION_KEY]
        try:
            with libraries_left_out(self.config):
                session.run_model_gate(self.suite, self.model, self.nodeid, self.cells)
        finally:
            self.segrobust_payload = session.cell_payload(self.nodeid)


ROBUSTNESS_ITEMS = (SuiteItem, ModelGateItem)
"""Every kind of item a suite file collects."""
