"""Decoded samples kept in memory across the cells of one process, within a budget.

Every cell of a suite streams the same dataset: without this cache each of them reads and
decodes every file again. The cache keeps what the first cell decoded, up to a budget in
bytes shared by all the process's datasets, and serves the later cells from memory.

Samples are kept compact and given out as they came: an integer tensor (a label map or a
panoptic segment map, int64 by contract) in the narrowest of uint8, int16 and int32 that
holds all its values, a bool tensor (instance masks) as bits; each is widened back to its
own dtype and shape on the way out, the same values exactly. A demo sample at 128 x 128
then takes 91 KiB instead of 384 (its uint8 image is kept as it is).

The budget (:func:`default_budget`, unless ``--segrobust-sample-cache MB`` sets it): an
eighth of the machine's memory (the smaller of the physical memory and a cgroup limit)
shared by the processes that evaluate cells (the xdist workers, or the one process), and
at most 1 GiB per process; 1 GiB over the workers where the memory cannot be read.

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
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pytest_segrobust.data.base import Sample, SegmentationDataset
from pytest_segrobust.runtime.budgeted_cache import BudgetedCache

MEBIBYTE = 2**20
# A process keeps at most this much, and the processes of a run at most this part of the machine's memory.
MOST_PER_PROCESS = 2**30
MACHINE_SHARE = 8
# Where a container's memory limit is (cgroup v2, then v1); "max" or a huge number means none.
_CGROUP_LIMITS = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
# The integer dtypes a kept tensor may be narrowed to, narrowest first, with the range each holds.
_NARROW = tuple(
    (dtype, torch.iinfo(dtype).min, torch.iinfo(dtype).max) for dtype in (torch.uint8, torch.int16, torch.int32)
)
_WIDE_INTEGERS = (torch.int16, torch.int32, torch.int64)
# Values that cannot be changed in place: shared as they are.
_IMMUTABLE = (str, bytes, int, float, bool, complex, type(None))

Reader = Callable[[Sequence[int]], Iterator[Sample]]


class SampleCache(BudgetedCache):
    """Samples of the process's datasets by position, within ``budget`` bytes of tensors.

    A dataset is known by the object itself (held here, so its ``id`` is never reused for
    another one): the run builds each suite's dataset once (see
    :class:`~pytest_segrobust.engine.workbench.Workbench`), so one object means one content.

    Args:
        budget: Bytes of tensors the cache may hold; 0 keeps nothing.

    Attributes:
        used: Bytes held.
        hits: Samples served from memory.
        reads: Samples read from their dataset through :meth:`samples`.
    """

    def __init__(self, budget: int) -> None:
        super().__init__(budget, "sample")
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
                yield _expand(kept[index])
            else:
                sample = next(fresh)  # a sample that raises is not kept: the next cell reads it again
                self.reads += 1
                self._keep(kept, index, sample)
                yield sample

    def _keep(self, kept: dict[int, Sample], index: int, sample: Sample) -> None:
        compact = _compact(sample)  # never the dataset's own object: the cell keeps that and may change it
        # Counted before stored: a cell interrupted in between (timeout) can only overstate what is held.
        if self._spend(nbytes(compact)):
            kept[index] = compact

    @staticmethod
    def footprint(sample: Sample) -> int:
        """Bytes that ``sample`` takes in the cache (what counts against the budget)."""
        return nbytes(_compact(sample))


def default_budget(workers: int | None = None, memory: int | None = None) -> int:
    """Bytes of samples each process keeps: an eighth of the machine's memory over the workers, at most 1 GiB.

    Args:
        workers: Processes evaluating cells at once; xdist's worker count
            (``PYTEST_XDIST_WORKER_COUNT``) or 1 when not given.
        memory: The machine's memory in bytes; :func:`machine_memory` when not given.
    """
    if workers is None:
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    workers = max(1, workers)
    if memory is None:
        memory = machine_memory()
    if memory is None:
        return MOST_PER_PROCESS // workers
    return min(MOST_PER_PROCESS, memory // MACHINE_SHARE // workers)


def machine_memory() -> int | None:
    """Bytes of memory this process's machine (or container) has, or None where that cannot be read."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # no sysconf (Windows) or no such name
        return None
    limits = [physical] if physical > 0 else []
    for path in _CGROUP_LIMITS:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    return min(limits) if limits else None


def nbytes(value: Any) -> int:
    """Bytes of the tensors and arrays in ``value`` (a sample, a target, a container of them)."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, _Fields):
        return sum(nbytes(field) for field in value.fields.values())
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


@dataclasses.dataclass(frozen=True)
class _Narrowed:
    """An integer tensor kept in a narrower integer dtype that holds all its values."""

    values: torch.Tensor
    dtype: torch.dtype


@dataclasses.dataclass(frozen=True)
class _Bits:
    """A bool tensor kept as one bit per value (``np.packbits``)."""

    bits: np.ndarray
    shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class _Fields:
    """A dataclass kept field by field, each field compact; made again with its constructor on the way out."""

    kind: type
    fields: dict[str, Any]


def _compact(value: Any) -> Any:
    """What the cache keeps of ``value``: a copy sharing nothing with it, its tensors compact (:func:`_expand` undoes it)."""
    if isinstance(value, torch.Tensor):
        return _compact_tensor(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        if all(f.init for f in fields):
            return _Fields(type(value), {f.name: _compact(getattr(value, f.name)) for f in fields})
    if type(value) in (tuple, list):
        return type(value)(_compact(item) for item in value)
    if type(value) is dict:  # a sample's extra fields
        return {key: _compact(item) for key, item in value.items()}
    return _copy(value)


def _compact_tensor(tensor: torch.Tensor) -> Any:
    # Only plain contiguous CPU tensors: anything else (a view with its own strides, autograd) is kept as it is.
    if tensor.device.type != "cpu" or not tensor.is_contiguous() or tensor.requires_grad or not tensor.numel():
        return tensor.clone()
    if tensor.dtype == torch.bool:
        return _Bits(np.packbits(tensor.numpy().reshape(-1)), tuple(tensor.shape))
    if tensor.dtype in _WIDE_INTEGERS:
        lowest, highest = (int(v) for v in torch.aminmax(tensor))
        for dtype, low, high in _NARROW:
            if dtype.itemsize < tensor.element_size() and low <= lowest and highest <= high:
                return _Narrowed(tensor.to(dtype), tensor.dtype)
    return tensor.clone()


def _expand(value: Any) -> Any:
    """A private copy of what :func:`_compact` kept: the original's types, dtypes, shapes and values."""
    if isinstance(value, _Narrowed):
        return value.values.to(value.dtype)
    if isinstance(value, _Bits):
        bits = np.unpackbits(value.bits, count=math.prod(value.shape))
        return torch.from_numpy(bits.view(np.bool_).reshape(value.shape))
    if isinstance(value, _Fields):
        return value.kind(**{name: _expand(field) for name, field in value.fields.items()})
    if type(value) in (tuple, list):
        return type(value)(_expand(item) for item in value)
    if type(value) is dict:
        return {key: _expand(item) for key, item in value.items()}
    return _copy(value)
