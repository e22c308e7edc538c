"""`tenxgraph threads list|show|delete` on a SQLite file of threads, and on PostgreSQL (--dsn)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tenxgraph.cli import threads as threads_cli
from tenxgraph.core.state import AgentState, Message
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import BaseCheckpointer, PgCheckpointer, SqliteCheckpointer
from tests.cli.conftest import Cli
from tests.observability._usage_models import Priced, add, tool_rounds
from tests.storage.conftest import drop_schema, fresh_schema, pg_dsn


@pytest.fixture
def db(cli: Cli, tmp_path: Path) -> str:
    """A database with a chat thread 'c' (2 turns) and a demo thread 'd'."""
    path = str(tmp_path / "t.db")
    assert cli("chat", "--thread", "c", "--db", path, stdin="one\ntwo\n").code == 0
    assert cli("demo", "--yes", "--thread", "d", "--db", path).code == 0
    return path


def test_list(cli: Cli, db: str) -> None:
    result = cli("threads", "list", "--db", db)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == ["THREAD", "MESSAGES", "STATUS", "UPDATED"]
    assert [line.split()[:3] for line in lines[1:]] == [
        ["c", "4", "completed"],
        ["d", "6", "completed"],
    ]


def test_db_may_come_before_the_action(cli: Cli, db: str) -> None:
    assert "completed" in cli("threads", "--db", db, "list").out


def test_show(cli: Cli, db: str) -> None:
    result = cli("threads", "show", "c", "--db", db)
    assert result.code == 0, result.err
    assert result.out.splitlines()[1:5] == [
        "user: one",
        "assistant: test answer to: one",
        "user: two",
        "assistant: test answer to: two",
    ]
    assert result.out.splitlines()[-1].startswith("tokens: ")


def test_show_a_paused_thread(cli: Cli, tmp_path: Path) -> None:
    path = str(tmp_path / "p.db")
    graph = tmp_path / "pausing.py"
    graph.write_text(
        "from tenxgraph import START, StateGraph\n"
        "from tenxgraph.utils import interrupt\n"
        "def ask(state):\n"
        "    return interrupt({'n': 1}, message='Go on?')\n"
        "g = StateGraph()\n"
        "g.add_node(ask)\n"
        "g.add_edge(START, 'ask')\n"
    )
    assert cli("run", f"{graph}:g", "--input", "hi", "--thread", "p", "--db", path).code == 0
    shown = cli("threads", "show", "p", "--db", path)
    assert "thread p: paused, 1 messages" in shown.out
    assert "paused: Go on?" in shown.out
    assert cli("threads", "list", "--db", path).out.splitlines()[1].split()[:3] == [
        "p",
        "1",
        "paused",
    ]


def test_delete_needs_yes_without_a_terminal(cli: Cli, db: str) -> None:
    refused = cli("threads", "delete", "c", "--db", db)
    assert refused.code == 2
    assert "there is no terminal to confirm on; add --yes" in refused.err
    deleted = cli("threads", "delete", "c", "--db", db, "--yes")
    assert deleted.code == 0
    assert "Deleted thread 'c'" in deleted.out
    assert [line.split()[0] for line in cli("threads", "list", "--db", db).out.splitlines()] == [
        "THREAD",
        "d",
    ]


def test_delete_asks_on_a_terminal(cli: Cli, db: str) -> None:
    kept = cli("threads", "delete", "d", "--db", db, stdin="n\n", tty=True)
    assert kept.code == 0
    assert "Delete thread 'd' from" in kept.out
    assert "Nothing deleted." in kept.out
    gone = cli("threads", "delete", "d", "--db", db, stdin="y\n", tty=True)
    assert gone.code == 0
    assert "Deleted thread 'd'" in gone.out
    assert cli("threads", "show", "d", "--db", db).code == 4


@pytest.mark.parametrize("action", [["show", "zz"], ["delete", "zz", "--yes"]])
def test_unknown_thread_is_not_found(cli: Cli, db: str, action: list[str]) -> None:
    result = cli("threads", *action, "--db", db)
    assert result.code == 4
    assert result.err == f"tenxgraph: error: No thread 'zz' in {db}\n"


def test_missing_database_is_not_found_and_not_created(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    result = cli("threads", "list", "--db", str(missing))
    assert result.code == 4
    assert "No database at" in result.err
    assert not missing.exists()


def test_empty_database(cli: Cli, db: str) -> None:
    cli("threads", "delete", "c", "--db", db, "--yes")
    cli("threads", "delete", "d", "--db", db, "--yes")
    assert cli("threads", "list", "--db", db).out == f"No threads in {db}.\n"


# -- listing many threads, one query per page ------------------------------------------------


def _fill(store: BaseCheckpointer, count: int) -> None:
    """`count` threads t000, t001, ... (created in that order), each with one message."""

    async def fill() -> None:
        try:
            for i in range(count):
                state = AgentState(context=[Message.text_message(f"hello {i}", "user")])
                await store.asave(
                    f"t{i:03}", expected_version=None, state=state, new_messages=state.context
                )
        finally:
            await store.aclose()

    asyncio.run(fill())


@pytest.fixture
def many_db(tmp_path: Path) -> str:
    path = tmp_path / "many.db"
    _fill(SqliteCheckpointer(path), 40)
    return str(path)


@pytest.fixture
def pg(cli: Cli) -> Iterator[tuple[str, str]]:
    """(dsn, schema): a fresh PostgreSQL schema holding 40 threads, dropped afterwards."""
    dsn, schema = pg_dsn(), fresh_schema()
    try:
        _fill(PgCheckpointer(dsn, schema=schema, max_size=2), 40)
        yield dsn, schema
    finally:
        asyncio.run(drop_schema(dsn, schema))


def _count_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, the text of every statement sent to SQLite or PostgreSQL."""
    import aiosqlite
    import asyncpg

    seen: list[str] = []
    for method in ("execute", "execute_fetchall"):
        execute = getattr(aiosqlite.Connection, method)

        def sqlite_execute(
            self: object, sql: str, parameters: object = None, _original: object = execute
        ) -> object:
            seen.append(sql)
            return _original(self, sql, parameters)  # type: ignore[operator]

        monkeypatch.setattr(aiosqlite.Connection, method, sqlite_execute)
    for name in ("fetch", "fetchrow", "fetchval", "execute"):
        original = getattr(asyncpg.Connection, name)

        async def pg_call(
            self: object, query: str, *args: object, _original: object = original, **kw: object
        ) -> object:
            seen.append(query)
            return await _original(self, query, *args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(asyncpg.Connection, name, pg_call)
    return seen


def _listed(out: str) -> list[list[str]]:
    return [line.split()[:3] for line in out.splitlines()[1:]]


EXPECTED = [[f"t{i:03}", "1", "running"] for i in range(40)]


def test_list_reads_a_page_per_query_not_a_query_per_thread(
    cli: Cli, many_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(threads_cli, "LIST_PAGE_SIZE", 7)
    statements = _count_statements(monkeypatch)
    result = cli("threads", "list", "--db", many_db)
    assert result.code == 0, result.err
    assert _listed(result.out) == EXPECTED
    reads = [sql for sql in statements if "tx_checkpoints" in sql or "FROM tx_threads" in sql]
    assert len(reads) == 6  # ceil(40 / 7) pages, nothing per thread
    assert len(statements) <= 6 + 8  # and the connection's setup (pragmas, schema version)


def test_list_with_dsn_reads_postgresql(
    cli: Cli, pg: tuple[str, str], many_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn, schema = pg
    monkeypatch.setattr(threads_cli, "LIST_PAGE_SIZE", 7)
    statements = _count_statements(monkeypatch)
    result = cli("threads", "list", "--dsn", dsn, "--schema", schema)
    assert result.code == 0, result.err
    assert _listed(result.out) == EXPECTED
    reads = [sql for sql in statements if "tx_checkpoints" in sql or ".tx_threads" in sql]
    assert len(reads) == 6, reads  # ceil(40 / 7) pages, nothing per thread
    assert len(statements) <= 2 * 6 + 10  # pool resets and the schema check, not per thread
    # the same listing, in the same format, as from SQLite
    from_sqlite = cli("threads", "list", "--db", many_db).out.splitlines()
    assert [line.split()[:3] for line in result.out.splitlines()] == [
        line.split()[:3] for line in from_sqlite
    ]


def test_show_and_delete_with_dsn(cli: Cli, pg: tuple[str, str]) -> None:
    dsn, schema = pg
    where = ["--dsn", dsn, "--schema", schema]
    shown = cli("threads", "show", "t005", *where)
    assert shown.code == 0, shown.err
    assert shown.out.splitlines()[1] == "user: hello 5"
    assert f"(schema {schema})" in shown.out.splitlines()[0]
    assert cli("threads", "delete", "t005", *where, "--yes").code == 0
    assert cli("threads", "show", "t005", *where).code == 4
    listed = cli("threads", *where, "list")  # the options may come before the action
    assert [row[0] for row in _listed(listed.out)] == [f"t{i:03}" for i in range(40) if i != 5]


def test_dsn_without_tenxgraph_tables_is_not_found_and_creates_nothing(cli: Cli) -> None:
    dsn, schema = pg_dsn(), fresh_schema()
    result = cli("threads", "list", "--dsn", dsn, "--schema", schema)
    assert result.code == 4
    assert f"schema {schema!r} has no tenxgraph tables" in result.err

    async def schema_exists() -> bool:
        import asyncpg

        conn = await asyncpg.connect(dsn)
        try:
            found = await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", schema)
        finally:
            await conn.close()
        return found is not None

    assert not asyncio.run(schema_exists())


def test_a_password_in_the_dsn_is_never_printed(cli: Cli) -> None:
    parts = urlsplit(pg_dsn())
    secret = "s3cret-never-shown"
    host = parts.netloc.rpartition("@")[2]
    dsn = urlunsplit(parts._replace(netloc=f"{parts.username}:{secret}@{host}"))
    result = cli("threads", "list", "--dsn", dsn, "--schema", fresh_schema())
    assert result.code in (1, 4)  # refused, or (a server that trusts us) no tables
    assert secret not in result.out + result.err
    assert host in result.err


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://me:pw@db:5432/app", "postgresql://me@db:5432/app"),
        (
            "postgres://me@db/app?password=pw&sslmode=require",
            "postgres://me@db/app?sslmode=require",
        ),
        ("postgresql://db/app", "postgresql://db/app"),
        ("host=db user=me password=pw dbname=app", "host=db user=me password=*** dbname=app"),
        ("host=db password='p w' dbname=app", "host=db password=*** dbname=app"),
    ],
)
def test_redacted_dsn(dsn: str, shown: str) -> None:
    assert threads_cli.redacted_dsn(dsn) == shown


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--db", "x.db", "--dsn", "postgresql://db/app"], "either --db (SQLite) or --dsn"),
        (["--schema", "other"], "--schema goes with --dsn"),
        (["--dsn", "postgresql://db/app", "--schema", "bad-name"], "is not a plain SQL identifier"),
    ],
)
def test_bad_store_options_are_usage_errors(cli: Cli, args: list[str], message: str) -> None:
    result = cli("threads", "list", *args)
    assert result.code == 2
    assert message in result.err


