"""Runtime bookkeeping of a thread: where it is, how far it got, and why it paused."""

from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from tenxgraph.core.state.usage import NO_USAGE, Usage


class ExecutionStatus(StrEnum):
    """Lifecycle of a run on a thread."""

    RUNNING = "running"
    INTERRUPTED_BEFORE = "interrupted_before"
    INTERRUPTED_AFTER = "interrupted_after"
    COMPLETED = "completed"
    ERROR = "error"


class StopRequestStatus(StrEnum):
    """Whether someone asked a running thread to stop."""

    NONE = "none"
    STOP_REQUESTED = "stop_requested"
    STOPPED = "stopped"


_INTERRUPTED = (ExecutionStatus.INTERRUPTED_BEFORE, ExecutionStatus.INTERRUPTED_AFTER)


class ExecutionState(BaseModel):
    """Where a thread's run stands. Owned by the runtime: read it, change it through the
    helper methods."""

    model_config = ConfigDict(defer_build=True)  # built on first use, not at import

    current_node: str
    step: int = 0
    status: ExecutionStatus = ExecutionStatus.RUNNING
    interrupted_node: str | None = None
    interrupt_reason: str | None = None
    interrupt_data: dict[str, Any] | None = None
    thread_id: str | None = None
    stop_current_execution: StopRequestStatus = StopRequestStatus.NONE
    internal_data: dict[str, Any] = Field(default_factory=dict)
    # what the thread's model calls have cost so far and the tools it ran, every run added up
    usage: Usage = NO_USAGE  # shared while nothing is spent; a tally puts a total of its own

    @field_validator("usage", mode="wrap")
    @classmethod
    def _tally_or_nothing(cls, value: Any, read: ValidatorFunctionWrapHandler) -> Usage:
        """A stored total that cannot be read counts as nothing: a tally is never a reason
        to refuse a thread."""
        try:
            found: Usage = read(value)
        except ValidationError:
            return NO_USAGE
        return found

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ExecutionState":
        """Build from a dict; accepts ``_internal_data`` as the older spelling of
        ``internal_data``."""
        values = dict(data)
        if "_internal_data" in values:
            values.setdefault("internal_data", values.pop("_internal_data"))
        return cls.model_validate(values)

    def set_interrupt(
        self,
        node: str,
        reason: str,
        status: ExecutionStatus = ExecutionStatus.INTERRUPTED_BEFORE,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Pause at `node` for `reason`; `status` says whether before or after it ran."""
        if status not in _INTERRUPTED:
            raise ValueError(
                f"set_interrupt needs an interrupted status ({', '.join(_INTERRUPTED)}), "
                f"not {status!r}"
            )
        self.interrupted_node = node
        self.interrupt_reason = reason
        self.status = status
        self.interrupt_data = data

    def clear_interrupt(self) -> None:
        """Forget the pause and mark the run as running again."""
        self.interrupted_node = None
        self.interrupt_reason = None
        self.interrupt_data = None
        self.status = ExecutionStatus.RUNNING

    def is_interrupted(self) -> bool:
        return self.status in _INTERRUPTED

    def is_running(self) -> bool:
        return self.status == ExecutionStatus.RUNNING

    def is_stopped_requested(self) -> bool:
        return self.stop_current_execution == StopRequestStatus.STOP_REQUESTED

    def advance_step(self) -> None:
        self.step += 1

    def set_current_node(self, node: str) -> None:
        self.current_node = node

    def complete(self) -> None:
        self.status = ExecutionStatus.COMPLETED

    def error(self, error_msg: str) -> None:
        """Mark the run failed; the message is kept in ``internal_data["error"]``."""
        self.status = ExecutionStatus.ERROR
        self.internal_data["error"] = error_msg


ExecMeta = ExecutionState

__all__ = ["ExecMeta", "ExecutionState", "ExecutionStatus", "StopRequestStatus"]
