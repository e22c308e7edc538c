"""PgCheckpointer specifics: two processes racing, lost connections, pools, configuration.

Skipped unless TENXGRAPH_TEST_PG_DSN points at a server (`.ci/run` starts one).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import StaleStateError, ThreadBusyError, TransientStorageError
from tenxgraph.core.state import AgentState
from tenxgraph.storage.checkpointer.lease import Lease
from tests.storage._support import msg, save, state_with, texts_of
from tests.storage.conftest import drop_schema, fresh_schema, pg_dsn

asyncpg = pytest.importorskip("asyncpg", reason="asyncpg is not installed")

from tenxgraph.storage.checkpointer.postgres import PgCheckpointer  # noqa: E402

WORKER = Path(__file__).with_name("_pg_race_worker.py")


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    dsn = pg_dsn()
    name = fresh_schema()
    yield name
    await drop_schema(dsn, name)


@pytest.fixture
async def store(schema: str) -> AsyncIterator[PgCheckpointer]:
    found = PgCheckpointer(pg_dsn(), schema=schema, max_size=4)
    yield found
    await found.aclose()


async def test_two_processes_racing_on_one_thread_lose_and_duplicate_nothing(
    schema: str,
) -> None:
    rounds = 15
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKER),
            pg_dsn(),
            schema,
            "shared",
            name,
            str(rounds),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for name in ("p1", "p2")
    ]
    try:
        for proc in procs:  # both connected (and both raced to create the fresh schema)
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            if line != b"ready\n":
                _, err = await proc.communicate()
                pytest.fail(f"worker did not start: {line!r} {err.decode()}")
        outputs = await asyncio.wait_for(
            asyncio.gather(*(proc.communicate(b"go\n") for proc in procs)), 120
        )
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    lines = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()
        lines.append(out.decode().split("\n"))
    firsts = sorted(line[0] for line in lines)
    assert firsts == ["stale", "won 1"]  # exactly one process created the thread
    winner = "p1" if lines[0][0] == "won 1" else "p2"

    store = PgCheckpointer(pg_dsn(), schema=schema)
    try:
        texts = await texts_of(store, "shared")
        assert texts[0] == f"{winner}-0"
        assert len(texts) == 1 + 2 * rounds
        assert len(set(texts)) == len(texts)  # nothing duplicated
        for name in ("p1", "p2"):  # nothing lost, each process's messages in its order
            mine = [t for t in texts[1:] if t.startswith(f"{name}-")]
            assert mine == [f"{name}-{n}" for n in range(1, rounds + 1)]
        assert await store.aversion("shared") == 1 + 2 * rounds
    finally:
        await store.aclose()


def tagged_dsn(tag: str) -> str:
    """The test DSN with an application_name, so this test can find its own connections."""
    dsn = pg_dsn()
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={tag}"


async def terminate_backends(tag: str) -> int:
    """Kill the connections tagged `tag`, as a server restart or failover would."""
    conn = await asyncpg.connect(pg_dsn())
    try:
        killed = await conn.fetch(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
            "WHERE application_name = $1 AND pid <> pg_backend_pid()",
            tag,
        )
        return len(killed)
    finally:
        await conn.close()


async def test_reads_and_saves_survive_lost_connections(schema: str) -> None:
    store = PgCheckpointer(tagged_dsn(schema), schema=schema, min_size=2, max_size=2)
    try:
        await save(store, "t", state_with("a"), None)
        assert await terminate_backends(schema) >= 1
        assert await texts_of(store, "t") == ["a"]  # the dead connection is replaced
        assert await terminate_backends(schema) >= 1
        assert await save(store, "t", state_with(), 1, new=[msg("b")]) == 2
        assert await texts_of(store, "t") == ["a", "b"]
    finally:
        await store.aclose()


class Flaky:
    """Makes a save's statement lose the connection: after it landed on the server
    (`commit_first`), or before it reached it."""

    def __init__(self, store: PgCheckpointer, *, commit_first: bool, times: int = 1) -> None:
        self.real = store._execute_save
        self.commit_first = commit_first
        self.left = times
        self.calls = 0

    async def __call__(self, conn: Any, query: str, args: Any) -> Any:
        self.calls += 1
        if self.left > 0:
            self.left -= 1
            if self.commit_first:
                await self.real(conn, query, args)
            raise asyncpg.ConnectionDoesNotExistError("connection lost during the save")
        return await self.real(conn, query, args)


async def test_a_commit_that_landed_before_the_connection_broke_is_a_success(
    store: PgCheckpointer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await save(store, "t", state_with("a"), None)
    flaky = Flaky(store, commit_first=True)
    monkeypatch.setattr(store, "_execute_save", flaky)
    assert await save(store, "t", state_with(), 1, new=[msg("b"), msg("c")]) == 2
    assert flaky.calls == 1  # not written twice
    assert await texts_of(store, "t") == ["a", "b", "c"]
    assert [h.version for h in await store.ahistory("t")] == [2, 1]


async def test_a_commit_that_did_not_land_is_repeated(
    store: PgCheckpointer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await save(store, "t", state_with("a"), None)
    flaky = Flaky(store, commit_first=False)
    monkeypatch.setattr(store, "_execute_save", flaky)
    assert await save(store, "t", state_with(), 1, new=[msg("b")]) == 2
    assert flaky.calls == 2
    assert await texts_of(store, "t") == ["a", "b"]


async def test_a_commit_that_keeps_failing_is_transient_and_writes_nothing(
    store: PgCheckpointer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await save(store, "t", state_with("a"), None)
    flaky = Flaky(store, commit_first=False, times=100)
    monkeypatch.setattr(store, "_execute_save", flaky)
    with pytest.raises(TransientStorageError, match="'t'"):
        await save(store, "t", state_with(), 1, new=[msg("b")])
    assert flaky.calls == 1 + store._retries
    assert await texts_of(store, "t") == ["a"]


async def test_a_lost_commit_where_another_writer_won_is_stale(
    store: PgCheckpointer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await save(store, "t", state_with("a"), None)
    real = store._execute_save

    async def lose_to_another_writer(conn: Any, query: str, args: Any) -> Any:
        monkeypatch.setattr(store, "_execute_save", real)
        await save(store, "t", state_with(), 1, new=[msg("other")])
        raise asyncpg.ConnectionDoesNotExistError("connection lost during the save")

    monkeypatch.setattr(store, "_execute_save", lose_to_another_writer)
    with pytest.raises(StaleStateError):
        await save(store, "t", state_with(), 1, new=[msg("mine")])
    assert await texts_of(store, "t") == ["a", "other"]


async def test_a_passed_in_pool_is_used_and_left_open(schema: str) -> None:
    pool = await asyncpg.create_pool(pg_dsn(), min_size=1, max_size=2)
    try:
        store = PgCheckpointer(pool=pool, schema=schema)
        await save(store, "t", state_with("a"), None)
        await store.aclose()
        assert not pool._closed
        async with pool.acquire() as conn:
            count = await conn.fetchval(f'SELECT COUNT(*) FROM "{schema}".tx_messages')
        assert count == 1
        again = PgCheckpointer(pool=pool, schema=schema)
        assert await texts_of(again, "t") == ["a"]
    finally:
        await pool.close()


async def test_an_owned_pool_is_closed(store: PgCheckpointer) -> None:
    await store.asetup()
    pools = list(store._pools._pools.values())
    assert len(pools) == 1
    await store.aclose()
    assert pools[0]._closed
    assert await store.aversion("t") is None  # and reopened on next use


async def test_one_instance_works_from_two_event_loops(store: PgCheckpointer) -> None:
    await save(store, "t", state_with("a"), None)

    def in_private_loop() -> int:
        return asyncio.run(save(store, "t", state_with(), 1, new=[msg("b")]))

    assert await asyncio.to_thread(in_private_loop) == 2
    assert await texts_of(store, "t") == ["a", "b"]


async def test_the_save_that_takes_the_lease_clears_stop_requests(
    store: PgCheckpointer,
) -> None:
    """They were asked of no run, or of another one: the run taking the thread starts with
    none (in the same statement: the engine need not look for one)."""
    one, two = Lease("run-1", 30.0), Lease("run-2", 30.0)

    async def saved(expected: int | None, lease: Lease | None, release: bool = False) -> int:
        state = state_with("a") if expected is None else state_with()
        return await store.asave(
            "t", expected_version=expected, state=state, new_messages=state.context,
            lease=lease, release=release,
        )  # fmt: skip

    assert store.lease_clears_stop_requests
    await store.arequest_stop("t")
    await store.arequest_stop("other")
    assert await saved(None, one) == 1  # a new thread, its lease taken
    assert not await store.ais_stop_requested("t")
    assert await store.ais_stop_requested("other")
    await store.arequest_stop("t")  # asked of run-1, which holds the thread
    assert await saved(1, one) == 2
    assert await store.ais_stop_requested("t")  # still there for run-1 to see
    assert await saved(2, one, release=True) == 3
    assert await saved(3, None) == 4  # no lease taken
    assert await store.ais_stop_requested("t")
    assert await saved(4, two) == 5  # run-2 takes the thread
    assert not await store.ais_stop_requested("t")
    await store.arequest_stop("t")
    with pytest.raises(ThreadBusyError):  # and a refused save clears nothing
        await saved(5, one)
    assert await store.ais_stop_requested("t")


async def count_backends(tag: str) -> int:
    conn = await asyncpg.connect(pg_dsn())
    try:
        found = await conn.fetchval(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1", tag
        )
        return int(found)
    finally:
        await conn.close()


def test_each_asyncio_run_closes_the_pool_it_made(schema: str) -> None:
    """A pool is closed as the loop that made it ends (not left open on the server until the
    garbage collector finds it): eight `asyncio.run()` turns with one checkpointer leave no
    connection behind, and no ResourceWarning once the garbage is collected."""
    from tests.core.graph._support import inp, linear

    store = PgCheckpointer(tagged_dsn(schema), schema=schema, min_size=3, max_size=4)
    app = linear(("a", lambda s: "from a"), ("b", lambda s: "from b"), checkpointer=store)
    collecting = gc.isenabled()
    gc.disable()  # nothing is closed behind the test's back: only what the loops' ends do
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for n in range(8):
                asyncio.run(app.ainvoke(inp(f"turn {n}"), {"thread_id": f"t{n}"}))
            left = asyncio.run(count_backends(schema))
            gc.collect()
        assert left == 0
        assert [str(w.message) for w in caught] == []
        assert len(store._pools) == 0
        assert asyncio.run(store.aversion("t7")) == 3  # and usable again on a new loop
        assert asyncio.run(count_backends(schema)) == 0
    finally:
        if collecting:
            gc.enable()


def test_a_call_after_the_loop_closed_its_pool_gets_a_connection_of_its_own(
    schema: str,
) -> None:
    """What still runs on a loop after its shutdown closed the pool (another async generator's
    clean-up) uses a connection opened and closed for it, and warns of nothing."""

    async def ending_loop() -> int | None:
        store = PgCheckpointer(tagged_dsn(schema), schema=schema, min_size=2)
        await save(store, "t", state_with("a"), None)
        assert await count_backends(schema) == 2
        await asyncio.get_running_loop().shutdown_asyncgens()  # as asyncio.run's end does
        assert await count_backends(schema) == 0
        found = await store.aversion("t")
        assert len(store._pools) == 0  # no new pool for a loop that is ending
        return found

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert asyncio.run(ending_loop()) == 1
        gc.collect()
    assert [str(w.message) for w in caught] == []
    assert asyncio.run(count_backends(schema)) == 0


async def test_many_instances_creating_one_schema_at_once(schema: str) -> None:
    stores = [PgCheckpointer(pg_dsn(), schema=schema, max_size=1) for _ in range(6)]
    try:
        await asyncio.gather(*(s.asetup() for s in stores))
        await save(stores[0], "t", state_with("a"), None)
        assert await texts_of(stores[5], "t") == ["a"]
    finally:
        for s in stores:
            await s.aclose()


def test_configuration_errors() -> None:
    with pytest.raises(ValueError, match="exactly one of dsn"):
        PgCheckpointer()
    with pytest.raises(ValueError, match="exactly one of dsn"):
        PgCheckpointer("postgresql://x", pool=object())
    with pytest.raises(ValueError, match="identifier"):
        PgCheckpointer("postgresql://x", schema='bad"; DROP TABLE x; --')
    with pytest.raises(ValueError, match="retries"):
        PgCheckpointer("postgresql://x", retries=-1)


async def test_unreachable_server_is_a_transient_error() -> None:
    store = PgCheckpointer("postgresql://nobody@127.0.0.1:1/none", retries=1)
    with pytest.raises(TransientStorageError, match="gave up after 2 attempts"):
        await store.aversion("t")


async def test_state_with_custom_type_round_trips(store: PgCheckpointer) -> None:
    state = AgentState(context=[msg("x")])
    await save(store, "t", state, None)
    snapshot = await store.aload("t", AgentState)
    assert snapshot is not None
    assert snapshot.state == state


async def test_looking_up_ids_in_a_just_filled_thread_reads_those_rows_not_the_thread(
    store: PgCheckpointer, schema: str
) -> None:
    """A table just filled has no statistics; the look-up of a turn's input ids in a cold
    thread's log must still go through the ids' index, not read every row of the thread
    through the primary key by its sequence bounds (40 ms at 50,000 messages)."""
    from tenxgraph.storage.checkpointer.postgres import _IDS_IN_LOG, pg_id, pg_id_text

    messages = [msg(f"m{i}") for i in range(2_000)]
    await save(store, "big", AgentState(context=messages), None)
    wanted = [pg_id(str(messages[1_000].message_id)), pg_id("not-there")]
    sql = f'SELECT m.message_id FROM "{schema}".tx_messages m WHERE ' + _IDS_IN_LOG.format(
        key=f'(SELECT thread_key FROM "{schema}".tx_threads WHERE thread_id = $1)',
        ids="$2",
        low="0",
        high="$3::bigint",
    )
    conn = await asyncpg.connect(pg_dsn())
    try:
        found = await conn.fetch(sql, "big", wanted, 2_000)
        plan = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", "big", wanted, 2_000)
    finally:
        await conn.close()
    assert [pg_id_text(row[0].hex()) for row in found] == [messages[1_000].message_id]
    text = plan if isinstance(plan, str) else str(plan)
    assert "tx_messages_id_hashes" in text, text
    assert "tx_messages_pkey" not in text, text
