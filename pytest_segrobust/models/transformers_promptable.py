"""Hugging Face SAM-family checkpoints as promptable models: ``transformers: dir`` in a ``task: promptable`` suite.

::

    task: promptable
    models:
      - name: sam
        transformers: checkpoints/sam-vit-base   # save_pretrained of the model and its processor

Any checkpoint whose ``model_type`` transformers maps to a mask-generation model
(``SamModel``, ``Sam2Model``, ``SamHQModel``, ``EdgeTamModel``, ...) and whose processor takes
``input_points`` / ``input_labels`` / ``input_boxes`` is read. The processor does what it does
for its own users, so its conventions hold: the corrupted image goes in as ``uint8`` ``(H, W, 3)``
(its pixels rounded), points ``(x, y)`` and boxes ``(x0, y0, x1, y1)`` in that image's pixels
(the processor rescales them to the model's input), click labels 1 on the instance and 0 off it.
Each prompt set is one request (one point batch of one image: the clicks of a set are never
padded with another's); the image is encoded once and its embeddings reused for every set.
The three multimask candidates come back with their ``iou_scores``, at the input size through
the processor's ``post_process_masks`` (logits, not binarised): the task takes the best-scoring
candidate and thresholds it at 0, the processor's own ``mask_threshold``.

SAM 2's processors are built on transformers' torchvision backend: where torchvision cannot be
imported, a SAM 2 checkpoint's inputs are prepared by
:class:`~pytest_segrobust.models.sam2_processing.Sam2Processing` from the settings saved in its
folder, as the processor would prepare them.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.prompts import PromptSet
from pytest_segrobust.models.promptable_functions import image_array
from pytest_segrobust.models.torch_module import module_fingerprint, require_finite

# What a processor's __call__ must accept for the adapter to speak its language.
PROMPT_ARGUMENTS = ("input_points", "input_labels", "input_boxes")


@dataclass(frozen=True)
class OpenCheckpoint:
    """A SAM-family checkpoint whose config is read: what its loaders need, as one value.

    Attributes:
        transformers: The imported ``transformers`` package.
        path: The checkpoint directory (or, where downloads are allowed, a hub id).
        config: Its config (``AutoConfig``), whose ``model_type`` picks the model class.
        local: Read local files only.
        device: Where the model runs.
        load: ``load(path, what, read)``: ``read()``, with transformers' errors as a
            :class:`SegRobustError` naming the checkpoint and ``what`` was read (the other
            checkpoints' rule, :func:`~pytest_segrobust.models.transformers.load_transformers`).
    """

    transformers: Any
    path: str
    config: Any
    local: bool
    device: torch.device
    load: Callable[[str, str, Callable[[], Any]], Any]

    def model_class(self, classes: Mapping[str, str], kind: str) -> Any:
        """The class ``classes`` names for the config's model type (:func:`class_of`)."""
        return class_of(self.transformers, self.path, self.config, classes, kind)

    def processor(self) -> Any:
        """The checkpoint's processor (:func:`load_processor`), its errors naming the checkpoint."""
        return self.load(self.path, "processor", lambda: load_processor(self.transformers, self.path, self.local))

    def network(self, model_class: Any) -> Any:
        """``model_class``'s pretrained weights from the checkpoint, its errors naming the checkpoint."""
        return self.load(self.path, "model", lambda: model_class.from_pretrained(self.path, local_files_only=self.local))


def load_promptable(checkpoint: OpenCheckpoint) -> TransformersPromptable:
    """A SAM-family checkpoint (model and processor) as a promptable model on its device.

    Raises:
        SegRobustError: naming the checkpoint, when its model is not a mask-generation model or
            its processor does not take points, labels and boxes.
    """
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASK_GENERATION_MAPPING_NAMES

    model_class = checkpoint.model_class(MODEL_FOR_MASK_GENERATION_MAPPING_NAMES, "a promptable (mask-generation) model")
    processor = checkpoint.processor()
    accepted = inspect.signature(type(processor).__call__).parameters
    missing = [name for name in PROMPT_ARGUMENTS if name not in accepted]
    if missing or not hasattr(processor, "post_process_masks"):
        lacks = ", ".join(missing) if missing else "post_process_masks"
        raise SegRobustError(
            f"transformers model {checkpoint.path}: its processor {type(processor).__name__} lacks {lacks}; a promptable "
            "model needs a SAM-style processor (input_points, input_labels, input_boxes, post_process_masks)"
        )
    network = checkpoint.network(model_class)
    return TransformersPromptable(network, processor, checkpoint.device, checkpoint.transformers.__version__)


def class_of(transformers: Any, checkpoint: str, config: Any, classes: Mapping[str, str], kind: str) -> Any:
    """The transformers class ``classes`` names for the config's ``model_type``.

    Raises:
        SegRobustError: naming the checkpoint, its model type and the supported ones, when ``classes`` has none
            for it (it is not ``kind``).
    """
    model_type = getattr(config, "model_type", "")
    if model_type not in classes:
        raise SegRobustError(
            f"transformers model {checkpoint}: model type {model_type!r} is not {kind}; "
            f"supported: {', '.join(sorted(classes))}"
        )
    return getattr(transformers, classes[model_type])


def load_processor(transformers: Any, checkpoint: str, local: bool) -> Any:
    """The checkpoint's processor, on the PIL/numpy backend where transformers offers a choice (the fast one
    imports torchvision); for a SAM 2 checkpoint whose processor needs a torchvision that cannot be imported,
    :class:`~pytest_segrobust.models.sam2_processing.Sam2Processing` read from the checkpoint folder."""
    if int(transformers.__version__.split(".")[0]) >= 5:
        try:
            return transformers.AutoProcessor.from_pretrained(checkpoint, backend="pil", local_files_only=local)
        except (TypeError, ValueError, ImportError):  # a processor without a PIL backend (SAM 2's is torch-only)
            pass
    try:
        return transformers.AutoProcessor.from_pretrained(checkpoint, local_files_only=local)
    except (ImportError, ValueError, RuntimeError) as exc:
        if "torchvision" not in str(exc):
            raise
        from pytest_segrobust.models.sam2_processing import Sam2Processing

        return Sam2Processing.from_checkpoint(checkpoint)


def prompt_arguments(prompt: PromptSet) -> dict[str, Any]:
    """One prompt set as a processor's nested lists for one image and one point batch: clicks ``(x, y)``
    with labels (1 on the instance, 0 off it), or a box ``(x0, y0, x1, y1)``, in the image's pixels."""
    arguments: dict[str, Any] = {}
    if int(prompt.points.shape[0]):
        arguments["input_points"] = [[prompt.points.detach().cpu().tolist()]]
        arguments["input_labels"] = [[prompt.labels.detach().cpu().tolist()]]
    if prompt.box is not None:
        arguments["input_boxes"] = [[prompt.box.detach().cpu().tolist()]]
    return arguments


class CheckpointAdapter:
    """What the SAM-family adapters share: the network on ``device`` in eval mode, its processor, and a
    fingerprint of both.

    Args:
        network: The loaded model.
        processor: Its processor (or :class:`~pytest_segrobust.models.sam2_processing.Sam2Processing`).
        device: Where the model runs.
        version: transformers' version, part of the fingerprint.
    """

    def __init__(self, network: torch.nn.Module, processor: Any, device: torch.device | str, version: str) -> None:
        self.device = torch.device(device)
        self.network = network.to(self.device).eval()
        self.processor = processor
        self.version = version

    def fingerprint(self) -> str:
        """Digest of the weights, the model's config, the processor's settings, the adapter and transformers' version."""
        config = {k: v for k, v in self.network.config.to_dict().items() if k != "_name_or_path"}
        processor = self.processor
        settings = json.dumps(processor.to_dict(), sort_keys=True, default=str) if hasattr(processor, "to_dict") else ""
        return module_fingerprint(
            self.network,
            f"{type(self).__name__} transformers {self.version}",
            json.dumps(config, sort_keys=True, default=str),
            settings,
        )


class TransformersPromptable(CheckpointAdapter):
    """A SAM-family model and its processor as a :class:`~pytest_segrobust.models.base.PromptableSegmentationModel`."""

    task = "promptable"

    @torch.inference_mode()
    def predict(
        self, images: torch.Tensor, prompts: Sequence[Sequence[PromptSet]]
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each set's multimask candidates (logits at the input size) and their predicted IoU.

        Shape:
            images: ``(B, 3, H, W)`` in ``[0, 1]``; return: ``B`` pairs of ``(P, M, H, W)`` float logits
            and ``(P, M)`` scores, ``P = len(prompts[b])``.
        """
        height, width = int(images.shape[-2]), int(images.shape[-1])
        results = []
        for image, sets in zip(images, prompts):
            array = image_array(image)
            candidates, scores = [], []
            embeddings = None
            for prompt in sets:
                inputs = self.processor(images=array, **prompt_arguments(prompt), return_tensors="pt").to(self.device)
                if embeddings is None:
                    embeddings = self.network.get_image_embeddings(inputs["pixel_values"])
                masks, iou = self.request(inputs, embeddings)
                candidates.append(masks)
                scores.append(iou)
            if candidates:
                results.append((torch.stack(candidates).to(self.device), torch.stack(scores).to(self.device)))
            else:
                results.append(
                    (torch.zeros(0, 1, height, width, device=self.device), torch.zeros(0, 1, device=self.device))
                )
        return results

    def request(self, inputs: Any, embeddings: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """One prompt set's candidates ``(M, H, W)`` (logits, post-processed to the image) and scores ``(M,)``."""
        prompt = {k: inputs[k] for k in PROMPT_ARGUMENTS if k in inputs}
        output = self.network(image_embeddings=embeddings, multimask_output=True, **prompt)
        logits = output.pred_masks.float()
        require_finite(logits, "mask logits")
        sizes = {"original_sizes": inputs["original_sizes"].cpu()}
        if "reshaped_input_sizes" in inputs:  # SAM's processor pads after resizing; SAM 2's does not
            sizes["reshaped_input_sizes"] = inputs["reshaped_input_sizes"].cpu()
        masks = self.processor.post_process_masks(logits.cpu(), **sizes, binarize=False)
        return masks[0][0].float(), output.iou_scores[0, 0].float().cpu()
