"""`interrupt()`: pause a run to ask a human (or another system) for input.

Inside a node or a tool, `answer = interrupt(question)` pauses the run: the thread is saved with
status `interrupted_before` and the `Interrupt` in `execution_meta.interrupt_data`. The caller
resumes it with `invoke({"resume": answer}, config)`; the node runs again from its start and
this time `interrupt()` returns the answer. A node may call `interrupt()` several times: each
call is matched, in order, with the answers given so far.
"""

import uuid
from contextvars import ContextVar
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field


class Interrupt(BaseModel):
    """A pause, as stored in `execution_meta.interrupt_data` and returned to the caller."""

    model_config = ConfigDict(defer_build=True)

    id: str = Field(default_factory=lambda: f"int_{uuid.uuid4().hex[:16]}")
    key: str
    node: str | None = None
    value: Any = None
    message: str | None = None
    reason: str = "input_required"
    response_schema: dict[str, Any] | None = None
    tool_call_id: str | None = None


class GraphInterrupt(BaseException):
    """Raised by `interrupt()` to unwind the node; the engine turns it into a pause. It is a
    BaseException so that `except Exception` in user code does not swallow it."""

    def __init__(self, interrupt: Interrupt) -> None:
        super().__init__(interrupt.message or interrupt.reason)
        self.interrupt = interrupt


class InterruptScope:
    """Where `interrupt()` is being called: a node (or a tool call) and its answers so far;
    also the run's tool ledger, for a `ToolNode` running in it."""

    __slots__ = ("answers", "index", "kind", "ledger", "name", "node", "tool_call_id")

    def __init__(
        self,
        kind: str,
        name: str,
        node: str,
        answers: list[Any],
        tool_call_id: str | None = None,
        ledger: Any = None,
    ) -> None:
        self.kind = kind
        self.name = name
        self.node = node
        self.answers = answers
        self.index = 0
        self.tool_call_id = tool_call_id
        self.ledger = ledger


current_scope: ContextVar[InterruptScope | None] = ContextVar(
    "tenxgraph_interrupt_scope", default=None
)


_ModelT = TypeVar("_ModelT", bound=BaseModel)


@overload
def interrupt(
    value: Any = None,
    *,
    message: str | None = None,
    reason: str = "input_required",
    response_schema: type[_ModelT],
) -> _ModelT: ...


@overload
def interrupt(
    value: Any = None,
    *,
    message: str | None = None,
    reason: str = "input_required",
    response_schema: dict[str, Any] | None = None,
) -> Any: ...


def interrupt(
    value: Any = None,
    *,
    message: str | None = None,
    reason: str = "input_required",
    response_schema: type[BaseModel] | dict[str, Any] | None = None,
) -> Any:
    """Pause the run for input; on resume, return the answer.

    `value` (JSON-ready) and `message` tell the caller what is asked. With a pydantic
    `response_schema`, the answer is validated into that model (and type checkers know it:
    `interrupt(..., response_schema=Approval)` is an `Approval`); with a JSON schema dict or
    none, it is the answer as given (`Any`).
    """
    scope = current_scope.get()
    if scope is None:
        raise RuntimeError(
            "interrupt() can only be called inside a node or a tool while a graph is running"
        )
    index = scope.index
    scope.index += 1
    is_model = isinstance(response_schema, type) and issubclass(response_schema, BaseModel)
    if index < len(scope.answers):
        answer = scope.answers[index]
        if is_model:
            return response_schema.model_validate(answer)  # type: ignore[union-attr]
        return answer
    schema = response_schema.model_json_schema() if is_model else response_schema  # type: ignore[union-attr]
    raise GraphInterrupt(
        Interrupt(
            key=f"{scope.kind}:{scope.name}:{index}",
            node=scope.node,
            value=value,
            message=message,
            reason=reason,
            response_schema=schema,
            tool_call_id=scope.tool_call_id,
        )
    )


def pending_interrupt(state: Any) -> Interrupt | None:
    """The interrupt a thread's state is paused at, or None."""
    data = state.execution_meta.interrupt_data
    return None if not data else Interrupt.model_validate(data)


__all__ = [
    "GraphInterrupt",
    "Interrupt",
    "InterruptScope",
    "current_scope",
    "interrupt",
    "pending_interrupt",
]
