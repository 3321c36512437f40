"""A model source of a plugin: ``binner: <window>`` builds the fakes' red binner with that smoothing
window. Registered in-process by tests/test_model_source_registry.py, installed through an entry
point by tests/test_entry_point_groups.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_segrobust.suite.model_sources.base import EntryContext, FieldError, ModelRequest, ModelSource
from tests.fakes import RedBinner


@dataclass(frozen=True)
class Binned:
    """What a ``binner:`` entry says: the smoothing window."""

    smoothing: int


class BinnerSource(ModelSource):
    name = "binner"
    summary = "a smoothing window"

    def read(self, entry: Mapping[str, Any], context: EntryContext) -> Binned:
        unknown = sorted(str(key) for key in entry if key not in ("name", "binner"))
        if unknown:
            raise FieldError(unknown[0], "unknown field of a binner; expected name, binner")
        smoothing = entry["binner"]
        if isinstance(smoothing, bool) or not isinstance(smoothing, int) or smoothing < 1:
            raise FieldError("binner", f"expected a smoothing window >= 1, got {smoothing!r}")
        return Binned(smoothing)

    def build(self, settings: Binned, request: ModelRequest) -> RedBinner:
        return RedBinner(smoothing=settings.smoothing).to(request.device)

    def describe(self, settings: Binned) -> str:
        return f"binner of window {settings.smoothing}"
