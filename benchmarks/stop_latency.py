"""How long `astop()` takes to stop one run among many concurrent ones in this process.

    python benchmarks/stop_latency.py                      # memory x 5,000 and SQLite x 500
    python benchmarks/stop_latency.py --backend sqlite --runs 500 --reps 7 --breakdown

N runs are started on distinct threads of one app and left working; once every one of them
is under way, `await app.astop({"thread_id": x})` is called for one of them (a different one
each repetition) and three times are taken from that call:

- `astop_ms`: until `astop()` returned;
- `cancelled_ms`: until the target's node saw its cancellation (the `idle` workload);
- `stopped_ms`: until the target's `ainvoke` returned (its stop saved, the thread free).

plus `loop_lag_ms`: how long a callback scheduled at that moment waited for its turn, the
event loop's backlog that any step of the stop waits behind. With `--breakdown`, the target's
checkpointer calls after the stop are timed too (when each started and how long it took).

Workloads (`--workload`):

- `idle`: the node awaits an `asyncio.Event` that is never set: N parked runs;
- `steps`: a two-node loop (a -> b -> a ...), each step `await asyncio.sleep(0)` and a counter
  update, so every run saves a checkpoint per step: N busy runs keeping the loop and the
  checkpointer's queue full.

Reported: the median of --reps repetitions (after one warm-up), one JSON line per backend and
workload when `--json`, else a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import BaseCheckpointer, InMemoryCheckpointer
from tenxgraph.utils.constants import END, START

DEFAULT_RUNS = {"memory": 5000, "sqlite": 500, "postgres": 500}
FIGURES = ("astop_ms", "loop_lag_ms", "cancelled_ms", "stopped_ms")


class Counted(AgentState):
    count: int = 0


class Bench:
    """One app and the bookkeeping of its runs: which have started, when each ended."""

    def __init__(self, workload: str, checkpointer: BaseCheckpointer) -> None:
        self.workload = workload
        self.never = asyncio.Event()
        self.started: set[str] = set()
        self.all_started = asyncio.Event()
        self.expected = 0
        self.cancelled_at: dict[str, float] = {}
        self.ended_at: dict[str, float] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.checkpointer = checkpointer
        self.app = self._build(checkpointer)

    def _note_started(self, thread_id: str) -> None:
        if thread_id not in self.started:
            self.started.add(thread_id)
            if len(self.started) >= self.expected:
                self.all_started.set()

    def _build(self, checkpointer: BaseCheckpointer) -> CompiledGraph:
        graph = StateGraph(Counted)
        if self.workload == "idle":

            async def park(state: Counted, config: dict[str, Any]) -> str:
                thread_id = config["thread_id"]
                self._note_started(thread_id)
                try:
                    await self.never.wait()
                except asyncio.CancelledError:
                    self.cancelled_at[thread_id] = time.perf_counter()
                    raise
                return "released"

            graph.add_node("park", park)
            graph.add_edge(START, "park")
            graph.add_edge("park", END)
        else:

            async def step(state: Counted, config: dict[str, Any]) -> dict[str, int]:
                self._note_started(config["thread_id"])
                await asyncio.sleep(0)
                return {"count": state.count + 1}

            graph.add_node("a", step)
            graph.add_node("b", step)
            graph.add_edge(START, "a")
            graph.add_edge("a", "b")
            graph.add_edge("b", "a")
        return graph.compile(checkpointer=checkpointer)

    async def run(self, thread_id: str) -> None:
        config = {"thread_id": thread_id, "recursion_limit": 10**9, "node_timeout": None}
        try:
            self.results[thread_id] = await self.app.ainvoke(
                {"messages": [Message.text_message("go")]}, config
            )
        finally:
            self.ended_at[thread_id] = time.perf_counter()


TIMED_CALLS = ("asave", "aclear_stop_request", "ais_stop_requested", "arelease_lease")


def timed_calls(
    checkpointer: BaseCheckpointer, thread_id: str, since: list[float], log: list[str]
) -> None:
    """Wrap the checkpointer's thread calls to log those for `thread_id` after `since[0]`
    (instance attributes over the class's methods; `untimed` removes them)."""
    for name in TIMED_CALLS:
        original = getattr(checkpointer, name, None)
        if original is None:
            continue

        def wrapper(
            *args: Any,
            _original: Callable[..., Awaitable[Any]] = original,
            _name: str = name,
            **kwargs: Any,
        ) -> Awaitable[Any]:
            async def call() -> Any:
                start = time.perf_counter()
                try:
                    return await _original(*args, **kwargs)
                finally:
                    if args and args[0] == thread_id and since and start >= since[0]:
                        end = time.perf_counter()
                        log.append(
                            f"{_name} at +{(start - since[0]) * 1e3:.1f} ms took "
                            f"{(end - start) * 1e3:.1f} ms"
                        )

            return call()

        setattr(checkpointer, name, wrapper)


def untimed(checkpointer: BaseCheckpointer) -> None:
    for name in TIMED_CALLS:
        checkpointer.__dict__.pop(name, None)


def lag_probe() -> list[float]:
    """Schedules a callback now; the list gets the time it ran: the loop's backlog."""
    ran: list[float] = []
    asyncio.get_running_loop().call_soon(lambda: ran.append(time.perf_counter()))
    return ran


async def repetition(
    bench: Bench, runs: int, tag: str, breakdown: bool
) -> tuple[dict[str, float], list[str]]:
    bench.expected = runs
    bench.started.clear()
    bench.all_started.clear()
    threads = [f"{tag}-{i}" for i in range(runs)]
    tasks = [asyncio.create_task(bench.run(t)) for t in threads]
    await bench.all_started.wait()
    if bench.workload == "steps":  # let every run be a few steps in, saving as it goes
        for _ in range(3):
            await asyncio.sleep(0)
    target = threads[runs // 2]
    since: list[float] = []
    log: list[str] = []
    if breakdown:
        timed_calls(bench.checkpointer, target, since, log)
    start = time.perf_counter()
    since.append(start)
    lag = lag_probe()
    answer = await bench.app.astop({"thread_id": target})
    returned = time.perf_counter()
    await asyncio.wait([tasks[runs // 2]])
    figures = {
        "astop_ms": (returned - start) * 1e3,
        "loop_lag_ms": (lag[0] - start) * 1e3,
        "cancelled_ms": (bench.cancelled_at.get(target, float("nan")) - start) * 1e3,
        "stopped_ms": (bench.ended_at[target] - start) * 1e3,
    }
    if not answer.get("running"):
        raise SystemExit(f"astop did not find the run: {answer}")
    outcome = bench.results.get(target)
    if outcome is None:
        raise SystemExit(f"the stopped run failed: {tasks[runs // 2].exception()!r}")
    if outcome.get("interrupted", {}).get("reason") != "stop_requested":
        raise SystemExit(f"the run did not stop: {outcome.get('interrupted')}")
    # the others: stopped too, so the next repetition starts from an empty loop
    for thread_id in threads:
        await bench.app.astop({"thread_id": thread_id})
    await asyncio.gather(*tasks, return_exceptions=True)
    untimed(bench.checkpointer)
    return figures, log


def open_checkpointer(backend: str, where: Path) -> BaseCheckpointer:
    if backend == "memory":
        return InMemoryCheckpointer()
    if backend == "sqlite":
        from tenxgraph.storage.checkpointer import SqliteCheckpointer

        return SqliteCheckpointer(where / "stop_latency.db")
    from tenxgraph.storage.checkpointer import PgCheckpointer

    dsn = os.environ["TENXGRAPH_TEST_PG_DSN"]
    return PgCheckpointer(dsn, schema=pg_schema(), max_size=10)


def pg_schema() -> str:
    return f"tx_bench_stop_{os.getpid()}"


async def drop_schema(dsn: str, schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def measure(
    backend: str, workload: str, runs: int, reps: int, breakdown: bool
) -> tuple[dict[str, float], list[list[str]]]:
    with tempfile.TemporaryDirectory() as where:
        checkpointer = open_checkpointer(backend, Path(where))
        bench = Bench(workload, checkpointer)
        rows: list[dict[str, float]] = []
        logs: list[list[str]] = []
        try:
            for rep in range(reps + 1):
                figures, log = await repetition(bench, runs, f"r{rep}", breakdown)
                if rep:  # the first one warms up
                    rows.append(figures)
                    logs.append(log)
        finally:
            await checkpointer.aclose()
            if backend == "postgres":
                await drop_schema(os.environ["TENXGRAPH_TEST_PG_DSN"], pg_schema())
    medians = {name: statistics.median(row[name] for row in rows) for name in FIGURES}
    return medians, logs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["memory", "sqlite", "postgres", "all"])
    parser.add_argument("--workload", choices=["idle", "steps", "both"], default="both")
    parser.add_argument("--runs", type=int, help="concurrent runs (default 5,000 / 500 / 500)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--breakdown", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.backend is None or args.backend == "all":
        backends = ["memory", "sqlite"]
        if args.backend == "all" or os.environ.get("TENXGRAPH_TEST_PG_DSN"):
            backends.append("postgres")
    else:
        backends = [args.backend]
    workloads = ["idle", "steps"] if args.workload == "both" else [args.workload]
    if not args.json:
        print(
            f"{'backend':<9} {'workload':<8} {'runs':>5}  " + "  ".join(f"{f:>12}" for f in FIGURES)
        )
    for backend in backends:
        for workload in workloads:
            runs = args.runs or DEFAULT_RUNS[backend]
            medians, logs = asyncio.run(measure(backend, workload, runs, args.reps, args.breakdown))
            if args.json:
                print(
                    json.dumps({"backend": backend, "workload": workload, "runs": runs, **medians})
                )
            else:
                cells = "  ".join(f"{medians[f]:>12.2f}" for f in FIGURES)
                print(f"{backend:<9} {workload:<8} {runs:>5}  {cells}")
            for i, log in enumerate(logs if args.breakdown else []):
                print(f"    rep {i + 1}: " + "; ".join(log))


if __name__ == "__main__":
    main()
