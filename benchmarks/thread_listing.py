"""Listing 10,000 threads on SQLite and PostgreSQL: `tenxgraph threads list`, and one page
of 100 threads at the start and at the end of the listing.

    PYTHONPATH=src python benchmarks/thread_listing.py --db /tmp/threads.db --runs 5
    # the same data read by another revision of tenxgraph:
    mkdir /tmp/base && git archive 04d2541 src | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base/src python benchmarks/thread_listing.py --db /tmp/threads.db --runs 5

Runs against whichever tenxgraph is imported, so two revisions can be compared on the same
data: the threads are created once (`--db` file, `--schema` in $TENXGRAPH_TEST_PG_DSN; each
thread one user message) and reused when they are already there. PostgreSQL is measured only
when TENXGRAPH_TEST_PG_DSN is set.

Figures (medians of --runs, after one warm-up):

- `list_s`: the whole `threads list`, in this process, its output thrown away: the command
  itself on SQLite (and on PostgreSQL with `--dsn`, when this revision has it); a revision
  without `--dsn` gets its own listing code run on a PgCheckpointer instead;
- `keyset_first_page_ms` / `keyset_last_page_ms`: 100 threads with their summaries from the
  start / the end of the listing (threads 9,901 to 10,000) with `alist_thread_page` and a
  cursor, when this revision has it;
- `offset_first_page_ms` / `offset_last_page_ms`: the same 100 thread ids with
  `alist_threads(offset=, limit=)`;
- `queries`: statements sent for one whole `threads list` (connection setup included).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import io
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tenxgraph.cli import main as cli_main
from tenxgraph.cli import threads as threads_cli
from tenxgraph.cli._console import Console
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import BaseCheckpointer, SqliteCheckpointer

PAGE = 100


def has_keyset() -> bool:
    return hasattr(BaseCheckpointer, "alist_thread_page")


def cli_has_dsn() -> bool:
    return "dsn" in inspect.getsource(threads_cli)


def open_store(backend: str, db: Path, schema: str) -> BaseCheckpointer:
    if backend == "sqlite":
        return SqliteCheckpointer(db)
    from tenxgraph.storage.checkpointer import PgCheckpointer

    return PgCheckpointer(os.environ["TENXGRAPH_TEST_PG_DSN"], schema=schema, max_size=4)


async def fill(store: BaseCheckpointer, count: int) -> None:
    """Threads th00000, th00001, ... until there are `count` (8 saves in flight at once)."""
    have = len(await store.alist_threads())
    if have >= count:
        return
    print(f"creating {count - have:,} threads in {store!r} ...", flush=True)

    async def one(i: int) -> None:
        state = AgentState(context=[Message.text_message(f"hello {i}", "user")])
        await store.asave(
            f"th{i:05}", expected_version=None, state=state, new_messages=state.context
        )

    for start in range(have, count, 8):
        await asyncio.gather(*(one(i) for i in range(start, min(start + 8, count))))


async def timed(work: Callable[[], Awaitable[Any]], runs: int) -> float:
    """Median seconds of `runs` awaits of `work()`, after a warm-up one."""
    await work()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def timed_call(work: Callable[[], Any], runs: int) -> float:
    """Median seconds of `runs` calls of `work()`, after a warm-up one."""
    work()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def list_command(backend: str, db: Path, schema: str) -> Callable[[], Any]:
    """A call of `threads list` on the stored threads, output thrown away."""
    if backend == "sqlite":
        args = ["threads", "list", "--db", str(db)]
    elif cli_has_dsn():
        args = ["threads", "list", "--dsn", os.environ["TENXGRAPH_TEST_PG_DSN"]]
        args += ["--schema", schema]
    else:  # this revision's listing code, on PostgreSQL
        return lambda: asyncio.run(_old_pg_list(db, schema))

    def run() -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli_main(args)
        assert code == 0, code

    return run


async def _old_pg_list(db: Path, schema: str) -> None:
    store = open_store("postgres", db, schema)
    console = Console(io.StringIO(), io.StringIO(), False)
    try:
        await threads_cli._list(console, store, db)  # type: ignore[arg-type,call-arg]
    finally:
        await store.aclose()


def count_statements(work: Callable[[], Any]) -> int:
    """The number of statements `work()` sends to SQLite or PostgreSQL."""
    import aiosqlite
    import asyncpg

    seen: list[str] = []
    execute = aiosqlite.Connection.execute

    def sqlite_execute(self: Any, sql: str, parameters: Any = None) -> Any:
        seen.append(sql)
        return execute(self, sql, parameters)

    originals = {name: getattr(asyncpg.Connection, name) for name in PG_CALLS}

    def pg_recording(original: Any) -> Any:
        async def pg_call(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
            seen.append(query)
            return await original(self, query, *args, **kwargs)

        return pg_call

    aiosqlite.Connection.execute = sqlite_execute  # type: ignore[method-assign]
    for name, original in originals.items():
        setattr(asyncpg.Connection, name, pg_recording(original))
    try:
        work()
    finally:
        aiosqlite.Connection.execute = execute  # type: ignore[method-assign]
        for name, original in originals.items():
            setattr(asyncpg.Connection, name, original)
    return len(seen)


PG_CALLS = ("fetch", "fetchrow", "fetchval", "execute")


async def page_times(store: BaseCheckpointer, count: int, runs: int) -> dict[str, float]:
    found: dict[str, float] = {}
    last = count - PAGE

    async def offset_first() -> None:
        assert len(await store.alist_threads(offset=0, limit=PAGE)) == PAGE

    async def offset_last() -> None:
        assert len(await store.alist_threads(offset=last, limit=PAGE)) == PAGE

    found["offset_first_page_ms"] = await timed(offset_first, runs) * 1000
    found["offset_last_page_ms"] = await timed(offset_last, runs) * 1000
    if has_keyset():
        cursor = None
        for _ in range(last // PAGE):  # walk to the page before the last one
            cursor = (await store.alist_thread_page(after=cursor, limit=PAGE)).next_cursor

        async def keyset_first() -> None:
            assert len((await store.alist_thread_page(limit=PAGE)).threads) == PAGE

        async def keyset_last() -> None:
            page = await store.alist_thread_page(after=cursor, limit=PAGE)
            assert len(page.threads) == PAGE
            assert page.next_cursor is None

        found["keyset_first_page_ms"] = await timed(keyset_first, runs) * 1000
        found["keyset_last_page_ms"] = await timed(keyset_last, runs) * 1000
    return found


def measure(backend: str, db: Path, schema: str, count: int, runs: int) -> dict[str, Any]:
    async def prepare() -> dict[str, float]:
        store = open_store(backend, db, schema)
        try:
            await fill(store, count)
            return await page_times(store, count, max(runs, 21))
        finally:
            await store.aclose()

    result: dict[str, Any] = {"backend": backend, "threads": count}
    result.update(asyncio.run(prepare()))
    command = list_command(backend, db, schema)
    result["list_s"] = timed_call(command, runs)
    result["queries"] = count_statements(command)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each figure")
    parser.add_argument("--db", type=Path, help="SQLite file of the threads (kept)")
    parser.add_argument("--schema", default="bench_thread_listing", help="PostgreSQL schema")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], action="append")
    parser.add_argument("--json", action="store_true", help="one JSON line per backend")
    options = parser.parse_args()
    db = options.db or Path(tempfile.mkdtemp()) / "threads.db"
    backends = options.backend or ["sqlite", "postgres"]
    if "postgres" in backends and not os.environ.get("TENXGRAPH_TEST_PG_DSN"):
        print("TENXGRAPH_TEST_PG_DSN is not set: PostgreSQL skipped")
        backends = [b for b in backends if b != "postgres"]
    for backend in backends:
        result = measure(backend, db, options.schema, options.threads, options.runs)
        result["keyset"] = has_keyset()
        if options.json:
            print(json.dumps(result))
        else:
            print(
                "  ".join(
                    f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in result.items()
                )
            )


if __name__ == "__main__":
    main()
