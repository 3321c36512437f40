"""Adapter for plain PyTorch modules that return per-class logits."""

from __future__ import annotations

import hashlib

import torch

from pytest_segrobust.errors import ModelOutputError


class TorchModuleSegmenter:
    """Wraps an ``nn.Module`` mapping ``(B, 3, H, W)`` images in ``[0, 1]`` to logits.

    The module may return a tensor ``(B, K, H, W)`` or a mapping with key ``"out"``
    (torchvision's segmentation models). Logits at another resolution are resized
    bilinearly to the input size before the argmax.

    Args:
        module: The network; it is put in eval mode and moved to ``device``.
        device: Where inference runs; corruption and metric follow it.
        amp: Run the forward pass under autocast (float16 on CUDA, bfloat16 elsewhere).
    """

    def __init__(self, module: torch.nn.Module, device: torch.device | str | None = None, amp: bool = False) -> None:
        if device is None:
            device = next((p.device for p in module.parameters()), torch.device("cpu"))
        self.device = torch.device(device)
        self.module = module.to(self.device).eval()
        self.amp = amp

    @torch.inference_mode()
    def predict(self, images: torch.Tensor) -> torch.Tensor:
        """Shape: images ``(B, 3, H, W)`` -> class ids ``(B, H, W)``."""
        dtype = torch.float16 if self.device.type == "cuda" else torch.bfloat16
        with torch.autocast(self.device.type, dtype=dtype, enabled=self.amp):
            output = self.module(images)
        if isinstance(output, dict):
            if "out" not in output:
                raise ModelOutputError(f"model returned a mapping without key 'out' (keys: {sorted(output)})")
            output = output["out"]
        if not isinstance(output, torch.Tensor) or output.dim() != 4 or output.shape[0] != images.shape[0]:
            shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
            raise ModelOutputError(f"expected logits of shape (B, K, H, W) for B={images.shape[0]}, got {shape}")
        if output.shape[-2:] != images.shape[-2:]:
            output = torch.nn.functional.interpolate(output, size=images.shape[-2:], mode="bilinear", align_corners=False)
        return output.argmax(dim=1)

    def fingerprint(self) -> str:
        """Digest of the module's class and every parameter and buffer."""
        digest = hashlib.blake2b(digest_size=16)
        digest.update(type(self.module).__qualname__.encode())
        digest.update(b"amp" if self.amp else b"fp32")
        for name, tensor in self.module.state_dict().items():
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()
