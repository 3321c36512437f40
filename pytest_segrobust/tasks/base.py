"""What a task is to the engine: a sample schema, a model protocol and its output checks.

A task declares the fields of a sample it reads (:attr:`Task.reads`, names in
:attr:`Sample.fields <pytest_segrobust.data.base.Sample.fields>`) and the typed fields it
collates them into (:attr:`Task.collates`, :mod:`pytest_segrobust.core.types`), or, an image
task scored against one annotation of each sample, that annotation (:class:`ImageAnnotation`),
which both follow from; says which model protocol its models follow, validates what a model
returned (in one place), and names its default metrics. Suites name a task; the engine looks it up in
:data:`pytest_segrobust.tasks.TASKS` and never branches on it. A task of a new modality
(clips, audio, a plugin's own field type) is one module: it reads its fields with
:meth:`Task.read`, overrides :meth:`Task.collate` where its samples have no image, and says
which samples may share a batch (:meth:`Task.batch_key`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch

from pytest_segrobust.core.errors import DatasetError, FieldError, ModelOutputError
from pytest_segrobust.core.types import Batch, Expressions, Field, Image, SampleIndex, field_of
from pytest_segrobust.data.base import Sample, SegmentationDataset
from pytest_segrobust.models.base import REFERRING_LOGIT_THRESHOLD
from pytest_segrobust.pictures.task_views import CLASS_VIEW, PictureView
from pytest_segrobust.text.registry import TextPerturbationRegistry


class SuiteKeyError(FieldError):
    """A task's own suite key is wrong: ``field`` names it as the suite file spells it (``dynamic.levels[1]``)."""


def suite_list(
    field: str, raw: Any, what: str, refusal: Callable[[str], str | None], taken: Collection[str] = ()
) -> tuple[str, ...]:
    """A suite key's list of names: ``raw``, when it is a non-empty list of names that ``refusal`` lets
    pass, none listed twice (nor among ``taken``, names the suite lists elsewhere).

    Args:
        field: Where the list stands, as the suite file spells it (``dynamic.corruptions``).
        raw: The list's raw YAML value.
        what: What the list names, for the message of a value that is no such list
            (``temporal perturbations``).
        refusal: Why a name may not stand in the list, or ``None`` where it may.
        taken: Names that count as listed already.

    Raises:
        SuiteKeyError: naming the list, or the item at fault (``temporal[1]``).
    """
    if not isinstance(raw, list) or not raw or not all(isinstance(name, str) for name in raw):
        raise SuiteKeyError(field, f"expected a non-empty list of {what}, got {raw!r}")
    for index, name in enumerate(raw):
        refused = refusal(name)
        if refused is not None:
            raise SuiteKeyError(f"{field}[{index}]", refused)
        if name in raw[:index] or name in taken:
            raise SuiteKeyError(f"{field}[{index}]", f"{name!r} is listed twice")
    return tuple(raw)


def suite_mapping(field: str, raw: Any, expected: str, known: Collection[str], unknown: str) -> dict[str, Any]:
    """A suite key's mapping of options: ``raw``, when it is a mapping of ``known`` keys only.

    Args:
        field: The key, as the suite file spells it (``dynamic``).
        raw: Its raw YAML value.
        expected: What the value should be, for the message of a value that is no mapping
            (``a mapping such as {redraw: per_frame}``).
        known: The options the mapping may have.
        unknown: The message for any other option (``unknown option; expected redraw``).

    Raises:
        SuiteKeyError: naming the key, or the first option it does not know (``static.speed``).
    """
    if not isinstance(raw, dict):
        raise SuiteKeyError(field, f"expected {expected}, got {raw!r}")
    for key in raw:
        if key not in known:
            raise SuiteKeyError(f"{field}.{key}", unknown)
    return raw


