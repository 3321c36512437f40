"""The sidecar's reader trusts nothing it reads: a damaged ``.stats.npz`` is a ``BaselineError``
naming the file and the flag that rewrites it, never a traceback out of zipfile, zlib or numpy."""

from __future__ import annotations

import itertools
import json
import os
import struct
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_segrobust.core.errors import BaselineError
from pytest_segrobust.store.baselines import CellKey, Conditions, read_baseline, write_baseline
from pytest_segrobust.store.sidecar import SidecarEntry, SidecarWriter, read_sidecar, sidecar_path, write_sidecar
from tests.plugin_project import run

CENTRAL_HEADER = b"PK\x01\x02"


def recorded(path: Path) -> dict[str, dict[str, np.ndarray]]:
    """Write a small sidecar of two cells (one shared clean array) to ``path``; its arrays by cell."""
    rng = np.random.default_rng(0)
    clean = rng.integers(0, 50, size=(5, 4, 3))
    cells = {f"m::noise::{s}": rng.integers(0, 50, size=(5, 4, 3)) for s in (1, 3)}
    write_sidecar(path, "s", [SidecarEntry(cell, "miou", corrupted, clean, 5) for cell, corrupted in cells.items()])
    return {cell: {"corrupted": corrupted, "clean": clean} for cell, corrupted in cells.items()}


def member_data_offset(data: bytes, name: str) -> tuple[int, int]:
    """Where the compressed data of member ``name`` starts in the archive ``data``, and its length."""
    import io

    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = archive.getinfo(name)
    name_length, extra_length = struct.unpack("<HH", data[info.header_offset + 26 : info.header_offset + 30])
    return info.header_offset + 30 + name_length + extra_length, info.compress_size


def flip_member(name: str) -> Callable[[bytes], bytes]:
    def damage(data: bytes) -> bytes:
        start, size = member_data_offset(data, name)
        middle = start + size // 2
        return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]

    return damage


def set_central_field(offset: int, value: int) -> Callable[[bytes], bytes]:
    """Set a 2-byte field of every central directory entry (6: version needed, 10: compression)."""

    def damage(data: bytes) -> bytes:
        out = bytearray(data)
        at = out.find(CENTRAL_HEADER)
        while at != -1:
            out[at + offset : at + offset + 2] = struct.pack("<H", value)
            at = out.find(CENTRAL_HEADER, at + 4)
        return bytes(out)

    return damage


