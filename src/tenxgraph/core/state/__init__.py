"""The data model: content blocks, messages, state, reducers, stream chunks, context managers.

Pure data, no I/O: everything here is a pydantic model or a plain function. The one context
manager that calls a model, `SummaryContextManager`, lives with the model clients
(`tenxgraph.core.llm.summary`) and is importable from here too, loaded on first use.
"""

from typing import TYPE_CHECKING, Any

from tenxgraph.core.state.agent_state import AgentState
from tenxgraph.core.state.context_manager import BaseContextManager, MessageContextManager
from tenxgraph.core.state.execution_state import (
    ExecMeta,
    ExecutionState,
    ExecutionStatus,
    StopRequestStatus,
)
from tenxgraph.core.state.message import Message, TokenUsages
from tenxgraph.core.state.message_block import (
    AnnotationBlock,
    AnnotationRef,
    AudioBlock,
    ContentBlock,
    DataBlock,
    DocumentBlock,
    ErrorBlock,
    ImageBlock,
    MediaRef,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from tenxgraph.core.state.reducers import (
    add_messages,
    append_items,
    remove_tool_messages,
    replace_messages,
    replace_value,
)
from tenxgraph.core.state.stream_chunks import CustomEvent, StreamChunk, StreamEvent
from tenxgraph.core.state.tool_result import ToolResult

if TYPE_CHECKING:
    from tenxgraph.core.llm.summary import SummaryContextManager


def __getattr__(name: str) -> Any:  # `SummaryContextManager`, on first use
    if name == "SummaryContextManager":
        from tenxgraph.core.llm.summary import SummaryContextManager

        return SummaryContextManager
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AgentState",
    "AnnotationBlock",
    "AnnotationRef",
    "AudioBlock",
    "BaseContextManager",
    "ContentBlock",
    "CustomEvent",
    "DataBlock",
    "DocumentBlock",
    "ErrorBlock",
    "ExecMeta",
    "ExecutionState",
    "ExecutionStatus",
    "ImageBlock",
    "MediaRef",
    "Message",
    "MessageContextManager",
    "ReasoningBlock",
    "StopRequestStatus",
    "StreamChunk",
    "StreamEvent",
    "SummaryContextManager",
    "TextBlock",
    "TokenUsages",
    "ToolCallBlock",
    "ToolResult",
    "ToolResultBlock",
    "VideoBlock",
    "add_messages",
    "append_items",
    "remove_tool_messages",
    "replace_messages",
    "replace_value",
]