@dataclass(frozen=True)
class SuiteNames:
    """What a task's own suite keys let a suite's ``corruptions:`` name (:meth:`Task.suite_names`),
    read before that list is validated.

    Attributes:
        text: The text perturbations the suite may name, alone or composed with an image
            corruption (a key may add some: a replay file's); none for a task without expressions.
        reserved: Cells a key adds, which the list may not name, each with how the key adds it
            (``{"r2bench-mixture": "mixture: r2bench"}``).
    """

    text: TextPerturbationRegistry = field(default_factory=TextPerturbationRegistry)
    reserved: Mapping[str, str] = field(default_factory=dict)


class SuiteCells:
    """What a task's own suite keys make of a suite's cells (:meth:`Task.suite_cells`): none by default.

    Attributes:
        added: Cells the keys add after the listed corruptions (each runs at the suite's severities).
        once: Cells that draw their own levels (a dynamic mixture): each runs once, at the suite's
            first severity, since every severity would measure the same thing again.
    """

    added: tuple[str, ...] = ()
    once: tuple[str, ...] = ()

    def cell(self, name: str, resolve: Callable[[str], Any]) -> Any:
        """The corruption of cell ``name``; ``resolve(name, preset=None)`` gives a name's corruption as the suite
        has it without the task's keys (in the suite's preset, or in ``preset``)."""
        return resolve(name)

    def with_seed(self, seed: int) -> SuiteCells:
        """These cells in a suite of global seed ``seed``: the same, unless a cell draws per sample from the
        suite's seed itself (the audio-visual mixture's modality per clip)."""
        return self

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))


@dataclass(frozen=True)
class ImageAnnotation:
    """The ground truth of an image task: one annotation of each sample, the size of its image, that
    :meth:`Task.targets` collates into one typed field. A task that declares one
    (:attr:`Task.annotation`) reads the image and that annotation and collates them into the image,
    the index and that field; :meth:`Task.annotations` refuses a sample without the annotation or
    with one of another size than its image.

    Attributes:
        source: The sample's field the annotation is (a name in ``Sample.fields``: ``instances``).
        field: The batch field :meth:`Task.targets` makes of them (``instances``).
        kind: That field's type (:class:`~pytest_segrobust.core.types.InstanceMasks`).
        tensor: The annotation's tensor that has its image's ``(H, W)`` (``masks``).
        leading: How many dimensions that tensor has before ``(H, W)`` (1 for ``(N, H, W)`` masks).
        what: What the annotation is, for the message of a sample without it (``instance annotations``).
        needs: Why a sample needs it, for that message: the evaluation, and a dataset that has it
            (``an instance evaluation needs ..., e.g. COCO-format data``).
        mismatch: The message's words for an annotation of another size than its image, ``{}``
            its size (``instance masks of size {} differ``).
    """

    source: str
    field: str
    kind: type[Field]
    tensor: str
    leading: int
    what: str
    needs: str
    mismatch: str