# -- the thread's running usage ---------------------------------------------------------------


def _priced_thread(path: str, thread: str, priced: list[bool]) -> list[dict[str, object]]:
    """A thread with one run per entry of `priced`: one model call each, priced or not;
    the runs' `token_usage`."""

    async def fill() -> list[dict[str, object]]:
        store = SqliteCheckpointer(path)
        try:
            found = []
            for n, is_priced in enumerate(priced):
                model = Priced(tool_rounds(0), priced=is_priced)
                app = ReactAgent(model, [add]).compile(checkpointer=store)
                result = await app.ainvoke(
                    {"messages": [Message.text_message(f"q{n}")]}, {"thread_id": thread}
                )
                found.append(result["token_usage"])
            return found
        finally:
            await store.aclose()

    return asyncio.run(fill())


def test_show_prints_the_threads_running_usage_and_cost(cli: Cli, tmp_path: Path) -> None:
    path = str(tmp_path / "u.db")
    runs = _priced_thread(path, "u", [True, True])
    result = cli("threads", "show", "u", "--db", path)
    assert result.code == 0, result.err
    into = sum(int(str(u["total_input_tokens"])) for u in runs)
    out = sum(int(str(u["total_output_tokens"])) for u in runs)
    cost = sum(float(str(u["cost"])) for u in runs)
    assert result.out.splitlines()[-1] == (
        f"tokens: {into} in, {out} out, {into + out} total; 2 model calls; cost ${cost:.6f}"
    )


