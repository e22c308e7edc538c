"""`ServeDB` on SQLite and PostgreSQL: every method, owners, multitask strategies, the claim
order, leases, finishing, cancelling and events; and, on PostgreSQL, claimers racing."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

from tenxgraph.serve.db.base import ServeDB, ThreadBusyError, ThreadExistsError
from tenxgraph.serve.records import MultitaskStrategy, RunEvent, RunRecord, ThreadRecord, new_id

TTL = 30.0
_clock = itertools.count()


async def thread(db: ServeDB, owner: str = "ann", **metadata: Any) -> str:
    thread_id = new_id()
    now = time.time() - 1000 + next(_clock) * 0.001  # in order, and older than any update
    await db.create_thread(ThreadRecord(thread_id, owner, metadata, "idle", now, now))
    return thread_id


async def run(
    db: ServeDB, thread_id: str, strategy: MultitaskStrategy = "enqueue", owner: str = "ann"
) -> tuple[str, list[str]]:
    record = RunRecord(new_id(), thread_id, owner, "agent", {"input": {"n": 1}}, {"m": 1}, strategy)
    stopping = await db.create_run(record)
    return record.run_id, stopping


# -- threads -----------------------------------------------------------------------------------


async def test_thread_is_seen_by_its_owner_only(serve_db: ServeDB) -> None:
    thread_id = await thread(serve_db, "ann", topic="x")
    mine = await serve_db.get_thread(thread_id, "ann")
    assert mine is not None
    assert mine.metadata == {"topic": "x"}
    assert mine.status == "idle"
    assert await serve_db.get_thread(thread_id, "bob") is None
    assert await serve_db.get_thread(thread_id, None) is not None
    assert await serve_db.get_thread(new_id(), "ann") is None
    with pytest.raises(ThreadExistsError):
        await serve_db.create_thread(ThreadRecord(thread_id, "bob"))


async def test_update_thread_merges_metadata_and_sets_status(serve_db: ServeDB) -> None:
    thread_id = await thread(serve_db, "ann", a=1, b=2)
    assert await serve_db.update_thread(thread_id, "bob", metadata={"a": 9}) is None
    updated = await serve_db.update_thread(thread_id, "ann", metadata={"b": 3, "c": 4})
    assert updated is not None
    assert updated.metadata == {"a": 1, "b": 3, "c": 4}
    assert updated.status == "idle"
    await serve_db.update_thread(thread_id, None, status="error")
    found = await serve_db.get_thread(thread_id, "ann")
    assert found is not None
    assert found.status == "error"
    assert found.metadata == {"a": 1, "b": 3, "c": 4}
    assert await serve_db.update_thread(new_id(), None, status="idle") is None


async def test_search_threads_filters_and_pages(serve_db: ServeDB) -> None:
    first = await thread(serve_db, "ann", kind="a", nested={"x": 1})
    second = await thread(serve_db, "ann", kind="b")
    third = await thread(serve_db, "ann", kind="a")
    await thread(serve_db, "bob", kind="a")
    await serve_db.update_thread(third, None, status="busy")

    ids = [t.thread_id for t in await serve_db.search_threads("ann", limit=10)]
    assert ids[0] == third
    assert set(ids) == {first, second, third}
    kind_a = await serve_db.search_threads("ann", metadata={"kind": "a"})
    assert {t.thread_id for t in kind_a} == {first, third}
    nested = await serve_db.search_threads("ann", metadata={"nested": {"x": 1}})
    assert [t.thread_id for t in nested] == [first]
    assert await serve_db.search_threads("ann", metadata={"kind": "zzz"}) == []
    busy = await serve_db.search_threads("ann", status="busy")
    assert [t.thread_id for t in busy] == [third]
    picked = await serve_db.search_threads("ann", ids=[first, second, new_id()])
    assert {t.thread_id for t in picked} == {first, second}
    assert [t.thread_id for t in await serve_db.search_threads("ann", limit=1, offset=1)] == [
        ids[1]
    ]
    assert await serve_db.count_threads("ann") == 3
    assert await serve_db.count_threads("ann", metadata={"kind": "a"}) == 2
    assert await serve_db.count_threads("ann", status="busy") == 1
    assert await serve_db.count_threads("carl") == 0


async def test_delete_thread_removes_its_runs_and_events(serve_db: ServeDB) -> None:
    thread_id = await thread(serve_db)
    run_id, _ = await run(serve_db, thread_id)
    await serve_db.add_events(run_id, [RunEvent(1, "values", "{}")])
    assert not await serve_db.delete_thread(thread_id, "bob")
    assert await serve_db.delete_thread(thread_id, "ann")
    assert await serve_db.get_thread(thread_id, None) is None
    assert await serve_db.get_run(run_id, None) is None
    assert await serve_db.read_events(run_id, 0) == []
    assert not await serve_db.delete_thread(thread_id, None)


# -- queueing ----------------------------------------------------------------------------------


async def test_create_run_marks_the_thread_busy_and_stores_the_run(serve_db: ServeDB) -> None:
    thread_id = await thread(serve_db)
    run_id, stopping = await run(serve_db, thread_id, "reject")
    assert stopping == []
    found = await serve_db.get_run(run_id, "ann")
    assert found is not None
    assert found.status == "pending"
    assert found.attempt == 0
    assert found.kwargs == {"input": {"n": 1}}
    assert found.metadata == {"m": 1}
    assert found.multitask_strategy == "reject"
    assert found.worker is None
    assert await serve_db.get_run(run_id, "bob") is None
    busy = await serve_db.get_thread(thread_id, None)
    assert busy is not None
    assert busy.status == "busy"


async def test_reject_writes_nothing_when_the_thread_is_busy(serve_db: ServeDB) -> None:
    thread_id = await thread(serve_db)
    active, _ = await run(serve_db, thread_id)
    with pytest.raises(ThreadBusyError) as raised:
        await run(serve_db, thread_id, "reject")
    assert raised.value.active == active
    assert [r.run_id for r in await serve_db.list_runs(thread_id, "ann")] == [active]


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
async def test_interrupt_and_rollback_name_the_active_runs(
    serve_db: ServeDB, strategy: MultitaskStrategy
) -> None:
    thread_id = await thread(serve_db)
    running, _ = await run(serve_db, thread_id)
    claimed = await serve_db.claim_run("w1", TTL)
    assert claimed is not None
    assert claimed.run_id == running
    queued, _ = await run(serve_db, thread_id)
    newest, stopping = await run(serve_db, thread_id, strategy)
    assert stopping == [running, queued]
    other, _ = await run(serve_db, await thread(serve_db))
    assert (await run(serve_db, thread_id, "enqueue"))[1] == []
    assert newest
    assert other


async def test_list_runs_newest_first_with_filters(serve_db: ServeDB) -> None:
    thread_id = await thread(serve_db)
    ids = [(await run(serve_db, thread_id))[0] for _ in range(3)]
    await run(serve_db, await thread(serve_db))
    listed = await serve_db.list_runs(thread_id, "ann")
    assert [r.run_id for r in listed] == ids[::-1]
    assert await serve_db.list_runs(thread_id, "bob") == []
    page = await serve_db.list_runs(thread_id, "ann", limit=1, offset=1)
    assert [r.run_id for r in page] == [ids[1]]
    await serve_db.claim_run("w1", TTL)
    running = await serve_db.list_runs(thread_id, "ann", status="running")
    assert [r.run_id for r in running] == [ids[0]]


async def test_search_runs_reads_every_thread_of_the_owner_in_one_query(serve_db: ServeDB) -> None:
    """Runs across 1,200 threads (more than the 1,000 a search once read one by one): newest
    first, paged, filtered by thread, status, assistant and metadata; another owner's never."""
    threads = [await thread(serve_db) for _ in range(1_200)]
    made: list[RunRecord] = []
    for n, thread_id in enumerate(threads):
        record = RunRecord(
            new_id(), thread_id, "ann", "agent" if n % 2 else "other", {}, {"n": n, "tag": n % 3}
        )
        await serve_db.create_run(record)
        made.append(record)
    await run(serve_db, await thread(serve_db, "bob"), owner="bob")
    newest = [r.run_id for r in reversed(made)]
    assert [r.run_id for r in await serve_db.search_runs("ann", limit=5)] == newest[:5]
    page = await serve_db.search_runs("ann", limit=3, offset=1_197)
    assert [r.run_id for r in page] == newest[1_197:]  # the oldest, beyond 1,000 threads
    tagged = await serve_db.search_runs("ann", metadata={"tag": 1}, assistant_id="agent", limit=4)
    assert [r.metadata["n"] for r in tagged] == [1195, 1189, 1183, 1177]
    assert all(r.metadata["tag"] == 1 and r.assistant_id == "agent" for r in tagged)
    one = await serve_db.search_runs("ann", thread_id=threads[7])
    assert [r.run_id for r in one] == [made[7].run_id]
    assert await serve_db.search_runs("ann", status="running") == []
    await serve_db.claim_run("w1", TTL)  # the oldest queued run starts
    running = await serve_db.search_runs("ann", status="running")
    assert [r.run_id for r in running] == [made[0].run_id]
    assert [r.owner for r in await serve_db.search_runs("bob")] == ["bob"]
    assert await serve_db.search_runs("carl") == []


