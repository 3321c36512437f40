"""Audio-visual segmentation (AVSBench S4 / MS3): segment what sounds in each frame, from the clip and its audio.

A sample is one clip (:mod:`pytest_segrobust.data.clips`): its frames (``video``), the
sounding mask per frame (``objects``: 1 where a pixel sounds, 0 elsewhere, object id 1) and
its sound (``audio``, :class:`~pytest_segrobust.data.clips.ClipAudio`). They are collated into
:class:`~pytest_segrobust.core.types.Video`, :class:`~pytest_segrobust.core.types.VideoMasks`,
:class:`~pytest_segrobust.core.types.Audio` (one span of samples per frame) and
:class:`~pytest_segrobust.corruptions.acoustic.CompetingAudio`: for each clip, the waveform
of the clip :func:`~pytest_segrobust.corruptions.acoustic.competing_clip` names (with seed
0: which clip competes is fixed per dataset, while ``background_noise``'s SNR and offset
follow the suite's seed). A dataset that can read a clip's sound alone offers
``read_audio(sample_id) -> ClipAudio`` and its ids as ``sample_ids``; otherwise the competing
clip is read as a whole sample (its frames decoded too) and the ids are read once per dataset.
A dataset of one clip has no competitor: its ``CompetingAudio`` is silence, which
``background_noise`` adds as nothing.

Models follow :class:`~pytest_segrobust.models.audio_visual.AudioVisualModel`:
``predict(clips, audio)`` returns ``(B, T, H, W)`` bool masks or float logits (thresholded at
0); the checked predictions are :class:`~pytest_segrobust.metrics.avs.SoundingMasks`, which
keep the logits' sigmoid for AVSBench's F. Default metrics: ``avs_miou``, ``avs_f``
(:mod:`pytest_segrobust.metrics.avs`); the video metrics (``vos_j``...) score them too.

Suite keys: the video tasks' ``static``, ``dynamic`` and ``temporal``
(:mod:`pytest_segrobust.tasks.clip_cells`), and two of its own::

    acoustic: [gain, low_pass]        # adds these cells of the avs-acoustic preset (whatever the
                                      # suite's preset, as temporal does for video-temporal)
    mixture: r2bench                  # adds the cell av-mixture: per clip, visual only (40%),
                                      # audio only (40%) or both (20%), R2-Bench's cross-modal mixture
    mixture: {protocol: r2bench, visual: [gaussian_noise, motion_blur], audio: [gain, time_mask]}

The mixture draws from the listed frame perturbations (visual) and the ``acoustic`` cells, or
else the listed acoustic ones, or else the whole ``avs-acoustic`` preset (audio). R2-Bench's
ablation (one named perturbation on every clip at a fixed level) is an ordinary cell: a
listed or ``acoustic`` perturbation at the suite's ``severities``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import torch

from pytest_segrobust.core.errors import DatasetError, SegRobustError
from pytest_segrobust.core.modality import Modality
from pytest_segrobust.core.types import Audio, Batch, Field, SampleIndex, Video, VideoMasks, field_of
from pytest_segrobust.corruptions.acoustic import CompetingAudio, competing_clip
from pytest_segrobust.corruptions.base import Corruption
from pytest_segrobust.corruptions.mixture import R2BENCH, CrossModalMixture, MixtureDraw, MixtureProtocol
from pytest_segrobust.data.base import Sample, SegmentationDataset
from pytest_segrobust.data.clips import ClipAudio
from pytest_segrobust.metrics.avs import SOUNDING, SoundingMasks
from pytest_segrobust.models.audio_visual import AudioVisualModel
from pytest_segrobust.tasks import register_task
from pytest_segrobust.tasks.base import (
    SuiteCells,
    SuiteKeyError,
    Task,
    clip_tensor,
    logit_masks,
    suite_list,
    suite_mapping,
    upload,
)
from pytest_segrobust.tasks.clip_cells import CLIP_SUITE_KEYS, ClipCells, clip_cells, perturbs_frames, preset_list
from pytest_segrobust.tasks.vos import clip_fields, clip_key, upload_clips, upload_objects

ACOUSTIC_PRESET = "avs-acoustic"
MIXTURE_CELL = "av-mixture"
MIXTURE_STREAM = "mixture:r2bench-avs"
"""The name slot of :func:`~pytest_segrobust.randomness.seeding.sample_seed` for the mixture's draws (no perturbation has it)."""


AUDIO_VISUAL_MIXTURE = MixtureProtocol(Modality.AUDIO, MIXTURE_STREAM)
"""R2-Bench's mixture of a visual perturbation and an acoustic one."""