@pytest.mark.parametrize(
    "damage, message",
    [
        (flip_member("index.npy"), "not a readable statistics file"),  # zlib.error or a CRC mismatch
        (flip_member("a0.npy"), "not a readable statistics file"),
        (set_central_field(6, 100), "not a readable statistics file (NotImplementedError: zip file version 10.0)"),
        (set_central_field(10, 13), "not a readable statistics file (NotImplementedError"),  # compression method 13
        (lambda data: data[: len(data) // 2], "not a readable statistics file"),
        (lambda data: data[:-30], "not a readable statistics file"),  # into the end of central directory
        (lambda data: b"", "not a readable statistics file"),
    ],
    ids=["index-bytes", "array-bytes", "zip-version", "compression-method", "half", "tail", "empty"],
)
def test_a_damaged_sidecar_is_a_baseline_error_naming_the_file_and_the_flag(tmp_path: Path, damage, message) -> None:
    path = tmp_path / "s.stats.npz"
    recorded(path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(BaselineError) as info:
        read_sidecar(path, "baselines/s.stats.npz")
    assert str(info.value).startswith("baselines/s.stats.npz: ")
    assert message in str(info.value) and "--segrobust-update-baselines" in str(info.value)


@pytest.mark.parametrize(
    "arrays, message",
    [
        (
            {
                "index": np.frombuffer(
                    b'{"format": 1, "cells": {"m::c::1": {"miou": {"corrupted": "a0", "clean": "a0", '
                    b'"images": Infinity}}}}',
                    dtype=np.uint8,
                ),
                "a0": np.zeros((2, 3)),
            },
            "index.cells.m::c::1.miou: missing or broken field or array (OverflowError",
        ),
        (
            {
                "index": np.frombuffer(
                    b'{"format": 1, "cells": {"m::c::1": {"miou": {"corrupted": "a0", "clean": "a0", "images": 2}}}}',
                    dtype=np.uint8,
                ),
                "a0": np.array(["ab", "cd"]),
            },
            "index.cells.m::c::1.miou: arrays of <U2 and <U2, expected numbers",
        ),
        ({"index": np.frombuffer(b"[" * 100_000, dtype=np.uint8)}, "index: not JSON (RecursionError"),
    ],
    ids=["infinite-images", "text-arrays", "deep-index"],
)
def test_a_well_formed_archive_with_a_wrong_index_is_a_baseline_error(tmp_path: Path, arrays, message) -> None:
    path = tmp_path / "s.stats.npz"
    np.savez(path, **arrays)
    with pytest.raises(BaselineError, match="--segrobust-update-baselines") as info:
        read_sidecar(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)


def test_random_corruption_reads_the_stored_data_or_raises_a_baseline_error(tmp_path: Path) -> None:
    """50 damaged copies (bytes flipped, overwritten, cut or dropped): each one reads back exactly
    what was stored (a byte zipfile does not look at) or is refused, and never raises anything else."""
    path = tmp_path / "s.stats.npz"
    stored = recorded(path)
    original = path.read_bytes()
    rng = np.random.default_rng(20240533)
    outcomes = {"refused": 0, "intact": 0}
    for trial in range(50):
        data = bytearray(original)
        kind = trial % 4
        if kind == 0:
            for at in rng.integers(0, len(data), size=int(rng.integers(1, 4))):
                data[at] ^= int(rng.integers(1, 256))
        elif kind == 1:
            at = int(rng.integers(0, len(data) - 8))
            data[at : at + 8] = rng.integers(0, 256, size=8, dtype=np.uint8).tobytes()
        elif kind == 2:
            del data[int(rng.integers(0, len(data))) :]
        else:
            at = int(rng.integers(0, len(data)))
            del data[at : at + int(rng.integers(1, 64))]
        path.write_bytes(bytes(data))
        try:
            cells = read_sidecar(path)
        except BaselineError as exc:
            assert str(exc).startswith(f"{path}: ") and "--segrobust-update-baselines" in str(exc), (trial, exc)
            outcomes["refused"] += 1
            continue
        assert sorted(cells) == sorted(stored), trial
        for cell, arrays in stored.items():
            assert np.array_equal(cells[cell]["miou"].corrupted, arrays["corrupted"]), trial
            assert np.array_equal(cells[cell]["miou"].clean, arrays["clean"]), trial
        outcomes["intact"] += 1
    assert outcomes["refused"] >= 40, outcomes  # the damage is real: most copies cannot be read


# -- a baseline JSON and its sidecar change together ------------------------------------------

CONDITIONS = Conditions(task="semantic", metric="miou", preset="coco-p", seed=0, limit=None, dataset="bands-8")
NOISE = CellKey("s", "m", "gaussian_noise", 1)


class Crash(BaseException):
    """A kill -9 at one step of a write: nothing after it runs (BaseException: no handler catches it)."""


def draw(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"corrupted": rng.integers(0, 50, size=(5, 4, 3)), "clean": rng.integers(0, 50, size=(5, 4, 3))}


def write_pair(folder: Path, score: float, seed: int) -> tuple[dict, dict[str, np.ndarray]]:
    """Write the pair with ``score`` and statistics drawn from ``seed``; what a reader should see."""
    statistics = draw(seed)
    entry = SidecarEntry("m::gaussian_noise::1", "miou", statistics["corrupted"], statistics["clean"], 5)
    writer = SidecarWriter(sidecar_path(folder / "s.json"), "s", [entry])
    write_baseline(folder / "s.json", "s", CONDITIONS, [(NOISE, {"score": score})], False, statistics=writer)
    return {"m": {"gaussian_noise": {"1": {"score": score}}}}, statistics


def read_pair(folder: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """The pair as a run reads it: the JSON's numbers and the statistics of the sidecar it records."""
    stored = read_baseline(folder / "s.json")
    assert stored is not None
    cells = read_sidecar(sidecar_path(folder / "s.json"), recorded=stored.statistics)
    found = cells["m::gaussian_noise::1"]["miou"]
    return stored.models, {"corrupted": found.corrupted, "clean": found.clean}


def same(pair: tuple[dict, dict[str, np.ndarray]], other: tuple[dict, dict[str, np.ndarray]]) -> bool:
    return pair[0] == other[0] and all(np.array_equal(pair[1][name], other[1][name]) for name in ("corrupted", "clean"))


def crashing(real: Callable[..., Any], calls: Iterator[int], step: int) -> Callable[..., Any]:
    """``real``, but the ``step``-th call counted by ``calls`` (shared by the patched functions) never happens."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if next(calls) == step:
            raise Crash
        return real(*args, **kwargs)

    return call


def test_a_write_killed_at_any_step_leaves_both_files_old_or_both_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step that makes a write durable or visible (fsync, rename, unlink) is a place a kill
    can land: crash before the k-th, for every k, and read back what the next run reads."""
    new = ({"m": {"gaussian_noise": {"1": {"score": 55.0}}}}, draw(2))
    outcomes = []
    for step in itertools.count():
        folder = tmp_path / f"kill-before-step-{step}"
        folder.mkdir()
        old = write_pair(folder, 60.0, seed=1)
        calls = itertools.count()
        with monkeypatch.context() as patched:
            for name in ("fsync", "replace", "unlink"):
                patched.setattr(os, name, crashing(getattr(os, name), calls, step))
            try:
                assert same(write_pair(folder, 55.0, seed=2), new)
                completed = True
            except Crash:
                completed = False
        seen = read_pair(folder)
        assert same(seen, old) or same(seen, new), step
        outcomes.append("old" if same(seen, old) else "new")
        if completed:  # the write got through without reaching this step: every step was tried
            break
    # Old up to the JSON's rename, new from it on; the steps: the pending sidecar's fsync and
    # rename, the JSON's fsync and rename, the sidecar's rename, one past the end.
    assert outcomes == ["old"] * 4 + ["new"] * 2, outcomes


def test_the_reader_completes_a_write_killed_after_its_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_pair(tmp_path, 60.0, seed=1)
    real_replace = os.replace

    def replace(source: Any, target: Any) -> None:
        if str(target).endswith(".stats.npz"):
            raise Crash
        real_replace(source, target)

    with monkeypatch.context() as patched, pytest.raises(Crash):
        patched.setattr(os, "replace", replace)
        write_pair(tmp_path, 55.0, seed=2)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".pending")]  # staged, not in place
    assert read_pair(tmp_path)[0]["m"]["gaussian_noise"]["1"]["score"] == 55.0
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".pending")]  # rolled forward


