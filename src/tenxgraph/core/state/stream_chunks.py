"""`StreamChunk`: one event of a streamed run."""

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

from tenxgraph.core.state.agent_state import AgentState
from tenxgraph.core.state.message import Message


class StreamEvent(StrEnum):
    """What a chunk carries: a message, a state snapshot, a progress update, an error, or
    what a node chose to stream (`CustomEvent`)."""

    STATE = "state"
    MESSAGE = "message"
    ERROR = "error"
    UPDATES = "updates"
    CUSTOM = "custom"


@dataclass(frozen=True, slots=True)
class CustomEvent:
    """Yielded by an async generator node, `data` goes out on `astream` as a chunk of its own
    (`event="custom"`, `data={"data": data}`) at every granularity, and on a server's
    `custom` stream mode; `ainvoke` drops it. Progress, partial results: whatever a UI of
    yours wants to show while the node runs. `data` must be JSON (it may be sent and stored).
    """

    data: Any


class StreamChunk(BaseModel):
    """One streamed event. Each chunk is a new object with its own `timestamp`."""

    model_config = ConfigDict(use_enum_values=True, defer_build=True)

    # The value, not the member: a default is not validated, so use_enum_values would not apply.
    event: StreamEvent = cast(StreamEvent, StreamEvent.MESSAGE.value)
    message: Message | None = None
    state: SerializeAsAny[AgentState] | None = None
    data: dict[str, Any] | None = None
    thread_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    timestamp: float = Field(default_factory=time.time)
    # where it was made: () for the graph that was run, ("research",) for its subgraph node
    # "research", ("research", "search") for a subgraph of that one
    namespace: tuple[str, ...] = ()


__all__ = ["CustomEvent", "StreamChunk", "StreamEvent"]
