"""Where a report's files go, from the path the user gave (``--segrobust-report``, the
``segrobust_report`` ini value, ``segrobust merge --report``).

The path names the report without its suffix, and everything after its last slash is the
name: ``out/run.1`` writes ``out/run.1.md`` and ``out/run.1.json``, and ``out/run.2`` writes
beside them, never over them. A path that ends in a suffix the report writes (``.md``,
``.json``, ``.html``) names that report: ``out/run.json`` is the report ``out/run``. Every
other file of the report (the HTML page, the figures folder, a partial run's report, a
shard's file) is named by adding to the base, never by replacing its last dot.
"""

from __future__ import annotations

from pathlib import Path

DOCUMENT_SUFFIXES = (".md", ".json", ".html")
"""The suffixes of the report's documents: a report path that ends in one names the report without it."""


def report_base(path: Path) -> Path:
    """The report's base path: ``path`` without a suffix of the report's documents, and unchanged otherwise."""
    if path.suffix.lower() in DOCUMENT_SUFFIXES:
        return path.with_name(path.name[: -len(path.suffix)])
    return path


def report_file(base: Path, suffix: str) -> Path:
    """The file of the report ``base`` with ``suffix`` added (``.md``, ``-partial``, ``-figures``)."""
    return base.with_name(base.name + suffix)