# -- claiming --------------------------------------------------------------------------------


async def test_claim_takes_runs_in_order_one_per_thread(serve_db: ServeDB) -> None:
    t1, t2 = await thread(serve_db), await thread(serve_db)
    a1, _ = await run(serve_db, t1)
    a2, _ = await run(serve_db, t1)
    b1, _ = await run(serve_db, t2)

    first = await serve_db.claim_run("w1", TTL)
    assert first is not None
    assert first.run_id == a1
    assert first.status == "running"
    assert first.worker == "w1"
    assert first.attempt == 1
    assert first.lease_expires is not None
    assert first.lease_expires > time.time()
    second = await serve_db.claim_run("w2", TTL)
    assert second is not None
    assert second.run_id == b1
    assert await serve_db.claim_run("w2", TTL) is None

    assert await serve_db.finish_run(a1, "w1", "success", {"v": 1}, "idle")
    third = await serve_db.claim_run("w2", TTL)
    assert third is not None
    assert third.run_id == a2


async def test_an_expired_lease_is_reclaimed_before_pending_runs(serve_db: ServeDB) -> None:
    t1, t2 = await thread(serve_db), await thread(serve_db)
    dead, _ = await run(serve_db, t1)
    await run(serve_db, t2)
    claimed = await serve_db.claim_run("w1", -1.0)  # its lease is already over: w1 "died"
    assert claimed is not None
    assert claimed.run_id == dead
    resumed = await serve_db.claim_run("w2", TTL)
    assert resumed is not None
    assert resumed.run_id == dead
    assert resumed.worker == "w2"
    assert resumed.attempt == 2
    assert resumed.status == "running"
    # the dead worker lost it: its renewal does not report it, it cannot finish it
    assert await serve_db.renew_runs("w1", [dead], TTL) == {}
    assert not await serve_db.finish_run(dead, "w1", "success", None, "idle")
    assert await serve_db.finish_run(dead, "w2", "success", None, "idle")


