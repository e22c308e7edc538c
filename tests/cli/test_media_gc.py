"""`tenxgraph media gc`: the media blobs no thread owns, older than the grace period, deleted
from a SQLite file or a PostgreSQL database; `--dry-run` only lists them."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tenxgraph import END, START, Agent, StateGraph
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.state import ImageBlock, Message
from tenxgraph.storage.checkpointer import BaseCheckpointer, PgCheckpointer, SqliteCheckpointer
from tenxgraph.storage.media import base as media_base
from tests.cli.conftest import Cli
from tests.storage.conftest import drop_schema, fresh_schema, pg_dsn

SAVED = b"\x89PNG saved into a thread" + bytes(2000)
STRAY = b"\x89PNG put, never sent" + bytes(3000)
STRAY_SIZE = "2.9 KiB, 3020 bytes"
DAY = 86_400.0


async def _fill(checkpointer: BaseCheckpointer, clock: list[float]) -> tuple[str, str]:
    """A thread owning one image, and one image put but never sent (two days ago); their
    sha256s."""
    graph = StateGraph()
    graph.add_node("agent", Agent(FunctionModel(lambda messages, info: "ok")))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    app = graph.compile(checkpointer=checkpointer)
    clock[0] -= 2 * DAY
    stray = await app.media_store.aput(STRAY, "image/png")
    saved = await app.media_store.aput(SAVED, "image/png")
    clock[0] += 2 * DAY
    turn = Message.multimodal_message([ImageBlock(media=saved)])
    await app.ainvoke({"messages": [turn]}, {"thread_id": "t"})
    await app.media_store.aclose()
    await checkpointer.aclose()
    return str(saved.sha256), str(stray.sha256)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    import time

    now = [time.time()]
    monkeypatch.setattr(media_base, "_clock", lambda: now[0])
    return now


@pytest.fixture
def db(tmp_path: Path, clock: list[float]) -> tuple[str, str, str]:
    path = str(tmp_path / "media.db")
    saved, stray = asyncio.run(_fill(SqliteCheckpointer(path), clock))
    return path, saved, stray


def _blobs(path: str) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {row[0] for row in conn.execute("SELECT sha256 FROM tx_media_blobs")}
    finally:
        conn.close()


def test_gc_deletes_unowned_blobs_older_than_a_day(cli: Cli, db: tuple[str, str, str]) -> None:
    path, saved, _ = db
    result = cli("media", "gc", "--db", path)
    assert result.code == 0, result.err
    assert result.out.strip() == (
        f"Deleted 1 media blob no thread owns ({STRAY_SIZE}) stored more than 1 day "
        f"ago, from {path}."
    )
    assert _blobs(path) == {saved}  # the thread's image is kept


def test_older_than_sets_the_grace_period(
    cli: Cli, db: tuple[str, str, str], clock: list[float]
) -> None:
    path, saved, stray = db
    result = cli("media", "--db", path, "gc", "--older-than", str(3 * DAY))
    assert result.code == 0, result.err
    assert result.out.startswith("Deleted 0 media blobs no thread owns (0 bytes)")
    assert _blobs(path) == {saved, stray}
    assert cli("media", "gc", "--db", path, "--older-than", "0").code == 0
    assert _blobs(path) == {saved}


def test_dry_run_lists_and_deletes_nothing(cli: Cli, db: tuple[str, str, str]) -> None:
    path, saved, stray = db
    result = cli("media", "gc", "--db", path, "--dry-run")
    assert result.code == 0, result.err
    listed, summary = result.out.strip().splitlines()
    assert listed == f"{stray}  {STRAY_SIZE}  image/png  2 days old"
    assert summary.startswith(f"Would delete 1 media blob no thread owns ({STRAY_SIZE})")
    assert _blobs(path) == {saved, stray}


def test_a_database_without_media_is_left_as_it_is(cli: Cli, tmp_path: Path) -> None:
    path = str(tmp_path / "plain.db")
    assert cli("chat", "--thread", "c", "--db", path, stdin="hi\n").code == 0
    result = cli("media", "gc", "--db", path)
    assert result.code == 0, result.err
    assert result.out.strip() == f"No media in {path}: nothing to delete."
    conn = sqlite3.connect(path)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        conn.close()
    assert "tx_media_blobs" not in tables


def test_missing_or_foreign_databases_are_refused(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "nothing.db"
    result = cli("media", "gc", "--db", str(missing))
    assert result.code == 4
    assert not missing.exists()
    other = tmp_path / "other.db"
    sqlite3.connect(other).close()
    result = cli("media", "gc", "--db", str(other))
    assert result.code == 4
    assert "not a tenxgraph database" in result.err


@pytest.mark.parametrize("value", ["-1", "soon", "inf", "nan"])
def test_older_than_must_be_seconds(cli: Cli, db: tuple[str, str, str], value: str) -> None:
    result = cli("media", "gc", "--db", db[0], "--older-than", value)
    assert result.code == 2
    assert "a number >= 0" in result.err


def test_gc_on_postgresql(cli: Cli, clock: list[float]) -> None:
    dsn, schema = pg_dsn(), fresh_schema()
    try:
        _, stray = asyncio.run(_fill(PgCheckpointer(dsn, schema=schema, max_size=2), clock))
        dry = cli("media", "gc", "--db", dsn, "--schema", schema, "--dry-run")
        assert dry.code == 0, dry.err
        assert dry.out.splitlines()[0].startswith(stray)
        result = cli("media", "gc", "--dsn", dsn, "--schema", schema)
        assert result.code == 0, result.err
        assert result.out.startswith(f"Deleted 1 media blob no thread owns ({STRAY_SIZE})")
        password = urlsplit(dsn).password
        assert not password or password not in result.out + dry.out
        again = cli("media", "gc", "--dsn", dsn, "--schema", schema, "--older-than", "0")
        assert again.out.startswith("Deleted 0 media blobs")
    finally:
        asyncio.run(drop_schema(dsn, schema))


def test_a_postgresql_schema_without_tenxgraph_tables_is_not_found(cli: Cli) -> None:
    result = cli("media", "gc", "--dsn", pg_dsn(), "--schema", fresh_schema())
    assert result.code == 4
    assert "has no tenxgraph tables" in result.err
