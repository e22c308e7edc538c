"""The request bodies the server accepts, checked before anything is done: a wrong body is a
422 that names the field, never a half-done request. Fields LangGraph's clients send that
change nothing here (durability, feedback keys, ...) are accepted and ignored; ones that
would change what happens and that this server does not do (webhooks, forking from a
checkpoint, `goto`) are refused by name."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tenxgraph.serve.streaming import STREAM_MODES
from tenxgraph.serve.wire_in import input_from_wire

Limit = Field(default=10, ge=1, le=1000)
Offset = Field(default=0, ge=0)


class Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


def _refuse(name: str, value: Any, why: str) -> None:
    if value not in (None, [], {}):
        raise ValueError(f"{name} is not supported: {why}")


class ThreadCreate(Body):
    thread_id: str | None = Field(default=None, min_length=1, max_length=256)
    metadata: dict[str, Any] = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"
    supersteps: Any = None

    @model_validator(mode="after")
    def _supported(self) -> ThreadCreate:
        _refuse("supersteps", self.supersteps, "create the thread, then update_state")
        return self


class _ThreadFilter(Body):
    values: Any = None

    @model_validator(mode="after")
    def _supported(self) -> _ThreadFilter:
        _refuse("values", self.values, "threads are found by metadata, status or ids here")
        return self


class ThreadPatch(Body):
    metadata: dict[str, Any] = Field(default_factory=dict)


class ThreadSearch(_ThreadFilter):
    metadata: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    ids: list[str] | None = None
    limit: int = Limit
    offset: int = Offset


class ThreadCount(_ThreadFilter):
    metadata: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None


class StateUpdate(Body):
    values: Any = None
    as_node: str | None = None


class HistoryQuery(Body):
    limit: int = Limit
    before: str | dict[str, Any] | None = None  # only checkpoints older than this one

    def before_id(self) -> str | None:
        """`before` as a checkpoint id (LangGraph's clients may send a checkpoint object)."""
        if isinstance(self.before, dict):
            inner = self.before.get("configurable") or self.before
            found = inner.get("checkpoint_id")
            return None if found is None else str(found)
        return self.before


class Command(Body):
    resume: Any = None
    update: Any = None
    goto: Any = None

    @model_validator(mode="before")
    @classmethod
    def _known(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("goto") not in (None, [], ""):
            raise ValueError("command.goto is not supported by this server; use resume/update")
        return data


class RunCreate(Body):
    """A run as LangGraph's clients ask for it (`assistant_id`, the thread in the path) or as
    the Agent Protocol does (`agent_id`, or none for the first graph; `thread_id` in the body;
    `messages` beside or instead of `input`)."""

    assistant_id: str | None = Field(default=None, min_length=1)
    agent_id: str | None = Field(default=None, min_length=1)
    thread_id: str | None = Field(default=None, min_length=1)
    messages: list[Any] | None = None
    input: Any = None
    command: Command | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    stream_mode: list[str] = Field(default_factory=lambda: ["values"])
    stream_subgraphs: bool = False
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] = "enqueue"
    if_not_exists: Literal["create", "reject"] = "reject"
    on_disconnect: Literal["cancel", "continue"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    webhook: str | None = None
    checkpoint_id: str | None = None
    checkpoint: dict[str, Any] | None = None
    interrupt_before: Any = None
    interrupt_after: Any = None

    @field_validator("stream_mode", mode="before")
    @classmethod
    def _modes(cls, value: Any) -> Any:
        modes = [value] if isinstance(value, str) else value
        if isinstance(modes, list):
            unknown = [m for m in modes if m not in STREAM_MODES]
            if unknown:
                raise ValueError(f"unknown stream_mode {unknown}; use {sorted(STREAM_MODES)}")
        return modes

    @model_validator(mode="after")
    def _supported(self) -> RunCreate:
        refused = {
            "webhook": "webhooks are not sent by this server (poll with join, or stream)",
            "checkpoint_id": "runs start from the thread's latest state (fork with copy)",
            "checkpoint": "runs start from the thread's latest state (fork with copy)",
            "interrupt_before": "set interrupt_before when compiling the graph",
            "interrupt_after": "set interrupt_after when compiling the graph",
        }
        for name, why in refused.items():
            _refuse(name, getattr(self, name), why)
        if self.messages is not None:
            if self.input is not None and not isinstance(self.input, dict):
                raise ValueError("messages goes with an object input (or none), not both")
            self.input = {**(self.input or {}), "messages": self.messages}
        return self

    @property
    def agent_protocol(self) -> bool:
        """Whether the client speaks the Agent Protocol (it names no `assistant_id`)."""
        return self.assistant_id is None

    def check_input(self) -> None:
        """Read the run's input and command update as the worker will, so a bad one is
        refused now (`WireError`), not found by the worker."""
        input_from_wire(self.input)
        if self.command is not None and self.command.update is not None:
            input_from_wire(self.command.update)

    def stored(self) -> dict[str, Any]:
        """What the run keeps of the request (its `kwargs`)."""
        return self.model_dump(
            include={
                "input",
                "command",
                "config",
                "context",
                "stream_mode",
                "stream_subgraphs",
                "on_disconnect",
                "on_completion",
            },
            exclude_none=True,
        )


class RunSearch(Body):
    metadata: dict[str, Any] | None = None
    status: Literal["pending", "running", "success", "error", "interrupted", "timeout"] | None = (
        None
    )
    thread_id: str | None = None
    agent_id: str | None = None
    limit: int = Limit
    offset: int = Offset


class ThreadEvents(Body):
    """The Agent Protocol's thread event stream: which channels (and namespaces) to send,
    and the sequence number of the current run's events to replay after."""

    channels: list[str] = Field(min_length=1)
    namespaces: list[list[str]] | None = None
    depth: int | None = Field(default=None, ge=0)
    since: int = Field(default=0, ge=0)


class StreamingCommand(Body):
    id: int = Field(ge=0)
    method: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)


class RunsCancel(Body):
    run_ids: list[str] | None = None
    thread_id: str | None = None
    status: Literal["pending", "running", "all"] | None = None


class StorePut(Body):
    namespace: list[str] = Field(min_length=1)
    key: str = Field(min_length=1)
    value: dict[str, Any]
    index: Literal[False] | list[str] | None = None


class StoreSearch(Body):
    namespace_prefix: list[str] = Field(default_factory=list)
    filter: dict[str, Any] | None = None
    limit: int = Limit
    offset: int = Offset
    query: str | None = None


class NamespaceSearch(Body):
    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: int | None = Field(default=None, ge=1)
    limit: int = Field(default=100, ge=1, le=1000)
    offset: int = Offset


class AssistantSearch(Body):
    graph_id: str | None = None
    metadata: dict[str, Any] | None = None
    name: str | None = None
    limit: int = Limit
    offset: int = Offset


class StoreDelete(Body):
    namespace: list[str] = Field(min_length=1)
    key: str = Field(min_length=1)
