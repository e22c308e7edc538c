"""S10: one process cycling through more threads than it can keep: turn time, GC, memory.

    python benchmarks/run.py s10_cache_cycle --rounds 1 --peers langgraph

2,000 threads of 1,000 messages each (`--threads`, `--messages`), alternating user (~120
characters) and assistant (~240 characters) messages, seeded into one SQLite file (tenxgraph:
the checkpointer's `asave`, one thread per call; LangGraph: `AsyncSqliteSaver`, one
`aupdate_state` per thread). Then a NEW process (this interpreter, started for it, so that
its peak RSS and GC figures are the cycle's alone) opens the file and runs one turn on each
thread in turn, all of them `--cycles` (2) times: a one-node graph, START -> reply -> END,
whose node reads the last message and returns a short reply (tenxgraph: `ainvoke` at the
default LOW granularity, which keeps the thread's state for its next turn, up to the app's
cache limit).

Before the cycle, the new process measures what a kept thread costs: a turn on each of
`--sample` (20) threads with a second app of its own, under `tracemalloc`, after a warm-up
turn; the traced bytes still held once they ended (after `gc.collect()`) are what that app
keeps (LangGraph keeps nothing between turns). Then `tracemalloc` stops and the cycle runs
on the first app.

Measures:

- turn_ms_median, turn_ms_p99, turn_ms_max over every turn of the cycle, and
  cycle1_turn_ms / last_cycle_turn_ms, the medians of the first and last cycle;
- gc_max_pause_ms, gc_total_ms: the longest garbage collection during the cycle and their sum
  (`gc.callbacks` start/stop timestamps), gc_full_collections: how many were of the oldest
  generation (the issue 17 goal: no pause over 100 ms);
- peak_rss_mb: the new process's peak resident set (`VmHWM`), rss_start_mb: its resident set
  before the cycle (after imports, the sample and its warm-up);
- kept_bytes_per_message: the sample's kept bytes / the messages of its threads;
  kept_over_json: kept bytes / the JSON size of those messages (tenxgraph
  `m.model_dump_json()`, LangGraph `json.dumps(m.model_dump())`; goal: at most 2);
- seed_s, cycle_s: seeding time (in the scenario's process) and the whole cycle's time.

The defaults are issue 17's sizes: a round takes minutes per framework on a 2-core machine
(4.5 for tenxgraph before issue 17, most of it in GC; 7 for LangGraph), and the SQLite file,
in a temporary folder removed afterwards, takes about 1 GB (LangGraph's grows by a whole
thread per turn). `--threads 300` is a quick check.
"""

import argparse
import asyncio
import contextlib
import gc
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from _common import emit, median

THREADS = 2_000
MESSAGES = 1_000
CYCLES = 2
SAMPLE = 20
_FILLER = (
    "The quick brown fox jumps over the lazy dog while the storage layer keeps every word "
    "of this conversation safe on disk, turn after turn, without rewriting what it already has. "
)


def text(i: int) -> str:
    size = 120 if i % 2 == 0 else 240
    return (f"[message {i}] " + (_FILLER * 3)[i % 50 :])[:size]


def thread_id(k: int) -> str:
    return f"s10-{k:05d}"


# -- tenxgraph ----------------------------------------------------------------------------------


