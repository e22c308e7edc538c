"""PgCheckpointer round trips, counted on the wire by a loopback proxy (`_pg_wire`).

A save is one statement: one round trip, one write transaction. A two-node turn on a thread
the app ran before is four round trips: the version check, the input's save (which takes the
lease and clears stale stop requests) and one save per step. Statements are prepared once per
connection, so every count is taken after a warm-up, on a pool of one connection.

Skipped unless TENXGRAPH_TEST_PG_DSN points at a server (`.ci/run` starts one).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tenxgraph.core.graph import CompiledGraph
from tenxgraph.storage.checkpointer.lease import Lease
from tests.core.graph._support import inp, linear
from tests.storage._pg_wire import Tally, WireCounter
from tests.storage._support import msg, state_with, texts_of
from tests.storage.conftest import drop_schema, fresh_schema, pg_dsn

pytest.importorskip("asyncpg", reason="asyncpg is not installed")

from tenxgraph.storage.checkpointer.postgres import PgCheckpointer


@pytest.fixture
def wire() -> Iterator[WireCounter]:
    with WireCounter(pg_dsn()) as counter:
        yield counter


@pytest.fixture
async def store(wire: WireCounter) -> AsyncIterator[PgCheckpointer]:
    schema = fresh_schema()
    found = PgCheckpointer(wire.dsn, schema=schema, min_size=1, max_size=1)
    await found.asetup()
    yield found
    await found.aclose()
    await drop_schema(pg_dsn(), schema)


def two_nodes(store: PgCheckpointer) -> CompiledGraph:
    return linear(("a", lambda s: "from a"), ("b", lambda s: "from b"), checkpointer=store)


def shown(tally: Tally) -> str:
    return "\n".join(" | ".join(statements) for statements in tally.exchanges)


async def test_a_two_node_turn_is_four_round_trips_and_a_write_per_save(
    store: PgCheckpointer, wire: WireCounter
) -> None:
    app = two_nodes(store)
    config = {"thread_id": "t"}
    for n in range(2):  # statements prepared, the thread kept by the app
        await app.ainvoke(inp(f"warm {n}"), config)
    wire.reset()
    result = await app.ainvoke(inp("turn"), config)
    turn = wire.reset()
    assert [m.text() for m in result["messages"]] == ["turn", "from a", "from b"]
    # the version, the input with the lease, step a, step b (at main: 25 and 3)
    assert turn.round_trips == 4, shown(turn)
    assert turn.write_transactions == 3, shown(turn)
    assert turn.connections == 0

    await app.ainvoke(inp("first"), {"thread_id": "new"})  # a new thread: the same
    first = wire.reset()
    assert (first.round_trips, first.write_transactions) == (4, 3), shown(first)


async def test_each_kind_of_save_is_one_round_trip(
    store: PgCheckpointer, wire: WireCounter
) -> None:
    lease = Lease("run-1", 30.0)

    async def saves(thread_id: str) -> None:
        first = state_with("a")
        assert await store.asave(
            thread_id, expected_version=None, state=first, new_messages=first.context,
            lease=lease,
        ) == 1  # fmt: skip
        assert await store.asave(
            thread_id, expected_version=1, state=state_with(), new_messages=[msg("b")],
            lease=lease,
        ) == 2  # fmt: skip
        summary = state_with("summary")
        assert await store.asave(
            thread_id, expected_version=2, state=summary, new_messages=summary.context,
            rewrite=True, lease=lease, release=True,
        ) == 3  # fmt: skip

    await saves("warm")  # statements prepared
    wire.reset()
    await saves("t")
    tally = wire.reset()
    assert (tally.round_trips, tally.write_transactions) == (3, 3), shown(tally)
    assert await texts_of(store, "t") == ["summary"]
    assert await store.alease_holder("t") is None


async def test_a_new_connection_asks_the_server_about_no_type(
    store: PgCheckpointer, wire: WireCounter
) -> None:
    """Message ids travel as text (the hex of their stored bytes): asyncpg has no codec of its
    own for an array of bytea, and would look the type up on each new connection (five round
    trips more on its first turn)."""
    wire.reset()
    await two_nodes(store).ainvoke(inp("first"), {"thread_id": "t"})
    await two_nodes(store).ainvoke(inp("again"), {"thread_id": "t"})  # a new app: loaded
    tally = wire.reset()
    assert not any("typeinfo" in s for e in tally.exchanges for s in e), shown(tally)
    assert await texts_of(store, "t") == ["first", "from a", "from b", "again", "from a", "from b"]
