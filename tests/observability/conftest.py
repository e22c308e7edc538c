"""Usage, cost and hooks, on every checkpointer.

`backend` / `checkpointer` run a test on memory, SQLite and PostgreSQL (PostgreSQL needs
TENXGRAPH_TEST_PG_DSN). `slept` (autouse): model retries record their delays instead of
sleeping.
"""

from __future__ import annotations

from tests.core.conftest import slept
from tests.storage.conftest import backend, checkpointer, sql_backend

__all__ = ["backend", "checkpointer", "slept", "sql_backend"]
