"""Shared helpers of the storage tests: a state class with custom fields, and short saves."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from tenxgraph.core.state import AgentState, Message, append_items
from tenxgraph.storage.checkpointer import BaseCheckpointer


class Counted(AgentState):
    count: int = 0
    tags: Annotated[list[str], append_items] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)


def msg(text: str, role: Any = "user") -> Message:
    return Message.text_message(text, role)


def state_with(*texts: str, **fields: Any) -> Counted:
    return Counted(context=[msg(t) for t in texts], **fields)


async def save(
    store: BaseCheckpointer,
    thread_id: str,
    state: AgentState,
    expected: int | None,
    new: list[Message] | None = None,
    rewrite: bool = False,
) -> int:
    return await store.asave(
        thread_id,
        expected_version=expected,
        state=state,
        new_messages=state.context if new is None else new,
        rewrite=rewrite,
    )


async def texts_of(
    store: BaseCheckpointer, thread_id: str, version: int | None = None
) -> list[str]:
    snapshot = await store.aload(thread_id, Counted, version)
    assert snapshot is not None
    return [m.text() for m in snapshot.state.context]