class Task(ABC):
    """A segmentation task.

    Attributes:
        name: Registry name, as written in suites (``task: semantic``).
        default_metrics: Metric names used when a suite lists none; the first is the headline.
        target_types: The ground-truth field types :meth:`targets` provides; a suite's metrics
            must read only these.
        model_protocol: The runtime-checkable protocol a model of this task follows.
        model_description: What such a model is, for error messages.
        reads: The fields of a sample the task reads (names in ``Sample.fields``).
        collates: The typed fields of a batch that :meth:`collate` makes, by name;
            :meth:`collate` checks that it made those.
        version: Bumped when a change of the task (its batches, its checks) can change a result:
            it invalidates its cached clean results (:func:`~pytest_segrobust.engine.evaluation.evaluator_version`).
        suite_keys: The top-level suite keys the task accepts besides the common ones (a video
            task's ``static`` and ``dynamic``, a referring task's ``text_replay`` and ``mixture``):
            :meth:`suite_names` reads what they let the suite's ``corruptions:`` name, then
            :meth:`suite_cells` what they make of its cells.
        resampling_unit: What the statistical gate's bootstrap draws (``image``, ``clip``), and
            what its degrees of freedom and sample-size hints count.
        annotation: The one annotation of each sample an image task scores against, where it has
            one: :attr:`reads`, :attr:`collates` and :attr:`target_types` follow from it, unless
            the task declares them itself.
        groups_samples: Several samples share one unit (a referring task's expressions of one
            image, an R-VOS task's of one clip): each sample names its unit
            (:attr:`Sample.unit <pytest_segrobust.data.base.Sample.unit>`), metrics keep it per
            row and the gate sums each unit's rows before it resamples them. Otherwise a sample
            is its unit.
        picture_view: How its predictions and ground truth become the report's pictures of an
            image (:mod:`pytest_segrobust.pictures.task_views`): by default their class views.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    default_metrics: ClassVar[tuple[str, ...]]
    target_types: ClassVar[tuple[type[Field], ...]]
    model_protocol: ClassVar[type]
    model_description: ClassVar[str]
    reads: ClassVar[tuple[str, ...]] = ("image",)
    collates: ClassVar[Mapping[str, type[Field]]] = {"image": Image, "index": SampleIndex}
    suite_keys: ClassVar[tuple[str, ...]] = ()
    resampling_unit: ClassVar[str] = "image"
    groups_samples: ClassVar[bool] = False
    annotation: ClassVar[ImageAnnotation | None] = None
    picture_view: ClassVar[PictureView] = CLASS_VIEW

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        annotation = vars(cls).get("annotation")
        if annotation is None:
            return
        implied = {
            "reads": ("image", annotation.source),
            "collates": {**Task.collates, annotation.field: annotation.kind},
            "target_types": (annotation.kind,),
        }
        for name, value in implied.items():
            if name not in vars(cls):  # a task that reads or collates more says so itself
                setattr(cls, name, value)

    def suite_names(self, options: Mapping[str, Any], folder: Path) -> SuiteNames:
        """What the suite keys of :attr:`suite_keys` that a suite sets (``options``) let its ``corruptions:``
        name, read before that list: by default the built-in text perturbations where the task's
        targets include expressions, and none elsewhere.

        Args:
            options: The keys of :attr:`suite_keys` the suite sets, with their raw YAML values.
            folder: The suite file's folder (a key's relative paths start there).

        Raises:
            SuiteKeyError: naming the field at fault; the suite loader adds the file.
        """
        if Expressions in self.target_types:
            return SuiteNames(TextPerturbationRegistry.installed())
        return SuiteNames()

    def suite_key_refusal(self, key: str, task: Task) -> str | None:
        """Why a suite of ``task``, which takes no ``key`` (one of :attr:`suite_keys`), cannot set it;
        ``None`` leaves the loader's own words (which tasks take the key)."""
        return None

    def suite_cells(
        self, options: Mapping[str, Any], corruptions: tuple[str, ...], resolve: Callable[..., Any]
    ) -> SuiteCells:
        """What the suite keys of :attr:`suite_keys` that a suite sets (``options``) make of its cells.

        Args:
            options: The keys of :attr:`suite_keys` the suite sets, with their raw YAML values.
            corruptions: The suite's listed corruptions (or its preset's), as cell names.
            resolve: A :class:`~pytest_segrobust.text.cells.CellResolver`: ``resolve(name, preset=None)``, a
                name's corruption as the suite has it without these keys (in the suite's preset, or in ``preset``).

        Raises:
            SuiteKeyError: naming the field at fault; the suite loader adds the file.
        """
        return SuiteCells()

    def for_suite(self, cells: SuiteCells, seed: int) -> Task:
        """The task as a suite whose keys made ``cells`` (:meth:`suite_cells`) and whose seed is ``seed``
        runs it: itself, unless its keys change its batches (the promptable task's prompt protocol)."""
        return self

    @property
    def setting(self) -> str:
        """What :meth:`for_suite` bound that changes a result, in words (``""``: nothing): part of the
        key of a cached clean result."""
        return ""

    @property
    def recorded_setting(self) -> dict[str, Any]:
        """What :meth:`for_suite` bound that changes a result, as JSON values a baseline's conditions
        record (``{}``: nothing): a run under another setting is not compared with them."""
        return {}

    def collate(self, samples: Sequence[Sample], positions: Sequence[int], dataset: SegmentationDataset,
                device: torch.device) -> dict[str, Field]:
        """The batch of ``samples`` on ``device``: images in ``[0, 1]``, their index and the task's targets.

        Raises:
            DatasetError: for an image that is not ``uint8`` ``(3, H, W)`` or a target that does not fit it.
            TypeError: when the fields made are not those the task declares in :attr:`collates`.
        """
        for sample in samples:
            image = self.read(sample, "image", dataset)
            if image.dim() != 3 or image.shape[0] != 3 or image.dtype != torch.uint8:
                raise DatasetError(
                    f"{dataset.name}: sample {sample.sample_id}: expected a uint8 image of shape (3, H, W), "
                    f"got {image.dtype} {tuple(image.shape)}"
                )
        images = upload(torch.stack([s.image for s in samples]), device).float().div_(255.0)  # type: ignore[misc]
        targets = self.targets(samples, dataset, device)  # a sample's own fields are checked first
        fields: dict[str, Field] = {"image": Image(images), "index": self.sample_index(samples, positions, dataset)}
        return self.declared(fields | targets)

    def sample_index(self, samples: Sequence[Sample], positions: Sequence[int], dataset: SegmentationDataset) -> SampleIndex:
        """The batch's :class:`~pytest_segrobust.core.types.SampleIndex`: positions, sample ids and,
        where the task groups samples, each one's unit.

        Raises:
            DatasetError: for a sample without a unit where the task groups samples, naming the
                dataset and the sample.
        """
        ids = tuple(s.sample_id for s in samples)
        if not self.groups_samples:
            return SampleIndex(tuple(positions), ids)
        for sample in samples:
            if not isinstance(sample.unit, str) or not sample.unit:
                raise DatasetError(
                    f"{dataset.name}: sample {sample.sample_id} names no {self.resampling_unit} (Sample.unit is "
                    f"{sample.unit!r}): the {self.name} task's statistical gate resamples {self.resampling_unit}s, "
                    f"since the samples of one {self.resampling_unit} change together; give each sample the id of "
                    f"its {self.resampling_unit}"
                )
        return SampleIndex(tuple(positions), ids, tuple(str(s.unit) for s in samples))

    def read(self, sample: Sample, name: str, dataset: SegmentationDataset) -> Any:
        """The field ``name`` of ``sample``.

        Raises:
            DatasetError: naming the dataset, the sample, the field and the fields it has.
        """
        fields = sample.fields
        if name not in fields:
            raise DatasetError(
                f"{dataset.name}: sample {sample.sample_id} has no field {name!r}, which the {self.name} task reads "
                f"(it has {', '.join(fields) or 'none'})"
            )
        return fields[name]

    def declared(self, fields: dict[str, Field]) -> dict[str, Field]:
        """``fields``, when they are the fields :attr:`collates` declares (names and types).

        Raises:
            TypeError: naming what differs (a task's bug, never the data's).
        """
        wrong = [
            f"{name}: {type(fields.get(name)).__name__}, declared {kind.__name__}"
            for name, kind in self.collates.items()
            if not isinstance(fields.get(name), kind)
        ]
        wrong += [f"{name}: not declared" for name in fields if name not in self.collates]
        if wrong:
            raise TypeError(f"task {self.name} collated other fields than it declares ({'; '.join(wrong)})")
        return fields

    def batch_key(self, sample: Sample) -> Hashable:
        """What samples that share a batch have in common: by default their image's shape."""
        image = sample.image
        return None if image is None else tuple(image.shape)

    def annotations(self, samples: Sequence[Sample], dataset: SegmentationDataset) -> list[Any]:
        """Each sample's :attr:`annotation`, checked to be there and of its image's size.

        Raises:
            DatasetError: naming the dataset, the sample and the annotation, for one without it
                (and what needs it) or with one of another size than its image.
        """
        spec = self.annotation
        if spec is None:
            raise TypeError(f"task {self.name} declares no annotation")
        found = []
        for sample in samples:
            annotation = sample.fields.get(spec.source)
            if annotation is None:
                raise DatasetError(f"{dataset.name}: sample {sample.sample_id} has no {spec.what}; {spec.needs}")
            size, image = tuple(getattr(annotation, spec.tensor).shape[spec.leading :]), tuple(sample.image.shape[1:])
            if size != image:
                raise DatasetError(
                    f"{dataset.name}: sample {sample.sample_id}: {spec.mismatch.format(size)} from image size {image}"
                )
            found.append(annotation)
        return found

    @abstractmethod
    def targets(self, samples: Sequence[Sample], dataset: SegmentationDataset, device: torch.device) -> dict[str, Field]:
        """The ground truth of ``samples`` as typed fields, checked against their images."""

    def predict(self, model: Any, batch: Batch) -> Any:
        """Call ``model`` on what its protocol takes from ``batch``; by default the images alone.

        A task whose models take more than images (referring: images and expressions)
        overrides this; what comes back goes to :meth:`check_predictions` unchanged.
        """
        return model.predict(field_of(batch, Image).data)

    @abstractmethod
    def check_predictions(self, predictions: Any, batch: Batch) -> Any:
        """What the model returned for ``batch``, validated; raises :class:`ModelOutputError`."""

    @property
    def model_kind(self) -> str:
        """The name the adapters that fit a model to this task are registered under
        (:func:`~pytest_segrobust.models.adapters.register_adapter`): the task's name, unless what
        :meth:`for_suite` bound changes what its models take (a VOS suite's prompt reference)."""
        return self.name

    def accepts_model(self, obj: object) -> bool:
        """Whether ``obj`` is a model of this task as it is.

        The protocol is checked by structure, and a model that declares its task (a ``task``
        attribute, as every adapter here does) must declare this one: an instance model
        cannot pass as a semantic one.
        """
        declared = getattr(obj, "task", None)
        return isinstance(obj, self.model_protocol) and declared in (None, self.name)

    def refusal(self, obj: object) -> str:
        """Why ``obj``, which no adapter fits, is not a model of this task, as words after its type
        (`` (it declares task 'semantic')``), or ``""`` where it declares nothing at odds with it."""
        declared = getattr(obj, "task", None)
        return f" (it declares task {declared!r})" if declared not in (None, self.name) else ""


