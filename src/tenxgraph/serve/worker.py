"""`Worker`: claims queued runs from the server's database and executes them, as many at once
as it may, renewing each run's lease while it runs. Several workers (processes, hosts) share
one PostgreSQL: any of them executes any run, and when one dies its runs' leases expire and
another resumes them from the thread's last checkpoint (finished tool calls replayed from the
ledger, never run again)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.core.state.execution_state import ExecutionStatus
from tenxgraph.serve.bus import CANCEL, QUEUE, Bus, run_topic, wait_for
from tenxgraph.serve.db.base import ServeDB
from tenxgraph.serve.records import RunRecord, RunStatus, ThreadStatus
from tenxgraph.serve.runs import NO_STATE, error_json, graph_config, graph_input, outcome
from tenxgraph.serve.streaming import END, ChunkEvents, EventLog, EventWriter
from tenxgraph.utils.constants import ResponseGranularity

logger = logging.getLogger("tenxgraph.serve")
POLL_SECONDS = 1.0  # how often an idle worker looks for runs without a wake-up


class Worker:
    """Executes the server's runs. `graphs` maps an assistant id to its compiled graph."""

    def __init__(
        self,
        db: ServeDB,
        bus: Bus,
        graphs: dict[str, CompiledGraph[Any]],
        *,
        worker_id: str | None = None,
        max_runs: int = 64,
        lease_ttl: float = 30.0,
        writer: EventWriter | None = None,
    ) -> None:
        self.db, self.bus, self.graphs = db, bus, graphs
        self.writer = writer or EventWriter(db, bus)
        self.worker_id = worker_id or f"worker-{uuid.uuid4().hex[:12]}"
        self.max_runs, self.lease_ttl = max_runs, lease_ttl
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._stopping: dict[str, str] = {}  # run id -> why its task was cancelled
        self._loops: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._loops = [
            asyncio.create_task(self._claim_loop(), name="tenxgraph-serve-claim"),
            asyncio.create_task(self._renew_loop(), name="tenxgraph-serve-renew"),
        ]

    async def stop(self) -> None:
        """Stop claiming; cancel the runs still going and hand them back (their leases end
        now, so another worker, or this one restarted, resumes them at once)."""
        for task in self._loops:
            task.cancel()
        for run_id in list(self._runs):
            self._cancel(run_id, "shutdown")
        running = list(self._runs.values())
        await asyncio.gather(*self._loops, *running, return_exceptions=True)
        handed = [run_id for run_id, why in self._stopping.items() if why == "shutdown"]
        with contextlib.suppress(Exception):
            await self.db.renew_runs(self.worker_id, handed, -1.0)

    # -- the loops --------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        with self.bus.watch(QUEUE) as woke:
            while True:
                try:
                    while len(self._runs) < self.max_runs:
                        run = await self.db.claim_run(self.worker_id, self.lease_ttl)
                        if run is None:
                            break
                        self._start(run)
                except Exception:
                    logger.exception("worker %s could not claim a run", self.worker_id)
                await wait_for(woke, POLL_SECONDS)

    async def _renew_loop(self) -> None:
        with self.bus.watch(CANCEL) as woke:
            while True:
                await wait_for(woke, self.lease_ttl / 3)
                ids = list(self._runs)
                try:
                    held = await self.db.renew_runs(self.worker_id, ids, self.lease_ttl)
                except Exception:
                    logger.exception("worker %s could not renew its leases", self.worker_id)
                    continue
                for run_id in ids:
                    if run_id not in held:
                        self._cancel(run_id, "lost")  # another worker has it now
                    elif held[run_id]:
                        self._cancel(run_id, str(held[run_id]))

    def _start(self, run: RunRecord) -> None:
        task = asyncio.create_task(self._execute(run), name=f"tenxgraph-run-{run.run_id}")
        self._runs[run.run_id] = task

        def done(_: asyncio.Task[None]) -> None:
            self._runs.pop(run.run_id, None)
            self.bus.wake(QUEUE)  # a slot is free, and the thread's next run may go

        task.add_done_callback(done)

    def _cancel(self, run_id: str, why: str) -> None:
        task = self._runs.get(run_id)
        if task is not None and run_id not in self._stopping:
            self._stopping[run_id] = why
            task.cancel()

    # -- one run ----------------------------------------------------------------------------

    async def _execute(self, run: RunRecord) -> None:
        log = self.writer.open(run.run_id, await self.db.last_seq(run.run_id))
        try:
            await self._execute_logged(run, log)
        finally:
            self.writer.closed(run.run_id)

    async def _execute_logged(self, run: RunRecord, log: EventLog) -> None:
        graph = self.graphs.get(run.assistant_id)
        log.add("metadata", {"run_id": run.run_id, "attempt": run.attempt})
        status: RunStatus = "success"
        thread: ThreadStatus = "idle"
        result: dict[str, Any] | None = None
        rollback = False
        try:
            if graph is None:
                raise LookupError(f"this server has no graph {run.assistant_id!r}")
            status, thread, result = await self._run_graph(run, graph, log)
        except asyncio.CancelledError:
            why = self._stopping.pop(run.run_id, "")
            if why == "lost":  # another worker has it: what this one did not write is void
                self.writer.discard(run.run_id)
            if why in ("lost", "shutdown", ""):
                raise  # not ours to finish
            status, thread = "interrupted", "idle"
            rollback = why == "rollback"
        except Exception as exc:
            log.add("error", error_json(exc))
            status, thread, result = "error", "error", {"__error__": error_json(exc)}
        if rollback and graph is not None:  # the thread as it was before the run
            failed = await roll_back(graph, run)
            if failed is not None:  # the run and what it saved stay, as they are
                log.add("error", failed)
                status, thread, result, rollback = "error", "error", {"__error__": failed}, False
            else:  # idle, or paused again if it was paused at an interrupt then
                thread = await _status_after(graph, run.thread_id)
        try:
            await log.close()
        finally:
            end = log.next_event(END, None)
            if await self.db.finish_run(run.run_id, self.worker_id, status, result, thread, end):
                await self.bus.publish_many((run_topic(run.run_id), QUEUE))
                if rollback:  # the run is forgotten (its steps stay in the thread's history)
                    await self.db.delete_run(run.run_id, run.owner)
            if run.temporary and graph is not None:
                await forget_thread(self.db, graph, run.thread_id)

    async def _run_graph(
        self, run: RunRecord, graph: CompiledGraph[Any], log: EventLog
    ) -> tuple[RunStatus, ThreadStatus, dict[str, Any]]:
        config = graph_config(run, self.lease_ttl)
        data, continuing = await self._input(run, graph)
        if continuing:  # an earlier attempt wrote to the thread: did it finish the graph?
            state = await graph.aget_state({"thread_id": run.thread_id})
            if state is not None and state.execution_meta.status != ExecutionStatus.RUNNING:
                return outcome(state)  # it did (or paused); its worker died before saying so
        kwargs = run.kwargs
        events = ChunkEvents(
            log,
            kwargs.get("stream_mode") or ["values"],
            {"run_id": run.run_id, "thread_id": run.thread_id, "assistant_id": run.assistant_id},
            bool(kwargs.get("stream_subgraphs")),
        )
        stream = graph.astream(data, config, response_granularity=ResponseGranularity.FULL)
        async with contextlib.aclosing(stream) as chunks:
            async for chunk in chunks:
                events.add(chunk)
        return outcome(await graph.aget_state({"thread_id": run.thread_id}))

    async def _input(
        self, run: RunRecord, graph: CompiledGraph[Any]
    ) -> tuple[dict[str, Any] | None, bool]:
        """The run's input; or (None, True): continue the thread, when an earlier attempt
        already wrote to it (its worker died after the thread moved past where it began)."""
        checkpointer = graph.checkpointer
        version = None if checkpointer is None else await checkpointer.aversion(run.thread_id)
        now = NO_STATE if version is None else version
        if run.start_version is not None and run.start_version != now:
            return None, True
        if run.start_version is None:
            await self.db.set_start_version(run.run_id, now)
            run.start_version = now  # what a rollback restores
        return graph_input(run), False


