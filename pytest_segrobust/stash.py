"""Where a run keeps its state on pytest's config; importable without torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_segrobust.session import SegRobustSession  # noqa: F401 - named in a string annotation

# The run's session: set at configure time with --segrobust, on first use of the fixture otherwise.
SESSION_KEY = pytest.StashKey["SegRobustSession"]()
# The registry as it was before this run's registrations, restored at unconfigure.
REGISTRY_SNAPSHOT_KEY = pytest.StashKey[dict]()
# Key of a worker's payload in xdist's workeroutput.
PAYLOAD_KEY = "segrobust"
