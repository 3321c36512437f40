"""The decoded-sample cache: budget, hits, isolation from in-place changes, errors, and equal numbers."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data import sample_cache
from pytest_segrobust.data.base import InstanceTarget, PanopticTarget, ReferringTarget, Sample, SemanticTarget
from pytest_segrobust.data.demo import DemoScenes
from pytest_segrobust.data.sample_cache import MEBIBYTE, SampleCache, default_budget, machine_memory, nbytes
from pytest_segrobust.engine.evaluation import EvalHooks, EvalSettings, evaluate
from pytest_segrobust.models import as_segmentation_model
from tests.fakes import BandScenes, RedBinner


class CountingScenes(BandScenes):
    """Band scenes that count their reads and raise at the positions in ``broken``."""

    def __init__(self, size: int = 6, broken: Sequence[int] = ()) -> None:
        super().__init__(size, height=12, width=12)
        self.reads: list[int] = []
        self.broken = set(broken)

    def __getitem__(self, index: int) -> Sample:
        self.reads.append(index)
        if index in self.broken:
            raise OSError(f"sample {index}: truncated file")
        return super().__getitem__(index)


def read_inline(dataset: CountingScenes) -> object:
    def read(indices: Sequence[int]) -> Iterator[Sample]:
        return (dataset[index] for index in indices)

    return read


def sample_bytes(dataset: BandScenes) -> int:
    """Bytes one sample takes in the cache (all take the same), measured on a twin so that ``dataset`` counts no read."""
    return SampleCache.footprint(BandScenes(dataset.size, dataset.height, dataset.width, dataset.seed)[0])


def test_second_pass_is_served_from_memory_with_the_same_content() -> None:
    dataset = CountingScenes()
    cache = SampleCache(10 * 2**20)
    first = list(cache.samples(dataset, 6, read_inline(dataset)))
    second = list(cache.samples(dataset, 6, read_inline(dataset)))
    assert dataset.reads == [0, 1, 2, 3, 4, 5]  # the second pass read nothing
    assert (cache.reads, cache.hits) == (6, 6)
    for a, b in zip(first, second):
        assert a.sample_id == b.sample_id and torch.equal(a.image, b.image)
        assert a.target is not None and b.target is not None and torch.equal(a.target.mask, b.target.mask)
    assert cache.used == 6 * sample_bytes(dataset)


def test_budget_keeps_the_first_samples_that_fit_and_rereads_the_rest() -> None:
    dataset = CountingScenes()
    size, ids = sample_bytes(dataset), [BandScenes(6, 12, 12)[i].sample_id for i in range(6)]
    cache = SampleCache(budget=2 * size + 1)
    for _ in range(3):
        dataset.reads.clear()
        assert [s.sample_id for s in cache.samples(dataset, 6, read_inline(dataset))] == ids
    assert dataset.reads == [2, 3, 4, 5]  # the first two stay; nothing is evicted for the others
    assert cache.used == 2 * size <= cache.budget


def test_budget_is_shared_by_the_process_datasets() -> None:
    first, second = CountingScenes(), CountingScenes()
    cache = SampleCache(budget=6 * sample_bytes(first))
    list(cache.samples(first, 6, read_inline(first)))
    list(cache.samples(second, 6, read_inline(second)))
    list(cache.samples(second, 6, read_inline(second)))
    assert second.reads == [0, 1, 2, 3, 4, 5] * 2 and first.reads == [0, 1, 2, 3, 4, 5]


def test_a_limit_reads_only_the_first_samples() -> None:
    dataset = CountingScenes()
    cache = SampleCache(2**20)
    list(cache.samples(dataset, 2, read_inline(dataset)))
    list(cache.samples(dataset, 4, read_inline(dataset)))
    assert dataset.reads == [0, 1, 2, 3]


def test_zero_budget_keeps_nothing() -> None:
    dataset = CountingScenes()
    cache = SampleCache(0)
    list(cache.samples(dataset, 6, read_inline(dataset)))
    list(cache.samples(dataset, 6, read_inline(dataset)))
    assert dataset.reads == list(range(6)) * 2 and cache.used == 0 and cache.hits == 0
    with pytest.raises(ValueError, match="budget"):
        SampleCache(-1)


def test_a_sample_that_raised_raises_again_in_the_next_pass() -> None:
    dataset = CountingScenes(broken=[3])
    cache = SampleCache(2**20)
    for _ in range(2):
        served = []
        with pytest.raises(OSError, match="sample 3: truncated file"):
            for sample in cache.samples(dataset, 6, read_inline(dataset)):
                served.append(sample.sample_id)
        assert len(served) == 3
    assert dataset.reads == [0, 1, 2, 3, 3]  # 0..2 kept, 3 read (and failed) each time
    dataset.broken.clear()  # the file is fixed: the next pass reads it and the rest
    assert len(list(cache.samples(dataset, 6, read_inline(dataset)))) == 6
    assert dataset.reads[5:] == [3, 4, 5]


class AnnotatedScenes(CountingScenes):
    """Band scenes with instance and panoptic targets as well."""

    def __getitem__(self, index: int) -> Sample:
        sample = super().__getitem__(index)
        assert sample.target is not None
        mask = sample.target.mask
        classes = mask.unique()
        masks = torch.stack([mask == c for c in classes])
        return Sample(
            sample.sample_id,
            sample.image,
            SemanticTarget(mask),
            instances=InstanceTarget.from_masks(masks, classes),
            panoptic=PanopticTarget(mask + 1, classes + 1, classes, torch.zeros_like(classes, dtype=torch.bool)),
        )


def tensors(sample: Sample) -> list[torch.Tensor]:
    assert sample.target is not None and sample.instances is not None and sample.panoptic is not None
    instances, panoptic = sample.instances, sample.panoptic
    return [sample.image, sample.target.mask, instances.masks, instances.labels, instances.boxes, instances.iscrowd,
            panoptic.segments, panoptic.ids, panoptic.labels, panoptic.iscrowd]  # fmt: skip


def test_cells_changing_their_samples_in_place_do_not_change_the_cache() -> None:
    dataset = AnnotatedScenes()
    expected = [[t.clone() for t in tensors(dataset[i])] for i in range(6)]
    cache = SampleCache(2**20)
    for _ in range(3):  # the reading pass, then two served from memory: each vandalises what it got
        for index, sample in enumerate(cache.samples(dataset, 6, read_inline(dataset))):
            assert all(torch.equal(a, b) for a, b in zip(tensors(sample), expected[index]))
            for tensor in tensors(sample):
                tensor.zero_() if tensor.dtype != torch.bool else tensor.logical_not_()
    assert cache.hits == 12


def test_numbers_are_the_same_with_and_without_the_cache_inline_and_with_loader_workers() -> None:
    model = as_segmentation_model(RedBinner(smoothing=3))
    dataset = BandScenes(size=7, height=16, width=16)
    cells = [(None, 0), (REGISTRY.get("gaussian_noise"), 5), (REGISTRY.get("rotate"), 3), (REGISTRY.get("contrast"), 2)]
    plain = [evaluate(model, dataset, c, s, settings=EvalSettings.of(batch_size=3)) for c, s in cells]
    cache = SampleCache(budget=4 * SampleCache.footprint(dataset[0]))  # four of seven kept: both paths in every pass
    for workers in (0, 2):
        cached = [
            evaluate(
                model,
                dataset,
                c,
                s,
                settings=EvalSettings.of(batch_size=3, loader_workers=workers),
                hooks=EvalHooks(sample_cache=cache),
            )
            for c, s in cells
        ]
        assert [r.metrics for r in cached] == [r.metrics for r in plain]
        for got, want in zip(cached, plain):
            assert got.statistics.keys() == want.statistics.keys()
            assert all((got.statistics[k] == want.statistics[k]).all() for k in want.statistics)
    assert cache.hits == 4 * (2 * len(cells) - 1)


class WideScenes(AnnotatedScenes):
    """Annotated scenes whose maps need each width: negative labels, ids past 255 and past 32767, odd mask sizes."""

    def __getitem__(self, index: int) -> Sample:
        sample = super().__getitem__(index)
        assert sample.target is not None and sample.instances is not None and sample.panoptic is not None
        offset = (0, -2, 300, 40_000, -70_000, 2**40)[index % 6]
        panoptic = sample.panoptic
        odd = torch.arange(3 * 5 * 7).view(3, 5, 7) % (index + 2) == 0  # 105 values: not a whole number of bytes
        return Sample(
            sample.sample_id,
            sample.image,
            SemanticTarget(sample.target.mask - (index % 2)),  # -1 where a band was 0: int16, not uint8
            instances=dataclasses.replace(sample.instances, masks=sample.instances.masks.clone()),
            panoptic=PanopticTarget(
                panoptic.segments + offset, panoptic.ids + offset, panoptic.labels, panoptic.iscrowd
            ),
            referring=None if index % 3 else ReferringTarget(f"band {index}", odd),
        )


def same(a: object, b: object) -> bool:
    """Equal types, and for tensors equal dtypes, shapes and values, all the way down."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return type(a) is type(b) and a == b


