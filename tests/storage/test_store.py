"""The behaviour every long-term store shares, run against memory, SQLite and PostgreSQL.

Writes get their `updated_at` from a test clock (one tick per write), so that the order of a
search is known without sleeping.
"""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.storage.store import BaseStore, InMemoryStore, Item
from tenxgraph.storage.store import base as store_base
from tests.storage.conftest import Backend


class StoreBackend(Backend):
    """A store, the means to open a new instance on the same storage, and raw SQL on it."""

    FILE = "store.db"

    def open(self) -> BaseStore:  # type: ignore[override]
        store: BaseStore
        if self.name == "memory":
            store = InMemoryStore()
        elif self.name == "sqlite":
            from tenxgraph.storage.store import SqliteStore

            store = SqliteStore(self.db_path)
        else:
            from tenxgraph.storage.store import PostgresStore

            store = PostgresStore(self.dsn, schema=self.schema, max_size=2)
        self.opened.append(store)
        return store


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreBackend]:
    found = StoreBackend(request.param, tmp_path)
    try:
        yield found
    finally:
        await found.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def lasting(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreBackend]:
    found = StoreBackend(request.param, tmp_path)
    try:
        yield found
    finally:
        await found.close()


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every write one second after the one before."""
    now = [1_000.0]

    def tick() -> float:
        now[0] += 1.0
        return now[0]

    monkeypatch.setattr(store_base, "_clock", tick)
    return now


@pytest.fixture
def store(backend: StoreBackend) -> BaseStore:
    return backend.store


def keys(items: list[Item]) -> list[str]:
    return [item.key for item in items]


# -- put, get, delete -----------------------------------------------------------------------


async def test_put_then_get_gives_the_value_and_its_times(store: BaseStore) -> None:
    assert await store.aget(("users", "u1"), "prefs") is None
    value = {"theme": "dark", "size": 1.5, "tags": ["a", {"b": None}], "on": True, "n": 10**20}
    await store.aput(("users", "u1"), "prefs", value)
    item = await store.aget(("users", "u1"), "prefs")
    assert item == Item(("users", "u1"), "prefs", value, 1001.0, 1001.0)


async def test_overwrite_keeps_created_at_and_moves_updated_at(store: BaseStore) -> None:
    await store.aput(("u",), "k", {"v": 1})
    await store.aput(("u",), "k", {"v": 2})
    item = await store.aget(("u",), "k")
    assert item is not None
    assert (item.value, item.created_at, item.updated_at) == ({"v": 2}, 1001.0, 1002.0)


async def test_a_read_value_is_a_copy(store: BaseStore) -> None:
    value: dict[str, Any] = {"list": [1]}
    await store.aput(("u",), "k", value)
    value["list"].append(2)
    item = await store.aget(("u",), "k")
    assert item is not None
    item.value["list"].append(3)
    again = await store.aget(("u",), "k")
    assert again is not None
    assert again.value == {"list": [1]}


async def test_delete_removes_only_that_item(store: BaseStore) -> None:
    await store.aput(("u",), "a", {"v": 1})
    await store.aput(("u",), "b", {"v": 2})
    await store.adelete(("u",), "a")
    await store.adelete(("u",), "missing")  # nothing there: no error
    assert await store.aget(("u",), "a") is None
    assert await store.aget(("u",), "b") is not None


async def test_namespaces_are_separate(store: BaseStore) -> None:
    await store.aput(("a",), "k", {"v": 1})
    await store.aput(("a", "b"), "k", {"v": 2})
    await store.aput(("ab",), "k", {"v": 3})
    for namespace, v in ((("a",), 1), (("a", "b"), 2), (("ab",), 3)):
        item = await store.aget(namespace, "k")
        assert item is not None
        assert item.value == {"v": v}


# -- search ---------------------------------------------------------------------------------


async def fill(store: BaseStore) -> None:
    await store.aput(("users", "u1", "notes"), "n1", {"kind": "food", "n": 1})
    await store.aput(("users", "u1", "notes"), "n2", {"kind": "work", "n": 2})
    await store.aput(("users", "u2", "notes"), "n3", {"kind": "food", "n": 3})
    await store.aput(("users", "u1"), "profile", {"kind": "profile", "n": 4})
    await store.aput(("users2",), "other", {"kind": "food", "n": 5})
    await store.aput(("teams", "t"), "x", {"kind": "food", "n": 1.0})


async def test_search_lists_items_under_a_prefix_newest_first(store: BaseStore) -> None:
    await fill(store)
    assert keys(await store.asearch(("users",))) == ["profile", "n3", "n2", "n1"]
    assert keys(await store.asearch(("users", "u1"))) == ["profile", "n2", "n1"]
    assert keys(await store.asearch(("users", "u1", "notes"))) == ["n2", "n1"]
    assert keys(await store.asearch(("nobody",))) == []
    assert keys(await store.asearch(())) == ["x", "other", "profile", "n3", "n2", "n1"]


async def test_search_ties_on_updated_at_go_by_key(
    store: BaseStore, clock: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_base, "_clock", lambda: 5.0)
    for key in ("c", "a", "b"):
        await store.aput(("t",), key, {})
    assert keys(await store.asearch(("t",))) == ["a", "b", "c"]


async def test_search_pages_with_limit_and_offset(store: BaseStore) -> None:
    await fill(store)
    assert keys(await store.asearch(("users",), limit=2)) == ["profile", "n3"]
    assert keys(await store.asearch(("users",), limit=2, offset=2)) == ["n2", "n1"]
    assert keys(await store.asearch(("users",), limit=2, offset=4)) == []
    assert keys(await store.asearch(("users",), limit=0)) == []


async def test_search_filters_on_top_level_fields_equal_as_json(store: BaseStore) -> None:
    await fill(store)
    food = await store.asearch((), filter={"kind": "food"})
    assert keys(food) == ["x", "other", "n3", "n1"]
    assert keys(await store.asearch(("users",), filter={"kind": "food"})) == ["n3", "n1"]
    assert keys(await store.asearch((), filter={"kind": "food", "n": 1})) == ["n1"]  # not 1.0
    assert keys(await store.asearch((), filter={"n": 1.0})) == ["x"]
    assert keys(await store.asearch((), filter={"kind": "food"}, limit=1, offset=1)) == ["other"]
    assert keys(await store.asearch((), filter={"missing": None})) == []
    assert keys(await store.asearch((), filter={"kind": "food"}, limit=0)) == []
    assert keys(await store.asearch((), filter={"kind": "food"}, limit=2, offset=3)) == ["n1"]
    assert keys(await store.asearch((), filter={"tags": ["a"]})) == []


async def test_search_refuses_bad_pages_and_filters(store: BaseStore) -> None:
    with pytest.raises(ValueError, match="limit must be an int >= 0"):
        await store.asearch((), limit=-1)
    with pytest.raises(ValueError, match="offset must be an int >= 0"):
        await store.asearch((), offset=-1)
    with pytest.raises(SerializationError, match="Search filter: field 'n': nan is not a JSON"):
        await store.asearch((), filter={"n": math.nan})
    with pytest.raises(ValueError, match="filter must be a dict"):
        await store.asearch((), filter=[("n", 1)])  # type: ignore[arg-type]


# -- list_namespaces ------------------------------------------------------------------------


async def test_list_namespaces_with_prefix_suffix_and_depth(store: BaseStore) -> None:
    await fill(store)
    assert await store.alist_namespaces() == [
        ("teams", "t"),
        ("users", "u1"),
        ("users", "u1", "notes"),
        ("users", "u2", "notes"),
        ("users2",),
    ]
    assert await store.alist_namespaces(prefix=("users",)) == [
        ("users", "u1"),
        ("users", "u1", "notes"),
        ("users", "u2", "notes"),
    ]
    assert await store.alist_namespaces(suffix=("notes",)) == [
        ("users", "u1", "notes"),
        ("users", "u2", "notes"),
    ]
    assert await store.alist_namespaces(max_depth=1) == [("teams",), ("users",), ("users2",)]
    assert await store.alist_namespaces(prefix=("users",), max_depth=2) == [
        ("users", "u1"),
        ("users", "u2"),
    ]
    assert await store.alist_namespaces(limit=2, offset=1) == [
        ("users", "u1"),
        ("users", "u1", "notes"),
    ]
    with pytest.raises(ValueError, match="max_depth"):
        await store.alist_namespaces(max_depth=0)


# -- what is refused ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "field", "reason"),
    [
        ({"a": {"b": math.nan}}, "a.b", "not a JSON number"),
        ({"a": [1, math.inf]}, "a.1", "not a JSON number"),
        ({"s": {1, 2}}, "s", "read back as a list"),
        ({"t": (1, 2)}, "t", "read back as a list"),
        ({"when": datetime(2026, 1, 1)}, "when", "read back as a str"),
        ({"d": {1: "x"}}, "d.1", "JSON object keys are strings"),
        ({"x": ["ok", "\ud800"]}, "x.1", "unpaired surrogate"),
    ],
)
async def test_unstorable_values_are_refused_naming_the_field(
    store: BaseStore, value: dict[str, Any], field: str, reason: str
) -> None:
    await store.aput(("u",), "k", {"before": True})
    with pytest.raises(SerializationError, match=reason) as info:
        await store.aput(("u",), "k", value)
    assert f"field {field!r}" in str(info.value)
    assert "Nothing was written" in str(info.value)
    assert info.value.context["field"] == field
    item = await store.aget(("u",), "k")
    assert item is not None
    assert item.value == {"before": True}


async def test_a_value_must_be_a_dict(store: BaseStore) -> None:
    with pytest.raises(SerializationError, match="a value is a dict, not a list"):
        await store.aput(("u",), "k", [1])  # type: ignore[arg-type]
    assert await store.aget(("u",), "k") is None


@pytest.mark.parametrize(
    ("namespace", "message"),
    [
        ((), "at least one label"),
        ("users", "tuple of str labels"),
        (("a", ""), "must not be empty"),
        (("a/b",), "contains '/'"),
        (("a", 1), "must be a str"),
        (("a\x00",), "control character"),
    ],
)
async def test_bad_namespaces_are_refused(store: BaseStore, namespace: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        await store.aput(namespace, "k", {})
    assert await store.alist_namespaces() == []


@pytest.mark.parametrize(("key", "message"), [("", "must not be empty"), (3, "must be a str")])
async def test_bad_keys_are_refused(store: BaseStore, key: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        await store.aput(("u",), key, {})
    assert await store.asearch(()) == []


async def test_a_namespace_and_key_too_long_for_an_index_are_refused(store: BaseStore) -> None:
    namespace = tuple("é" * 250 + str(i) for i in range(4))  # 4 x 501 bytes, under 255 chars
    with pytest.raises(ValueError, match=r"take 2,\d{3} bytes in UTF-8; the limit is 2,048"):
        await store.aput(namespace, "k" * 60, {})
    assert await store.alist_namespaces() == []
    await store.aput(namespace, "k", {})  # 2,008 bytes: fits
    assert await store.aget(namespace, "k") is not None


async def test_a_list_namespace_is_taken_as_its_tuple(store: BaseStore) -> None:
    await store.aput(["a", "b"], "k", {"v": 1})
    item = await store.aget(("a", "b"), "k")
    assert item is not None
    assert item.namespace == ("a", "b")


# -- sync twins, persistence ----------------------------------------------------------------


def test_sync_twins(backend: StoreBackend) -> None:
    store = backend.store
    store.put(("u",), "a", {"v": 1})
    store.put(("u", "x"), "b", {"v": 2})
    item = store.get(("u",), "a")
    assert item is not None
    assert item.value == {"v": 1}
    assert keys(store.search(("u",), filter={"v": 2})) == ["b"]
    assert store.list_namespaces(max_depth=1) == [("u",)]
    store.delete(("u",), "a")
    assert store.get(("u",), "a") is None


async def test_items_outlive_the_store_object(lasting: StoreBackend) -> None:
    await lasting.store.aput(("users", "u1"), "prefs", {"theme": "dark"})
    await lasting.store.aclose()
    again = lasting.open()
    item = await again.aget(("users", "u1"), "prefs")
    assert item is not None
    assert item.value == {"theme": "dark"}
    assert await again.alist_namespaces() == [("users", "u1")]


async def test_the_sqlite_store_shares_a_file_with_the_checkpointer(tmp_path: Path) -> None:
    from tenxgraph.storage.checkpointer import SqliteCheckpointer
    from tenxgraph.storage.store import SqliteStore

    path = tmp_path / "app.db"
    checkpointer = SqliteCheckpointer(path)
    await checkpointer.asetup()
    store = SqliteStore(path)
    try:
        await store.aput(("u",), "k", {"v": 1})
        assert await checkpointer.alist_threads() == []
    finally:
        await store.aclose()
        await checkpointer.aclose()
    tables = {row[0] for row in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert {"tx_store_items", "tx_threads"} <= tables


_WRITER = """
import asyncio, sys
sys.path[:0] = [{src!r}]
from tenxgraph.storage.store import SqliteStore

