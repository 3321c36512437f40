"""The acoustic perturbations that audiomentations and pyroomacoustics compute leave Python's and
NumPy's global generators alone: a thread drawing from them while the perturbations run sees the
very stream it would see without them, and the perturbations' results do not depend on them.

The global generators are read here only to be compared with private copies of their states,
and are put back as they were after each test.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterator
from typing import Any
from unittest import mock

import numpy as np
import pytest
import torch

from pytest_segrobust.core.types import Audio
from pytest_segrobust.corruptions import acoustic as A

RATE = 16000

# Every perturbation computed by a library that draws from the global generators when asked to.
LIBRARY = (
    A.tanh_distortion, A.peaking_filter, A.low_pass, A.high_pass,
    A.air_absorption, A.room_reverb, A.mp3_compression,
)  # fmt: skip


def _needs(corruption: A.AcousticCorruption[Any, Any]) -> pytest.MarkDecorator:
    missing = [m for extra in corruption.requires for m in extra.missing()]
    return pytest.mark.skipif(
        bool(missing), reason=f"{', '.join(missing)} not installed: pip install 'pytest-segrobust[audio]'"
    )


def _waves(count: int = 3, seconds: float = 0.5) -> torch.Tensor:
    """Mono test clips: a chord with a little noise, from a private generator. Shape: ``(count, 1, S)``."""
    g = torch.Generator().manual_seed(5)
    t = torch.arange(int(seconds * RATE), dtype=torch.float64) / RATE
    chords = [
        torch.sin(2 * torch.pi * 220 * (k + 1) * t) + 0.5 * torch.sin(2 * torch.pi * 1300 * t) for k in range(count)
    ]
    noisy = torch.stack(chords) + 0.05 * torch.randn((count, t.shape[0]), generator=g, dtype=torch.float64)
    return (0.2 * noisy / noisy.abs().amax(dim=-1, keepdim=True))[:, None].float()


def _perturb(corruption: A.AcousticCorruption[Any, Any], waves: torch.Tensor) -> torch.Tensor:
    return corruption({"audio": Audio.of(waves, RATE, 5)}, 4, [7, 8, 9][: waves.shape[0]])["audio"].data


@pytest.fixture
def global_states() -> Iterator[tuple[random.Random, np.random.RandomState]]:
    """Private generators in the global generators' states now; the global states put back after the test."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    python_copy, numpy_copy = random.Random(), np.random.RandomState()
    python_copy.setstate(python_state)
    numpy_copy.set_state(numpy_state)
    yield python_copy, numpy_copy
    random.setstate(python_state)
    np.random.set_state(numpy_state)


def _same_numpy_state(first: Any, second: Any) -> bool:
    return first[0] == second[0] and np.array_equal(first[1], second[1]) and tuple(first[2:]) == tuple(second[2:])


# What a library could call to draw from, seed, save or restore the global generators.
GLOBAL_FUNCTIONS = (
    *(
        (random, name)
        for name in ("random", "uniform", "randint", "randrange", "choice", "gauss", "seed", "getstate", "setstate")
    ),
    *(
        (np.random, name)
        for name in (
            "random",
            "random_sample",
            "rand",
            "randn",
            "uniform",
            "randint",
            "choice",
            "normal",
            "seed",
            "get_state",
            "set_state",
        )
    ),
)


def _refuse(name: str) -> Any:
    def call(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"{name} was called")

    return call


@pytest.mark.parametrize("corruption", [pytest.param(c, id=c.name, marks=_needs(c)) for c in LIBRARY])
def test_a_perturbation_calls_nothing_of_the_global_generators(
    corruption: A.AcousticCorruption[Any, Any], global_states: tuple[random.Random, np.random.RandomState]
) -> None:
    python_copy, numpy_copy = global_states
    waves = _waves()
    first = _perturb(corruption, waves)  # the libraries imported: what they do on import is theirs
    assert random.getstate() == python_copy.getstate()
    assert _same_numpy_state(np.random.get_state(), numpy_copy.get_state())
    with contextlib.ExitStack() as stack:
        for module, name in GLOBAL_FUNCTIONS:
            stack.enter_context(mock.patch.object(module, name, _refuse(f"{module.__name__}.{name}")))
        assert torch.equal(_perturb(corruption, waves), first)


def test_a_thread_drawing_meanwhile_sees_the_streams_it_would_see_without_the_perturbations(
    global_states: tuple[random.Random, np.random.RandomState],
) -> None:
    runnable = [c for c in LIBRARY if not any(extra.missing() for extra in c.requires)]
    if not runnable:
        pytest.skip("audiomentations not installed: pip install 'pytest-segrobust[audio]'")
    python_copy, numpy_copy = global_states
    waves = _waves()
    alone = [_perturb(corruption, waves) for corruption in runnable]
    python_drawn: list[float] = []
    numpy_drawn: list[float] = []
    started, done = threading.Event(), threading.Event()

    def draw() -> None:
        while not done.is_set():
            python_drawn.append(random.random())
            numpy_drawn.append(float(np.random.random()))
            started.set()

    thread = threading.Thread(target=draw, daemon=True)
    thread.start()
    try:
        assert started.wait(10.0)
        during = [_perturb(corruption, waves) for corruption in runnable]
    finally:
        done.set()
        thread.join(10.0)
    assert len(python_drawn) > 100  # the thread drew all along
    assert python_drawn == [python_copy.random() for _ in python_drawn]
    assert numpy_drawn == numpy_copy.random_sample(len(numpy_drawn)).tolist()
    assert random.getstate() == python_copy.getstate()
    assert _same_numpy_state(np.random.get_state(), numpy_copy.get_state())
    for corruption, before, after in zip(runnable, alone, during):
        assert torch.equal(before, after), corruption.name
