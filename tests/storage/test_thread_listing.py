"""Thread listing on every backend: `alist_thread_page` (keyset pages with an opaque cursor),
`aiter_threads`, and `alist_threads` (offset paging) in the same order."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.core.state import ExecutionStatus
from tenxgraph.storage.checkpointer import BaseCheckpointer, ThreadPage, ThreadSummary
from tests.storage._support import msg, save, state_with
from tests.storage.conftest import Backend

# (thread id, creation time): several threads share a creation time, and ids are created in
# an order that is neither their listing order nor alphabetical
THREADS = [
    ("m", 1000.0),
    ("c", 1000.0),
    ("x", 999.5),
    ("a", 1000.0),
    ("k", 1001.25),
    ("b", 1000.0),
    ("z", 1001.25),
    ("d", 1002.0),
]
LISTED = [t for t, _ in sorted(THREADS, key=lambda pair: (pair[1], pair[0]))]


@contextmanager
def clock(now: float) -> Iterator[None]:
    """`time.time()` returns `now`: the creation time the stores record."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(time, "time", lambda: now)
        yield


async def create_threads(store: BaseCheckpointer) -> None:
    for thread_id, created in THREADS:
        with clock(created):
            await save(store, thread_id, state_with(thread_id), None)


async def walk(store: BaseCheckpointer, limit: int) -> list[ThreadPage]:
    pages = [await store.alist_thread_page(limit=limit)]
    while pages[-1].next_cursor is not None:
        assert len(pages) <= 100, "the cursor does not move forward"
        pages.append(await store.alist_thread_page(after=pages[-1].next_cursor, limit=limit))
    return pages