def non_empty_text(text: object, dataset: SegmentationDataset, sample: Sample, what: str) -> str:
    """``text``, when it is a string with more than white space (an expression a task reads).

    Raises:
        DatasetError: naming the dataset, the sample and ``what`` was expected.
    """
    if not isinstance(text, str) or not text.strip():
        raise DatasetError(f"{dataset.name}: sample {sample.sample_id}: expected a non-empty {what}, got {text!r}")
    return text


def first_id(batch: Batch) -> str:
    """The sample id of the batch's first image, for messages."""
    index = next((f for f in batch.values() if isinstance(f, SampleIndex)), None)
    return index.sample_ids[0] if index is not None and index.sample_ids else "?"


def clip_tensor(predictions: Any, expected: tuple[int, ...], batch: Batch, *, values: str, wanted: str) -> torch.Tensor:
    """``predictions``, when they are a tensor of the clips' shape ``expected``.

    Args:
        predictions: What a video model returned.
        expected: The targets' shape, ``(B, T, H, W)``.
        batch: The batch, whose first sample the messages name.
        values: What the model returns, as the shape message names it (``masks``, ``ids``).
        wanted: What a model should have returned, as the message for a non-tensor says it
            (``a tensor (2, 4, 64, 64) (a mask per frame)``).

    Raises:
        ModelOutputError: for a non-tensor or a wrong shape.
    """
    after = f"(B, T, H, W) (first sample {first_id(batch)})"
    return shaped_tensor(predictions, expected, values=values, wanted=wanted, after=after)


