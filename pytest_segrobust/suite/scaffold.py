"""``segrobust init``: a new project's suite, empty baselines folder, model-factory stub and dataset stub.

One :class:`Scaffold` per (task, data layout): the suite it writes names the layout's reader in
:mod:`pytest_segrobust.data` and the factory in ``model.py``. The stubs run as written (the
model stub returns the package's demo network for the task, the dataset stub writes a few demo
samples in the layout), so the first ``pytest --segrobust --segrobust-update-baselines`` records
and the next passes; the user then puts their model and data where the stubs say. Nothing that
exists is overwritten: :func:`write_project` names every file in the way and writes none.
"""

from __future__ import annotations

import wave
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from pytest_segrobust.core.errors import SegRobustError

# DAVIS's palette for the first objects (index 0 black); the rest black.
_DAVIS_PALETTE = [0, 0, 0, 128, 0, 0, 0, 128, 0, 128, 128, 0, 0, 0, 128] + [0, 0, 0] * 251
_STUB_SAMPLES = 4  # demo samples a dataset stub writes: enough to run, few enough to read
_AVS_CLIPS = 2  # AVSBench clips the stub writes (5 s of 16 kHz sound each)


@dataclass(frozen=True)
class Scaffold:
    """What ``init`` writes for one task on one data layout.

    Attributes:
        task: The suite's ``task``.
        layout: The data layout's name on the command line.
        what: One line for the prompt and ``--help``.
        dataset: The suite's ``dataset`` block (YAML, indented two spaces).
        cells: The suite's perturbation keys and metric (YAML).
        model_factory: The body of ``model.py``'s ``build_model`` after the marked line.
        model_contract: What the user's model must take and return (for ``model.py``'s docstring).
        default_data: The data folder the suite reads unless ``--data`` names another.
        write_data: Writes the dataset stub (a few demo samples) into a data folder.
        data_files: The files ``write_data`` writes, relative to the data folder.
    """

    task: str
    layout: str
    what: str
    dataset: str
    cells: str
    model_factory: str
    model_contract: str
    default_data: str
    write_data: Callable[[Path], None]
    data_files: Callable[[], list[str]]


def _image_folder_files() -> list[str]:
    return [f"{kind}/sample-{i}.png" for kind in ("images", "masks") for i in range(_STUB_SAMPLES)]


def _write_image_folder(folder: Path) -> None:
    from pytest_segrobust.data.demo import generate_scene

    for index in range(_STUB_SAMPLES):
        scene = generate_scene("val", index, image_size=64)
        _save_png(folder / "images" / f"sample-{index}.png", scene.pixels.transpose(1, 2, 0))
        _save_png(folder / "masks" / f"sample-{index}.png", scene.labels.astype(np.uint8))


def _coco_files() -> list[str]:
    return ["annotations.json", *(f"images/sample-{i}.png" for i in range(_STUB_SAMPLES))]


def _write_coco(folder: Path) -> None:
    import json

    from pycocotools import mask as mask_utils

    from pytest_segrobust.data.demo import CATEGORIES, generate_scene

    images: list[dict[str, object]] = []
    annotations: list[dict[str, object]] = []
    for index in range(_STUB_SAMPLES):
        scene = generate_scene("val", index, image_size=64)
        file_name = f"sample-{index}.png"
        _save_png(folder / "images" / file_name, scene.pixels.transpose(1, 2, 0))
        images.append({"id": index + 1, "file_name": file_name, "height": 64, "width": 64})
        target = scene.instances()
        for mask, label in zip(target.masks.numpy(), target.labels.tolist(), strict=True):
            rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": index + 1,
                    "category_id": int(label),
                    "segmentation": {"size": [64, 64], "counts": rle["counts"].decode("ascii")},
                    "area": float(mask.sum()),
                    "bbox": [float(v) for v in mask_utils.toBbox(rle)],
                    "iscrowd": 0,
                }
            )
    document = {"images": images, "annotations": annotations, "categories": [dict(c) for c in CATEGORIES]}
    (folder / "annotations.json").write_text(json.dumps(document))


# Demo clips that show every object in their first frame, where DAVIS gives its objects.
_DAVIS_DEMO_CLIPS = (1, 2)