def ids(page: ThreadPage) -> list[str]:
    return [summary.thread_id for summary in page.threads]


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 7, 8, 9, 100])
async def test_pages_list_every_thread_once_by_creation_time_then_id(
    checkpointer: BaseCheckpointer, limit: int
) -> None:
    await create_threads(checkpointer)
    pages = await walk(checkpointer, limit)
    assert [t for page in pages for t in ids(page)] == LISTED
    assert [len(page.threads) for page in pages[:-1]] == [limit] * (len(pages) - 1)
    # a full last page says it is the last: no extra query for an empty page
    assert len(pages) == -(-len(THREADS) // limit)
    assert pages[-1].next_cursor is None
    assert all(isinstance(page.next_cursor, str) for page in pages[:-1])


async def test_offset_listing_has_the_same_order(checkpointer: BaseCheckpointer) -> None:
    await create_threads(checkpointer)
    assert await checkpointer.alist_threads() == LISTED
    assert await checkpointer.alist_threads(offset=2, limit=3) == LISTED[2:5]
    assert await checkpointer.alist_threads(limit=0) == []
    assert [s.thread_id async for s in checkpointer.aiter_threads(page_size=3)] == LISTED


async def test_a_summary_is_the_latest_version(checkpointer: BaseCheckpointer) -> None:
    with clock(500.0):
        await save(checkpointer, "t", state_with("one"), None)
    state = state_with()
    state.execution_meta.step = 7
    state.execution_meta.current_node = "agent"
    state.execution_meta.status = ExecutionStatus.INTERRUPTED_BEFORE
    with clock(512.5):
        await save(checkpointer, "t", state, 1, new=[msg("two"), msg("three")])
    with clock(600.0):
        await save(checkpointer, "u", state_with("x"), None)
    page = await checkpointer.alist_thread_page()
    assert page.next_cursor is None
    assert page.threads == [
        ThreadSummary("t", 2, 500.0, 512.5, 7, "interrupted_before", "agent", 3),
        ThreadSummary("u", 1, 600.0, 600.0, 0, "running", "__start__", 1),
    ]
    assert page.threads[0] == (await checkpointer.alist_thread_page(limit=1)).threads[0]


async def test_an_empty_store_has_one_empty_last_page(checkpointer: BaseCheckpointer) -> None:
    assert await checkpointer.alist_thread_page() == ThreadPage([], None)
    assert [s async for s in checkpointer.aiter_threads()] == []


async def test_a_cursor_past_the_end_gives_an_empty_last_page(
    checkpointer: BaseCheckpointer,
) -> None:
    await create_threads(checkpointer)
    first = await checkpointer.alist_thread_page(limit=len(THREADS) - 1)
    assert first.next_cursor is not None
    last = await checkpointer.alist_thread_page(after=first.next_cursor, limit=5)
    assert ids(last) == LISTED[-1:]
    assert last.next_cursor is None
    # the cursor of the newest thread, once it is no longer the newest
    stale_end = first.next_cursor
    await checkpointer.adelete_thread(LISTED[-1])
    assert await checkpointer.alist_thread_page(after=stale_end) == ThreadPage([], None)


async def test_cursors_survive_changes_between_pages(checkpointer: BaseCheckpointer) -> None:
    await create_threads(checkpointer)
    first = await checkpointer.alist_thread_page(limit=3)
    assert ids(first) == LISTED[:3]
    assert first.next_cursor is not None
    # the thread the cursor names and a later one go; an update and a new thread come
    await checkpointer.adelete_thread(LISTED[2])
    await checkpointer.adelete_thread(LISTED[4])
    await save(checkpointer, LISTED[5], state_with(), 1, new=[msg("more")])
    with clock(2000.0):
        await save(checkpointer, "new", state_with("n"), None)
    rest = await walk_from(checkpointer, first.next_cursor, 2)
    assert rest == [LISTED[3], LISTED[5], LISTED[6], LISTED[7], "new"]


async def walk_from(store: BaseCheckpointer, cursor: str | None, limit: int) -> list[str]:
    found: list[str] = []
    while cursor is not None:
        page = await store.alist_thread_page(after=cursor, limit=limit)
        found += ids(page)
        cursor = page.next_cursor
    return found


async def test_a_cursor_works_on_another_instance_of_the_same_store(
    sql_backend: Backend,
) -> None:
    await create_threads(sql_backend.store)
    first = await sql_backend.store.alist_thread_page(limit=4)
    other = sql_backend.open()
    assert await walk_from(other, first.next_cursor, 3) == LISTED[4:]


async def test_thread_ids_beyond_ascii_and_times_with_many_digits(
    checkpointer: BaseCheckpointer,
) -> None:
    """The cursor carries the creation time bit for bit and the id verbatim: no thread is
    skipped or repeated because of rounding or escaping."""
    created = 1764590000.123456789
    names = ["ü-1", 'quote"d', "back\\slash", "日本", "e\u0301"]
    with clock(created):
        for name in names:
            await save(checkpointer, name, state_with(), None)
    with clock(created + 1e-6):
        await save(checkpointer, "later", state_with(), None)
    listed = await checkpointer.alist_threads()
    pages = await walk(checkpointer, 1)
    assert [t for page in pages for t in ids(page)] == listed
    assert sorted(listed) == sorted([*names, "later"])
    assert listed[-1] == "later"


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "10", None])
async def test_a_bad_limit_is_refused(checkpointer: BaseCheckpointer, limit: object) -> None:
    with pytest.raises(ValueError, match="limit must be a positive int"):
        await checkpointer.alist_thread_page(limit=limit)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit must be a positive int"):
        [s async for s in checkpointer.aiter_threads(page_size=limit)]  # type: ignore[arg-type]


def _token(value: object) -> str:
    raw = json.dumps(value).encode()
    return "t1." + base64.urlsafe_b64encode(raw).decode().rstrip("=")


BAD_CURSORS = [
    "",
    "garbage",
    "t1.",
    "t1.!!!!",
    "t2." + _token([1.0, "a"])[3:],  # another format's version
    _token([1.0, "a"]) + "=",  # not canonical
    _token([1.0, "a"])[:-2],  # cut short
    _token({"created_at": 1.0, "thread_id": "a"}),
    _token([1.0]),
    _token([1.0, "a", 3]),
    _token(["1.0", "a"]),
    _token([True, "a"]),
    _token([1.0, 7]),
    _token([1.0, ""]),
    _token([1.0, "bad\x00id"]),
    _token([1.0, "x" * 256]),
    "t1." + base64.urlsafe_b64encode(b'[Infinity,"a"]').decode().rstrip("="),
    "t1." + base64.urlsafe_b64encode(b"\xff\xfe").decode().rstrip("="),
    "t1." + "A" * 10_000,
]


@pytest.mark.parametrize("cursor", BAD_CURSORS)
async def test_a_bad_cursor_is_refused(checkpointer: BaseCheckpointer, cursor: str) -> None:
    await create_threads(checkpointer)
    with pytest.raises(ValueError, match="is not a thread listing cursor") as info:
        await checkpointer.alist_thread_page(after=cursor)
    assert "pass the next_cursor of a page" in str(info.value)