def test_cached_samples_equal_uncached_ones_exactly() -> None:
    dataset = WideScenes(size=12)
    cache = SampleCache(2**24)
    for _ in range(3):  # the reading pass, then two from memory
        served = list(cache.samples(dataset, 12, read_inline(dataset)))
        assert all(same(sample, dataset[index]) for index, sample in enumerate(served))
    assert cache.hits == 24
    # Every integer map was kept narrower than int64 except the one past 2**31; masks as bits.
    kept = cache._kept[id(dataset)][1]
    segments = [kept[i].fields["panoptic"].fields["segments"] for i in range(6)]
    assert [s.values.dtype if isinstance(s, sample_cache._Narrowed) else s.dtype for s in segments] == [
        torch.uint8, torch.int16, torch.int16, torch.int32, torch.int32, torch.int64
    ]  # fmt: skip
    assert sample_cache.nbytes(kept[0]) < nbytes(dataset[0]) / 2


def test_a_demo_sample_takes_a_quarter_of_its_size() -> None:
    sample = DemoScenes("val", size=1)[0]
    assert SampleCache.footprint(sample) < nbytes(sample) / 4


def test_tensors_the_cache_cannot_narrow_are_kept_as_copies() -> None:
    # A strided view, a tensor that needs its gradient, an empty map: kept as they are, dtype and strides too.
    strided = torch.arange(24, dtype=torch.int64).view(4, 6).t()
    grad = torch.ones(3, requires_grad=True)
    for tensor in (strided, torch.zeros(0, 5, dtype=torch.int64), torch.rand(2, 3)):
        kept = sample_cache._compact(tensor)
        assert isinstance(kept, torch.Tensor) and same(sample_cache._expand(kept), tensor)
        assert sample_cache._expand(kept).stride() == tensor.stride()
    kept = sample_cache._compact(grad)
    assert kept.requires_grad and torch.equal(kept.detach(), grad.detach()) and kept is not grad