def _davis_files() -> list[str]:
    from pytest_segrobust.data.demo_video import FRAMES

    frames = [
        f"{kind}/480p/clip-{clip}/{frame:05d}.{suffix}"
        for clip in range(len(_DAVIS_DEMO_CLIPS))
        for frame in range(FRAMES)
        for kind, suffix in (("JPEGImages", "jpg"), ("Annotations", "png"))
    ]
    return [*frames, "ImageSets/2017/val.txt"]


def _write_davis(davis: Path) -> None:
    from pytest_segrobust.data.demo_video import generate_clip

    names: list[str] = []
    for clip_number, demo_index in enumerate(_DAVIS_DEMO_CLIPS):
        clip = generate_clip("val", demo_index)
        name = f"clip-{clip_number}"
        names.append(name)
        for frame, (pixels, mask) in enumerate(zip(clip.frames, clip.masks, strict=True)):
            jpeg = davis / "JPEGImages" / "480p" / name / f"{frame:05d}.jpg"
            jpeg.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.ascontiguousarray(pixels.transpose(1, 2, 0))).save(jpeg, quality=90)
            labels = Image.fromarray(mask.astype(np.uint8), mode="P")
            labels.putpalette(_DAVIS_PALETTE)
            png = davis / "Annotations" / "480p" / name / f"{frame:05d}.png"
            png.parent.mkdir(parents=True, exist_ok=True)
            labels.save(png)
    split = davis / "ImageSets" / "2017" / "val.txt"
    split.parent.mkdir(parents=True, exist_ok=True)
    split.write_text("".join(f"{name}\n" for name in names))


def _avsbench_files() -> list[str]:
    data = "s4_data"
    files = ["s4_meta_data.csv"]
    for clip in range(_AVS_CLIPS):
        name = f"clip-{clip}"
        files += [
            f"{data}/{kind}/test/sound/{name}/{name}_{k}.png"
            for kind in ("visual_frames", "gt_masks")
            for k in range(1, 6)
        ]
        files.append(f"{data}/audio_wav/test/sound/{name}.wav")
    return files