@pytest.mark.parametrize("cursor", [7, b"t1.xx", ["t1."]])
async def test_a_cursor_that_is_not_a_str_is_refused(
    checkpointer: BaseCheckpointer, cursor: object
) -> None:
    with pytest.raises(ValueError, match="after must be a cursor str"):
        await checkpointer.alist_thread_page(after=cursor)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("offset", "limit", "wrong"),
    [(-1, None, "offset"), (0, -1, "limit"), (1.0, None, "offset"), (0, "2", "limit")],
)
async def test_offset_listing_refuses_negative_numbers(
    checkpointer: BaseCheckpointer, offset: object, limit: object, wrong: str
) -> None:
    with pytest.raises(ValueError, match=f"{wrong} must be an int >= 0"):
        await checkpointer.alist_threads(offset=offset, limit=limit)  # type: ignore[arg-type]


async def test_a_thread_whose_latest_checkpoint_is_missing_is_named(
    sql_backend: Backend,
) -> None:
    await create_threads(sql_backend.store)
    await sql_backend.sql(
        "DELETE FROM tx_checkpoints "
        "WHERE thread_key = (SELECT thread_key FROM tx_threads WHERE thread_id = ?)",
        "k",
    )
    with pytest.raises(SerializationError, match="Thread 'k': the checkpoint of its version 1"):
        await sql_backend.store.alist_thread_page()
    page = await sql_backend.store.alist_thread_page(limit=3)  # pages before it still read
    assert ids(page) == LISTED[:3]


async def test_a_page_is_one_query_seeking_the_creation_index(
    sql_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page is one statement, and its plan seeks tx_threads_created from the cursor
    (keyset), with no scan of earlier threads nor of every checkpoint."""
    store = sql_backend.store
    await create_threads(store)
    first = await store.alist_thread_page(limit=2)
    assert first.next_cursor is not None
    statements = record_statements(sql_backend, monkeypatch)
    page = await store.alist_thread_page(after=first.next_cursor, limit=2)
    assert ids(page) == LISTED[2:4]
    ours = [(sql, params) for sql, params in statements if not sql.startswith(POOL_RESET)]
    assert len(ours) == 1, statements
    query, params = ours[0]
    if sql_backend.name == "sqlite":
        plan = await sql_backend.sql(f"EXPLAIN QUERY PLAN {query}", *params)
        text = " | ".join(str(row[-1]) for row in plan)
        assert "USING INDEX tx_threads_created ((created_at,thread_id)>(?,?))" in text, text
        assert "TEMP B-TREE" not in text, text
    else:
        import asyncpg

        # a table this small is read whole unless told otherwise; the plan's shape is the point
        settings = {"enable_seqscan": "off"}
        conn = await asyncpg.connect(sql_backend.dsn, server_settings=settings)
        try:
            rows = await conn.fetch(f"EXPLAIN {query}", *params)
        finally:
            await conn.close()
        text = " | ".join(str(row[0]) for row in rows)
        assert "Index Cond: (ROW(created_at, thread_id) > ROW(" in text, text
        assert "Index Scan using tx_checkpoints_pkey" in text, text  # a lookup per thread
        assert "Seq Scan" not in text, text


# what asyncpg's pool sends when a connection goes back to it (not the store's query)
POOL_RESET = "SELECT pg_advisory_unlock_all()"


def record_statements(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, tuple[object, ...]]]:
    """From now on, every statement the backend's stores send, with its parameters."""
    seen: list[tuple[str, tuple[object, ...]]] = []
    if backend.name == "sqlite":
        import aiosqlite

        for name in ("execute", "execute_fetchall"):
            original_sqlite = getattr(aiosqlite.Connection, name)

            def recording_execute(
                self: object,
                sql: str,
                parameters: object = None,
                _original: object = original_sqlite,
            ) -> object:
                seen.append((sql, tuple(parameters or ())))  # type: ignore[arg-type]
                return _original(self, sql, parameters)  # type: ignore[operator]

            monkeypatch.setattr(aiosqlite.Connection, name, recording_execute)
        return seen
    import asyncpg

    for name in ("fetch", "fetchrow", "fetchval", "execute", "executemany"):
        original = getattr(asyncpg.Connection, name)

        async def recording(
            self: object, query: str, *args: object, _original: object = original, **kw: object
        ) -> object:
            seen.append((query, args))
            return await _original(self, query, *args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(asyncpg.Connection, name, recording)
    return seen