def test_show_says_the_cost_is_unknown_when_a_price_is(cli: Cli, tmp_path: Path) -> None:
    path = str(tmp_path / "u.db")
    _priced_thread(path, "u", [True, False])
    last = cli("threads", "show", "u", "--db", path).out.splitlines()[-1]
    assert last.endswith("; 2 model calls; cost unknown (1 call without a known price)")
    assert "$" not in last


def test_show_an_offline_models_thread_costs_nothing(cli: Cli, db: str) -> None:
    # the chat thread's two answers, by the offline model: free, so a known cost of 0
    last = cli("threads", "show", "c", "--db", db).out.splitlines()[-1]
    assert last.endswith("; 2 model calls; cost $0.000000")


def test_show_counts_the_tools_a_thread_ran(cli: Cli, tmp_path: Path) -> None:
    path = str(tmp_path / "t.db")

    async def fill() -> None:
        store = SqliteCheckpointer(path)
        try:  # two rounds of tools: two parallel calls, then one
            app = ReactAgent(Priced(tool_rounds(2)), [add]).compile(checkpointer=store)
            await app.ainvoke({"messages": [Message.text_message("q")]}, {"thread_id": "t"})
        finally:
            await store.aclose()

    asyncio.run(fill())
    last = cli("threads", "show", "t", "--db", path).out.splitlines()[-1]
    assert "; 3 model calls; 3 tool calls; cost $" in last


def test_delete_releases_the_threads_media(cli: Cli, tmp_path: Path) -> None:
    import base64

    from tenxgraph import END, START, StateGraph
    from tenxgraph.storage.media import SqliteMediaStore

    path = tmp_path / "m.db"
    big = bytes(300 * 1024)

    async def save() -> str:
        graph = StateGraph()
        graph.add_node("answer", lambda state: "ok")
        graph.add_edge(START, "answer")
        graph.add_edge("answer", END)
        checkpointer = SqliteCheckpointer(path)
        app = graph.compile(checkpointer=checkpointer)
        data = base64.b64encode(big).decode()
        message = Message.image_message(image_base64=data, mime_type="image/png")
        await app.ainvoke({"messages": [message]}, {"thread_id": "m"})
        assert isinstance(app.media_store, SqliteMediaStore)  # the default: the same file
        (media,) = await app.media_store.alist()
        await app.media_store.aclose()
        await checkpointer.aclose()
        return media.sha256

    sha = asyncio.run(save())
    assert cli("threads", "delete", "m", "--db", str(path), "--yes").code == 0

    async def left() -> bool:
        store = SqliteMediaStore(path)
        try:
            return await store.ahas(sha)
        finally:
            await store.aclose()

    assert not asyncio.run(left())
