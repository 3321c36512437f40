"""Where a run keeps its state on pytest's config; importable without torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_segrobust.corruptions import CorruptionRegistry
    from pytest_segrobust.run.session import SegRobustSession

# The run's session: set at configure time with --segrobust, on first use of the fixture otherwise.
SESSION_KEY: pytest.StashKey[SegRobustSession] = pytest.StashKey()
# The run's corruptions: the built-ins plus what plugins and conftest files registered.
# Built on first use (plugin.run_registry), so a run without the gate never imports torch.
REGISTRY_KEY: pytest.StashKey[CorruptionRegistry] = pytest.StashKey()
# Key of a worker's payload in xdist's workeroutput.
PAYLOAD_KEY = "segrobust"
