"""What the server keeps besides the checkpointer's threads: who owns a thread and its metadata,
the runs asked of it (queued, running, finished) and the events each run streamed.

Plain dataclasses; the `serve.db` backends store them and the routes turn them into the JSON
LangGraph's clients read (`thread_json`, `run_json`).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
RunStatus = Literal["pending", "running", "success", "error", "interrupted", "timeout"]
MultitaskStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]

ACTIVE: tuple[RunStatus, ...] = ("pending", "running")
FINISHED: tuple[RunStatus, ...] = ("success", "error", "interrupted", "timeout")


def new_id() -> str:
    """A run or thread id: a UUID, as LangGraph's clients expect."""
    return str(uuid.uuid4())


def iso(seconds: float) -> str:
    """An epoch time as the ISO 8601 text the clients parse."""
    return datetime.fromtimestamp(seconds, UTC).isoformat()


@dataclass
class ThreadRecord:
    """A served thread: its owner, metadata and status (its state is the checkpointer's)."""

    thread_id: str
    owner: str
    metadata: dict[str, Any] = field(default_factory=dict)
    status: ThreadStatus = "idle"
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


@dataclass
class RunRecord:
    """A run asked of a thread. `kwargs` holds what the client asked (input, command, config,
    stream_mode, ...); `worker` and `lease_expires` say who executes it and until when it
    counts as alive; `cancel` is a pending cancel request ("interrupt" or "rollback")."""

    run_id: str
    thread_id: str
    owner: str
    assistant_id: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    multitask_strategy: MultitaskStrategy = "reject"
    status: RunStatus = "pending"
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    worker: str | None = None
    lease_expires: float | None = None
    cancel: str | None = None
    attempt: int = 0
    # the thread's checkpoint version when the run first started: a run resumed after its
    # worker died continues the thread if it moved past it, else starts from its input again
    start_version: int | None = None
    # the final values or the error, as sent to `wait`/`join` callers
    result: dict[str, Any] | None = None
    # a stateless run's thread is deleted when it finishes
    temporary: bool = False


@dataclass(frozen=True)
class RunEvent:
    """One streamed event of a run: `seq` orders them and is the SSE id clients resume from."""

    seq: int
    event: str
    data: str  # JSON text, written as the SSE data line


def thread_json(
    thread: ThreadRecord,
    values: dict[str, Any] | None = None,
    interrupts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A thread as LangGraph's clients read it."""
    return {
        "thread_id": thread.thread_id,
        "created_at": iso(thread.created_at),
        "updated_at": iso(thread.updated_at),
        "metadata": thread.metadata,
        "status": thread.status,
        "values": values,
        "interrupts": interrupts or {},
    }


def run_json(run: RunRecord) -> dict[str, Any]:
    """A run as LangGraph's clients read it."""
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": run.assistant_id,
        "agent_id": run.assistant_id,  # the Agent Protocol's name for it
        "created_at": iso(run.created_at),
        "updated_at": iso(run.updated_at),
        "status": run.status,
        "metadata": run.metadata,
        "kwargs": run.kwargs,
        "multitask_strategy": run.multitask_strategy,
    }


__all__ = [
    "ACTIVE",
    "FINISHED",
    "MultitaskStrategy",
    "RunEvent",
    "RunRecord",
    "RunStatus",
    "ThreadRecord",
    "ThreadStatus",
    "iso",
    "new_id",
    "run_json",
    "thread_json",
]