def _write_avsbench(source: Path) -> None:
    from pytest_segrobust.data.demo_avs import FRAMES, SAMPLE_RATE, generate_clip

    data = source / "s4_data"
    rows = ["name,category,split"]
    for index in range(_AVS_CLIPS):
        clip = generate_clip("val", index)
        name = f"clip-{index}"
        rows.append(f"{name},sound,test")
        for frame in range(FRAMES):
            frame_file = data / "visual_frames" / "test" / "sound" / name / f"{name}_{frame + 1}.png"
            _save_png(frame_file, clip.frames[frame].transpose(1, 2, 0))
            mask_file = data / "gt_masks" / "test" / "sound" / name / f"{name}_{frame + 1}.png"
            _save_png(mask_file, (clip.masks[frame] * 255).astype(np.uint8))
        sound = data / "audio_wav" / "test" / "sound" / f"{name}.wav"
        sound.parent.mkdir(parents=True, exist_ok=True)
        pcm = np.round(np.clip(clip.waveform, -1.0, 1.0) * 32767).astype("<i2")
        with wave.open(str(sound), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(SAMPLE_RATE)
            out.writeframes(pcm.tobytes())
    (source / "s4_meta_data.csv").write_text("\n".join(rows) + "\n")


def _save_png(path: Path, pixels: np.ndarray) -> None:
    """Write ``pixels`` (``(H, W, 3)`` or ``(H, W)`` uint8) as a PNG, making its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.ascontiguousarray(pixels)).save(path)


SCAFFOLDS: Mapping[tuple[str, str], Scaffold] = {
    (s.task, s.layout): s
    for s in (
        Scaffold(
            task="semantic",
            layout="image-folder",
            what="semantic segmentation on a folder of images and a folder of label maps",
            dataset=(
                "  factory: pytest_segrobust.data.semantic_folder:SemanticFolder\n"
                "  # images/<id>.png (or .jpg) with masks/<id>.png: one grey level per class id, 255 unscored\n"
                "  kwargs:\n"
                "    images_dir: {data}/images\n"
                "    masks_dir: {data}/masks\n"
                "    class_names: [background, striped, checkered, dotted, smooth]\n"
            ),
            cells="corruptions: [gaussian_noise, defocus_blur, rotate]\nmetric: miou\n",
            model_factory=(
                "    from pytest_segrobust.models.demo import tiny_unet\n\n"
                "    return tiny_unet()  # the package's demo network, trained on scenes like the stub's\n"
            ),
            model_contract="takes float RGB images in [0, 1], (B, 3, H, W), and returns class logits (B, K, H, W)",
            default_data="data",
            write_data=_write_image_folder,
            data_files=_image_folder_files,
        ),
        Scaffold(
            task="instance",
            layout="coco",
            what="instance segmentation on a COCO json and its folder of images",
            dataset=(
                "  factory: pytest_segrobust.data.coco:CocoInstances\n"
                "  # annotations.json: images, annotations (polygons or RLE), categories; file names under images/\n"
                "  kwargs: {{images_dir: {data}/images, annotation_file: {data}/annotations.json}}\n"
            ),
            cells="corruptions: [gaussian_noise, defocus_blur, rotate]\nmetric: map\n",
            model_factory=(
                "    from pytest_segrobust.models.demo import tiny_unet_instances\n\n"
                "    return tiny_unet_instances()  # the package's demo network, its regions as instances\n"
            ),
            model_contract=(
                "takes float RGB images in [0, 1], (B, 3, H, W), and returns per image a mapping with masks "
                "(N, H, W) bool, labels (N,) int64 (1-based, in category id order) and scores (N,) float"
            ),
            default_data="data",
            write_data=_write_coco,
            data_files=_coco_files,
        ),
        Scaffold(
            task="vos",
            layout="davis",
            what="semi-supervised video object segmentation on a DAVIS 2017 folder",
            dataset=(
                "  factory: pytest_segrobust.data.davis:davis\n"
                "  # JPEGImages/480p/<clip>/*.jpg, Annotations/480p/<clip>/*.png (palette), ImageSets/2017/val.txt\n"
                "  kwargs: {{root: {data}, split: val}}\n"
            ),
            cells="corruptions: [gaussian_noise, defocus_blur]\ntemporal: [frame_freeze]\nmetrics: [vos_jf]\n",
            model_factory=(
                "    from pytest_segrobust.models.demo_video import tiny_vos\n\n"
                "    return tiny_vos()  # the package's demo tracker, trained on clips like the stub's\n"
            ),
            model_contract=(
                "takes clips, float RGB in [0, 1] (B, T, 3, H, W), and a reference, int64 (B, T, H, W) holding each "
                "object's id where it is given (its first frame) and 0 elsewhere, and returns an object id per pixel "
                "and frame (B, T, H, W)"
            ),
            default_data="data/DAVIS",
            write_data=_write_davis,
            data_files=_davis_files,
        ),
        Scaffold(
            task="avs",
            layout="avsbench",
            what="audio-visual segmentation on an AVSBench S4 folder",
            dataset=(
                "  factory: pytest_segrobust.data.avsbench:avsbench\n"
                "  # s4_meta_data.csv (name,category,split), s4_data/visual_frames, gt_masks, audio_wav (16 kHz)\n"
                "  kwargs: {{root: {data}, subset: s4, split: test}}\n"
            ),
            cells="corruptions: [gaussian_noise]\nacoustic: [audio_gaussian_noise, time_mask]\nmetrics: [avs_miou, avs_f]\n",
            model_factory=(
                "    from pytest_segrobust.models.demo_avs import tiny_avs\n\n"
                "    return tiny_avs()  # the package's demo network, trained on clips like the stub's\n"
            ),
            model_contract=(
                "has predict(clips, audio): clips float RGB in [0, 1] (B, T, 3, H, W), audio the batch's Audio "
                "(waveform (B, C, S), sample_rate, frame spans), returning logits (B, T, H, W) thresholded at 0"
            ),
            default_data="data/Single-source",
            write_data=_write_avsbench,
            data_files=_avsbench_files,
        ),
        Scaffold(
            task="promptable",
            layout="coco",
            what="promptable (SAM-style) segmentation on a COCO json and its folder of images",
            dataset=(
                "  factory: pytest_segrobust.data.coco:CocoInstances\n"
                "  # annotations.json: images, annotations (polygons or RLE), categories; file names under images/\n"
                "  kwargs: {{images_dir: {data}/images, annotation_file: {data}/annotations.json}}\n"
            ),
            cells=(
                "# Every instance is asked once with a click at its centre and once with its tight box.\n"
                "prompts: {points: {count: 1, where: center}, box: tight, mask: false}\n"
                "preset: coco-p-prompts   # COCO-P's corruptions and the prompt perturbations\n"
                "corruptions: [gaussian_noise, box_jitter, rotate+point_displacement]\n"
                "metrics: [promptable_miou]\n"
            ),
            model_factory=(
                "    from pytest_segrobust.models.demo_promptable import tiny_promptable\n\n"
                "    return tiny_promptable()  # the package's demo promptable network, trained on scenes like the stub's\n"
            ),
            model_contract=(
                "has predict(images, prompts): images float RGB in [0, 1] (B, 3, H, W), prompts[b] image b's prompt "
                "sets (points (P, 2) (x, y), labels, box (x0, y0, x1, y1) or None), returning per image one mask per "
                "prompt set (P, H, W), bool or logits; or it is a function segment(image, prompts) of an (H, W, 3) "
                "uint8 array and prompt dicts, returning (len(prompts), H, W) masks"
            ),
            default_data="data",
            write_data=_write_coco,
            data_files=_coco_files,
        ),
    )
}
"""Every (task, layout) ``init`` offers."""


def layouts_of(task: str) -> list[str]:
    """The data layouts ``init`` offers for ``task``."""
    return [layout for known, layout in SCAFFOLDS if known == task]


def choose(task: str, layout: str) -> Scaffold:
    """The scaffold of ``task`` on ``layout``.

    Raises:
        SegRobustError: naming the flag and what it may be, for an unknown task or layout.
    """
    tasks = list(dict.fromkeys(known for known, _ in SCAFFOLDS))
    if task not in tasks:
        raise SegRobustError(f"--task: no scaffold for task {task!r}; choose from {', '.join(tasks)}")
    if (task, layout) not in SCAFFOLDS:
        raise SegRobustError(
            f"--layout: no scaffold for layout {layout!r} of task {task}; choose from {', '.join(layouts_of(task))}"
        )
    return SCAFFOLDS[task, layout]


def suite_text(scaffold: Scaffold, name: str, data: str) -> str:
    """The suite file ``init`` writes for ``scaffold``, named ``name``, reading the data folder ``data``."""
    return (
        f"# Written by `segrobust init --task {scaffold.task} --layout {scaffold.layout}`: {scaffold.what}.\n"
        f"name: {name}\n"
        f"task: {scaffold.task}\n"
        f"dataset:\n{scaffold.dataset.format(data=data)}"
        "models:\n"
        "  - name: my-model\n"
        "    factory: model:build_model   # model.py beside this project's suites/ folder\n"
        f"{scaffold.cells}"
        "severities: [3, 5]\n"
        "# Each number may move 1 point (0.01 of gamma_r) the wrong way from its baseline. With a few\n"
        "# hundred samples, the statistical gate (`gate: {margin: ...}`) decides with confidence instead.\n"
        "tolerance: {gamma_r: 0.01, score: 1.0}\n"
        "batch_size: 8\n"
        "seed: 0\n"
    )


def model_text(scaffold: Scaffold) -> str:
    """The model-factory stub ``model.py``: runnable as written, marked where the user's model goes."""
    return (
        f'"""The model factory the suite names (``model:build_model``), for task {scaffold.task}."""\n\n'
        "from __future__ import annotations\n\n"
        "from typing import Any\n\n\n"
        "def build_model() -> Any:\n"
        '    """Build the model to gate, ready for inference (eval mode).\n\n'
        f"    The model {scaffold.model_contract}.\n"
        '    """\n'
        "    # >>> YOUR MODEL GOES HERE: build it, load its weights, call .eval() and return it.\n"
        "    # Until then the stub returns a small trained demo network, so the suite runs as written.\n"
        f"{scaffold.model_factory}"
    )


def planned_files(scaffold: Scaffold, name: str, data: str | None) -> dict[str, str | None]:
    """Each file ``init`` writes, relative to the project, with its text (``None``: the dataset stub's).

    ``data`` is the user's data folder (no stub is written), or ``None`` for the stub in the
    layout's default folder.
    """
    files: dict[str, str | None] = {
        f"suites/{name}.yaml": suite_text(scaffold, name, data or scaffold.default_data),
        "model.py": model_text(scaffold),
    }
    if data is None:
        files.update(dict.fromkeys(f"{scaffold.default_data}/{file}" for file in scaffold.data_files()))
    return files


def write_project(root: Path, scaffold: Scaffold, name: str, data: str | None = None) -> list[str]:
    """Write the suite, ``baselines/``, ``model.py`` and, unless ``data`` names the user's data, the dataset stub.

    Args:
        root: The project folder.
        scaffold: What to write.
        name: The suite's name (``suites/<name>.yaml``).
        data: The user's data folder in the layout, as the suite names it (relative to ``root``
            or absolute); ``None`` writes a few demo samples into the layout's default folder.

    Returns:
        The files written, relative to ``root``.

    Raises:
        SegRobustError: naming every planned file that exists (then nothing is written), a
            suite name that cannot be a file name, or a ``data`` folder that does not exist.
    """
    if not name or name != Path(name).name or name.startswith("."):
        raise SegRobustError(f"--name: {name!r} is not a plain file name (it names suites/<name>.yaml)")
    if data is not None and not (root / data).is_dir():
        raise SegRobustError(f"--data: {data}: no such folder (leave --data out for a stub in {scaffold.default_data})")
    files = planned_files(scaffold, name, data)
    existing = [relative for relative in files if (root / relative).exists()]
    if existing:
        shown = ", ".join(existing[:5]) + (f" and {len(existing) - 5} more" if len(existing) > 5 else "")
        raise SegRobustError(f"not overwriting {shown}: move them away, or run init in an empty folder")
    (root / "baselines").mkdir(parents=True, exist_ok=True)
    for relative, text in files.items():
        if text is not None:
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_text(text)
    if data is None:
        scaffold.write_data(root / scaffold.default_data)
    return list(files)


def init(
    root: Path,
    task: str | None,
    layout: str | None,
    data: str | None,
    name: str | None,
    ask: Callable[[str], str] | None,
) -> list[str]:
    """``segrobust init``: ask for what the flags left out (where ``ask`` is given), write the project.

    Args:
        root: The project folder (the current one).
        task, layout, data, name: The flags' values, ``None`` where left out.
        ask: Reads an answer to a prompt (``input`` on a terminal); ``None`` when stdin is not
            one, and then a left-out task or layout is an error naming its flag.

    Returns:
        The lines to print: what was written and the next command.

    Raises:
        SegRobustError: for a missing flag without a terminal, an unknown choice, or files in the way.
    """
    tasks = list(dict.fromkeys(known for known, _ in SCAFFOLDS))
    task = task or _answer(ask, "--task", "task", tasks)
    layout = layout or _answer(ask, "--layout", f"data layout for {task}", layouts_of(task) or ["(none)"])
    scaffold = choose(task, layout)
    if name is None:
        name = (ask(f"suite name [{task}]: ").strip() if ask else "") or task
    written = write_project(root, scaffold, name, data)
    stub = "your data in --data" if data else f"a dataset stub in {scaffold.default_data}/ (a few demo samples)"
    return [
        f"wrote suites/{name}.yaml, model.py (its stub returns a demo network), {stub}, and baselines/",
        f"({len(written)} files; put your model in model.py's build_model and your data in the suite's dataset)",
        "next: pytest --segrobust --segrobust-update-baselines   # records baselines/; then `pytest --segrobust` gates",
    ]


def _answer(ask: Callable[[str], str] | None, flag: str, what: str, choices: list[str]) -> str:
    """The choice typed at a prompt, by name or number.

    Raises:
        SegRobustError: without a terminal (naming ``flag``), or for a choice not offered.
    """
    if ask is None:
        raise SegRobustError(f"{flag}: required when stdin is not a terminal; choose from {', '.join(choices)}")
    listed = "  ".join(f"{number}) {choice}" for number, choice in enumerate(choices, start=1))
    typed = ask(f"{what}: {listed}\n> ").strip()
    if typed.isdigit() and 1 <= int(typed) <= len(choices):
        return choices[int(typed) - 1]
    if typed in choices:
        return typed
    raise SegRobustError(f"{flag}: {typed!r} is not one of {', '.join(choices)}")
