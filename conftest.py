"""Repository-wide test configuration (the plugin itself loads through its entry point)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

pytest_plugins = ["pytester"]

# Property tests are part of the gate, so they must not flake: CI replays a fixed set of
# examples; locally `HYPOTHESIS_PROFILE=explore` searches afresh.
settings.register_profile(
    "ci", derandomize=True, deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("explore", deadline=None, max_examples=200)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
