"""A run's events: what the worker executing it records (`EventLog`), how a run's chunks become
the events LangGraph's clients read (`ChunkEvents`), and how a client follows them from any
worker (`follow`).

Every event is stored with its sequence number before anyone reads it, so a client that
connects to another worker, or reconnects with `Last-Event-ID`, reads the same events in the
same order; the bus only says when to look.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Collection
from typing import Any

from tenxgraph.core.state import AgentState, Message, StreamChunk
from tenxgraph.serve.bus import Bus, run_topic, wait_for
from tenxgraph.serve.db.base import ServeDB
from tenxgraph.serve.records import FINISHED, RunEvent
from tenxgraph.serve.runs import interrupt_json
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


class EventWriter:
    """Records the events of every run this process executes: what they add in a burst is
    written together, in one transaction every `FLUSH_SECONDS`, then one wake-up message
    names every run touched. Batches are written one after the other, so each run's events
    are stored in order.

    It also keeps, while a run executes here, the events of it already written, so that the
    clients following it through this process read them from memory (`written`), not from
    the database; never one that is not stored yet (a client must never have seen an event
    that a worker dying now would number again)."""

    def __init__(self, db: ServeDB, bus: Bus) -> None:
        self._db, self._bus = db, bus
        self._live: dict[str, tuple[int, list[RunEvent]]] = {}  # run -> (last seq before, events)
        self._pending: list[tuple[str, RunEvent]] = []
        self._lock = asyncio.Lock()
        self._writer: asyncio.Task[None] | None = None
        self._failed: dict[str, BaseException] = {}

    def open(self, run_id: str, last_seq: int) -> EventLog:
        """The log of a run starting here, whose stored events end at `last_seq`."""
        self._live[run_id] = (last_seq, [])
        return EventLog(self, run_id, last_seq)

    def closed(self, run_id: str) -> None:
        """The run ended here: its followers read what is left from the database."""
        self._live.pop(run_id, None)

    def discard(self, run_id: str) -> None:
        """Drop the run's events not written yet (the run is no longer this worker's)."""
        self._pending = [(r, e) for r, e in self._pending if r != run_id]

    def written(self, run_id: str, after: int) -> list[RunEvent] | None:
        """The stored events of a run executing here with `seq > after`, or None when they
        must be read from the database (not here, or older than this process's part)."""
        found = self._live.get(run_id)
        if found is None or after < found[0]:
            return None
        return found[1][after - found[0] :]

    def add(self, run_id: str, event: RunEvent) -> None:
        self._pending.append((run_id, event))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_soon())

    async def _write_soon(self) -> None:
        await asyncio.sleep(FLUSH_SECONDS)  # gather the events of a burst into one write
        await self.flush()

    async def flush(self) -> None:
        """Write everything added so far (and wait for a write under way)."""
        async with self._lock:
            while self._pending:
                batch, self._pending = self._pending, []
                runs = list(dict.fromkeys(run_id for run_id, _ in batch))
                try:
                    await self._db.add_events_many(batch)
                except Exception as exc:  # their runs go on; each run's close() reports it
                    self._failed.update(dict.fromkeys(runs, exc))
                    for run_id in runs:  # a gap in memory: their followers read the database
                        self._live.pop(run_id, None)
                    continue
                for run_id, event in batch:
                    live = self._live.get(run_id)
                    if live is not None:
                        live[1].append(event)
                await self._bus.publish_many(run_topic(run_id) for run_id in runs)

    def failure(self, run_id: str) -> BaseException | None:
        return self._failed.pop(run_id, None)


class EventLog:
    """The events of one run, numbered from `last_seq + 1`, recorded by the process's
    `EventWriter`. `close` waits until they are written."""

    def __init__(self, writer: EventWriter, run_id: str, last_seq: int) -> None:
        self._writer, self.run_id, self._seq = writer, run_id, last_seq

    def add(self, event: str, data: Any) -> None:
        self._writer.add(self.run_id, self.next_event(event, data))

    def next_event(self, event: str, data: Any) -> RunEvent:
        """The run's next event, numbered (`add` records it; `ServeDB.finish_run` takes
        the `end` event this gives)."""
        self._seq += 1
        return RunEvent(self._seq, event, _json(data))

    async def close(self) -> None:
        await self._writer.flush()
        failure = self._writer.failure(self.run_id)
        if failure is not None:
            raise failure


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
    db: ServeDB,
    bus: Bus,
    run_id: str,
    after: int = 0,
    modes: Collection[str] | None = None,
    live: EventWriter | None = None,
) -> AsyncIterator[RunEvent]:
    """The run's events after `after`, as they are recorded, until its `end` event (recorded
    with the run's outcome), or until the run is gone (its thread was deleted)."""
    with bus.watch(run_topic(run_id)) as woke:
        quiet = False
        while True:
            woke.clear()
            events = None if live is None else live.written(run_id, after)
            if events is None:
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
        elif chunk.event == "custom" and "custom" in self.modes and chunk.data is not None:
            self._emit("custom", ns, chunk.data.get("data"))

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
            interrupt = interrupt_json(data.get("interrupt") or {})
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
    "EventWriter",
    "follow",
    "wanted",
]
