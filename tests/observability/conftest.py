"""Usage, cost and hooks, on every checkpointer.

`backend` / `checkpointer` run a test on memory, SQLite and PostgreSQL (PostgreSQL needs
TENXGRAPH_TEST_PG_DSN). `slept` (autouse): model retries record their delays instead of
sleeping. `openai_api`: the mocked OpenAI endpoint.
"""

from __future__ import annotations

from tests.core.conftest import openai_api, slept
from tests.storage.conftest import backend, checkpointer, sql_backend

__all__ = ["backend", "checkpointer", "openai_api", "slept", "sql_backend"]