@pytest.mark.parametrize(
    ("workers", "memory", "expected"),
    [
        (1, 64 * 2**30, 2**30),  # a large machine: the cap
        (4, 16 * 2**30, 512 * MEBIBYTE),  # 2 GiB over four workers
        (8, 2 * 2**30, 32 * MEBIBYTE),  # a small runner: 256 MiB over eight
        (0, 4 * 2**30, 512 * MEBIBYTE),  # no workers counts as one process
    ],
)
def test_the_default_budget_is_an_eighth_of_the_memory_over_the_workers(
    workers: int, memory: int | None, expected: int
) -> None:
    assert default_budget(workers, memory) == expected


def test_the_default_budget_counts_xdist_workers_and_reads_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    assert default_budget(memory=16 * 2**30) == 512 * MEBIBYTE
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT")
    assert default_budget(memory=16 * 2**30) == 2**30  # one process: 2 GiB, capped
    memory = machine_memory()
    assert memory is None or memory > 0
    assert default_budget() == (2**30 if memory is None else default_budget(1, memory))
    monkeypatch.setattr(sample_cache, "machine_memory", lambda: None)  # memory unknown: 1 GiB over the workers
    assert default_budget(2) == 512 * MEBIBYTE


def test_a_containers_limit_caps_the_machines_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unlimited, limited = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    unlimited.write_text("max\n")
    monkeypatch.setattr(sample_cache, "_CGROUP_LIMITS", (unlimited, tmp_path / "absent"))
    physical = machine_memory()
    if physical is None:
        pytest.skip("this system does not say how much memory it has")
    limited.write_text(f"{2**30}\n")
    monkeypatch.setattr(sample_cache, "_CGROUP_LIMITS", (unlimited, limited))
    assert machine_memory() == min(physical, 2**30)
    assert default_budget(1) == min(2**30, physical) // 8
