"""How a queued run becomes a graph run: its input (or, when a worker died in the middle of
it, the thread's continuation), its config, and what it ended as."""

from __future__ import annotations

from typing import Any

from tenxgraph.core.graph.run_config import KNOWN_CONFIG_KEYS
from tenxgraph.core.state import AgentState
from tenxgraph.serve.records import RunRecord, RunStatus, ThreadStatus
from tenxgraph.serve.wire import values_to_wire
from tenxgraph.serve.wire_in import input_from_wire

NO_STATE = -1  # a run's start_version when its thread had no state yet
# keys of the client's config the server sets itself, never the client
_SERVER_KEYS = frozenset({"thread_id", "run_id", "multitask_strategy", "enqueue_timeout",
                          "checkpoint_version", "is_stream", "hooks"})  # fmt: skip
_PAUSED = ("interrupted_before", "interrupted_after")


def graph_input(run: RunRecord) -> dict[str, Any] | None:
    """The run's input as the graph takes it: a `command`'s resume answer and update, or
    its `input` (messages and fields, in LangGraph's shapes or ours)."""
    command = run.kwargs.get("command") or {}
    data = input_from_wire(run.kwargs.get("input"))
    update = input_from_wire(command.get("update")) if command.get("update") else None
    if update:
        data = {**(data or {}), **update}
    if "resume" in command:
        data = {**(data or {}), "resume": command["resume"]}
    return data


def graph_config(run: RunRecord, lease_ttl: float) -> dict[str, Any]:
    """The graph config of a run: the client's `configurable` (and `context`), its known
    runtime keys lifted to the top as tenxgraph reads them, the thread and run ids. A run
    waits for a thread still held by a dead worker's lease rather than failing."""
    asked = run.kwargs.get("config") or {}
    configurable = {**(asked.get("configurable") or {}), **(run.kwargs.get("context") or {})}
    config: dict[str, Any] = {
        key: value
        for key, value in configurable.items()
        if key in KNOWN_CONFIG_KEYS and key not in _SERVER_KEYS and key != "configurable"
    }
    if "recursion_limit" in asked:
        config["recursion_limit"] = asked["recursion_limit"]
    if run.owner:  # the caller, as auth identified them (never what the client claims)
        config["user_id"] = run.owner
    config.update(
        configurable=configurable,
        thread_id=run.thread_id,
        run_id=run.run_id,
        multitask_strategy="enqueue",
        enqueue_timeout=2 * lease_ttl + 5.0,
    )
    return config


def outcome(state: AgentState | None) -> tuple[RunStatus, ThreadStatus, dict[str, Any]]:
    """What a run that returned ended as: interrupted (paused for a human; its interrupt
    kept with the run) or a success. The values are not kept with the run: `wait` and `join`
    read them from the thread (`served_values`), so a turn's cost does not grow with it."""
    if state is None:
        return "success", "idle", {}
    status = str(getattr(state.execution_meta.status, "value", state.execution_meta.status))
    if status in _PAUSED:
        return "interrupted", "interrupted", {"__interrupt__": interrupts_of(state)}
    if status == "error":  # a run that failed, found so by the worker resuming it
        return "error", "error", {}
    return "success", "idle", {}


def served_values(state: AgentState) -> dict[str, Any]:
    """A thread's values as `wait` and `join` answer them (`__interrupt__` when paused)."""
    values = values_to_wire(state)
    found = interrupts_of(state)
    if found:
        values["__interrupt__"] = found
    return values


def interrupts_of(state: AgentState) -> list[dict[str, Any]]:
    """The pending interrupt of a paused thread, as LangGraph's clients read it."""
    data = state.execution_meta.interrupt_data or {}
    if not data and not state.execution_meta.interrupted_node:
        return []
    if not isinstance(data, dict):
        return [{"value": data, "id": None}]
    return [interrupt_json(data)]


def interrupt_json(data: dict[str, Any]) -> dict[str, Any]:
    """One of our interrupts as LangGraph's clients read it (`value`, `id`), with the text
    `interrupt(..., message=...)` gave, when there is one."""
    found = {"value": data.get("value"), "id": data.get("id")}
    if data.get("message"):
        found["message"] = data["message"]
    return found


def error_json(exc: BaseException) -> dict[str, Any]:
    return {"error": type(exc).__name__, "message": str(exc)}


__all__ = ["NO_STATE", "error_json", "graph_config", "graph_input", "interrupts_of", "outcome"]
