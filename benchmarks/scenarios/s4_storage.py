"""S4: storage cost of one long thread on SQLite and PostgreSQL checkpointers.

    python benchmarks/run.py s4_storage --rounds 3 --peers langgraph

One thread, 200 turns (`--turns N` to change it). Each turn invokes a one-node graph with one
user message (~200 characters); the node answers with one assistant message (~400 characters).
The thread is kept by a file-backed SQLite checkpointer in a temporary folder and, when
TENXGRAPH_TEST_PG_DSN is set (`.ci/postgres.sh` starts a throwaway server), by PostgreSQL:
tenxgraph's `SqliteCheckpointer` / `PgCheckpointer` (a fresh schema per run), LangGraph's
`AsyncSqliteSaver` / `AsyncPostgresSaver` (a fresh database per run) with `MessagesState`.
Everything created is removed afterwards.

Measures, per backend (prefix `sqlite_`, `pg_`):

- bytes_stored: what the thread occupies after the last turn. SQLite: the byte length of every
  TEXT and BLOB value in the thread's rows, summed over every table with a `thread_id` column
  (page slack and the WAL do not count). PostgreSQL: `sum(pg_column_size(t.*))` over the
  thread's rows of every such table (row headers included; TOASTed values at their stored,
  possibly compressed, size).
- messages_json_bytes: the JSON size of the messages themselves (tenxgraph:
  `m.model_dump_json()`, LangGraph: `json.dumps(m.model_dump())`), and bytes_ratio, their ratio.
- first_write_ms / last_write_ms: time spent in checkpoint writes during one turn (tenxgraph:
  the checkpointer's `asave` calls; LangGraph: its saver's `aput` and `aput_writes` calls),
  median over turns 1-5 and over the last 5 turns; write_growth is last / first.
- turn_ms_first10 / turn_ms_last10: median `ainvoke` wall time of the first and last 10 turns.
- writes_per_turn: the number of timed write calls per turn (for reading the figures above).

`--breakdown` prints the bytes per table and column to stderr.
"""

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import emit, median

TURNS = 200
WINDOW_WRITES = 5
WINDOW_TURNS = 10
PG_DSN_VAR = "TENXGRAPH_TEST_PG_DSN"
_FILLER = (
    "The quick brown fox jumps over the lazy dog while the storage layer keeps every word "
    "of this conversation safe on disk, turn after turn, without rewriting what it already has. "
)


