"""The decoded-sample cache: budget, hits, isolation from in-place changes, errors, and equal numbers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.base import InstanceTarget, PanopticTarget, Sample, SemanticTarget
from pytest_segrobust.data.sample_cache import SampleCache, nbytes
from pytest_segrobust.evaluation import evaluate
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
    """Bytes of one sample (all have the same), measured on a twin so that ``dataset`` counts no read."""
    return nbytes(BandScenes(dataset.size, dataset.height, dataset.width, dataset.seed)[0])


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
    plain = [evaluate(model, dataset, c, s, batch_size=3) for c, s in cells]
    cache = SampleCache(budget=4 * nbytes(dataset[0]))  # four of seven kept: both paths in every pass
    for workers in (0, 2):
        cached = [evaluate(model, dataset, c, s, batch_size=3, sample_cache=cache, loader_workers=workers) for c, s in cells]
        assert [r.metrics for r in cached] == [r.metrics for r in plain]
        for got, want in zip(cached, plain):
            assert got.statistics.keys() == want.statistics.keys()
            assert all((got.statistics[k] == want.statistics[k]).all() for k in want.statistics)
    assert cache.hits == 4 * (2 * len(cells) - 1)
