"""`Server`: what the routes share. The served graphs (one assistant each), the server's
database and bus, this process's worker, and the operations the routes are made of: find a
caller's thread, queue a run under its multitask strategy, follow a run's events, wait for
its result, cancel it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Collection, Coroutine
from typing import Any

from starlette.requests import Request

from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.serve.auth import Authenticate, identify
from tenxgraph.serve.bus import CANCEL, QUEUE, Bus
from tenxgraph.serve.db.base import ServeDB, ThreadBusyError, ThreadExistsError
from tenxgraph.serve.http import HTTPError, not_found
from tenxgraph.serve.records import ACTIVE, RunEvent, RunRecord, ThreadRecord, new_id
from tenxgraph.serve.runs import served_values
from tenxgraph.serve.schemas import RunCreate
from tenxgraph.serve.streaming import END, EventLog, EventWriter, follow
from tenxgraph.serve.worker import Worker, roll_back
from tenxgraph.storage.store.base import BaseStore

logger = logging.getLogger("tenxgraph.serve")

#: LangGraph names an assistant made for a graph by this UUID namespace and the graph's id
ASSISTANT_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
DEFAULT_BODY_LIMIT = 10 * 1024 * 1024
DEFAULT_HEARTBEAT = 15.0  # seconds between the ping comments of a quiet SSE stream


def assistant_uuid(graph_id: str) -> str:
    return str(uuid.uuid5(ASSISTANT_NAMESPACE, graph_id))


class Server:
    """The served graphs and everything their routes need (see the module docstring)."""

    def __init__(
        self,
        graphs: dict[str, CompiledGraph[Any]],
        db: ServeDB,
        bus: Bus,
        *,
        auth: Authenticate | None = None,
        store: BaseStore | None = None,
        lease_ttl: float = 30.0,
        max_runs: int = 64,
        body_limit: int = DEFAULT_BODY_LIMIT,
        heartbeat: float = DEFAULT_HEARTBEAT,
        run_worker: bool = True,
    ) -> None:
        if not graphs:
            raise ValueError("a server needs at least one graph")
        self.graphs, self.db, self.bus = graphs, db, bus
        self.auth, self.store, self.body_limit = auth, store, body_limit
        self.heartbeat = heartbeat
        self._by_uuid = {assistant_uuid(name): name for name in graphs}
        self.writer = EventWriter(db, bus)
        self.worker = (
            Worker(db, bus, graphs, max_runs=max_runs, lease_ttl=lease_ttl, writer=self.writer)
            if run_worker
            else None
        )
        self.ready = False
        self._detached: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        await self.db.asetup()
        await self.bus.start()
        if self.worker is not None:
            await self.worker.start()
        self.ready = True

    async def stop(self) -> None:
        self.ready = False
        for task in self._detached:
            task.cancel()
        await asyncio.gather(*self._detached, return_exceptions=True)
        if self.worker is not None:
            await self.worker.stop()
        await self.bus.stop()
        await self.db.aclose()
        for graph in self.graphs.values():
            with contextlib.suppress(Exception):
                await graph.aclose()

    def detach(self, work: Coroutine[Any, Any, None]) -> None:
        """Do `work` apart from the request that asked for it (which may be going away)."""
        task = asyncio.create_task(_logged(work))
        self._detached.add(task)
        task.add_done_callback(self._detached.discard)

    # -- who and what -----------------------------------------------------------------------

    async def owner(self, request: Request) -> str:
        who = await identify(self.auth, request)
        if who is None:
            raise HTTPError(401, "not authenticated: send Authorization: Bearer <token>")
        return who

    def graph_id(self, assistant_id: str) -> str:
        """The served graph an assistant id names (its graph id, or LangGraph's UUID of it)."""
        name = assistant_id if assistant_id in self.graphs else self._by_uuid.get(assistant_id)
        if name is None:
            raise not_found("assistant", assistant_id)
        return name

    def graph_of(self, thread: ThreadRecord) -> CompiledGraph[Any]:
        """The graph whose state a thread holds (the one its runs named; else the first)."""
        name = thread.metadata.get("graph_id")
        return self.graphs.get(str(name)) or next(iter(self.graphs.values()))

    async def thread(self, thread_id: str, owner: str) -> ThreadRecord:
        found = await self.db.get_thread(thread_id, owner)
        if found is None:
            raise not_found("thread", thread_id)
        return found

    async def run(self, thread_id: str | None, run_id: str, owner: str) -> RunRecord:
        found = await self.db.get_run(run_id, owner)
        if found is None or (thread_id is not None and found.thread_id != thread_id):
            raise not_found("run", run_id)
        return found

    # -- runs -------------------------------------------------------------------------------

    async def create_run(
        self, owner: str, thread_id: str | None, body: RunCreate, *, temporary: bool = False
    ) -> RunRecord:
        """Queue a run (on a new temporary thread when `thread_id` is None)."""
        graph_id = self.graph_id(body.assistant_id or body.agent_id or next(iter(self.graphs)))
        graph_meta = {"graph_id": graph_id, "assistant_id": graph_id}
        if thread_id is None:
            thread_id = new_id()
            thread = ThreadRecord(thread_id, owner, {**graph_meta, "stateless": True})
            await self.db.create_thread(thread)
        else:
            found = await self.db.get_thread(thread_id, owner)
            if found is None:
                if body.if_not_exists != "create":
                    raise not_found("thread", thread_id)
                with contextlib.suppress(ThreadExistsError):  # taken by another: a 404 below
                    await self.db.create_thread(ThreadRecord(thread_id, owner, dict(graph_meta)))
                found = await self.thread(thread_id, owner)
            thread = found
        run = RunRecord(
            run_id=new_id(),
            thread_id=thread_id,
            owner=owner,
            assistant_id=graph_id,
            kwargs=body.stored(),
            metadata=body.metadata,
            multitask_strategy=body.multitask_strategy,
            temporary=temporary,
        )
        try:
            stopping = await self.db.create_run(run)
        except ThreadBusyError as exc:
            raise HTTPError(409, str(exc)) from None
        if any(thread.metadata.get(key) != value for key, value in graph_meta.items()):
            # the graph whose state the thread now holds
            await self.db.update_thread(thread_id, owner, metadata=graph_meta)
        if stopping:
            await self.cancel(stopping, body.multitask_strategy)
        await self.bus.publish(QUEUE)
        return run

    async def cancel(self, run_ids: list[str], action: str) -> None:
        """Stop runs: a queued one ends at once, a running one at its worker's next check."""
        ended = await self.db.request_cancel(run_ids, action)
        for run in ended:
            await self._end_unstarted(run)
            if action == "rollback":  # a run resumed after its worker died may have written
                graph = self.graphs.get(run.assistant_id)
                if graph is None or await roll_back(graph, run) is None:
                    await self.db.delete_run(run.run_id, run.owner)
        await self.bus.publish(CANCEL)

    async def _end_unstarted(self, run: RunRecord) -> None:
        log = EventLog(self.writer, run.run_id, await self.db.last_seq(run.run_id))  # not live
        log.add(END, None)
        await log.close()

    def events(
        self, run: RunRecord, after: int = 0, modes: Collection[str] | None = None
    ) -> AsyncIterator[RunEvent]:
        return follow(self.db, self.bus, run.run_id, after, modes, self.writer)

    async def ended(self, run: RunRecord) -> RunRecord | None:
        """Wait for the run to end: its record then (None if it is gone)."""
        seen = await self.db.last_seq(run.run_id)
        current = await self.db.get_run(run.run_id, None)
        if current is not None and current.status in ACTIVE:
            async for _ in self.events(run, seen, ()):
                pass
            current = await self.db.get_run(run.run_id, None)
        return current

    async def result(self, run: RunRecord) -> dict[str, Any]:
        """Wait for the run to end; then the thread's values (`__error__` when the run
        failed; a stateless run's thread may be gone: its interrupt, if any)."""
        current = await self.ended(run)
        if current is None:
            return {}
        if current.result and "__error__" in current.result:
            return current.result
        graph = self.graphs.get(current.assistant_id)
        state = None if graph is None else await graph.aget_state({"thread_id": run.thread_id})
        return current.result or {} if state is None else served_values(state)


async def _logged(work: Coroutine[Any, Any, None]) -> None:
    try:
        await work
    except Exception:
        logger.exception("tenxgraph serve: a detached task failed")


__all__ = ["DEFAULT_BODY_LIMIT", "DEFAULT_HEARTBEAT", "Server", "assistant_uuid"]
