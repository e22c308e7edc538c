"""The adversarial suite: promises tried as a hostile user would, on every checkpointer.

`backend` / `checkpointer` run a test on memory, SQLite and PostgreSQL (PostgreSQL needs
TENXGRAPH_TEST_PG_DSN; `.ci/run` starts a server on loopback). `sql_backend` is SQLite and
PostgreSQL only, for tests that reach into stored rows.
"""

from __future__ import annotations

import pytest

from tenxgraph.core.llm import retry
from tests.storage.conftest import backend, checkpointer, sql_backend

__all__ = ["backend", "checkpointer", "slept", "sql_backend"]


@pytest.fixture(autouse=True)
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays model retries asked for, recorded instead of waited: no test here sleeps."""
    delays: list[float] = []

    async def record(seconds: float) -> None:
        delays.append(seconds)

    monkeypatch.setattr(retry, "sleep", record)
    monkeypatch.setattr(retry, "jitter_source", lambda: 1.0)
    return delays
