"""Context managers decide which part of a long history the model sees on the next call."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from tenxgraph.core.redaction import get_logger
from tenxgraph.core.state.agent_state import AgentState
from tenxgraph.core.state.message import Message
from tenxgraph.core.state.reducers import remove_tool_messages

S = TypeVar("S", bound=AgentState)

log = get_logger("tenxgraph.context")


class BaseContextManager(ABC, Generic[S]):
    """Trims or condenses `state.context` before a model call. Implement both forms."""

    @abstractmethod
    def trim_context(self, state: S) -> S:
        """Return the state whose `context` the model should see."""

    @abstractmethod
    async def atrim_context(self, state: S) -> S:
        """Async form of `trim_context`."""

    async def atrim_overflow(self, state: S) -> S:
        """The context to retry with after the model refused it as too long: by default the
        trimmed context without its older half of user turns (tool exchanges stay whole)."""
        trimmed = await self.atrim_context(state)
        turns = sum(m.role == "user" for m in trimmed.context)
        if turns < 2:
            return trimmed
        kept = MessageContextManager(turns // 2).trim_messages(trimmed.context)
        return trimmed.model_copy(update={"context": kept})


class MessageContextManager(BaseContextManager[S]):
    """Keep system messages, the first message, and the last `max_messages` user turns (each
    user message with everything after it).

    Cutting only at user messages (and keeping a tool-calling first message with its results)
    means an assistant tool call is never separated from its tool results. With
    `remove_tool_msgs=True`, finished tool exchanges are dropped as well (see
    `remove_tool_messages`). The input state is not modified: a trimmed copy is returned, and the
    same state object when nothing needed trimming.
    """

    def __init__(self, max_messages: int = 10, remove_tool_msgs: bool = False) -> None:
        if max_messages < 1:
            raise ValueError(f"max_messages must be at least 1, got {max_messages}")
        self.max_messages = max_messages
        self.remove_tool_msgs = remove_tool_msgs

    def __repr__(self) -> str:
        return f"MessageContextManager(max_messages={self.max_messages})"

    def trim_messages(self, messages: list[Message]) -> list[Message]:
        """The messages to keep, in their original order."""
        cut = _start_of_last_turns(messages, self.max_messages)
        if cut > 0:
            first = 1  # the first message, with its tool results when it asks for tools
            if messages[0].role == "assistant" and messages[0].has_tool_calls():
                while first < cut and messages[first].role == "tool":
                    first += 1
            # the system messages of the part cut away are kept (a lazy history finds them
            # without reading that part)
            select = getattr(messages, "with_role_system", None)
            if select is not None:
                system = select(first, cut)
            else:
                system = [m for m in messages[first:cut] if m.role == "system"]
            messages = [*messages[:first], *system, *messages[cut:]]
        if self.remove_tool_msgs:
            messages = remove_tool_messages(messages)
        return messages

    def trim_context(self, state: S) -> S:
        kept = self.trim_messages(state.context)
        if len(kept) == len(state.context):
            return state
        if log.isEnabledFor(logging.INFO):
            log_trim(self, state, len(kept), len(state.context) - len(kept), "dropped")
        return state.model_copy(update={"context": kept})

    async def atrim_context(self, state: S) -> S:
        return self.trim_context(state)


def log_trim(manager: object, state: AgentState, kept: int, dropped: int, how: str) -> None:
    """One INFO record for a trim that left messages out of the model's view: counts and the
    thread, never contents."""
    log.info(
        "%r: context of thread %s trimmed: %d messages kept, %d %s", manager,
        state.execution_meta.thread_id or "-", kept, dropped, how,
    )  # fmt: skip


def _start_of_last_turns(messages: list[Message], turns: int) -> int:
    """Where the last `turns` user turns start; 0 when there are no more than that (found
    from the end, so the cost is that of the kept part)."""
    seen = 0
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            seen += 1
            if seen > turns:
                return next(j for j in range(i + 1, len(messages)) if messages[j].role == "user")
    return 0


__all__ = ["BaseContextManager", "MessageContextManager"]
