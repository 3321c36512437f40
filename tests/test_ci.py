"""CI runs what README tells a reader to run: the demo gate, then every test, the same commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What README's commands do before the command proper, and .ci/run does on lines of its own.
SETUP = {"python3 -m venv .venv", ". .venv/bin/activate"}


def readme_commands() -> list[str]:
    """README's first two bash blocks (the demo gate, the tests), without the virtual environment's setup."""
    blocks = re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), flags=re.DOTALL)[:2]
    return [" && ".join(part for part in block.split(" && ") if part not in SETUP) for block in blocks]


def test_ci_runs_the_readmes_commands_line_for_line() -> None:
    gate, tests = readme_commands()
    assert gate.endswith("pytest --segrobust -n 2") and tests.startswith("pytest")
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert gate in lines and tests in lines


def test_ci_leaves_no_test_out(pytestconfig: pytest.Config) -> None:
    """The slow proofs run in CI: neither the command nor pytest's settings select by marker."""
    _, tests = readme_commands()
    assert "-m" not in tests.split() and "-m" not in pytestconfig.getini("addopts")
    assert any(marker.startswith("slow:") for marker in pytestconfig.getini("markers"))
