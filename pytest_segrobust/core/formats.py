"""Format versions and fields of what crosses a process or a file (records, outcomes, shard
plans, the report's coverage, decisions): a value written in another version, or naming other
fields, is refused, never half-read."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
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


def same_fields(cls: type, data: Mapping[str, Any], what: str, derived: Iterable[str] = ()) -> dict[str, Any]:
    """``data`` as keyword arguments of the dataclass ``cls``, whose fields it must name, no more and no fewer.

    Args:
        cls: The dataclass the JSON is made into.
        data: The JSON value as read.
        what: What the value is, for the message (``"a requirement check"``).
        derived: Keys the JSON carries besides the fields, computed from them (checked to be
            there, left out of the result).

    Raises:
        ValueError: naming the fields missing and unknown, so that a change of the producer's
            JSON is seen where it is read, not lost.
    """
    extra = tuple(derived)
    expected = [f.name for f in dataclasses.fields(cls)] + list(extra)
    if set(data) != set(expected):
        missing, unknown = sorted(set(expected) - set(data)), sorted(set(data) - set(expected))
        raise ValueError(f"{what} has fields {expected}; missing {missing}, unknown {unknown}")
    return {key: value for key, value in data.items() if key not in extra}