def mixture_draw(seed: int, sample_id: str, visual: Sequence[str], audio: Sequence[str]) -> MixtureDraw:
    """One clip's modality (40 / 40 / 20) and types (each uniform over its list), a function of
    ``(seed, sample_id)`` and the lists alone: the same at every level, in any batch or worker."""
    return AUDIO_VISUAL_MIXTURE.draw(seed, sample_id, visual, audio)


class AudioVisualMixture(CrossModalMixture):
    """R2-Bench's cross-modal mixture for AVS at one level: per clip, visual only, audio only or both.

    Each clip's draw is :func:`mixture_draw` of the suite's seed and its id; the cell's
    severity is the level of the parts. A part draws from ``part_seed(clip seed, part name)``,
    so a clip is perturbed alike in any batch, order or worker.
    """

    def __init__(self, visual: Sequence[Corruption[Any]], audio: Sequence[Corruption[Any]], seed: int) -> None:
        super().__init__(MIXTURE_CELL, AUDIO_VISUAL_MIXTURE, visual, audio, seed)  # the sound is its ``other``


@dataclass(frozen=True)
class MixtureSpec:
    """A suite's ``mixture``: the perturbations drawn per clip (visual ones resolved as the suite's cells)."""

    visual: tuple[str, ...]
    audio: tuple[str, ...]


