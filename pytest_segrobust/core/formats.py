"""Format versions of what crosses a process or a file (records, outcomes, shard plans, the
report's coverage): a value written in another version is refused, never half-read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def check_format(data: Mapping[str, Any], expected: int, what: str) -> None:
    """Refuse ``data`` unless its ``format`` is ``expected``.

    Args:
        data: The JSON value as read.
        expected: The format this code writes and reads.
        what: What the value is, for the message (``"cell record"``).

    Raises:
        ValueError: ``cell record of format 2, expected 1`` (``None`` where it has no format).
    """
    if data.get("format") != expected:
        raise ValueError(f"{what} of format {data.get('format')!r}, expected {expected}")
