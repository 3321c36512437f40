"""What each model adapter adds per image at 512x512: its pre- and post-processing, apart from inference.

For every adapter, the same network runs bare (its own input prepared beforehand, its raw
output left as it is) and through the adapter (images in [0, 1] in, class ids at the input
size out); the two are interleaved and repeated, and the table shows min and median of the
difference per image. The networks are tiny on purpose, so that the difference is not lost
in inference time.

    python benchmarks/adapters.py [--repeats 7] [--batch 8]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from pytest_segrobust.models.arrays import ArrayInput, ArrayModel, ArrayOutput
from pytest_segrobust.models.torch_module import TorchModuleSegmenter
from pytest_segrobust.models.zoo import Normalized

SIZE = 512
CLASSES = 19


def tiny_network() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Conv2d(3, CLASSES, 1).eval()


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def compare(name: str, bare: Callable[[], object], adapted: Callable[[], object], repeats: int, batch: int) -> tuple[str, ...]:
    bare(), adapted()  # warm up
    bare_times, adapted_times = [], []
    for _ in range(repeats):  # interleaved: a busy machine slows both alike
        bare_times.append(timed(bare))
        adapted_times.append(timed(adapted))
    overhead = [(a - b) / batch * 1e3 for a, b in zip(adapted_times, bare_times, strict=True)]
    bare_ms = statistics.median(bare_times) / batch * 1e3
    return (name, f"{bare_ms:.2f}", f"{min(overhead):.2f}", f"{statistics.median(overhead):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    images = torch.rand(args.batch, 3, SIZE, SIZE)
    network = tiny_network()
    rows = []

    with torch.inference_mode():
        rows.append(compare("torch module (logits -> ids)", lambda: network(images), lambda: TorchModuleSegmenter(network).predict(images), args.repeats, args.batch))
        normalized = Normalized(network)
        rows.append(compare("zoo Normalized + torch module", lambda: network(images), lambda: TorchModuleSegmenter(normalized).predict(images), args.repeats, args.batch))

    # A function of arrays: NHWC uint8 batches and one image at a time.
    prepared = (images.permute(0, 2, 3, 1) * 255).round().to(torch.uint8).numpy()
    weights = network.weight.detach()[:, :, 0, 0].numpy().T / 255

    def numpy_net(array: np.ndarray) -> np.ndarray:
        return array.astype(np.float32) @ weights  # (..., H, W, K) logits

    uint8_nhwc = ArrayInput.from_yaml({"layout": "NHWC", "dtype": "uint8"})
    logits_nhwc = ArrayOutput.from_yaml({"kind": "logits", "layout": "NHWC"})
    batched = ArrayModel(numpy_net, uint8_nhwc, logits_nhwc, "bench")
    rows.append(compare("arrays: NHWC uint8, batched", lambda: numpy_net(prepared), lambda: batched.predict(images), args.repeats, args.batch))
    per_image = ArrayModel(numpy_net, ArrayInput.from_yaml({"layout": "NHWC", "dtype": "uint8", "batch": False}), logits_nhwc, "bench")
    rows.append(
        compare("arrays: NHWC uint8, per image", lambda: [numpy_net(a) for a in prepared], lambda: per_image.predict(images), args.repeats, args.batch)
    )

    try:
        import onnxruntime

        from pytest_segrobust.models.onnx import load_onnx
    except ImportError as exc:
        rows.append(("onnx", "-", "-", f"skipped: {exc}"))
    else:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "net.onnx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(
                    network, (images[:1],), str(path), input_names=["images"], output_names=["logits"],
                    dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}}, dynamo=False,
                )
            session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            array = images.numpy()
            model = load_onnx(path)
            rows.append(compare("onnx (float32 NCHW)", lambda: session.run(None, {"images": array}), lambda: model.predict(images), args.repeats, args.batch))

    try:
        import transformers
        from transformers import SegformerImageProcessorPil

        from pytest_segrobust.models.transformers import load_transformers
    except ImportError as exc:
        rows.append(("transformers", "-", "-", f"skipped: {exc}"))
    else:
        with tempfile.TemporaryDirectory() as folder:  # SegFormer-B0's architecture, random weights
            names = [f"class{k}" for k in range(CLASSES)]
            config = transformers.SegformerConfig(num_labels=CLASSES, id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})
            torch.manual_seed(0)
            transformers.SegformerForSemanticSegmentation(config).save_pretrained(folder)
            SegformerImageProcessorPil(size={"height": SIZE, "width": SIZE}).save_pretrained(folder)
            model = load_transformers(folder, task="semantic", device=torch.device("cpu"), class_names=names, label_map=None, allow_download=False)
            with torch.inference_mode():
                pixels = model.pixel_values(images)
                rows.append(
                    compare("transformers SegFormer-B0", lambda: model.network(pixel_values=pixels), lambda: model.predict(images), args.repeats, args.batch)
                )

    header = ("adapter", "bare ms/img", "overhead min ms/img", "overhead median ms/img")
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    print(f"{SIZE}x{SIZE}, batch {args.batch}, {args.repeats} interleaved repeats, torch threads {torch.get_num_threads()}")
    for row in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
