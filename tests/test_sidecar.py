"""The sidecar's reader trusts nothing it reads: a damaged ``.stats.npz`` is a ``BaselineError``
naming the file and the flag that rewrites it, never a traceback out of zipfile, zlib or numpy."""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pytest_segrobust.errors import BaselineError
from pytest_segrobust.sidecar import SidecarEntry, read_sidecar, write_sidecar

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