def test_a_sidecar_the_json_does_not_record_is_refused_naming_both_flags(tmp_path: Path) -> None:
    write_pair(tmp_path, 60.0, seed=1)
    recorded_content = sidecar_path(tmp_path / "s.json").read_bytes()
    write_pair(tmp_path, 55.0, seed=2)
    sidecar_path(tmp_path / "s.json").write_bytes(recorded_content)  # one file restored without the other
    with pytest.raises(
        BaselineError, match="not the statistics file the baseline JSON was written with.*--segrobust-update-baselines"
    ):
        read_pair(tmp_path)


def test_the_repository_baselines_read_with_their_statistics_records() -> None:
    root = Path(__file__).parents[1] / "baselines"
    for baseline in sorted(root.glob("*.json")):
        stored = read_baseline(baseline)
        assert stored is not None, baseline
        if sidecar_path(baseline).exists():
            assert stored.statistics is not None and stored.statistics.sha256, baseline
            assert read_sidecar(sidecar_path(baseline), recorded=stored.statistics), baseline


def test_a_baseline_written_before_the_record_existed_still_reads(tmp_path: Path) -> None:
    """A file without ``statistics`` (older files) takes its statistics file as found."""
    root = Path(__file__).parents[1] / "baselines"
    data = json.loads((root / "demo.json").read_text())
    assert data.pop("statistics")
    old = tmp_path / "demo.json"
    old.write_text(json.dumps(data))
    sidecar_path(old).write_bytes(sidecar_path(root / "demo.json").read_bytes())
    stored = read_baseline(old)
    assert stored is not None and stored.statistics is None
    assert read_sidecar(sidecar_path(old), recorded=stored.statistics)


# -- an update repairs a broken sidecar, end to end -------------------------------------------

GATED_SUITE = """\
name: bands
dataset: {factory: segrobust_fakes:band_scenes}
models: [{name: binner, factory: segrobust_fakes:red_binner}]
corruptions: [gaussian_noise]
severities: [1]
gate: {margin: {gamma_r: 0.01, score: 1.0}}
batch_size: 4
"""


def test_an_update_rewrites_a_broken_sidecar_and_names_the_cells_left_without_statistics(
    project: pytest.Pytester,
) -> None:
    (project.path / "suites" / "bands.yaml").write_text(GATED_SUITE)
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=2)
    stats = project.path / "baselines" / "bands.stats.npz"
    stats.write_bytes(flip_member("index.npy")(stats.read_bytes()))

    # A gate run fails each cell with one line naming the file (as the rootdir shows it) and the flag.
    result = run(project, "--segrobust")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*baselines/bands.stats.npz: not a readable statistics file*--segrobust-update-baselines*"]
    )
    assert str(stats) not in result.stdout.str() and "Traceback" not in result.stdout.str()

    # An update of one cell rewrites the file, keeping nothing of it, and says what that costs.
    result = run(project, "--segrobust-update-baselines", "-k", "gaussian_noise")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*baselines/bands.stats.npz: could not be read (*); written afresh with the statistics of the 1 cell this update measured*",
            "*baselines/bands.stats.npz: 1 cell not measured by this update has no statistics now*: binner::clean",
        ]
    )
    assert sorted(read_sidecar(stats)) == ["binner::gaussian_noise::1"]
    result = run(project, "--segrobust")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*bands.stats.npz has no per-image statistics of miou for it*"])

    run(project, "--segrobust-update-baselines").assert_outcomes(passed=2)
    run(project, "--segrobust").assert_outcomes(passed=2)
