"""Decoded samples kept in memory across the cells of one process, within a budget.

Every cell of a suite streams the same dataset: without this cache each of them reads and
decodes every file again. The cache keeps what the first cell decoded, up to a budget in
bytes shared by all the process's datasets, and serves the later cells from memory.

Three rules keep the numbers exactly what an uncached run gives:

* A cell never sees the cache's own tensors: every sample it gets is a private copy, so a
  corruption, task or model that works in place (on CPU ``.to(device)`` returns the same
  tensor) cannot change what the next cell reads.
* Only samples the dataset returned are kept: a sample that raised is read (and raises)
  again in the next cell.
* Nothing is ever evicted: once the budget is spent, the samples that did not fit are read
  from the dataset in every cell, and those that fit stay (no thrashing).
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from pytest_segrobust.data.base import Sample, SegmentationDataset

MEBIBYTE = 2**20
# Values that cannot be changed in place: shared as they are.
_IMMUTABLE = (str, bytes, int, float, bool, complex, type(None))

Reader = Callable[[Sequence[int]], Iterator[Sample]]


class SampleCache:
    """Samples of the process's datasets by position, within ``budget`` bytes of tensors.

    A dataset is known by the object itself (held here, so its ``id`` is never reused for
    another one): the run builds each suite's dataset once (see
    :class:`~pytest_segrobust.workbench.Workbench`), so one object means one content.

    Args:
        budget: Bytes of tensors the cache may hold; 0 keeps nothing.

    Attributes:
        used: Bytes held.
        hits: Samples served from memory.
        reads: Samples read from their dataset through :meth:`samples`.
    """

    def __init__(self, budget: int) -> None:
        if budget < 0:
            raise ValueError(f"a sample cache budget is a number of bytes >= 0, got {budget}")
        self.budget = budget
        self.used = 0
        self.hits = 0
        self.reads = 0
        self._kept: dict[int, tuple[SegmentationDataset, dict[int, Sample]]] = {}

    def samples(self, dataset: SegmentationDataset, total: int, read: Reader, *, start: int = 0) -> Iterator[Sample]:
        """The samples of ``dataset`` at positions ``start`` to ``total - 1``, in order: kept ones
        copied, the others from ``read``.

        Args:
            dataset: Whose samples.
            total: Where they end (the first ``total`` samples, from ``start`` on).
            read: Given the positions the cache does not hold (ascending), yields those samples
                in that order (inline, or through loader processes).
            start: The first position (a piece of a cell split over workers starts past 0).
        """
        kept = self._kept.setdefault(id(dataset), (dataset, {}))[1]
        missing = [index for index in range(start, total) if index not in kept]
        fresh = read(missing) if missing else iter(())
        for index in range(start, total):
            if index in kept:
                self.hits += 1
                yield _copy(kept[index])
            else:
                sample = next(fresh)  # a sample that raises is not kept: the next cell reads it again
                self.reads += 1
                self._keep(kept, index, sample)
                yield sample

    def _keep(self, kept: dict[int, Sample], index: int, sample: Sample) -> None:
        size = nbytes(sample)
        if self.used + size > self.budget:
            return
        # Counted before stored: a cell interrupted in between (timeout) can only overstate what is held.
        self.used += size
        kept[index] = _copy(sample)  # the cell keeps the dataset's own object and may change it


def nbytes(value: Any) -> int:
    """Bytes of the tensors and arrays in ``value`` (a sample, a target, a container of them)."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(nbytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, (tuple, list)):
        return sum(nbytes(item) for item in value)
    if isinstance(value, dict):
        return sum(nbytes(item) for item in value.values())
    return sys.getsizeof(value)


def _copy(value: Any) -> Any:
    """A copy of ``value`` that shares no tensor, array or other mutable object with it."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, _IMMUTABLE):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        if all(f.init for f in fields):
            return dataclasses.replace(value, **{f.name: _copy(getattr(value, f.name)) for f in fields})
    if type(value) in (tuple, list):
        return type(value)(_copy(item) for item in value)
    return copy.deepcopy(value)