def shaped_tensor(predictions: Any, expected: tuple[int, ...], *, values: str, wanted: str, after: str) -> torch.Tensor:
    """``predictions``, when they are a tensor of shape ``expected``.

    Args:
        predictions: What a model returned.
        expected: The shape they must have.
        values: What the model returns, as the shape message names it (``predictions``, ``masks``).
        wanted: What a model should have returned, as the message for a non-tensor says it.
        after: What the shape message says after the expected shape: what it holds, the
            batch's first sample.

    Raises:
        ModelOutputError: for a non-tensor or a wrong shape.
    """
    if not isinstance(predictions, torch.Tensor):
        raise ModelOutputError(f"model returned {type(predictions).__name__}, expected {wanted}")
    if tuple(predictions.shape) != expected:
        raise ModelOutputError(
            f"model returned {values} of shape {tuple(predictions.shape)}, expected {expected} {after}"
        )
    return predictions


def logit_masks(predictions: torch.Tensor, batch: Batch, *, first: str = "first sample") -> torch.Tensor:
    """Bool masks of a referring or sounding-object model: bool predictions as they are, float logits
    thresholded at 0 (a pixel is in the mask where its logit is above it).

    Args:
        predictions: The model's masks, already of the right shape.
        batch: The batch, whose first sample the message for non-finite logits names.
        first: The words before that sample's id in the message (``batch starting at``).

    Raises:
        ModelOutputError: for an integer dtype, or NaN / infinite logits.

    Shape:
        predictions: any; return: the same, bool.
    """
    if predictions.dtype == torch.bool:
        return predictions
    if not predictions.is_floating_point():
        raise ModelOutputError(
            f"model returned masks of dtype {predictions.dtype}; expected bool masks or float logits (thresholded at 0)"
        )
    finite = torch.isfinite(predictions)
    if not bool(finite.all()):
        bad = int(finite.numel() - finite.sum())
        raise ModelOutputError(
            f"model returned NaN or infinite logits ({bad} of {finite.numel()} values; {first} {first_id(batch)})"
        )
    return predictions > REFERRING_LOGIT_THRESHOLD


