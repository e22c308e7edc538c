"""Checkpointers: `InMemoryCheckpointer` (tests, notebooks), `SqliteCheckpointer` (the embedded
default) and `PgCheckpointer` (PostgreSQL, many processes on many hosts).

The SQL checkpointers are loaded on first access, so importing this package does not import
aiosqlite or asyncpg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenxgraph._lazy import lazy_getattr
from tenxgraph.storage.checkpointer.base import BaseCheckpointer, CheckpointInfo, ThreadSnapshot
from tenxgraph.storage.checkpointer.memory import InMemoryCheckpointer

if TYPE_CHECKING:
    from tenxgraph.storage.checkpointer.postgres import PgCheckpointer
    from tenxgraph.storage.checkpointer.sqlite import SqliteCheckpointer

_LAZY = {
    "SqliteCheckpointer": "tenxgraph.storage.checkpointer.sqlite",
    "PgCheckpointer": "tenxgraph.storage.checkpointer.postgres",
}


__getattr__ = lazy_getattr(__name__, globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "BaseCheckpointer",
    "CheckpointInfo",
    "InMemoryCheckpointer",
    "PgCheckpointer",
    "SqliteCheckpointer",
    "ThreadSnapshot",
]
