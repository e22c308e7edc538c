"""PostgreSQL: round trips and write transactions per turn, and connections left by loops.

    export TENXGRAPH_TEST_PG_DSN=postgresql://user@127.0.0.1:5432/db
    python benchmarks/pg_round_trips.py            # a table
    python benchmarks/pg_round_trips.py --json     # one JSON object
    python benchmarks/pg_round_trips.py --show     # and the statements of each round trip

The checkpointer talks to the server through a loopback proxy (tests/storage/_pg_wire.py)
that reads the client side of the wire protocol. A turn is one `ainvoke` of a two-node graph
(START -> a -> b -> END, each node adding an assistant message) with one user message:

- `first`: the first turn of a new thread;
- `next`: a later turn on a thread this app ran before (its state kept in memory), the median
  over `--turns` turns after one warm-up; and its median wall time over `--timed` turns
  talking to the server directly (no proxy);
- `cold`: a later turn by a new app on the same checkpointer (the thread loaded from storage),
  after one such turn.

For each: round trips (a `Sync` or a simple `Query` the client sends and then waits on) and
write transactions (BEGIN ... COMMIT blocks, or single statements outside one, that insert,
update or delete). Then `loops`: `--loops` calls of `asyncio.run()`, each running a turn with
one shared checkpointer (`min_size=5` by default, a fresh thread each), and the number of
the checkpointer's connections still open on the server afterwards (`pg_stat_activity` by
application_name; the garbage collector off meanwhile), after a `gc.collect()`, and after
`aclose()`; and the warnings (ResourceWarning: unclosed sockets) raised on the way.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.storage._pg_wire import Tally, WireCounter

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.utils.constants import END, START


def two_nodes(checkpointer: PgCheckpointer) -> Any:
    def a(state: AgentState) -> Message:
        return Message.text_message("from a", "assistant")

    def b(state: AgentState) -> Message:
        return Message.text_message("from b", "assistant")

    graph = StateGraph(AgentState)
    graph.add_node("a", a)
    graph.add_node("b", b)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", END)
    return graph.compile(checkpointer=checkpointer)


def turn_input(n: int) -> dict[str, Any]:
    return {"messages": [Message.text_message(f"turn {n}", "user")]}


def figures(tally: Tally) -> dict[str, Any]:
    return {"round_trips": tally.round_trips, "write_transactions": tally.write_transactions}


async def measure_turns(dsn: str, wire: WireCounter, turns: int) -> dict[str, Any]:
    schema = f"tx_rt_{uuid.uuid4().hex[:12]}"
    store = PgCheckpointer(wire.dsn, schema=schema)
    try:
        await store.asetup()
        app = two_nodes(store)
        config = {"thread_id": "t"}
        wire.reset()
        await app.ainvoke(turn_input(0), config)
        first = wire.reset()
        await app.ainvoke(turn_input(1), config)  # warm-up: statements prepared
        wire.reset()
        nexts = []
        for n in range(turns):
            await app.ainvoke(turn_input(2 + n), config)
            nexts.append(wire.reset())
        await two_nodes(store).ainvoke(turn_input(98), config)  # warm-up: statements prepared
        wire.reset()
        await two_nodes(store).ainvoke(turn_input(99), config)
        cold = wire.reset()
        middle = sorted(nexts, key=lambda t: t.round_trips)[len(nexts) // 2]
        return {
            "first": {**figures(first), "exchanges": first.exchanges},
            "next": {
                "round_trips": statistics.median(t.round_trips for t in nexts),
                "write_transactions": statistics.median(t.write_transactions for t in nexts),
                "exchanges": middle.exchanges,
            },
            "cold": {**figures(cold), "exchanges": cold.exchanges},
        }
    finally:
        await store.aclose()
        await drop(dsn, schema)


async def time_turns(dsn: str, turns: int) -> float:
    """Median wall time of a `next` turn in ms, straight to the server (no proxy)."""
    schema = f"tx_rt_{uuid.uuid4().hex[:12]}"
    store = PgCheckpointer(dsn, schema=schema)
    try:
        app = two_nodes(store)
        config = {"thread_id": "t"}
        for n in range(3):
            await app.ainvoke(turn_input(n), config)
        times = []
        for n in range(turns):
            started = time.perf_counter()
            await app.ainvoke(turn_input(3 + n), config)
            times.append((time.perf_counter() - started) * 1000)
        return statistics.median(times)
    finally:
        await store.aclose()
        await drop(dsn, schema)


async def drop(dsn: str, schema: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def open_connections(dsn: str, tag: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        return int(
            await conn.fetchval(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1", tag
            )
        )
    finally:
        await conn.close()


def measure_loops(dsn: str, loops: int, min_size: int) -> dict[str, Any]:
    """`loops` asyncio.run() calls, each running a turn with one shared checkpointer. The
    garbage collector is off until they are counted: what is left open is what the loops'
    ends left, not what a collection happened to close meanwhile."""
    tag = f"tx_rt_{uuid.uuid4().hex[:12]}"
    tagged = f"{dsn}{'&' if '?' in dsn else '?'}application_name={tag}"
    store = PgCheckpointer(tagged, schema=tag, min_size=min_size)
    app = two_nodes(store)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.disable()
        try:
            for n in range(loops):
                asyncio.run(app.ainvoke(turn_input(n), {"thread_id": f"t{n}"}))
            left = asyncio.run(open_connections(dsn, tag))
        finally:
            gc.enable()
        gc.collect()  # what a collection of the dropped pools and connections closes
        collected = asyncio.run(open_connections(dsn, tag))
        asyncio.run(store.aclose())
        after_close = asyncio.run(open_connections(dsn, tag))
    asyncio.run(drop(dsn, tag))
    return {
        "loops": loops,
        "min_size": min_size,
        "connections_left": left,
        "after_gc": collected,
        "after_aclose": after_close,
        "warnings": len(caught),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=9)
    parser.add_argument("--loops", type=int, default=8)
    parser.add_argument("--timed", type=int, default=200, help="`next` turns timed, direct")
    parser.add_argument("--min-size", type=int, default=5, help="of the loops' pools")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--show", action="store_true", help="the statements of each round trip")
    args = parser.parse_args()
    dsn = os.environ.get("TENXGRAPH_TEST_PG_DSN")
    if not dsn:
        sys.exit("set TENXGRAPH_TEST_PG_DSN to a PostgreSQL server (see benchmarks/README.md)")
    with WireCounter(dsn) as wire:
        turns = asyncio.run(measure_turns(dsn, wire, args.turns))
    loops = measure_loops(dsn, args.loops, args.min_size)
    turns["next"]["ms"] = asyncio.run(time_turns(dsn, args.timed))
    if args.json:
        out = {k: {f: v for f, v in t.items() if f != "exchanges"} for k, t in turns.items()}
        print(json.dumps({**out, "loops": loops}))
        return
    print(f"{'turn (2 nodes)':<16}{'round trips':>12}{'write transactions':>20}")
    for name, found in turns.items():
        print(f"{name:<16}{found['round_trips']:>12}{found['write_transactions']:>20}")
        if "ms" in found:
            print(f"    median wall time, straight to the server: {found['ms']:.2f} ms")
        if args.show:
            for n, statements in enumerate(found["exchanges"], 1):
                print(f"    {n:>2}. " + " | ".join(statements))
    print(
        f"{loops['loops']} asyncio.run() turns, one checkpointer (min_size={loops['min_size']}): "
        f"{loops['connections_left']} connections left open, {loops['after_gc']} after "
        f"gc.collect(), {loops['after_aclose']} after aclose(); {loops['warnings']} warnings"
    )


if __name__ == "__main__":
    main()