def upload(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``host`` on ``device``, in its own dtype, moved as cheaply as its values allow.

    To a CUDA device the copy starts from pinned memory, so that it runs asynchronously
    beside the model's kernels instead of stalling the host, and integer labels travel in the
    narrowest integer type that holds their values and are widened on the device: a 512x512
    int64 label map is 2 MiB, its uint8 twin 256 KiB. Values and dtype are those of ``host``.

    Shape:
        host: any, on the CPU; return: same, on ``device``.
    """
    if device.type != "cuda" or host.device.type != "cpu":
        return host.to(device, non_blocking=True)
    narrow = _narrowest(host)
    moved = narrow.pin_memory().to(device, non_blocking=True)
    return moved if moved.dtype == host.dtype else moved.to(host.dtype)


def _narrowest(host: torch.Tensor) -> torch.Tensor:
    # The same values in uint8 or int16 where they fit (one pass over the values to know).
    if host.dtype not in (torch.int16, torch.int32, torch.int64) or host.numel() == 0:
        return host
    low, high = (int(v) for v in torch.aminmax(host))
    if 0 <= low and high <= 255:
        return host.to(torch.uint8)
    if host.dtype != torch.int16 and -(2**15) <= low and high < 2**15:
        return host.to(torch.int16)
    return host
