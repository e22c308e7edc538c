"""Hypothesis profiles for the property tests.

The default profile is deterministic (a fixed seed per test), so a run's result does not depend on
chance. HYPOTHESIS_PROFILE=explore draws new random examples on each run instead.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "deterministic",
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore",
    derandomize=False,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
