from __future__ import annotations

import subprocess
import sys

from pytest_segrobust.seeding import sample_seed


def test_seed_is_stable_across_processes_and_hash_randomisation() -> None:
    code = "from pytest_segrobust.seeding import sample_seed; print(sample_seed(0, 'demo/val/00003', 'rotate', 3))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "123", "PATH": ""}).stdout.strip()
    assert int(other) == sample_seed(0, "demo/val/00003", "rotate", 3)


def test_every_component_changes_the_seed() -> None:
    base = sample_seed(0, "a", "rotate", 3)
    variants = [sample_seed(1, "a", "rotate", 3), sample_seed(0, "b", "rotate", 3),
                sample_seed(0, "a", "shear", 3), sample_seed(0, "a", "rotate", 4)]
    assert len({base, *variants}) == 5
    assert all(0 <= s < 2**63 for s in variants)


def test_fields_cannot_run_into_each_other() -> None:
    assert sample_seed(0, "a1", "x", 1) != sample_seed(0, "a", "1x", 1)
