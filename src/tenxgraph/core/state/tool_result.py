"""`ToolResult`: what a tool returns when it must both answer the model and change state."""

from __future__ import annotations

from typing import Any


class ToolResult:
    """A tool's answer to the model (`message`) plus updates to state fields (`state`).

    Each key of `state` names a field; its value merges through that field's reducer. `content`
    is an alias of `message`.
    """

    __slots__ = ("is_error", "message", "state")

    def __init__(
        self,
        message: Any = None,
        state: dict[str, Any] | None = None,
        is_error: bool = False,
        *,
        content: Any = None,
    ) -> None:
        if message is not None and content is not None:
            raise TypeError("ToolResult takes `message` or its alias `content`, not both")
        if state is not None and not isinstance(state, dict):
            raise TypeError(
                f"ToolResult(state=...) must be a dict of field names to values, "
                f"not {type(state).__name__}"
            )
        self.message = content if message is None else message
        self.state = state
        self.is_error = is_error

    @property
    def content(self) -> Any:
        return self.message

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolResult):
            return NotImplemented
        return (self.message, self.state, self.is_error) == (
            other.message,
            other.state,
            other.is_error,
        )

    def __hash__(self) -> int:
        # Only what equal results surely share: `message` may be unhashable, and equal messages
        # can differ in type (1 == 1.0, a StrEnum member == its str).
        return hash((frozenset(self.state or ()), self.is_error))

    def __repr__(self) -> str:
        return (
            f"ToolResult(message={self.message!r}, state={self.state!r}, is_error={self.is_error})"
        )


__all__ = ["ToolResult"]
