from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.randomness import philox
from pytest_segrobust.randomness.seeding import SampleStreams, sample_seed


def test_seed_is_stable_across_processes_and_hash_randomisation() -> None:
    code = "from pytest_segrobust.randomness.seeding import sample_seed; print(sample_seed(0, 'demo/val/00003', 'rotate', 3))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "123", "PATH": ""}).stdout.strip()
    assert int(other) == sample_seed(0, "demo/val/00003", "rotate", 3)


def test_every_component_changes_the_seed() -> None:
    base = sample_seed(0, "a", "rotate", 3)
    variants = [sample_seed(1, "a", "rotate", 3), sample_seed(0, "b", "rotate", 3),
                sample_seed(0, "a", "shear", 3), sample_seed(0, "a", "rotate", 4)]
    assert len({base, *variants}) == 5
    assert all(0 <= s < 2**63 for s in variants)


def test_fields_cannot_run_into_each_other() -> None:
    assert sample_seed(0, "a1", "x", 1) != sample_seed(0, "a", "1x", 1)


# --------------------------------------------------------------------------- SampleStreams


def draw_everything(seeds: list[int], device: str = "cpu") -> list[torch.Tensor]:
    """One of each draw, in a fixed order, as a corruption would make them."""
    streams = SampleStreams(seeds, device)
    # Each sample's rates are a function of its seed alone, from 0 to 26.
    pattern = torch.arange(12, dtype=torch.float32, device=device).view(1, 3, 4) % 7 * 3.5
    rates = pattern + torch.tensor([s % 5 for s in seeds], dtype=torch.float32, device=device).view(-1, 1, 1)
    return [
        streams.uniform((3, 5, 7)),
        streams.normal((4, 9)),
        streams.integers(-4, 11, (2, 6)),
        streams.signs(),
        streams.poisson(rates),
        streams.uniform((2,), dtype=torch.float64),
    ]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=6, unique=True), st.data())
def test_a_samples_draws_do_not_depend_on_the_batch_composition_or_order(seeds: list[int], data: st.DataObject) -> None:
    order = data.draw(st.permutations(range(len(seeds))))
    subset = data.draw(st.lists(st.sampled_from(range(len(seeds))), min_size=1, unique=True))
    full = draw_everything(seeds)
    shuffled = draw_everything([seeds[i] for i in order])
    part = draw_everything([seeds[i] for i in subset])
    for whole, reordered, some in zip(full, shuffled, part):
        assert torch.equal(whole[list(order)], reordered)
        assert torch.equal(whole[subset], some)
    alone = [draw_everything([s]) for s in seeds]
    for k, whole in enumerate(full):
        assert torch.equal(whole, torch.cat([draws[k] for draws in alone]))


def test_the_kth_draw_reads_philox_stream_k() -> None:
    streams = SampleStreams([11, 12], "cpu")
    first, second, third = streams.uniform((5,)), streams.integers(0, 7, (3,)), streams.poisson(torch.ones(2, 4))
    assert torch.equal(first, philox.uniform([11, 12], (5,), "cpu", stream=0))
    assert torch.equal(second, philox.integers([11, 12], 0, 7, (3,), "cpu", stream=1))
    assert torch.equal(third, philox.poisson([11, 12], torch.ones(2, 4), stream=2))
    assert torch.equal(streams.normal((2,)), philox.normal([11, 12], (2,), "cpu", stream=4))  # poisson took 2 and 3


def test_a_draw_does_not_depend_on_the_length_of_the_draws_before_it() -> None:
    short, long = SampleStreams([5], "cpu"), SampleStreams([5], "cpu")
    short.uniform((3,))
    long.uniform((3000,))
    assert torch.equal(short.normal((10,)), long.normal((10,)))


def test_fresh_streams_repeat_their_draws() -> None:
    assert all(torch.equal(a, b) for a, b in zip(draw_everything([1, 2]), draw_everything([1, 2])))


def test_signs_are_both_signs_evenly() -> None:
    signs = SampleStreams(list(range(2_000)), "cpu").signs()
    assert set(signs.tolist()) == {-1.0, 1.0} and abs(float(signs.mean())) < 0.1


def test_a_sign_is_the_stream_s_first_integer_in_0_1() -> None:
    # The signs every stored baseline was drawn with: 2 * integers(0, 2) - 1 of the same stream.
    seeds = [0, 1, 2**63, 2**64 - 1, *range(7, 2_000, 13)]
    signs = SampleStreams(seeds, "cpu").signs()
    bits = SampleStreams(seeds, "cpu").integers(0, 2, (1,))[:, 0]
    assert signs.dtype == torch.float32 and torch.equal(signs, bits.to(torch.float32) * 2 - 1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the CPU-vs-CUDA comparison of SampleStreams needs one")
def test_streams_draw_the_same_on_cpu_and_cuda() -> None:
    seeds = [3, 2**62 + 5, 17]
    on_cpu, on_cuda = draw_everything(seeds, "cpu"), [d.cpu() for d in draw_everything(seeds, "cuda")]
    uniforms, normals, integers, signs, counts, doubles = zip(on_cpu, on_cuda)
    for exact in (uniforms, integers, signs, doubles):
        assert torch.equal(*exact)
    assert float((normals[0] - normals[1]).abs().max()) <= 8 * torch.finfo(torch.float32).eps  # |z| < 8: 1 ulp
    assert torch.equal(*counts)  # a count can move only where a uniform sits on a CDF step