def text(turn: int, role: str, size: int) -> str:
    """Deterministic message text of exactly `size` characters, distinct per turn and role."""
    head = f"[{role} turn {turn}] "
    body = (_FILLER * (size // len(_FILLER) + 2))[turn % 50 :]
    return (head + body)[:size]


def user_text(turn: int) -> str:
    return text(turn, "user", 200)


def reply_text(turn: int) -> str:
    return text(turn, "assistant", 400)


@dataclass
class WriteTimer:
    """Collects the duration of every checkpoint write, bucketed by the turn it ran in."""

    turn: int = 0
    per_turn: dict[int, list[float]] = field(default_factory=dict)

    def wrap(self, target: Any, name: str) -> None:
        original = getattr(target, name)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            turn = self.turn
            start = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                elapsed = (time.perf_counter() - start) * 1e3
                self.per_turn.setdefault(turn, []).append(elapsed)

        setattr(target, name, timed)

    def totals(self, turns: int) -> list[float]:
        return [sum(self.per_turn.get(i, ())) for i in range(turns)]

    def calls(self, turns: int) -> list[int]:
        return [len(self.per_turn.get(i, ())) for i in range(turns)]


@dataclass
class Outcome:
    turn_ms: list[float]
    timer: WriteTimer
    tables: dict[str, dict[str, int]]  # table -> column (or "*row") -> bytes
    messages_json_bytes: int


# -- measuring what a thread occupies ----------------------------------------------------------


def sqlite_thread_bytes(db_path: Path, thread_id: str) -> dict[str, dict[str, int]]:
    """Byte length of the TEXT and BLOB values of the thread's rows, per table and column."""
    result: dict[str, dict[str, int]] = {}
    with contextlib.closing(sqlite3.connect(db_path)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            if "thread_id" not in columns:
                continue
            sums = ", ".join(
                f"coalesce(sum(CASE WHEN typeof(\"{c}\") IN ('text', 'blob') "
                f'THEN length(CAST("{c}" AS BLOB)) ELSE 0 END), 0)'
                for c in columns
            )
            row = conn.execute(
                f'SELECT count(*), {sums} FROM "{table}" WHERE thread_id = ?', (thread_id,)
            ).fetchone()
            result[table] = {"rows": row[0], **dict(zip(columns, row[1:], strict=True))}
    return result


PG_TABLES_SQL = (
    "SELECT table_name FROM information_schema.columns "
    "WHERE table_schema = {p1} AND column_name = 'thread_id' ORDER BY table_name"
)
PG_COLUMNS_SQL = (
    "SELECT column_name FROM information_schema.columns "
    "WHERE table_schema = {p1} AND table_name = {p2} ORDER BY ordinal_position"
)


def pg_bytes_sql(schema: str, table: str, columns: list[str], placeholder: str) -> str:
    per_column = ", ".join(f'coalesce(sum(pg_column_size(t."{c}")), 0)' for c in columns)
    return (
        f"SELECT count(*), coalesce(sum(pg_column_size(t.*)), 0), {per_column} "
        f'FROM "{schema}"."{table}" t WHERE thread_id = {placeholder}'
    )


def pg_result(columns: list[str], row: Any) -> dict[str, int]:
    values = [int(v) for v in row]
    return {"rows": values[0], "*row": values[1], **dict(zip(columns, values[2:], strict=True))}


def total_bytes(tables: dict[str, dict[str, int]], pg: bool) -> int:
    if pg:
        return sum(t["*row"] for t in tables.values())
    return sum(v for t in tables.values() for k, v in t.items() if k != "rows")


# -- tenxgraph ----------------------------------------------------------------------------------


async def run_tenxgraph(backend: str, workdir: Path, turns: int) -> Outcome:
    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.storage.checkpointer import PgCheckpointer, SqliteCheckpointer
    from tenxgraph.utils.constants import END, START

    async def reply(state: AgentState) -> Message:
        return Message.text_message(reply_text(len(state.context) // 2), "assistant")

    thread_id = f"s4-{uuid.uuid4().hex[:12]}"
    dsn = os.environ.get(PG_DSN_VAR, "")
    schema = f"s4_{uuid.uuid4().hex[:16]}"
    checkpointer: Any
    if backend == "sqlite":
        db_path = workdir / "tenxgraph.db"
        checkpointer = SqliteCheckpointer(db_path)
    else:
        checkpointer = PgCheckpointer(dsn, schema=schema)
    timer = WriteTimer()
    try:
        await checkpointer.asetup()
        timer.wrap(checkpointer, "asave")
        g = StateGraph(AgentState)
        g.add_node("reply", reply)
        g.add_edge(START, "reply")
        g.add_edge("reply", END)
        app = g.compile(checkpointer=checkpointer)
        turn_ms = []
        for i in range(turns):
            timer.turn = i
            start = time.perf_counter()
            await app.ainvoke(
                {"messages": [Message.text_message(user_text(i))]}, {"thread_id": thread_id}
            )
            turn_ms.append((time.perf_counter() - start) * 1e3)
        state = await checkpointer.aget_state({"thread_id": thread_id})
        if state is None or len(state.context) != 2 * turns:
            raise RuntimeError("s4_storage: the thread does not hold every message")
        json_bytes = sum(len(m.model_dump_json().encode()) for m in state.context)
        await checkpointer.aclose()
        if backend == "sqlite":
            tables = sqlite_thread_bytes(db_path, thread_id)
        else:
            tables = await _asyncpg_thread_bytes(dsn, schema, thread_id)
        return Outcome(turn_ms, timer, tables, json_bytes)
    finally:
        with contextlib.suppress(Exception):
            await checkpointer.aclose()
        if backend == "pg":
            import asyncpg  # type: ignore[import-untyped]

            conn = await asyncpg.connect(dsn)
            try:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            finally:
                await conn.close()


async def _asyncpg_thread_bytes(dsn: str, schema: str, thread_id: str) -> dict[str, dict[str, int]]:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(dsn)
    try:
        result = {}
        for (table,) in await conn.fetch(PG_TABLES_SQL.format(p1="$1"), schema):
            sql = PG_COLUMNS_SQL.format(p1="$1", p2="$2")
            columns = [r[0] for r in await conn.fetch(sql, schema, table)]
            row = await conn.fetchrow(pg_bytes_sql(schema, table, columns, "$1"), thread_id)
            result[table] = pg_result(columns, row)
        return result
    finally:
        await conn.close()


# -- LangGraph ----------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def langgraph_saver(backend: str, workdir: Path) -> AsyncIterator[tuple[Any, Any]]:
    """(saver, measure) where `await measure(thread_id)` gives the thread's bytes per table."""
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        db_path = workdir / "langgraph.db"
        async with AsyncSqliteSaver.from_conn_string(str(db_path)) as saver:
            yield saver, lambda thread_id: _after_close(sqlite_thread_bytes, db_path, thread_id)
        return

    import psycopg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.conninfo import make_conninfo

    dsn = os.environ[PG_DSN_VAR]
    database = f"s4_{uuid.uuid4().hex[:16]}"
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
        await admin.execute(f'CREATE DATABASE "{database}"')
        try:
            fresh = make_conninfo(dsn, dbname=database)
            async with AsyncPostgresSaver.from_conn_string(fresh) as saver:

                async def measure(thread_id: str) -> dict[str, dict[str, int]]:
                    return await _psycopg_thread_bytes(fresh, "public", thread_id)

                yield saver, measure
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


async def _after_close(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


async def _psycopg_thread_bytes(dsn: str, schema: str, thread_id: str) -> dict[str, dict[str, int]]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        result = {}
        cursor = await conn.execute(PG_TABLES_SQL.format(p1="%s"), (schema,))
        for (table,) in await cursor.fetchall():
            cursor = await conn.execute(PG_COLUMNS_SQL.format(p1="%s", p2="%s"), (schema, table))
            columns = [r[0] for r in await cursor.fetchall()]
            cursor = await conn.execute(pg_bytes_sql(schema, table, columns, "%s"), (thread_id,))
            result[table] = pg_result(columns, await cursor.fetchone())
        return result


async def run_langgraph(backend: str, workdir: Path, turns: int) -> Outcome:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    async def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=reply_text(len(state["messages"]) // 2))]}

    thread_id = f"s4-{uuid.uuid4().hex[:12]}"
    config = {"configurable": {"thread_id": thread_id}}
    timer = WriteTimer()
    async with langgraph_saver(backend, workdir) as (saver, measure):
        await saver.setup()
        timer.wrap(saver, "aput")
        timer.wrap(saver, "aput_writes")
        g = StateGraph(MessagesState)
        g.add_node("reply", reply)
        g.add_edge(START, "reply")
        g.add_edge("reply", END)
        app = g.compile(checkpointer=saver)
        turn_ms = []
        for i in range(turns):
            timer.turn = i
            start = time.perf_counter()
            await app.ainvoke({"messages": [HumanMessage(content=user_text(i))]}, config)
            turn_ms.append((time.perf_counter() - start) * 1e3)
        messages = (await app.aget_state(config)).values["messages"]
        if len(messages) != 2 * turns:
            raise RuntimeError("s4_storage: the thread does not hold every message")
        json_bytes = sum(len(json.dumps(m.model_dump()).encode()) for m in messages)
        if backend == "pg":
            tables = await measure(thread_id)
    if backend == "sqlite":  # after the saver closed its connection
        tables = await measure(thread_id)
    return Outcome(turn_ms, timer, tables, json_bytes)


# -- driver -------------------------------------------------------------------------------------


def summarise(backend: str, outcome: Outcome, turns: int) -> dict[str, float]:
    writes = outcome.timer.totals(turns)
    stored = total_bytes(outcome.tables, pg=backend == "pg")
    first_write = median(writes[:WINDOW_WRITES])
    last_write = median(writes[-WINDOW_WRITES:])
    p = f"{backend}_"
    return {
        p + "bytes_stored": stored,
        p + "messages_json_bytes": outcome.messages_json_bytes,
        p + "bytes_ratio": stored / outcome.messages_json_bytes,
        p + "first_write_ms": first_write,
        p + "last_write_ms": last_write,
        p + "write_growth": last_write / first_write if first_write else float("nan"),
        p + "turn_ms_first10": median(outcome.turn_ms[:WINDOW_TURNS]),
        p + "turn_ms_last10": median(outcome.turn_ms[-WINDOW_TURNS:]),
        p + "writes_per_turn": median(outcome.timer.calls(turns)),
    }


async def measure(framework: str, turns: int, breakdown: bool) -> dict[str, float]:
    runner: Callable[[str, Path, int], Awaitable[Outcome]]
    if framework == "tenxgraph":
        runner = run_tenxgraph
    elif framework == "langgraph":
        runner = run_langgraph
    else:
        raise SystemExit(f"s4_storage: no storage setup for framework {framework!r}")
    backends = ["sqlite"] + (["pg"] if os.environ.get(PG_DSN_VAR) else [])
    measures: dict[str, float] = {}
    for backend in backends:
        with tempfile.TemporaryDirectory(prefix="tenxgraph-s4-") as tmp:
            outcome = await runner(backend, Path(tmp), turns)
        measures.update(summarise(backend, outcome, turns))
        if breakdown:
            print(f"{framework} {backend}: {json.dumps(outcome.tables)}", file=sys.stderr)
    return measures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", required=True)
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--breakdown", action="store_true", help="bytes per table to stderr")
    args = parser.parse_args()
    if args.turns < 1:
        parser.error("--turns must be at least 1")
    emit(asyncio.run(measure(args.framework, args.turns, args.breakdown)))


if __name__ == "__main__":
    main()
