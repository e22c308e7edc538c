"""Checkpointers: `InMemoryCheckpointer` (tests, notebooks); SQLite and PostgreSQL follow."""

from tenxgraph.storage.checkpointer.base import BaseCheckpointer, ThreadSnapshot
from tenxgraph.storage.checkpointer.memory import InMemoryCheckpointer

__all__ = ["BaseCheckpointer", "InMemoryCheckpointer", "ThreadSnapshot"]
