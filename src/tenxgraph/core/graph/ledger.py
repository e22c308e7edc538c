"""The tool ledger of a run: a finished tool call is recorded at once and, when its step runs
again (resumed after an interrupt, or after a crash), replayed instead of executed twice."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from pydantic_core import to_json

if TYPE_CHECKING:
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer

# without a checkpointer, a compiled graph remembers this many results in memory (enough for
# a run paused in this process to resume; nothing survives the process anyway)
MEMORY_LEDGER_SIZE = 10_000

MemoryLedger = OrderedDict[tuple[str, str, str], str]


class ToolLedger:
    """Results of tool calls on one thread, keyed by (assistant message id, tool call id).

    Backed by the graph's checkpointer, so it survives the process; a graph without one keeps
    a bounded in-memory ledger. Records (JSON data and pydantic models) are stored as JSON."""

    __slots__ = ("_checkpointer", "_memory", "thread_id")

    def __init__(
        self, checkpointer: BaseCheckpointer | None, thread_id: str, memory: MemoryLedger
    ) -> None:
        self._checkpointer = checkpointer
        self._memory = memory
        self.thread_id = thread_id

    async def get(self, message_id: str | int, call_id: str) -> dict[str, Any] | None:
        if self._checkpointer is not None:
            return await self._checkpointer.aget_tool_result(
                self.thread_id, str(message_id), call_id
            )
        found = self._memory.get((self.thread_id, str(message_id), call_id))
        return None if found is None else json.loads(found)

    async def put(self, message_id: str | int, call_id: str, record: dict[str, Any]) -> bool:
        """Record a result; False if the call already had one (the first record wins)."""
        if self._checkpointer is not None:
            return await self._checkpointer.aput_tool_result(
                self.thread_id, str(message_id), call_id, record
            )
        key = (self.thread_id, str(message_id), call_id)
        memory = self._memory
        if key in memory:
            return False
        memory[key] = to_json(record).decode()
        if len(memory) > MEMORY_LEDGER_SIZE:
            memory.popitem(last=False)
        return True


__all__ = ["MEMORY_LEDGER_SIZE", "MemoryLedger", "ToolLedger"]