async def main():
    store = SqliteStore({path!r})
    for i in range(50):
        await store.aput(("p", sys.argv[1]), str(i), {{"i": i}})
    await store.aclose()

asyncio.run(main())
"""


def test_two_processes_write_the_same_sqlite_store(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    src = str(Path(__file__).resolve().parents[2] / "src")
    script = _WRITER.format(src=src, path=str(path))
    procs = [subprocess.Popen([sys.executable, "-c", script, name]) for name in ("a", "b")]
    assert [proc.wait(timeout=60) for proc in procs] == [0, 0]
    from tenxgraph.storage.store import SqliteStore

    store = SqliteStore(path)
    try:
        assert store.list_namespaces() == [("p", "a"), ("p", "b")]
        assert len(store.search(("p",), limit=1000)) == 100
    finally:
        store._blocking(store.aclose())


def test_the_package_imports_no_backend() -> None:
    code = (
        "import sys, tenxgraph.storage.store as s; s.InMemoryStore; "
        "assert 'asyncpg' not in sys.modules and 'tenxgraph.storage.store.sqlite' not in "
        "sys.modules, sorted(sys.modules)"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path[:0]=[{src!r}]; {code}"], check=True
    )


async def test_filter_values_compare_as_json(store: BaseStore) -> None:
    await store.aput(("f",), "flag", {"on": True, "meta": {"a": 2, "b": [1, "x"]}})
    await store.aput(("f",), "one", {"on": 1})
    assert keys(await store.asearch(("f",), filter={"on": True})) == ["flag"]
    assert keys(await store.asearch(("f",), filter={"on": 1})) == ["one"]
    nested = {"meta": {"b": [1, "x"], "a": 2}}  # the keys in another order
    assert keys(await store.asearch(("f",), filter=nested)) == ["flag"]


async def test_a_prefix_matches_whole_labels_only(store: BaseStore) -> None:
    """Namespaces stored as "a-b", "a.c", "a0", "A" sort around "a/" (byte order, or a
    database's locale): none of them is under ("a",)."""
    for label in ("a-b", "a.c", "a0", "a~", "A", "ab", "a b", "é"):
        await store.aput((label,), "k", {})
        await store.aput((label, "x"), "k", {})
    await store.aput(("a",), "k", {})
    await store.aput(("a", "x"), "k", {})
    await store.aput(("a", "x", "y"), "k", {})
    found = [item.namespace for item in await store.asearch(("a",), limit=100)]
    assert sorted(found) == [("a",), ("a", "x"), ("a", "x", "y")]
    assert await store.alist_namespaces(prefix=("a",)) == [("a",), ("a", "x"), ("a", "x", "y")]
    assert await store.alist_namespaces(prefix=("a", "x")) == [("a", "x"), ("a", "x", "y")]


async def test_postgres_compares_namespaces_bytewise_whatever_the_database_locale(
    tmp_path: Path,
) -> None:
    """A prefix search is a range of text: under a locale's collation ("a-b" sorting next to
    "ab") it would be wrong, so the columns are `COLLATE "C"`."""
    found = StoreBackend("postgres", tmp_path)
    try:
        await found.store.asetup()
        rows = await found.sql(
            "SELECT column_name, collation_name FROM information_schema.columns "
            "WHERE table_schema = ? AND table_name = 'tx_store_items' "
            "AND column_name IN ('namespace', 'key') ORDER BY column_name",
            found.schema,
        )
        assert rows == [("key", "C"), ("namespace", "C")]
    finally:
        await found.close()


@pytest.mark.parametrize("stored", ["{not json", "[1, 2]"])
async def test_a_damaged_row_is_a_serialization_error_naming_the_item(
    lasting: StoreBackend, stored: str
) -> None:
    await lasting.store.aput(("u",), "k", {"v": 1})
    await lasting.sql("UPDATE tx_store_items SET value = ? WHERE key = 'k'", stored)
    with pytest.raises(SerializationError, match=r"Store item \('u',\) / 'k': the stored value"):
        await lasting.store.aget(("u",), "k")


async def test_tables_of_a_newer_tenxgraph_are_refused(lasting: StoreBackend) -> None:
    from tenxgraph.core.exceptions import SchemaVersionError

    await lasting.store.asetup()
    await lasting.sql("UPDATE tx_store_schema_version SET version = 99")
    with pytest.raises(SchemaVersionError, match="store schema version 99, but this tenxgraph"):
        await lasting.open().aget(("u",), "k")