async def test_a_live_lease_is_not_reclaimed(serve_db: ServeDB) -> None:
    await run(serve_db, await thread(serve_db))
    assert await serve_db.claim_run("w1", TTL) is not None
    assert await serve_db.claim_run("w2", TTL) is None


async def test_renew_extends_leases_and_reports_cancel_requests(serve_db: ServeDB) -> None:
    t1, t2 = await thread(serve_db), await thread(serve_db)
    r1, _ = await run(serve_db, t1)
    r2, _ = await run(serve_db, t2)
    await serve_db.claim_run("w1", 0.5)
    await serve_db.claim_run("w1", 0.5)
    assert await serve_db.renew_runs("w1", [], TTL) == {}
    assert await serve_db.renew_runs("w1", [r1, r2, new_id()], TTL) == {r1: None, r2: None}
    assert await serve_db.renew_runs("w2", [r1], TTL) == {}
    found = await serve_db.get_run(r1, None)
    assert found is not None
    assert found.lease_expires is not None
    assert found.lease_expires > time.time() + TTL / 2
    assert await serve_db.request_cancel([r2], "rollback") == []
    assert await serve_db.renew_runs("w1", [r1, r2], TTL) == {r1: None, r2: "rollback"}
    assert await serve_db.renew_runs("w1", [r1], -1.0) == {r1: None}  # handed back
    taken = await serve_db.claim_run("w2", TTL)
    assert taken is not None
    assert taken.run_id == r1
    assert await serve_db.renew_runs("w1", [r1, r2], TTL) == {r2: "rollback"}


async def test_start_version_is_stored(serve_db: ServeDB) -> None:
    run_id, _ = await run(serve_db, await thread(serve_db))
    await serve_db.set_start_version(run_id, 7)
    found = await serve_db.get_run(run_id, None)
    assert found is not None
    assert found.start_version == 7
    await serve_db.set_start_version(run_id, None)
    found = await serve_db.get_run(run_id, None)
    assert found is not None
    assert found.start_version is None


# -- finishing and cancelling --------------------------------------------------------------