async def roll_back(graph: CompiledGraph[Any], run: RunRecord) -> dict[str, Any] | None:
    """Give the run's thread back the state it had when the run started, as a new version
    (the run's own versions stay in the history); nothing when the run wrote nothing. None
    when done, else the error, saying what was left as it was."""
    checkpointer, start = graph.checkpointer, run.start_version
    head = None
    try:
        head = None if checkpointer is None else await checkpointer.aversion(run.thread_id)
        if start is None or head is None or head == start:
            return None  # the run never started, or wrote nothing
        await graph.arestore({"thread_id": run.thread_id}, None if start == NO_STATE else start)
    except Exception as exc:
        logger.warning("could not roll back thread %s: %s", run.thread_id, exc)
        with contextlib.suppress(Exception):
            if checkpointer is not None and await checkpointer.aversion(run.thread_id) == head:
                exc.add_note("Nothing was written: the thread keeps the state the run left")
        notes = " ".join(getattr(exc, "__notes__", ()))
        return {
            "error": type(exc).__name__,
            "message": f"the rollback of run {run.run_id} on thread {run.thread_id!r} failed: "
            f"{exc}{'. ' + notes if notes else ''}. Update the thread's state, or run again",
        }
    return None


async def _status_after(graph: CompiledGraph[Any], thread_id: str) -> ThreadStatus:
    """A rolled-back thread's status: idle, or interrupted when its state is paused."""
    try:
        return outcome(await graph.aget_state({"thread_id": thread_id}))[1]
    except Exception:
        logger.exception("could not read rolled-back thread %s", thread_id)
        return "idle"


async def forget_thread(db: ServeDB, graph: CompiledGraph[Any], thread_id: str) -> None:
    """Delete a stateless run's thread (its record and its state), once nobody needs it."""
    with contextlib.suppress(Exception):
        await db.delete_thread(thread_id, None)
        if graph.checkpointer is not None:
            await graph.checkpointer.adelete_thread(thread_id)


__all__ = ["Worker", "forget_thread", "roll_back"]