class TenxGraph:
    def __init__(self, db_path: str) -> None:
        from tenxgraph.storage.checkpointer import SqliteCheckpointer

        self.checkpointer = SqliteCheckpointer(db_path)

    @contextlib.asynccontextmanager
    async def opened(self) -> AsyncIterator["TenxGraph"]:
        await self.checkpointer.asetup()
        try:
            yield self
        finally:
            await self.checkpointer.aclose()

    def messages(self, count: int) -> list[Any]:
        from tenxgraph.core.state import Message

        return [
            Message.text_message(text(i), "user" if i % 2 == 0 else "assistant")
            for i in range(count)
        ]

    async def seed(self, threads: int, count: int) -> None:
        from tenxgraph.core.state import AgentState

        messages = self.messages(count)  # the same messages in every thread: ids are per thread
        for k in range(threads):
            await self.checkpointer.asave(
                thread_id(k), expected_version=None, state=AgentState(), new_messages=messages
            )

    def json_bytes(self, count: int) -> int:
        return sum(len(m.model_dump_json().encode()) for m in self.messages(count))

    def app(self) -> Any:
        from tenxgraph.core.graph import StateGraph
        from tenxgraph.core.state import AgentState, Message
        from tenxgraph.utils.constants import END, START

        async def reply(state: AgentState) -> Message:
            return Message.text_message(f"reply to {state.context[-1].text()[:20]}", "assistant")

        g = StateGraph(AgentState)
        g.add_node("reply", reply)
        g.add_edge(START, "reply")
        g.add_edge("reply", END)
        return g.compile(checkpointer=self.checkpointer)

    async def turn(self, app: Any, thread: str) -> None:
        from tenxgraph.core.state import Message

        await app.ainvoke({"messages": [Message.text_message("next")]}, {"thread_id": thread})

    async def length(self, app: Any, thread: str) -> int:
        return len((await app.aget_state({"thread_id": thread})).context)


# -- LangGraph ----------------------------------------------------------------------------------


class LangGraph:
    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        self.saver: Any = None

    @contextlib.asynccontextmanager
    async def opened(self) -> AsyncIterator["LangGraph"]:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(self.db_path) as saver:
            await saver.setup()
            self.saver = saver
            yield self

    def messages(self, count: int) -> list[Any]:
        from langchain_core.messages import AIMessage, HumanMessage

        return [
            (HumanMessage if i % 2 == 0 else AIMessage)(content=text(i), id=f"m{i}")
            for i in range(count)
        ]

    async def seed(self, threads: int, count: int) -> None:
        app, messages = self.app(), self.messages(count)
        for k in range(threads):
            config = {"configurable": {"thread_id": thread_id(k)}}
            await app.aupdate_state(config, {"messages": messages}, as_node="reply")

    def json_bytes(self, count: int) -> int:
        return sum(len(json.dumps(m.model_dump()).encode()) for m in self.messages(count))

    def app(self) -> Any:
        from langchain_core.messages import AIMessage
        from langgraph.graph import END, START, MessagesState, StateGraph

        async def reply(state: MessagesState) -> dict[str, Any]:
            last = state["messages"][-1]
            return {"messages": [AIMessage(content=f"reply to {last.content[:20]}")]}

        g = StateGraph(MessagesState)
        g.add_node("reply", reply)
        g.add_edge(START, "reply")
        g.add_edge("reply", END)
        return g.compile(checkpointer=self.saver)

    async def turn(self, app: Any, thread: str) -> None:
        from langchain_core.messages import HumanMessage

        config = {"configurable": {"thread_id": thread}}
        await app.ainvoke({"messages": [HumanMessage(content="next")]}, config)

    async def length(self, app: Any, thread: str) -> int:
        state = await app.aget_state({"configurable": {"thread_id": thread}})
        return len(state.values["messages"])


def side_of(framework: str, db_path: str) -> Any:
    if framework == "tenxgraph":
        return TenxGraph(db_path)
    if framework == "langgraph":
        return LangGraph(db_path)
    raise SystemExit(f"s10_cache_cycle: no storage setup for framework {framework!r}")


# -- the cycling process ------------------------------------------------------------------------


def status_mb(field: str) -> float:
    """A `VmRSS`/`VmHWM` line of /proc/self/status, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class GcClock:
    """Every collection's duration and generation, from `gc.callbacks`."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses.append((info["generation"], (time.perf_counter() - self._start) * 1e3))