async def test_finish_only_by_the_holder_and_only_once(serve_db: ServeDB) -> None:
    thread_id = await thread(serve_db)
    run_id, _ = await run(serve_db, thread_id)
    await serve_db.claim_run("w1", TTL)
    assert not await serve_db.finish_run(run_id, "w2", "success", None, "idle")
    assert await serve_db.finish_run(run_id, "w1", "error", {"__error__": "boom"}, "error")
    assert not await serve_db.finish_run(run_id, "w1", "success", None, "idle")
    assert not await serve_db.finish_run(run_id, None, "success", None, "idle")
    found = await serve_db.get_run(run_id, "ann")
    assert found is not None
    assert found.status == "error"
    assert found.result == {"__error__": "boom"}
    assert found.lease_expires is None
    finished = await serve_db.get_thread(thread_id, None)
    assert finished is not None
    assert finished.status == "error"


async def test_finish_records_the_end_event_only_with_the_outcome(serve_db: ServeDB) -> None:
    run_id, _ = await run(serve_db, await thread(serve_db))
    await serve_db.claim_run("w1", TTL)
    await serve_db.add_events(run_id, [RunEvent(1, "values", "{}")])
    end = RunEvent(2, "end", "null")
    assert not await serve_db.finish_run(run_id, "w2", "success", None, "idle", end)
    assert await serve_db.last_seq(run_id) == 1  # not the holder: nothing written
    assert await serve_db.finish_run(run_id, "w1", "success", {"v": 1}, "idle", end)
    assert await serve_db.read_events(run_id, 1) == [end]


async def test_cancelling_queued_runs_leaves_the_thread_idle_unless_busy(
    serve_db: ServeDB,
) -> None:
    lone = await thread(serve_db)
    queued, _ = await run(serve_db, lone)
    shared = await thread(serve_db)
    running, _ = await run(serve_db, shared)
    await serve_db.claim_run("w1", TTL)  # the oldest: `queued`
    waiting, _ = await run(serve_db, shared)
    await serve_db.claim_run("w1", TTL)  # `running`; `waiting` waits behind it
    ended = await serve_db.request_cancel([waiting], "interrupt")
    assert [r.run_id for r in ended] == [waiting]
    still = await serve_db.get_thread(shared, None)
    assert still is not None
    assert still.status == "busy"  # `running` goes on
    assert await serve_db.finish_run(queued, "w1", "success", None, "idle")
    assert await serve_db.finish_run(running, "w1", "success", None, "idle")
    third, _ = await run(serve_db, lone)
    assert [r.run_id for r in await serve_db.request_cancel([third], "interrupt")] == [third]
    idle = await serve_db.get_thread(lone, None)
    assert idle is not None
    assert idle.status == "idle"


async def test_finish_leaves_the_thread_busy_while_another_run_is_queued(
    serve_db: ServeDB,
) -> None:
    thread_id = await thread(serve_db)
    first, _ = await run(serve_db, thread_id)
    second, _ = await run(serve_db, thread_id)
    await serve_db.claim_run("w1", TTL)
    assert await serve_db.finish_run(first, "w1", "success", None, "idle")
    busy = await serve_db.get_thread(thread_id, None)
    assert busy is not None
    assert busy.status == "busy"
    assert await serve_db.finish_run(second, None, "interrupted", None, "interrupted")
    done = await serve_db.get_thread(thread_id, None)
    assert done is not None
    assert done.status == "interrupted"


async def test_cancel_ends_pending_runs_and_asks_running_ones(serve_db: ServeDB) -> None:
    thread_id = await thread(serve_db)
    running, _ = await run(serve_db, thread_id)
    pending, _ = await run(serve_db, thread_id)
    await serve_db.claim_run("w1", TTL)
    assert await serve_db.request_cancel([], "interrupt") == []
    ended = await serve_db.request_cancel([running, pending, new_id()], "interrupt")
    assert [r.run_id for r in ended] == [pending]
    stopped = await serve_db.get_run(pending, None)
    assert stopped is not None
    assert stopped.status == "interrupted"
    asked = await serve_db.get_run(running, None)
    assert asked is not None
    assert asked.status == "running"
    assert asked.cancel == "interrupt"
    assert await serve_db.claim_run("w2", TTL) is None  # the interrupted run is not queued


async def test_delete_run_only_when_finished(serve_db: ServeDB) -> None:
    thread_id = await thread(serve_db)
    run_id, _ = await run(serve_db, thread_id)
    await serve_db.add_events(run_id, [RunEvent(1, "end", "null")])
    assert not await serve_db.delete_run(run_id, "ann")  # still pending
    await serve_db.claim_run("w1", TTL)
    await serve_db.finish_run(run_id, "w1", "success", None, "idle")
    assert not await serve_db.delete_run(run_id, "bob")
    assert await serve_db.delete_run(run_id, "ann")
    assert await serve_db.get_run(run_id, None) is None
    assert await serve_db.read_events(run_id, 0) == []
    assert await serve_db.last_seq(run_id) == 0


