"""Gaussian and speckle noise's clipped sums as compiled loops give the tensor operations' bits.

On the CPU, where numba is installed, :func:`~pytest_segrobust.corruptions.functional.noise.additive_gaussian_noise`
and :func:`~pytest_segrobust.corruptions.functional.noise.speckle_noise` add the noise in one
pass of :mod:`~pytest_segrobust.corruptions.functional.color_kernel`; elsewhere the tensor
expressions run. Both must give the same values exactly, so that which one runs changes no pixel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.functional import color
from pytest_segrobust.corruptions.functional import noise as Fn

pytest.importorskip("numba", reason="the compiled noise loops need numba (the 'fast' extra)")

EXPRESSIONS: dict[str, Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]] = {
    "add_noise_into": lambda x, n, std: (x + std * n).clamp_(0.0, 1.0),
    "add_scaled_noise_into": lambda x, n, std: (x + x * (n * std)).clamp_(0.0, 1.0),
}
FUNCTIONS = {"add_noise_into": Fn.additive_gaussian_noise, "add_scaled_noise_into": Fn.speckle_noise}


def images() -> Iterator[tuple[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(3)
    yield "float32", torch.rand(2, 3, 128, 128, generator=generator)
    yield "float64", torch.rand(1, 3, 130, 129, generator=generator, dtype=torch.float64)
    yield "out of range", torch.rand(1, 3, 128, 128, generator=generator) * 1.4 - 0.2
    yield "zeros and ones", torch.randint(0, 2, (1, 3, 128, 128), generator=generator).float()


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The compiled loops, counting their calls."""
    kernel = color._compiled_color()
    assert kernel is not None, "numba is installed but the compiled loops are not loaded"
    counted = {name: 0 for name in EXPRESSIONS}

    class Spy:
        def __getattr__(self, name: str) -> object:
            def call(*args: object) -> None:
                counted[name] += 1
                getattr(kernel, name)(*args)

            return call

    monkeypatch.setattr(color, "_compiled_color_for", lambda images: Spy())
    return counted


@pytest.mark.parametrize("loop", list(EXPRESSIONS))
@pytest.mark.parametrize("std", [0.08, 0.38, 1.0 / 3.0])
def test_the_compiled_sum_is_the_tensor_expression_bit_for_bit(loop: str, std: float, calls: dict[str, int]) -> None:
    for label, image in images():
        noise = torch.randn(image.shape, generator=torch.Generator().manual_seed(7), dtype=image.dtype)
        expected = EXPRESSIONS[loop](image, noise, std)
        before = calls[loop]
        got = FUNCTIONS[loop](image, noise, std)
        assert calls[loop] == before + 1, f"{label}: the compiled loop did not run"
        assert got.dtype == image.dtype and got.is_contiguous()
        assert torch.equal(got, expected), f"{label}: {(got - expected).abs().max():.3g}"


@pytest.mark.parametrize("loop", list(EXPRESSIONS))
def test_what_the_loops_do_not_take_goes_the_tensor_way(loop: str, calls: dict[str, int]) -> None:
    image = torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(1))
    noise = torch.randn(image.shape, generator=torch.Generator().manual_seed(2))
    others = {
        "channels last": (image.contiguous(memory_format=torch.channels_last), noise),
        "a float16 noise": (image, noise.half()),
        "a graph to keep": (image.clone().requires_grad_(True), noise),
    }
    for label, (x, n) in others.items():
        got = FUNCTIONS[loop](x, n, 0.2)
        assert calls[loop] == 0, f"{label}: took the compiled loop"
        assert torch.equal(got.detach(), EXPRESSIONS[loop](x.detach(), n, 0.2)), label


@pytest.mark.parametrize(("name", "preset"), [("gaussian_noise", "coco-p"), ("speckle_noise", "imagenet-c")])
def test_the_noise_corruptions_give_the_same_pixels_with_or_without_the_loops(
    name: str, preset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    corruption = REGISTRY.get(name, preset)
    batch = torch.rand(3, 3, 128, 128, generator=torch.Generator().manual_seed(5))
    compiled = [corruption(batch, severity, [11, 12, 13]) for severity in (1, 3, 5)]
    monkeypatch.setattr(color, "_compiled_color_for", lambda images: None)
    tensor = [corruption(batch, severity, [11, 12, 13]) for severity in (1, 3, 5)]
    assert all(torch.equal(a, b) for a, b in zip(compiled, tensor, strict=True))
