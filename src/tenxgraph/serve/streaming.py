"""A run's events: what the worker executing it records (`EventLog`), how a run's chunks become
the events LangGraph's clients read (`ChunkEvents`), and how a client follows them from any
worker (`follow`).

Every event is stored with its sequence number before anyone reads it, so a client that
connects to another worker, or reconnects with `Last-Event-ID`, reads the same events in the
same order; the bus only says when to look.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Collection
from typing import Any

from tenxgraph.core.state import AgentState, Message, StreamChunk
from tenxgraph.serve.bus import Bus, run_topic, wait_for
from tenxgraph.serve.db.base import ServeDB
from tenxgraph.serve.records import FINISHED, RunEvent
from tenxgraph.serve.wire import chunk_to_wire, message_to_wire, values_to_wire

STREAM_MODES = frozenset(
    {"values", "updates", "messages", "messages-tuple", "custom", "events", "debug", "tasks",
     "checkpoints"}
)  # fmt: skip
ALWAYS = frozenset({"metadata", "error", "end"})
END = "end"
POLL_SECONDS = 1.0  # how long a follower waits when no wake-up comes (a lost one)
FLUSH_SECONDS = 0.005  # how long recorded events gather before one write


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


class EventLog:
    """The events of one run, numbered from `last_seq + 1`, written in batches by one task,
    each batch followed by a wake-up of the run's followers. `close` writes what is left."""

    def __init__(self, db: ServeDB, bus: Bus, run_id: str, last_seq: int) -> None:
        self._db, self._bus, self.run_id = db, bus, run_id
        self._seq = last_seq
        self._pending: list[RunEvent] = []
        self._writer: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None

    def add(self, event: str, data: Any) -> None:
        self._seq += 1
        self._pending.append(RunEvent(self._seq, event, _json(data)))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_soon())

    async def _write_soon(self) -> None:
        await asyncio.sleep(FLUSH_SECONDS)  # gather the events of a burst into one write
        await self._write()

    async def _write(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await self._db.add_events(self.run_id, batch)
            except Exception as exc:  # the run goes on; close() reports it
                self._failure = exc
                return
            await self._bus.publish(run_topic(self.run_id))

    def next_event(self, event: str, data: Any) -> RunEvent:
        """The run's next event, numbered but not recorded (for `ServeDB.finish_run`)."""
        self._seq += 1
        return RunEvent(self._seq, event, _json(data))

    async def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer
        await self._write()
        if self._failure is not None:
            raise self._failure


def _mode(event: str) -> str:
    """The stream mode an event belongs to ("messages" events are `messages-tuple`'s;
    `messages/partial` and the like are the older `messages` mode's)."""
    base = event.split("|", 1)[0]
    if base == "messages":
        return "messages-tuple"
    return "messages" if base.startswith("messages/") else base


def wanted(event: str, modes: Collection[str]) -> bool:
    """Whether a follower that asked for `modes` gets `event`."""
    return event in ALWAYS or _mode(event) in modes


async def follow(
    db: ServeDB, bus: Bus, run_id: str, after: int = 0, modes: Collection[str] | None = None
) -> AsyncIterator[RunEvent]:
    """The run's events after `after`, as they are recorded, until its `end` event (recorded
    with the run's outcome), or until the run is gone (its thread was deleted)."""
    with bus.watch(run_topic(run_id)) as woke:
        quiet = False
        while True:
            woke.clear()
            events = await db.read_events(run_id, after)
            for event in events:
                after = event.seq
                if modes is None or wanted(event.event, modes):
                    yield event
                if event.event == END:
                    return
            if quiet and not events:
                run = await db.get_run(run_id, None)  # gone, or ended before it started
                if run is None or (run.status in FINISHED and run.worker is None):
                    return
            quiet = not events
            if quiet:
                await wait_for(woke, POLL_SECONDS)


class ChunkEvents:
    """Turns a run's chunks into the events of the stream modes it was asked for:
    `values` (the state after each step), `updates` ({node: its new messages} after each
    node, `__interrupt__` when it pauses), `messages-tuple` ([message or chunk, metadata]),
    and the older `messages` (`messages/partial`, `messages/complete`, `messages/metadata`).
    With `subgraphs`, a child graph's events are named `mode|node` as LangGraph names them."""

    def __init__(self, log: EventLog, modes: Collection[str], run_meta: dict[str, Any],
                 subgraphs: bool = False) -> None:  # fmt: skip
        self.log, self.modes, self.meta, self.subgraphs = log, set(modes), run_meta, subgraphs
        self._node: dict[tuple[str, ...], str] = {}
        self._made: dict[tuple[str, ...], list[Message]] = {}
        self._streamed: set[str] = set()
        self._partial: dict[str, dict[str, Any]] = {}

    def _name(self, mode: str, namespace: tuple[str, ...]) -> str | None:
        if not namespace:
            return mode
        return f"{mode}|{'|'.join(namespace)}" if self.subgraphs else None

    def _emit(self, mode: str, namespace: tuple[str, ...], data: Any) -> None:
        name = self._name(mode, namespace)
        if name is not None:
            self.log.add(name, data)

    def add(self, chunk: StreamChunk) -> None:
        ns = chunk.namespace
        if chunk.event == "state" and "values" in self.modes and chunk.state is not None:
            self._emit("values", ns, values_to_wire(chunk.state))
        elif chunk.event == "message" and chunk.message is not None:
            self._message(chunk.message, ns)
        elif chunk.event == "updates" and chunk.data is not None:
            self._progress(chunk.data, ns)

    def values(self, state: AgentState) -> None:
        """The final values (when no step emitted them, e.g. a run that resumed nothing)."""
        if "values" in self.modes:
            self.log.add("values", values_to_wire(state))

    def _progress(self, data: dict[str, Any], ns: tuple[str, ...]) -> None:
        status = data.get("status")
        if status == "invoking_node":
            self._node[ns] = str(data.get("node"))
            self._made[ns] = []
        elif status == "node_invoked" and "updates" in self.modes:
            made = self._made.pop(ns, [])
            update = {"messages": [message_to_wire(m) for m in made]} if made else None
            self._emit("updates", ns, {str(data.get("node")): update})
        elif status == "interrupted" and "updates" in self.modes:
            found = data.get("interrupt") or {}
            interrupt = {"value": found.get("value"), "id": found.get("id")}
            self._emit("updates", ns, {"__interrupt__": [interrupt]})

    def _message(self, message: Message, ns: tuple[str, ...]) -> None:
        node = self._node.get(ns, "")
        meta = {**self.meta, "langgraph_node": node, "langgraph_checkpoint_ns": "|".join(ns)}
        message_id = str(message.message_id)
        if message.delta:
            self._streamed.add(message_id)
            wire = chunk_to_wire(message)
            if "messages-tuple" in self.modes:
                self._emit("messages", ns, [wire, meta])
            if "messages" in self.modes:
                self._legacy_partial(message_id, wire, meta, ns)
            return
        if ns in self._made and message.role != "user":
            self._made[ns].append(message)
        if message.role == "user":
            return
        wire = message_to_wire(message)
        if "messages-tuple" in self.modes and message_id not in self._streamed:
            self._emit("messages", ns, [wire, meta])
        if "messages" in self.modes:
            if message_id not in self._partial:
                self._emit("messages/metadata", ns, {message_id: {"metadata": meta}})
            self._partial.pop(message_id, None)
            self._emit("messages/complete", ns, [wire])

    def _legacy_partial(
        self, message_id: str, wire: dict[str, Any], meta: dict[str, Any], ns: tuple[str, ...]
    ) -> None:
        so_far = self._partial.get(message_id)
        if so_far is None:
            self._emit("messages/metadata", ns, {message_id: {"metadata": meta}})
            so_far = self._partial[message_id] = {**wire, "type": "ai", "content": ""}
        if isinstance(wire.get("content"), str):
            so_far["content"] += wire["content"]
        self._emit("messages/partial", ns, [so_far])


__all__ = [
    "END",
    "STREAM_MODES",
    "ChunkEvents",
    "EventLog",
    "follow",
    "wanted",
]