@dataclass(frozen=True)
class AudioVisualCells(SuiteCells):
    """An AVS suite's video keys, its ``acoustic`` cells and its mixture."""

    clip: ClipCells = field(default_factory=ClipCells)
    acoustic: tuple[str, ...] = ()
    mixture: MixtureSpec | None = None
    seed: int = 0

    @property
    def added(self) -> tuple[str, ...]:  # type: ignore[override]
        return (*self.clip.added, *self.acoustic, *(() if self.mixture is None else (MIXTURE_CELL,)))

    @property
    def once(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.clip.once

    def with_seed(self, seed: int) -> SuiteCells:
        return replace(self, seed=seed)

    def cell(self, name: str, resolve: Callable[..., Any]) -> Any:
        if self.mixture is not None and name == MIXTURE_CELL:
            visual = [self.cell(part, resolve) for part in self.mixture.visual]
            return AudioVisualMixture(visual, [self.cell(part, resolve) for part in self.mixture.audio], self.seed)
        if name in self.acoustic:
            return resolve(name, ACOUSTIC_PRESET)
        return self.clip.cell(name, resolve)


def audio_visual_cells(
    options: Mapping[str, Any], corruptions: tuple[str, ...], resolve: Callable[..., Any]
) -> AudioVisualCells:
    """An AVS suite's keys (see the module).

    Raises:
        SuiteKeyError: naming the field at fault.
    """
    clip = clip_cells({k: v for k, v in options.items() if k in CLIP_SUITE_KEYS}, corruptions, resolve)
    acoustic = _acoustic(options["acoustic"], corruptions, resolve) if "acoustic" in options else ()
    if "mixture" not in options:
        return AudioVisualCells(clip, acoustic)
    raw = options["mixture"]
    spec = {"protocol": raw} if isinstance(raw, str) else raw
    expected = "'r2bench' or a mapping {protocol: r2bench, visual: [...], audio: [...]}"
    # A wrong protocol is named before an unknown field; a value that is no mapping, by suite_mapping.
    if isinstance(spec, dict) and spec.get("protocol") != R2BENCH:
        raise SuiteKeyError("mixture", f"expected {expected}, got {raw!r}")
    known = ("protocol", "visual", "audio")
    spec = suite_mapping("mixture", spec, expected, known, "unknown field; expected protocol, visual or audio")
    listed = AudioVisualCells(clip, acoustic)
    visual = _mixture_names(spec, "visual", corruptions, lambda name: _fits(listed, name, resolve, visual=True))
    audio = _mixture_names(spec, "audio", acoustic, lambda name: _fits(listed, name, resolve, visual=False))
    if not visual:
        raise SuiteKeyError("mixture.visual", "none of the listed corruptions perturbs frames; list some here")
    if not audio:
        audio = tuple(name for name in corruptions if _fits(listed, name, resolve, visual=False))
        audio = audio or tuple(c.name for c in _acoustic_preset(resolve))
    return AudioVisualCells(clip, acoustic, MixtureSpec(visual, audio))


def _acoustic_preset(resolve: Callable[..., Any]) -> list[Corruption[Any]]:
    from pytest_segrobust.corruptions.registry import REGISTRY

    return [resolve(c.name, ACOUSTIC_PRESET) for c in REGISTRY.preset(ACOUSTIC_PRESET)]


def _fits(cells: AudioVisualCells, name: str, resolve: Callable[..., Any], *, visual: bool) -> bool:
    try:
        corruption = cells.cell(name, resolve) if name in (*cells.acoustic, *cells.clip.temporal) else resolve(name)
    except SegRobustError:
        try:
            corruption = resolve(name, ACOUSTIC_PRESET)
        except SegRobustError:
            return False
    if not isinstance(corruption, Corruption):
        return False
    return perturbs_frames(corruption) if visual else corruption.modality is Modality.AUDIO


def _mixture_names(
    spec: Mapping[str, Any], kind: str, defaults: tuple[str, ...], fits: Callable[[str], bool]
) -> tuple[str, ...]:
    if kind not in spec:
        return tuple(name for name in defaults if fits(name))
    what = "a frame perturbation (not temporal, text or acoustic)" if kind == "visual" else "an acoustic perturbation"
    return suite_list(
        f"mixture.{kind}", spec[kind], "names", lambda name: None if fits(name) else f"expected {what}, got {name!r}"
    )


def _acoustic(raw: Any, listed: tuple[str, ...], resolve: Callable[..., Any]) -> tuple[str, ...]:
    return preset_list("acoustic", raw, "acoustic perturbations", listed, resolve, ACOUSTIC_PRESET)


# The sample ids of datasets that do not list them, read once per dataset object.
_IDS: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()


def dataset_ids(dataset: SegmentationDataset) -> tuple[str, ...]:
    """Every sample id of ``dataset``: its ``sample_ids`` where it has them, else read once (every sample)."""
    listed = getattr(dataset, "sample_ids", None)
    if listed is not None:
        return tuple(listed)
    try:
        return _IDS[dataset]
    except (KeyError, TypeError):
        ids = tuple(dataset[i].sample_id for i in range(len(dataset)))
        try:
            _IDS[dataset] = ids
        except TypeError:  # not weakly referable: read again next time
            pass
        return ids


def competing_audio(
    task: Task, sample: Sample, own: ClipAudio, dataset: SegmentationDataset
) -> tuple[str, torch.Tensor]:
    """The id and waveform ``(C, S')`` of the clip competing with ``sample`` in ``background_noise``
    (silence where the dataset has no other clip).

    Raises:
        DatasetError: for a competing clip whose sound is not a :class:`ClipAudio`, or is at another
            sample rate than the clip's (naming both clips and both rates).
    """
    ids = dataset_ids(dataset)
    try:
        other = competing_clip(sample.sample_id, ids)
    except ValueError:
        return "", torch.zeros_like(own.waveform)
    reader = getattr(dataset, "read_audio", None)
    if callable(reader):
        audio = reader(other)
    else:
        audio = task.read(dataset[ids.index(other)], "audio", dataset)
    if not isinstance(audio, ClipAudio):
        raise DatasetError(
            f"{dataset.name}: sample {other}: field 'audio' is {type(audio).__name__}, expected "
            "pytest_segrobust.data.clips.ClipAudio"
        )
    if audio.sample_rate != own.sample_rate:
        # Which of the two is at another rate than the rest of the dataset is not known here;
        # a dataset that knows its rate (AVSBench) refuses the file itself when it reads it.
        raise DatasetError(
            f"{dataset.name}: sample {sample.sample_id}'s field 'audio' is at {own.sample_rate} Hz and sample "
            f"{other}'s (the clip competing with it in background_noise) at {audio.sample_rate} Hz; the clips of a "
            "dataset share one sample rate, so one of the two sound files is at another"
        )
    return other, audio.waveform


@register_task
class AudioVisualTask(Task):
    name = "avs"
    default_metrics = ("avs_miou", "avs_f")
    target_types = (VideoMasks,)
    reads = ("video", "objects", "audio")
    collates: ClassVar[Mapping[str, type[Field]]] = {
        "video": Video,
        "objects": VideoMasks,
        "audio": Audio,
        "competing": CompetingAudio,
        "index": SampleIndex,
    }
    model_protocol = AudioVisualModel
    model_description = (
        "an AudioVisualModel (predict(clips, audio) -> (B, T, H, W) bool masks or float logits, device, fingerprint)"
    )

    suite_keys = (*CLIP_SUITE_KEYS, "acoustic", "mixture")
    resampling_unit = "clip"

    def suite_cells(
        self, options: Mapping[str, Any], corruptions: tuple[str, ...], resolve: Callable[[str], Any]
    ) -> SuiteCells:
        """``static``, ``dynamic``, ``temporal``, ``acoustic`` and ``mixture`` (see the module)."""
        return audio_visual_cells(options, corruptions, resolve)

    def batch_key(self, sample: Sample) -> Hashable:
        audio = sample.fields.get("audio")
        shape = tuple(audio.waveform.shape) if isinstance(audio, ClipAudio) else None
        rate = audio.sample_rate if isinstance(audio, ClipAudio) else None
        return (clip_key(sample), shape, rate)

    def collate(
        self, samples: Sequence[Sample], positions: Sequence[int], dataset: SegmentationDataset, device: torch.device
    ) -> dict[str, Field]:
        clips = clip_fields(self, samples, dataset)
        sounds = [self._audio(sample, dataset) for sample in samples]
        first = sounds[0]
        for sample, sound in zip(samples, sounds, strict=True):
            if (sound.sample_rate, sound.layout, sound.waveform.shape) != (
                first.sample_rate,
                first.layout,
                first.waveform.shape,
            ):
                raise DatasetError(
                    f"{dataset.name}: sample {sample.sample_id}: field 'audio' is {sound.layout} "
                    f"{tuple(sound.waveform.shape)} at {sound.sample_rate} Hz, and {samples[0].sample_id}'s in its "
                    f"batch {first.layout} {tuple(first.waveform.shape)} at {first.sample_rate} Hz"
                )
        competing = [competing_audio(self, sample, sound, dataset) for sample, sound in zip(samples, sounds)]
        frames = int(clips[0][0].frames.shape[0])
        waveform = upload(torch.stack([s.waveform.float() for s in sounds]), device)
        fields: dict[str, Field] = {
            "video": upload_clips([video for video, _ in clips], device),
            "audio": Audio.of(waveform, first.sample_rate, frames, first.layout),
            "competing": CompetingAudio(
                _stacked([wave for _, wave in competing], first.waveform, device),
                first.sample_rate,
                tuple(i for i, _ in competing),
            ),
            "index": SampleIndex(tuple(positions), tuple(s.sample_id for s in samples)),
        }
        return self.declared(fields | self.targets(samples, dataset, device))

    def _audio(self, sample: Sample, dataset: SegmentationDataset) -> ClipAudio:
        audio = self.read(sample, "audio", dataset)
        if not isinstance(audio, ClipAudio):
            raise DatasetError(
                f"{dataset.name}: sample {sample.sample_id}: field 'audio' is {type(audio).__name__}, expected "
                "pytest_segrobust.data.clips.ClipAudio"
            )
        return audio

    def targets(
        self, samples: Sequence[Sample], dataset: SegmentationDataset, device: torch.device
    ) -> dict[str, Field]:
        objects = [objects for _, objects in clip_fields(self, samples, dataset)]
        for sample, clip in zip(samples, objects, strict=True):
            if clip.object_ids != (SOUNDING,):
                raise DatasetError(
                    f"{dataset.name}: sample {sample.sample_id}: field 'objects' has objects {list(clip.object_ids)}; "
                    f"an audio-visual clip has one, the sounding mask ({SOUNDING})"
                )
        return {"objects": upload_objects(objects, device)}

    def predict(self, model: Any, batch: Batch) -> Any:
        """``model.predict(clips, audio)`` with the batch's (possibly perturbed) frames and waveforms."""
        return model.predict(field_of(batch, Video).data, field_of(batch, Audio))

    def check_predictions(self, predictions: Any, batch: Batch) -> SoundingMasks:
        """:class:`SoundingMasks`: 1 where the bool mask is set or the logit is above 0, with the logits' sigmoid.

        Raises:
            ModelOutputError: for a non-tensor, a wrong shape, an integer dtype, or NaN / infinite logits.
        """
        target = field_of(batch, VideoMasks)
        expected = tuple(target.data.shape)
        wanted = f"a tensor {expected} (a mask per frame)"
        predictions = clip_tensor(predictions, expected, batch, values="masks", wanted=wanted)
        masks = logit_masks(predictions, batch)
        # AVSBench's F ranks pixels by the logits' sigmoid; bool masks give none.
        probabilities = torch.sigmoid(predictions.float()) if predictions.is_floating_point() else None
        return SoundingMasks(
            masks.long().to(target.data.device),
            target.object_ids,
            target.annotated,
            target.frame_ids,
            target.ignore_index,
            target.unseen,
            None if probabilities is None else probabilities.to(target.data.device),
        )


def _stacked(waves: Sequence[torch.Tensor], like: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Competing waveforms as one ``(B, C, S)`` tensor of the clips' shape ``like`` (``(C, S)``): each looped or
    cut to the clip's length, and one of another channel count mixed down to mono and heard on every channel
    (as ``background_noise`` would); a function of the competing clip alone, whatever the batch."""
    channels, length = int(like.shape[0]), int(like.shape[-1])
    out = []
    for wave in waves:
        wave = wave.float()
        if wave.shape[0] != channels:
            wave = wave.mean(dim=0, keepdim=True).expand(channels, -1)
        if wave.shape[-1] == 0:
            wave = torch.zeros(channels, 1)
        repeats = -(-length // int(wave.shape[-1]))
        out.append(wave.repeat(1, repeats)[:, :length])
    return upload(torch.stack(out), device)