async def kept_bytes(side: Any, threads: int, sample: int) -> float:
    """Traced bytes a fresh app still holds after one turn on each of `sample` threads."""
    warm = side.app()
    await side.turn(warm, thread_id(threads - 1))  # builds whatever is built on first use
    del warm
    app = side.app()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k in range(threads - 1 - sample, threads - 1):
            await side.turn(app, thread_id(k))
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del app
    gc.collect()
    return float(after - before)


async def cycle(framework: str, db_path: str, threads: int, count: int, cycles: int) -> None:
    side = side_of(framework, db_path)
    async with side.opened():
        sample = min(SAMPLE, threads - 1)
        kept = await kept_bytes(side, threads, sample) if sample > 0 else float("nan")
        per_thread_json = side.json_bytes(count)
        app = side.app()
        clock = GcClock()
        rss_start = status_mb("VmRSS")
        gc.callbacks.append(clock)
        times: list[list[float]] = []
        started = time.perf_counter()
        try:
            for _ in range(cycles):
                row = []
                for k in range(threads):
                    start = time.perf_counter()
                    await side.turn(app, thread_id(k))
                    row.append((time.perf_counter() - start) * 1e3)
                times.append(row)
        finally:
            gc.callbacks.remove(clock)
        cycle_s = time.perf_counter() - started
        peak = status_mb("VmHWM")
        length = await side.length(app, thread_id(0))
    extra = 2 * cycles + (0 if threads - 1 - sample > 0 else 2)
    if length != count + extra:
        raise RuntimeError(
            f"s10_cache_cycle: thread 0 holds {length} messages, not {count + extra}"
        )
    every = sorted(t for row in times for t in row)
    print(
        json.dumps(
            {
                "turn_ms_median": median(every),
                "turn_ms_p99": every[min(len(every) - 1, int(len(every) * 0.99))],
                "turn_ms_max": every[-1],
                "cycle1_turn_ms": median(times[0]),
                "last_cycle_turn_ms": median(times[-1]),
                "gc_max_pause_ms": max((p for _, p in clock.pauses), default=0.0),
                "gc_total_ms": sum(p for _, p in clock.pauses),
                "gc_full_collections": sum(1 for g, _ in clock.pauses if g == 2),
                "peak_rss_mb": peak,
                "rss_start_mb": rss_start,
                "kept_bytes_per_message": kept / (sample * count) if sample else float("nan"),
                "kept_over_json": kept / (sample * per_thread_json) if sample else float("nan"),
                "cycle_s": cycle_s,
            }
        )
    )


# -- the scenario's process: seed, then start the cycling one -------------------------------------


async def seed(framework: str, db_path: str, threads: int, count: int) -> float:
    side = side_of(framework, db_path)
    start = time.perf_counter()
    async with side.opened():
        await side.seed(threads, count)
    return time.perf_counter() - start


def measure(framework: str, threads: int, count: int, cycles: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="tenxgraph-s10-") as tmp:
        db_path = str(Path(tmp) / f"{framework}.db")
        seed_s = asyncio.run(seed(framework, db_path, threads, count))
        proc = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--framework",
                framework,
                "--child",
                db_path,
                "--threads",
                str(threads),
                "--messages",
                str(count),
                "--cycles",
                str(cycles),
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"s10_cache_cycle: the cycling process failed:\n{proc.stderr[-3000:]}"
            )
        measures: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    measures["seed_s"] = seed_s
    return measures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", required=True)
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--messages", type=int, default=MESSAGES, help="per thread")
    parser.add_argument("--cycles", type=int, default=CYCLES)
    parser.add_argument("--child", metavar="DB", help=argparse.SUPPRESS)  # the cycling process
    args = parser.parse_args()
    if args.threads < 2 or args.messages < 2 or args.cycles < 1:
        parser.error("--threads and --messages at least 2, --cycles at least 1")
    if args.child:
        asyncio.run(cycle(args.framework, args.child, args.threads, args.messages, args.cycles))
        return
    emit(measure(args.framework, args.threads, args.messages, args.cycles))


if __name__ == "__main__":
    main()
