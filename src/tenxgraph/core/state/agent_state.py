"""`AgentState`: the conversation plus run metadata; subclass it to add your own fields."""

from collections.abc import Callable
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, field_serializer

from tenxgraph.core.state.execution_state import ExecMeta, ExecutionStatus
from tenxgraph.core.state.message import Message
from tenxgraph.core.state.reducers import add_messages
from tenxgraph.utils.constants import START

Reducer = Callable[[Any, Any], Any]

# The fields the runtime owns; the `state` key of a run's input may not set them.
RESERVED_FIELDS = frozenset({"context", "context_summary", "execution_meta"})


def _start_meta() -> ExecMeta:
    return ExecMeta(current_node=START)


class AgentState(BaseModel):
    """Graph state: `context` (the history, merged by `add_messages`), `context_summary` (what a
    context manager condensed) and `execution_meta` (owned by the runtime)."""

    # a float field refuses NaN and infinity (JSON has no such numbers: they could not be
    # stored); subclasses inherit this
    model_config = ConfigDict(allow_inf_nan=False, defer_build=True)

    context: Annotated[list[Message], add_messages] = Field(default_factory=list)
    context_summary: str | None = None
    execution_meta: ExecMeta = Field(default_factory=_start_meta)

    @field_serializer("context", mode="wrap")
    def _dump_context(self, value: Any, handler: SerializerFunctionWrapHandler) -> Any:
        # a lazy history (see `lazy_history`) fetches what is still in the store first
        whole = getattr(value, "materialized", None)
        return handler(value if whole is None else whole())

    _reducers_by_class: ClassVar[dict[type["AgentState"], dict[str, Reducer]]] = {}

    @classmethod
    def field_reducers(cls) -> dict[str, Reducer]:
        """Field name -> reducer, read once per class from ``Annotated[T, reducer]``."""
        found = AgentState._reducers_by_class.get(cls)
        if found is None:
            found = {}
            for name, info in cls.model_fields.items():
                for meta in reversed(info.metadata):
                    if callable(meta) and not isinstance(meta, type):
                        found[name] = meta
                        break
            AgentState._reducers_by_class[cls] = found
        return found

    # -- execution helpers (delegate to execution_meta) ------------------------------------

    def set_interrupt(
        self,
        node: str,
        reason: str,
        status: ExecutionStatus = ExecutionStatus.INTERRUPTED_BEFORE,
        data: dict[str, Any] | None = None,
    ) -> None:
        self.execution_meta.set_interrupt(node, reason, status, data)

    def clear_interrupt(self) -> None:
        self.execution_meta.clear_interrupt()

    def is_running(self) -> bool:
        return self.execution_meta.is_running()

    def is_interrupted(self) -> bool:
        return self.execution_meta.is_interrupted()

    def is_stopped_requested(self) -> bool:
        return self.execution_meta.is_stopped_requested()

    def advance_step(self) -> None:
        self.execution_meta.advance_step()

    def set_current_node(self, node: str) -> None:
        self.execution_meta.set_current_node(node)

    def complete(self) -> None:
        self.execution_meta.complete()

    def error(self, error_msg: str) -> None:
        self.execution_meta.error(error_msg)


__all__ = ["RESERVED_FIELDS", "AgentState", "Reducer"]
