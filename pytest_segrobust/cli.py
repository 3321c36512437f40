"""The ``segrobust`` command: inspect the corruption catalogue, merge the shards of a run, measure a suite's
numeric noise, convert refs files."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from pytest_segrobust import __version__
from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.types import Audio
from pytest_segrobust.core.wording import plural
from pytest_segrobust.corruptions import DEFAULT_PRESET, REGISTRY, Corruption
from pytest_segrobust.engine.suite_pictures import (
    SPECTROGRAM_FLOOR_DB,
    SPECTROGRAM_LEVELS,
    gallery_tiles,
    spectrogram_tiles,
)
from pytest_segrobust.report.gallery import render_gallery


def _add_rootdir(command: argparse.ArgumentParser, project: str) -> None:
    """A command's ``--rootdir DIR``: ``project`` (what the folder is to the command), the current folder by default."""
    command.add_argument(
        "--rootdir", type=Path, default=Path.cwd(), metavar="DIR", help=f"{project} (default: the current folder)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="segrobust", description="Segmentation robustness gate for pytest.")
    parser.add_argument("--version", action="version", version=f"segrobust {__version__} (torch {torch.__version__})")
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser(
        "list",
        help="list everything a suite may name, by family: image presets, text, temporal and acoustic "
        "perturbations with their severity parameters, and the suite keys that add cells (dynamic, mixture, replay)",
    )
    listing.add_argument(
        "--family", default=None, help="only this family (image, text, temporal, acoustic, dynamic, mixture, replay...)"
    )
    listing.add_argument(
        "--preset",
        default=None,
        help=f"only this preset, or text for the text perturbations (default: all; {DEFAULT_PRESET} first, then by name)",
    )
    listing.add_argument(
        "--names",
        action="store_true",
        help="only the perturbation names, one per line, each once (for scripts); a suite key family's: its key",
    )
    gallery = commands.add_parser(
        "gallery",
        help="one image under every corruption of a preset, as a PNG grid (acoustic presets: the demo clip's "
        "sound as spectrograms)",
    )
    gallery.add_argument(
        "image",
        type=Path,
        nargs="?",
        default=None,
        help="an image file Pillow can read; left out for acoustic perturbations, which show the sound of the "
        "first demo audio-visual clip",
    )
    gallery.add_argument("--out", type=Path, required=True, help="PNG file to write")
    gallery.add_argument("--preset", default=DEFAULT_PRESET, help=f"whose corruptions (default {DEFAULT_PRESET})")
    gallery.add_argument(
        "--corruptions", nargs="+", default=None, metavar="NAME", help="only these of the preset, in this order"
    )
    gallery.add_argument(
        "--severities", type=int, nargs="+", default=None, help="columns (default 1 3 5; for sound 1 2 3 4 5)"
    )
    gallery.add_argument(
        "--size", type=int, default=160, help="longer side of each shown tile in pixels (default 160); corruption runs at full size"
    )
    gallery.add_argument("--seed", type=int, default=0, help="global seed of the random draws (default 0)")
    merge = commands.add_parser(
        "merge",
        help="write the report (and baselines) of a run from its shard files (pytest --segrobust-shard K/N)",
        description="Check that the files are the N shards of one run, made from the same suites, baselines, "
        "models, data and evaluator, gate every cell again from what its shard measured against the baselines "
        "here, then write the report that run would have written. Exit status: 0 when the merged verdict "
        "passes, 1 when it fails, 2 when the shards cannot be merged.",
    )
    merge.add_argument("shards", type=Path, nargs="+", metavar="SHARD", help="the shard files, <report>-shard-K-of-N.json")
    merge.add_argument(
        "--report",
        metavar="BASE",
        default=None,
        help="report path without suffix, relative to the rootdir as --segrobust-report is "
        "(default: the report path the shards were run with)",
    )
    merge.add_argument(
        "--update-baselines",
        action="store_true",
        help="write the baselines the shards measured; given exactly when the shards ran with --segrobust-update-baselines",
    )
    _add_rootdir(merge, "the project the shards ran in")
    convert = commands.add_parser(
        "convert-refs",
        help="convert a RefCOCO-style refs pickle (refs(unc).p) to JSON, refusing any pickle that asks for code",
        description="Read the refs file with an unpickler that allows only lists, dicts, strings and numbers "
        "(nothing in the file is run) and write the refs as JSON, which RefCoco datasets read as well.",
    )
    convert.add_argument("source", type=Path, help="the refs pickle, e.g. refcoco/refs(unc).p")
    convert.add_argument("target", type=Path, help="the JSON file to write, e.g. refcoco/refs(unc).json")
    calibrate = commands.add_parser(
        "calibrate",
        help="re-run a suite's cells under other batch sizes, autocast, TF32 and devices: its numeric noise per cell",
        description="Evaluate each model's clean cell and every corruption (at the suite's middle severity, or "
        "--severities) under the reference execution (the suite's batch size, float32, the CPU) and under each "
        "variation of one thing: batch 1 and twice the size, autocast, TF32 and every other device where CUDA or "
        "MPS is present. Prints the largest change of each cell's score and gamma_r, and warns where it reaches "
        "the suite's margin. Exit status: 0 when every margin stands above the noise, 1 when one does not, 2 "
        "for bad input.",
    )
    calibrate.add_argument("suite", type=Path, help="the suite file, e.g. suites/demo.yaml")
    calibrate.add_argument("--severities", type=int, nargs="+", default=None, help="severities to measure (1..5)")
    _add_rootdir(calibrate, "the project the suite belongs to")
    init = commands.add_parser(
        "init",
        help="start a project here: a suite, baselines/, a model-factory stub and a dataset stub for a task and data layout",
        description="Write suites/<name>.yaml, an empty baselines/, model.py (a factory stub marked where your model "
        "goes, runnable as is) and a dataset stub in the layout, refusing to overwrite anything; then print the next "
        "command. Asks for what the flags leave out when stdin is a terminal.",
    )
    init.add_argument("--task", default=None, help="semantic, instance, vos or avs")
    init.add_argument("--layout", default=None, help="image-folder (semantic), coco (instance), davis (vos) or avsbench (avs)")
    init.add_argument("--data", default=None, metavar="DIR", help="your data folder in the layout (default: a stub)")
    init.add_argument("--name", default=None, help="the suite's name (default: the task)")
    args = parser.parse_args(argv)
    try:
        if args.command == "init":
            from pytest_segrobust.suite.scaffold import init as init_project

            ask = input if sys.stdin.isatty() else None
            print("\n".join(init_project(Path.cwd(), args.task, args.layout, args.data, args.name, ask)))
            return 0
        if args.command == "calibrate":
            return _calibrate(args.suite, args.severities, args.rootdir)
        if args.command == "convert-refs":
            return _convert_refs(args.source, args.target)
        if args.command == "merge":
            return _merge(args.shards, args.report, args.update_baselines, args.rootdir)
        REGISTRY.load_entry_points()
        if args.command == "gallery":
            return _gallery(args.image, args.out, args.preset, args.corruptions, args.severities, args.size, args.seed)
        return _list(listing, args.family, args.preset, names=args.names)
    except SegRobustError as exc:
        print(f"segrobust: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`segrobust list | head`): stop quietly, as cat or ls do. Pointing
        # stdout at devnull keeps the interpreter's final flush from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE: what a shell reports for a writer the closed pipe ended


def _gallery(
    image_path: Path | None,
    out: Path,
    preset: str,
    names: list[str] | None,
    severities: list[int] | None,
    size: int,
    seed: int,
) -> int:
    if size < 1:
        raise SegRobustError(f"--size: expected a number of pixels >= 1, got {size}")
    bad = [s for s in severities or () if not 1 <= s <= 5]
    if bad:
        raise SegRobustError(f"--severities: expected values 1..5, got {bad}")
    corruptions = _chosen(preset, names)
    sounds = [c for c in corruptions if c.accepts(Audio)]
    if sounds and len(sounds) != len(corruptions):
        raise SegRobustError(
            f"preset {preset} mixes acoustic perturbations ({', '.join(c.name for c in sounds)}) with corruptions "
            "of images: choose one kind with --corruptions"
        )
    if sounds:
        if image_path is not None:
            raise SegRobustError(
                f"{image_path}: the perturbations of {preset} act on sound; their gallery shows the demo clip's "
                "sound as spectrograms: leave out the image"
            )
        severities = severities or list(SPECTROGRAM_LEVELS)
        batch, sample_id = _demo_sound()
        tiles = spectrogram_tiles(batch, corruptions, severities, seed=seed, sample_id=sample_id, tile=size)
        grid = render_gallery(tiles, columns=1, column_title="level")
        what = f"spectrograms of {sample_id}'s sound (log magnitude, {SPECTROGRAM_FLOOR_DB:.0f}..0 dBFS)"
    else:
        if image_path is None:
            raise SegRobustError(f"IMAGE: the corruptions of {preset} act on images: name an image file")
        severities = severities or [1, 3, 5]
        try:
            with Image.open(image_path) as opened:
                picture = opened.convert("RGB")
        except OSError as exc:
            raise SegRobustError(f"{image_path}: cannot read the image ({exc})") from exc
        image = torch.from_numpy(np.array(picture)).permute(2, 0, 1).contiguous()
        # Corrupted at full resolution, as a model sees the image; shrunk to --size only for display.
        tiles = gallery_tiles(image, corruptions, severities, seed=seed, sample_id=image_path.name, tile=size)
        grid = render_gallery(tiles)
        what = ""
    out.parent.mkdir(parents=True, exist_ok=True)
    grid.save(out, format="PNG")
    shown = plural(len(corruptions), "corruption")
    print(f"wrote {out}: {shown} of {preset} at severities {', '.join(map(str, severities))}" + (f": {what}" if what else ""))
    return 0


def _chosen(preset: str, names: list[str] | None) -> list[Corruption[Any]]:
    """The preset's corruptions, or those of ``names`` in their order (an unknown name is an error naming the rest)."""
    available = REGISTRY.available(preset)  # raises for an unknown preset
    if names is None:
        return available
    by_name = {c.name: c for c in available}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise SegRobustError(
            f"--corruptions: no {', '.join(map(repr, unknown))} in preset {preset}; it has {', '.join(by_name)}"
        )
    return [by_name[name] for name in names]


def _demo_sound() -> tuple[dict[str, Any], str]:
    """The first clip of the demo audio-visual set (val), collated as a suite's batch, and its id."""
    from pytest_segrobust.data.demo_avs import demo_avs_dataset
    from pytest_segrobust.tasks import get_task

    dataset = demo_avs_dataset("val")
    sample = dataset[0]
    return get_task("avs").collate([sample], [0], dataset, torch.device("cpu")), sample.sample_id


def _calibrate(path: Path, severities: list[int] | None, rootdir: Path) -> int:
    """Measure a suite's numeric noise; the exit status of ``calibrate``."""
    from dataclasses import replace

    import pytest

    from pytest_segrobust.core.errors import SuiteError
    from pytest_segrobust.engine.calibrate import (
        available_devices,
        calibration_verdict,
        cells_at,
        executions,
        measure,
        report_lines,
    )
    from pytest_segrobust.engine.workbench import Workbench
    from pytest_segrobust.plugin import start_session

    for severity in severities or []:
        if not 1 <= severity <= 5:
            raise SuiteError(f"--severities: expected severities 1..5, got {severity}")
    root = rootdir.resolve()
    suite_path = (path if path.is_absolute() else Path.cwd() / path).resolve()
    if not suite_path.is_file():
        raise SuiteError(f"{path}: no such suite file")
    config = pytest.Config.fromdictargs({}, ["--rootdir", str(root), "-p", "no:cacheprovider", "--segrobust", str(root)])
    session = start_session(config)
    try:
        suite = session.suite(suite_path)

        def bench_for(execution):  # type: ignore[no-untyped-def]
            options = replace(
                session.options, device=execution.device, amp=execution.amp, batch_size=execution.batch_size, cache_dir=None
            )
            return Workbench(options, session.registry, session.runner.bench.adapt_hook, session.runner.bench.shown)

        variants = executions(suite.batch_size, available_devices())
        with session.runner.in_project():
            noises = measure(bench_for, suite, cells_at(suite, severities), variants, progress=print)
    finally:
        session.close()
    lines, warnings = report_lines(suite, noises)
    print("\n".join(lines))
    for warning in warnings:
        print(f"warning: {warning}")
    passed, line = calibration_verdict(suite, noises)
    print(line)
    return 0 if passed else 1


def _merge(paths: list[Path], report: str | None, update: bool, rootdir: Path) -> int:
    """Merge shard files into the report one run would have written; the exit status of ``merge``."""
    import pytest

    from pytest_segrobust.backends.shard_plan import ShardError, check_local_files
    from pytest_segrobust.backends.shards import MergedShards, project_digests
    from pytest_segrobust.plugin import start_session, written_lines
    from pytest_segrobust.report import pictures_left_out_by, terminal_summary
    from pytest_segrobust.run import shards as sharding

    merged = MergedShards.read(paths)
    shards = merged.shards
    first_path, first = shards[0]
    if update and not first.update_baselines:
        raise ShardError(
            f"--update-baselines: the shards were not run with --segrobust-update-baselines ({first_path}): "
            "they compared their cells with the baselines; run them again with it to update"
        )
    if first.update_baselines and not update:
        raise ShardError(
            f"the shards were run with --segrobust-update-baselines ({first_path}): "
            "pass --update-baselines to write the baselines they measured"
        )
    # Shards that all ran with --segrobust-figures=none merge as one run with it; where only some
    # did, the pictures the others made are kept and the report names those that made none.
    without_figures = [str(shard.spec) for _, shard in shards if not shard.figures]
    # The rootdir's configuration, as a run there reads it: ini settings, conftest.py (corruptions
    # and model adapters it registers), installed plugins. Shards that ran with HTML ask for it here.
    root = rootdir.resolve()
    args = ["--rootdir", str(root), "-p", "no:cacheprovider", "--segrobust", "--segrobust-report", report or first.report]
    modes = (
        ("--segrobust-update-baselines", update),
        ("--segrobust-prune", first.prune),
        ("--segrobust-report-html", first.report_html),
        ("--segrobust-figures=none", len(without_figures) == len(shards)),
    )
    args += [flag for flag, on in modes if on]
    try:
        config = pytest.Config.fromdictargs({}, [*args, str(root)])
    except pytest.UsageError as exc:
        raise ShardError(f"{root}: {exc}") from None
    session = start_session(config)
    session.runner.import_factories = False  # a merge measures nothing: the models need not be here
    try:
        suites, baselines = project_digests(session.options, session.rootpath)
        check_local_files(first, first_path, suites, baselines)
        changed = sharding.merge(session, merged)
        session.finish()
    finally:
        session.close()
    for line in changed:
        print(f"note: {line}")
    if not (session.records or session.errors):
        print("no cell was evaluated: no report written, the last one is left as it was")
    elif without_figures and len(without_figures) < len(shards):
        print(f"note: {pictures_left_out_by(without_figures)}")
    for problem in session.problems:
        print(f"error: {problem}", file=sys.stderr)
    for warning in session.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for line in [*(terminal_summary(session.report) if session.report else []), *session.baseline_summary]:
        print(line)
    for line in written_lines(session.written):
        print(line)
    last = session.last_verdict()  # the report's, or the outcomes' where no report could be built
    if last is not None:
        print(last.line())  # the last line, as a run's terminal summary ends
    failed = session.problems or (session.coverage is not None and session.coverage.not_run)
    if last is not None:
        failed = failed or not last.passed
    return 1 if failed else 0


def _convert_refs(source: Path, target: Path) -> int:
    from pytest_segrobust.data.referring import convert_refs

    count = convert_refs(source, target)
    print(f"wrote {target}: {plural(count, 'ref')} from {source}")
    return 0


def _list(parser: argparse.ArgumentParser, family: str | None, preset: str | None, names: bool = False) -> int:
    """Print the catalogue (:mod:`pytest_segrobust.suite.catalogue`), or its names, filtered by family and preset."""
    from pytest_segrobust.suite.catalogue import catalogue
    from pytest_segrobust.text.registry import TextPerturbationRegistry

    text = TextPerturbationRegistry.installed()
    text.load_installed()
    families = catalogue(REGISTRY, text)
    if family is not None and family not in {f.name for f in families}:
        known = ", ".join(repr(f.name) for f in families)
        parser.error(f"argument --family: invalid choice: {family!r} (choose from {known})")  # exits 2
    chosen = [f for f in families if family in (None, f.name)]
    if preset is not None:
        presets = dict.fromkeys(g.name for f in families for g in f.groups if g.selectable)
        if preset not in presets:
            raise SegRobustError(f"unknown preset {preset!r}; known: {', '.join(presets)}")
        chosen = [f for f in chosen if any(g.name == preset and g.selectable for g in f.groups)]
        if not chosen:
            raise SegRobustError(f"preset {preset!r} has no perturbation of family {family}")
    selected = [(f, [g for g in f.groups if preset in (None, g.name)]) for f in chosen]
    if names:
        # Without --family, the perturbations only: what a suite's lists name, as before the suite keys were listed.
        shown = (f.names(groups) for f, groups in selected if family is not None or not f.suite_key)
        print("\n".join(dict.fromkeys(name for listed in shown for name in listed)))
        return 0
    for f, groups in selected:
        print(f.heading)
        for group in groups:
            print(group.heading)
            for detail in group.details:
                print(f"  {detail}")
            for entry in group.entries:
                print(f"  {entry.name}  [{', '.join(entry.tags)}]")
                for line in (entry.description, entry.level and f"level: {entry.level}"):
                    if line:
                        print(f"    {line}")
                for severity, row in enumerate(entry.rows, start=1):
                    print(f"    s{severity}: {row}")
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
