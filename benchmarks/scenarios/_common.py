"""Shared helpers for benchmark scenarios (each scenario runs as a script in a peer's env)."""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence


def emit(measures: dict[str, float]) -> None:
    """Print the scenario's measurements as the one JSON line `run.py` reads."""
    print(json.dumps(measures))
    sys.stdout.flush()


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