# -- events ----------------------------------------------------------------------------------


async def test_events_read_in_order_after_a_seq(serve_db: ServeDB) -> None:
    run_id, _ = await run(serve_db, await thread(serve_db))
    assert await serve_db.last_seq(run_id) == 0
    assert await serve_db.read_events(run_id, 0) == []
    events = [RunEvent(i, "values", f'{{"i": {i}}}') for i in range(1, 6)]
    await serve_db.add_events(run_id, events[:2])
    await serve_db.add_events(run_id, events[2:])
    await serve_db.add_events(run_id, [])
    assert await serve_db.read_events(run_id, 0) == events
    assert await serve_db.read_events(run_id, 3) == events[3:]
    assert await serve_db.read_events(run_id, 1, limit=2) == events[1:3]
    assert await serve_db.read_events(run_id, 5) == []
    assert await serve_db.last_seq(run_id) == 5
    other, _ = await run(serve_db, await thread(serve_db))
    assert await serve_db.read_events(other, 0) == []


# -- many claimers (PostgreSQL) --------------------------------------------------------------


async def test_racing_claimers_never_share_a_run_nor_a_thread(
    pg_schema: tuple[str, str],
) -> None:
    """Eight workers, each on its own pool, drain 60 runs of 6 threads: every run is claimed
    exactly once and no thread ever has two runs executing at once."""
    from tenxgraph.serve.db.postgres import PostgresServeDB

    dsn, schema = pg_schema
    dbs = [PostgresServeDB(dsn, schema=schema, max_size=2) for _ in range(8)]
    try:
        threads = [await thread(dbs[0]) for _ in range(6)]
        ids = [(await run(dbs[0], t))[0] for _ in range(10) for t in threads]
        claimed: list[str] = []
        executing: dict[str, str] = {}
        overlaps: list[str] = []
        order: dict[str, list[str]] = {t: [] for t in threads}

        async def worker(db: PostgresServeDB, name: str) -> None:
            idle = 0
            while len(claimed) < len(ids) and idle < 200:
                got = await db.claim_run(name, TTL)
                if got is None:
                    idle += 1
                    await asyncio.sleep(0)
                    continue
                idle = 0
                claimed.append(got.run_id)
                if got.thread_id in executing:
                    overlaps.append(got.thread_id)
                executing[got.thread_id] = got.run_id
                order[got.thread_id].append(got.run_id)
                await asyncio.sleep(0)
                del executing[got.thread_id]  # before the commit that frees the thread
                assert await db.finish_run(got.run_id, name, "success", None, "idle")

        await asyncio.gather(*(worker(db, f"w{i}") for i, db in enumerate(dbs)))
        assert sorted(claimed) == sorted(ids)
        assert len(claimed) == len(ids)
        assert overlaps == []
        for t in threads:  # each thread's runs executed in the order they were queued
            assert order[t] == [i for i in ids if i in set(order[t])]
            assert len(order[t]) == 10
    finally:
        for db in dbs:
            await db.aclose()


async def test_tables_are_made_once_and_a_late_worker_waits_for_nobody(
    pg_schema: tuple[str, str],
) -> None:
    """Workers starting at once make the tables once; a worker starting while another is in
    the middle of a transaction on them starts at once (no DDL then, which would wait for
    that transaction, or deadlock with it)."""
    import asyncpg

    from tenxgraph.serve.db.postgres import PostgresServeDB

    dsn, schema = pg_schema
    dbs = [PostgresServeDB(dsn, schema=schema) for _ in range(4)]
    late = PostgresServeDB(dsn, schema=schema)
    conn = await asyncpg.connect(dsn)
    try:
        await asyncio.gather(*(db.asetup() for db in dbs))
        await run(dbs[0], await thread(dbs[0]))
        async with conn.transaction():  # holds the runs table (and a row) until the block ends
            await conn.execute(f'UPDATE "{schema}".tx_serve_runs SET updated_at = updated_at')
            await asyncio.wait_for(late.asetup(), 10)
            await asyncio.wait_for(late.count_threads("ann"), 10)
        versions = await conn.fetch(f'SELECT version FROM "{schema}".tx_serve_version')
        assert [row[0] for row in versions] == [1]
    finally:
        await conn.close()
        for db in [*dbs, late]:
            await db.aclose()
