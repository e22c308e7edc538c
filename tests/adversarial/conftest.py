"""The adversarial suite: promises tried as a hostile user would, on every checkpointer.

`backend` / `checkpointer` run a test on memory, SQLite and PostgreSQL (PostgreSQL needs
TENXGRAPH_TEST_PG_DSN; `.ci/run` starts a server on loopback). `sql_backend` is SQLite and
PostgreSQL only, for tests that reach into stored rows. `slept` (autouse): model retries
record their delays instead of sleeping.
"""

from __future__ import annotations

from tests.core.conftest import slept
from tests.storage.conftest import backend, checkpointer, sql_backend

__all__ = ["backend", "checkpointer", "slept", "sql_backend"]
