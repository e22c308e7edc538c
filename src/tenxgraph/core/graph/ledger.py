"""The tool ledger of a run: a finished tool call is recorded at once and, when its step runs
again (resumed after an interrupt, or after a crash), replayed instead of executed twice."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer


class ToolLedger:
    """Results of tool calls on one thread, keyed by (assistant message id, tool call id), in
    the graph's checkpointer. Records (JSON data and pydantic models) are stored as JSON.

    A graph without a checkpointer has no ledger: its threads are not kept, so no step of
    theirs ever runs again."""

    __slots__ = ("_checkpointer", "thread_id")

    def __init__(self, checkpointer: BaseCheckpointer, thread_id: str) -> None:
        self._checkpointer = checkpointer
        self.thread_id = thread_id

    async def get(self, message_id: str | int, call_id: str) -> dict[str, Any] | None:
        return await self._checkpointer.aget_tool_result(
            self.thread_id, ledger_key(str(message_id)), ledger_key(call_id)
        )

    async def put(self, message_id: str | int, call_id: str, record: dict[str, Any]) -> bool:
        """Record a result; False if the call already had one (the first record wins)."""
        return await self._checkpointer.aput_tool_result(
            self.thread_id, ledger_key(str(message_id)), ledger_key(call_id), record
        )


def ledger_key(text: str) -> str:
    """An id as the ledger stores it: as it is when every store can keep it, else a digest.
    Call ids come from the model: one with a NUL byte (which PostgreSQL text refuses), other
    control characters, lone surrogates or an absurd length must not fail the tool step."""
    if len(text) <= _PLAIN_KEY_LENGTH and text.isprintable():
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"sha256:{digest}"


_PLAIN_KEY_LENGTH = 200


def idempotency_key(thread_id: str, message_id: str | int | None, call_id: str) -> str:
    """The key a tool gets as its `idempotency_key` parameter: the same for every run of one
    call (the ids it is made of are stored before the tool runs), different for any other call.

    A tool passes it to the outside system it changes (a payment API's idempotency key, a
    unique column), so that a run repeated after a crash between the side effect and the
    ledger write is recognised there. ``tx_`` and 32 hex digits (a SHA-256 prefix)."""
    parts = (thread_id, "" if message_id is None else str(message_id), call_id)
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    return f"tx_{digest[:32]}"


__all__ = ["ToolLedger", "idempotency_key", "ledger_key"]
