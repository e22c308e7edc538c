"""Semantic search in the long-term store, on memory, SQLite and PostgreSQL.

The embedding function is a bag of words over a small vocabulary: a text's vector counts each
word of `VOCAB` in it, so which item is closest to a query is known in advance.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import EmbeddingError
from tenxgraph.storage.store import BaseStore, IndexConfig, InMemoryStore, SearchItem
from tenxgraph.storage.store._paths import parse_path, texts_at
from tests.storage.test_store import StoreBackend, keys
from tests.storage.test_store import clock as clock  # autouse: one clock tick per write

VOCAB = ["tea", "coffee", "cat", "dog", "rain", "sun", "code", "python"]
DIMS = len(VOCAB)


def bag(text: str) -> list[float]:
    words = re.findall(r"[a-z]+", text.lower())
    return [float(words.count(word)) for word in VOCAB]


class Embedder:
    """The bag-of-words function, recording every call's texts; `fail` makes it raise,
    `answer` is returned instead of the vectors."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.fail: Exception | None = None
        self.answer: Any = None
        self.threads: set[int] = set()

    def __call__(self, texts: list[str]) -> Any:
        self.threads.add(threading.get_ident())
        self.calls.append(list(texts))
        if self.fail is not None:
            raise self.fail
        return [bag(text) for text in texts] if self.answer is None else self.answer


class IndexedBackend(StoreBackend):
    """A store made with `index` (None: without one)."""

    def __init__(self, name: str, tmp_path: Path, index: IndexConfig | None) -> None:
        self.index = index
        super().__init__(name, tmp_path)

    def open(self) -> BaseStore:  # type: ignore[override]
        store: BaseStore
        if self.name == "memory":
            store = InMemoryStore(index=self.index)
        elif self.name == "sqlite":
            from tenxgraph.storage.store import SqliteStore

            store = SqliteStore(self.db_path, index=self.index)
        else:
            from tenxgraph.storage.store import PostgresStore

            store = PostgresStore(self.dsn, schema=self.schema, max_size=2, index=self.index)
        self.opened.append(store)
        return store


@pytest.fixture
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> AsyncIterator[IndexedBackend]:
    found = IndexedBackend(request.param, tmp_path, {"dims": DIMS, "embed": embedder})
    try:
        yield found
    finally:
        await found.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def lasting(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> AsyncIterator[IndexedBackend]:
    found = IndexedBackend(request.param, tmp_path, {"dims": DIMS, "embed": embedder})
    try:
        yield found
    finally:
        await found.close()


@pytest.fixture
def store(backend: IndexedBackend) -> BaseStore:
    return backend.store


async def fill(store: BaseStore) -> None:
    await store.aput(("u", "notes"), "tea", {"text": "I drink tea, green tea", "kind": "drink"})
    await store.aput(("u", "notes"), "coffee", {"text": "coffee in the morning", "kind": "drink"})
    await store.aput(("u", "notes"), "both", {"text": "tea or coffee", "kind": "drink"})
    await store.aput(("u", "pets"), "dog", {"text": "my dog hates rain", "kind": "pet"})
    await store.aput(("v", "notes"), "tea2", {"text": "tea tea tea", "kind": "drink"})


def scores(items: list[SearchItem]) -> list[float | None]:
    return [None if item.score is None else round(item.score, 4) for item in items]


# -- ranking --------------------------------------------------------------------------------


async def test_a_query_ranks_the_items_under_the_prefix_by_cosine_similarity(
    store: BaseStore,
) -> None:
    await fill(store)
    found = await store.asearch(("u",), query="tea")
    assert keys(found) == ["tea", "both", "dog", "coffee"]  # equal scores: newest first
    # "tea" alone is (1, 0, ...); "I drink tea, green tea" is (2, 0, ...): the same direction
    assert scores(found) == [1.0, round(1 / math.sqrt(2), 4), 0.0, 0.0]
    assert all(isinstance(item, SearchItem) for item in found)
    assert found[0].value == {"text": "I drink tea, green tea", "kind": "drink"}
    assert found[0].namespace == ("u", "notes")
    assert keys(await store.asearch(("u", "pets"), query="rain")) == ["dog"]
    assert keys(await store.asearch((), query="tea", limit=2)) == ["tea2", "tea"]  # ties: newest


async def test_without_a_query_a_search_is_by_recency_with_no_score(store: BaseStore) -> None:
    await fill(store)
    found = await store.asearch(("u",))
    assert keys(found) == ["dog", "both", "coffee", "tea"]
    assert scores(found) == [None] * 4


async def test_a_query_with_a_filter_limit_and_offset(store: BaseStore) -> None:
    await fill(store)
    ranked = await store.asearch((), query="coffee", filter={"kind": "drink"})
    assert keys(ranked) == ["coffee", "both", "tea2", "tea"]
    page = await store.asearch((), query="coffee", filter={"kind": "drink"}, limit=2, offset=1)
    assert keys(page) == ["both", "tea2"]
    assert keys(await store.asearch((), query="coffee", filter={"kind": "pet"})) == ["dog"]
    assert await store.asearch((), query="coffee", limit=0) == []
    assert keys(await store.asearch((), query="coffee", offset=5)) == []


async def test_an_update_embeds_the_item_again(store: BaseStore, embedder: Embedder) -> None:
    await store.aput(("u",), "k", {"text": "tea"})
    await store.aput(("u",), "other", {"text": "cat"})
    await store.aput(("u",), "k", {"text": "dog"})
    assert embedder.calls == [['{"text": "tea"}'], ['{"text": "cat"}'], ['{"text": "dog"}']]
    assert scores(await store.asearch(("u",), query="dog")) == [1.0, 0.0]
    assert keys(await store.asearch(("u",), query="dog")) == ["k", "other"]
    assert keys(await store.asearch(("u",), query="tea")) == ["k", "other"]  # both 0: by recency
    assert scores(await store.asearch(("u",), query="tea")) == [0.0, 0.0]


async def test_a_deleted_item_leaves_no_vectors(backend: IndexedBackend) -> None:
    store = backend.store
    await fill(store)
    await store.adelete(("u", "notes"), "tea")
    assert keys(await store.asearch(("u",), query="tea")) == ["both", "dog", "coffee"]
    if backend.is_sql:
        rows = await backend.sql("SELECT key FROM tx_store_items WHERE vectors IS NOT NULL")
        assert sorted(row[0] for row in rows) == ["both", "coffee", "dog", "tea2"]
    else:
        assert len(store._vectors) == 4  # type: ignore[attr-defined]


async def test_index_false_stores_an_item_out_of_query_searches(
    store: BaseStore, embedder: Embedder
) -> None:
    await store.aput(("u",), "plain", {"text": "tea"}, index=False)
    await store.aput(("u",), "meant", {"text": "tea"})
    assert len(embedder.calls) == 1
    assert keys(await store.asearch(("u",))) == ["meant", "plain"]
    assert keys(await store.asearch(("u",), query="tea")) == ["meant"]
    await store.aput(("u",), "meant", {"text": "tea"}, index=False)  # its vectors dropped
    assert await store.asearch(("u",), query="tea") == []
    assert keys(await store.asearch(("u",))) == ["meant", "plain"]


async def test_an_item_with_nothing_to_embed_has_no_vectors(
    store: BaseStore, embedder: Embedder
) -> None:
    await store.aput(("u",), "empty", {"text": "  "}, index=["text"])
    await store.aput(("u",), "missing", {"other": "tea"}, index=["text"])
    assert embedder.calls == []  # blank and absent texts are not sent
    assert await store.asearch(("u",), query="tea") == []
    assert keys(await store.asearch(("u",))) == ["missing", "empty"]


async def test_vectors_are_stored_as_float32_with_the_row(lasting: IndexedBackend) -> None:
    await lasting.store.aput(("u",), "k", {"a": "tea", "b": "dog"}, index=["a", "b"])
    rows = await lasting.sql("SELECT length(vectors) FROM tx_store_items WHERE key = 'k'")
    assert rows == [(4 + 2 * DIMS * 4,)]  # a length, then two vectors of DIMS float32
    reopened = lasting.open()  # another instance reads the stored vectors
    assert keys(await reopened.asearch(("u",), query="dog")) == ["k"]


# -- fields ---------------------------------------------------------------------------------


async def test_fields_choose_what_is_embedded(tmp_path: Path, embedder: Embedder) -> None:
    index: IndexConfig = {"dims": DIMS, "embed": embedder, "fields": ["title", "notes[*].body"]}
    store = InMemoryStore(index=index)
    value = {
        "title": "My cat",
        "notes": [{"body": "rain today"}, {"body": "sun"}, {"other": "x"}],
        "private": "tea",
    }
    await store.aput(("u",), "k", value)
    assert embedder.calls == [["My cat", "rain today", "sun"]]  # one call per item
    [found] = await store.asearch(("u",), query="sun")
    assert found.score == pytest.approx(1.0)  # the best of the item's texts
    [found] = await store.asearch(("u",), query="tea")
    assert found.score == 0.0  # "private" was not embedded
    await store.aput(("u",), "k", value, index=["private", "notes[-1]"])
    assert embedder.calls[-1] == ["tea", '{"other": "x"}']
    [found] = await store.asearch(("u",), query="tea")
    assert found.score == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("path", "value", "texts"),
    [
        ("$", {"b": 1, "a": "x"}, ['{"a": "x", "b": 1}']),
        ("a", {"a": "x"}, ["x"]),
        ("a", {"a": {"n": [1, 2]}}, ['{"n": [1, 2]}']),
        ("a.b", {"a": {"b": "deep"}}, ["deep"]),
        ("a.b", {"a": "flat"}, []),
        ("a[1]", {"a": ["x", "y"]}, ["y"]),
        ("a[-1]", {"a": ["x", "y"]}, ["y"]),
        ("a[2]", {"a": ["x", "y"]}, []),
        ("a[*]", {"a": ["x", 3]}, ["x", "3"]),
        ("a[*].b", {"a": [{"b": "p"}, {"c": "q"}, {"b": "r"}]}, ["p", "r"]),
        ("a[*]", {"a": "not a list"}, []),
        ("missing", {"a": "x"}, []),
    ],
)
def test_field_paths_reach_their_texts(path: str, value: Any, texts: list[str]) -> None:
    assert texts_at(value, parse_path(path)) == texts


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "non-empty str"),
        ("a..b", "cannot read it from '..b'"),
        ("[0]", "must start with a field name"),
        ("a[x]", "cannot read it from"),
        ("a.", "cannot read it from '.'"),
        (3, "non-empty str"),
    ],
)
def test_bad_field_paths_are_refused(path: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_path(path)


# -- failures write nothing -----------------------------------------------------------------


async def test_a_failing_embedder_stores_nothing(store: BaseStore, embedder: Embedder) -> None:
    await store.aput(("u",), "old", {"text": "tea"})
    embedder.fail = RuntimeError("model down")
    with pytest.raises(EmbeddingError, match="the embedding function failed") as info:
        await store.aput(("u",), "new", {"text": "dog"})
    message = str(info.value)
    assert "Store item ('u',) / 'new'" in message
    assert "RuntimeError: model down" in message
    assert "Nothing was written" in message
    assert isinstance(info.value.__cause__, RuntimeError)
    with pytest.raises(EmbeddingError):
        await store.aput(("u",), "old", {"text": "dog"})  # an update: the old item stays
    assert await store.aget(("u",), "new") is None
    old = await store.aget(("u",), "old")
    assert old is not None
    assert old.value == {"text": "tea"}
    embedder.fail = None
    assert keys(await store.asearch(("u",), query="tea")) == ["old"]  # its vectors stayed too
    embedder.fail = RuntimeError("model down")
    with pytest.raises(EmbeddingError, match=r"Search query: .* Nothing was searched"):
        await store.asearch(("u",), query="tea")


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ([[1.0] * 3], "vector 0 has 3 numbers but the index's dims is 8"),
        ([], "0 vector(s) for 1 text(s)"),
        ([[1.0] * DIMS, [1.0] * DIMS], "2 vector(s) for 1 text(s)"),
        ([[math.nan] * DIMS], "vector 0 holds nan, not a finite number"),
        ([["1"] * DIMS], "vector 0 holds '1', not a finite number"),
        ([[True] * DIMS], "vector 0 holds True"),
        ("vectors", "expected a list of 1 vector(s), got str"),
        ([b"12345678"], "vector 0 is a bytes"),
    ],
)
async def test_an_answer_that_does_not_fit_the_index_stores_nothing(
    store: BaseStore, embedder: Embedder, answer: Any, problem: str
) -> None:
    embedder.answer = answer
    with pytest.raises(EmbeddingError, match=re.escape(problem)) as info:
        await store.aput(("u",), "k", {"text": "tea"})
    assert "Nothing was written" in str(info.value)
    assert await store.aget(("u",), "k") is None
    with pytest.raises(EmbeddingError, match=re.escape(problem)):
        await store.asearch(("u",), query="tea")


async def test_items_embedded_with_other_dims_are_reported(lasting: IndexedBackend) -> None:
    await lasting.store.aput(("u",), "k", {"text": "tea"})
    lasting.index = {"dims": DIMS + 1, "embed": lambda texts: [[*bag(t), 0.0] for t in texts]}
    changed = lasting.open()
    with pytest.raises(EmbeddingError, match=r"'k' was embedded with 8 dims, but .* has 9"):
        await changed.asearch(("u",), query="tea")
    await changed.aput(("u",), "k", {"text": "tea"})  # embedded again: searchable
    assert keys(await changed.asearch(("u",), query="tea")) == ["k"]


# -- stores without an index, bad configurations --------------------------------------------


async def test_a_store_without_an_index_refuses_a_query(tmp_path: Path) -> None:
    for name in ("memory", "sqlite"):
        found = IndexedBackend(name, tmp_path, None)
        store = found.store
        try:
            assert store.index_config is None
            await store.aput(("u",), "k", {"text": "tea"}, index=False)
            await store.aput(("u",), "j", {"text": "tea"})
            with pytest.raises(ValueError, match="needs a store made with an index"):
                await store.asearch(("u",), query="tea")
            with pytest.raises(ValueError, match="this store has no semantic index"):
                await store.aput(("u",), "k", {"text": "tea"}, index=["text"])
            assert keys(await store.asearch(("u",))) == ["j", "k"]
        finally:
            await found.close()


@pytest.mark.parametrize(
    ("index", "message"),
    [
        ({"dims": 0, "embed": bag}, "dims must be a positive int"),
        ({"dims": True, "embed": bag}, "dims must be a positive int"),
        ({"embed": bag}, "dims must be a positive int"),
        ({"dims": 2, "embed": 3}, "embed must be a function"),
        ({"dims": 2}, "embed must be a function"),
        ({"dims": 2, "embed": " "}, "embed is an empty model name"),
        (
            {"dims": 2, "embed": "openai:text-embedding-3-small"},
            "litellm, which tenxgraph calls, names that model 'openai/text-embedding-3-small'",
        ),
        ({"dims": 2, "embed": bag, "fields": []}, "non-empty list of field paths"),
        ({"dims": 2, "embed": bag, "fields": "text"}, "non-empty list of field paths"),
        ({"dims": 2, "embed": bag, "fields": ["a..b"]}, "field path 'a..b'"),
        ({"dims": 2, "embed": bag, "distance": "l2"}, "unknown keys ['distance']"),
        ([2, bag], "index must be a dict"),
    ],
)
def test_bad_index_configurations_are_refused(index: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        InMemoryStore(index=index)


async def test_bad_queries_and_index_arguments_are_refused(store: BaseStore) -> None:
    with pytest.raises(ValueError, match="query must be a non-empty str"):
        await store.asearch(("u",), query="")
    with pytest.raises(ValueError, match="query must be a non-empty str"):
        await store.asearch(("u",), query=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="index must be a non-empty list of field paths"):
        await store.aput(("u",), "k", {}, index=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="field path 'a\\['"):
        await store.aput(("u",), "k", {}, index=["a["])
    assert await store.aget(("u",), "k") is None


# -- the forms of `embed` -------------------------------------------------------------------


async def test_sync_async_and_langchain_style_embedders() -> None:
    loop_thread = threading.get_ident()
    sync = Embedder()
    store = InMemoryStore(index={"dims": DIMS, "embed": sync})
    await store.aput(("u",), "k", {"t": "tea"}, index=["t"])
    assert sync.threads  # it ran, in a worker thread:
    assert loop_thread not in sync.threads

    async def async_embed(texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(0)
        return [bag(text) for text in texts]

    class LangChainLike:
        def __init__(self) -> None:
            self.queries: list[str] = []

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            return [bag(text) for text in texts]

        async def aembed_query(self, text: str) -> list[float]:
            self.queries.append(text)
            return bag(text)

    class SyncOnly:
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [bag(text) for text in texts]

    like = LangChainLike()
    for embed in (async_embed, like, SyncOnly(), lambda texts: [bag(t) for t in texts]):
        store = InMemoryStore(index={"dims": DIMS, "embed": embed, "fields": ["t"]})
        await store.aput(("u",), "dog", {"t": "dog"})
        await store.aput(("u",), "tea", {"t": "tea"})
        assert keys(await store.asearch(("u",), query="a dog")) == ["dog", "tea"]
    assert like.queries == ["a dog"]


def test_the_sync_twins_take_index_and_query(backend: IndexedBackend) -> None:
    store = backend.store
    store.put(("u",), "tea", {"text": "tea"})
    store.put(("u",), "dog", {"text": "dog"}, index=False)
    store.put(("u",), "cat", {"text": "cat"}, ["text"])
    assert keys(store.search(("u",), query="tea")) == ["tea", "cat"]
    assert keys(store.search(("u",), query="tea", filter={"text": "cat"})) == ["cat"]
    assert store.index_config is not None
    assert store.index_config["dims"] == DIMS


# -- schema ---------------------------------------------------------------------------------


async def test_version_1_tables_gain_the_vectors_column(lasting: IndexedBackend) -> None:
    if lasting.name == "postgres":
        await lasting.sql(f'CREATE SCHEMA "{lasting.schema}"')
    await lasting.sql(
        "CREATE TABLE tx_store_items (namespace TEXT NOT NULL, key TEXT NOT NULL, "
        "value TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL, "
        "PRIMARY KEY (namespace, key))"
        if lasting.name == "sqlite"
        else 'CREATE TABLE tx_store_items (namespace TEXT COLLATE "C" NOT NULL, '
        'key TEXT COLLATE "C" NOT NULL, value TEXT NOT NULL, created_at DOUBLE PRECISION '
        "NOT NULL, updated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (namespace, key))"
    )
    await lasting.sql("CREATE TABLE tx_store_schema_version (version INTEGER NOT NULL)")
    await lasting.sql("INSERT INTO tx_store_schema_version VALUES (1)")
    await lasting.sql("INSERT INTO tx_store_items VALUES ('u', 'old', '{\"text\": \"tea\"}', 1, 1)")
    store = lasting.store
    old = await store.aget(("u",), "old")
    assert old is not None
    assert old.value == {"text": "tea"}
    assert await lasting.sql("SELECT version FROM tx_store_schema_version") == [(2,)]
    await store.aput(("u",), "new", {"text": "tea"})
    assert keys(await store.asearch(("u",), query="tea")) == ["new"]  # the old one: no vectors
    assert keys(await store.asearch(("u",))) == ["new", "old"]


# -- list_namespaces wildcards --------------------------------------------------------------


async def test_list_namespaces_wildcards(store: BaseStore) -> None:
    for namespace in (
        ("users", "u1", "notes"),
        ("users", "u2", "notes"),
        ("users", "u2", "todo"),
        ("users", "u3"),
        ("teams", "t1", "notes"),
        ("*",),
    ):
        await store.aput(namespace, "k", {}, index=False)
    assert await store.alist_namespaces(prefix=("users", "*", "notes")) == [
        ("users", "u1", "notes"),
        ("users", "u2", "notes"),
    ]
    assert await store.alist_namespaces(prefix=("*", "*", "notes")) == [
        ("teams", "t1", "notes"),
        ("users", "u1", "notes"),
        ("users", "u2", "notes"),
    ]
    assert await store.alist_namespaces(suffix=("u2", "*")) == [
        ("users", "u2", "notes"),
        ("users", "u2", "todo"),
    ]
    assert await store.alist_namespaces(prefix=("users", "*"), suffix=("*",), max_depth=2) == [
        ("users", "u1"),
        ("users", "u2"),
        ("users", "u3"),
    ]
    assert await store.alist_namespaces(prefix=("*",), suffix=("*", "*", "*")) == [
        ("teams", "t1", "notes"),
        ("users", "u1", "notes"),
        ("users", "u2", "notes"),
        ("users", "u2", "todo"),
    ]


# -- a litellm model name -------------------------------------------------------------------

EMBEDDINGS_URL = "https://api.openai.com/v1/embeddings"
SECRET = "sk-test-embeddings-0123456789abcdef"


async def test_a_litellm_model_name_embeds_through_the_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json

    import httpx
    import respx

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        data = [
            {"object": "embedding", "index": n, "embedding": bag(text)}
            for n, text in reversed(list(enumerate(body["input"])))  # any order: by index
        ]
        usage = {"prompt_tokens": 3, "total_tokens": 3}
        return httpx.Response(
            200, json={"object": "list", "data": data, "model": body["model"], "usage": usage}
        )

    index: IndexConfig = {
        "dims": DIMS,
        "embed": "openai/text-embedding-3-small",
        "fields": ["a", "b"],
    }
    store = InMemoryStore(index=index)
    with respx.mock(using="httpx", assert_all_called=True) as mock:
        route = mock.post(EMBEDDINGS_URL).mock(side_effect=answer)
        await store.aput(("u",), "k", {"a": "dog", "b": "tea tea"})
        await store.aput(("u",), "j", {"a": "rain"})
        found = await store.asearch(("u",), query="my tea")
        assert route.call_count == 3
        assert route.calls[0].request.headers["authorization"] == f"Bearer {SECRET}"
    assert [body["input"] for body in sent] == [["dog", "tea tea"], ["rain"], ["my tea"]]
    assert {body["model"] for body in sent} == {"text-embedding-3-small"}
    assert keys(found) == ["k", "j"]
    assert found[0].score == pytest.approx(1.0)


async def test_a_litellm_provider_error_stores_nothing_and_shows_no_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import httpx
    import respx

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    store = InMemoryStore(index={"dims": DIMS, "embed": "openai/text-embedding-3-small"})
    refusal = {"error": {"message": f"Incorrect API key provided: {SECRET}", "type": "auth"}}
    with respx.mock(using="httpx") as mock:
        mock.post(EMBEDDINGS_URL).mock(return_value=httpx.Response(401, json=refusal))
        with pytest.raises(EmbeddingError, match="AuthenticationError") as info:
            await store.aput(("u",), "k", {"text": "tea"})
    assert "Check the model name 'openai/text-embedding-3-small' and the provider's API key" in str(
        info.value
    )
    assert info.value.context["status_code"] == 401
    assert SECRET not in str(info.value)
    assert SECRET not in str(info.value.__cause__)
    assert "Nothing was written" in str(info.value)
    assert await store.aget(("u",), "k") is None


def test_scores_stay_within_minus_one_and_one() -> None:
    """float32 storage rounds: an item equal to the query would score 1.0000001 about half
    the time without the bounds."""
    import random

    from tenxgraph.storage.store._vectors import best_score, pack, unit

    rng = random.Random(7)
    for _ in range(200):
        vector = [rng.uniform(-1, 1) for _ in range(rng.randint(2, 50))]
        blob = pack([vector], len(vector))
        same = best_score(unit(vector), blob)
        opposite = best_score(unit([-x for x in vector]), blob)
        assert 1.0 - 1e-6 <= same <= 1.0
        assert -1.0 <= opposite <= -1.0 + 1e-6
    assert best_score([1.0, 0.0, 0.0], pack([[0.0, 0.0, 0.0]], 3)) == 0.0  # a zero vector


# -- a batch of puts ------------------------------------------------------------------------


async def test_put_many_embeds_the_batch_in_one_call(store: BaseStore, embedder: Embedder) -> None:
    await store.aput_many(
        [
            (("u",), "tea", {"text": "tea"}),
            (("u", "x"), "dog", {"text": "my dog", "n": 1}),
            (("u",), "blank", {"text": "  "}),
            (("u",), "many", {"text": "rain", "also": "sun"}),
        ],
        index=["text", "also"],
    )
    assert embedder.calls == [["tea", "my dog", "rain", "sun"]]
    assert keys(await store.asearch(("u",))) == ["many", "blank", "dog", "tea"]
    assert keys(await store.asearch(("u",), query="dog")) == ["dog", "many", "tea"]
    assert scores(await store.asearch(("u",), query="sun", limit=1)) == [1.0]
    item = await store.aget(("u", "x"), "dog")
    assert item is not None
    assert item.value == {"text": "my dog", "n": 1}
    calls = len(embedder.calls)  # the batch's one call, then the queries'
    await store.aput_many([])  # nothing to do
    assert len(embedder.calls) == calls


async def test_put_many_writes_nothing_when_an_item_or_the_embedder_fails(
    store: BaseStore, embedder: Embedder
) -> None:
    batch: list[Any] = [(("v",), "a", {"text": "tea"}), (("v",), "b", {"text": "dog"})]
    embedder.fail = RuntimeError("model down")
    with pytest.raises(EmbeddingError, match=r"2 store items \(the first \('v',\) / 'a'\)"):
        await store.aput_many(batch)
    embedder.fail = None
    calls = len(embedder.calls)
    from tenxgraph.core.exceptions import SerializationError

    with pytest.raises(SerializationError, match="field 'x'"):
        await store.aput_many([*batch, (("v",), "c", {"x": math.inf})])
    with pytest.raises(ValueError, match=r"items\[1\] must be a \(namespace, key, value\)"):
        await store.aput_many([batch[0], ("v", "k")])
    with pytest.raises(ValueError, match="must not be empty"):
        await store.aput_many([batch[0], (("v",), "", {})])
    assert len(embedder.calls) == calls  # refused before any embedding call
    assert await store.asearch(("v",)) == []


async def test_put_many_is_one_transaction(lasting: IndexedBackend) -> None:
    """A write the database refuses part way through the batch leaves none of it."""
    await lasting.store.asetup()
    if lasting.name == "sqlite":
        await lasting.sql(
            "CREATE TRIGGER refuse BEFORE INSERT ON tx_store_items WHEN NEW.key = 'bad' "
            "BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
    else:
        await lasting.sql(
            "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'refused'; "
            "END $$ LANGUAGE plpgsql"
        )
        await lasting.sql(
            "CREATE TRIGGER refuse BEFORE INSERT ON tx_store_items FOR EACH ROW "
            "WHEN (NEW.key = 'bad') EXECUTE FUNCTION refuse()"
        )
    batch: list[Any] = [(("u",), "good", {"text": "tea"}), (("u",), "bad", {"text": "dog"})]
    with pytest.raises(Exception, match="refused"):
        await lasting.store.aput_many(batch)
    assert await lasting.store.asearch(("u",)) == []
    await lasting.store.aput_many(batch[:1])
    assert keys(await lasting.store.asearch(("u",), query="tea")) == ["good"]


def test_put_many_sync_twin_and_a_store_without_an_index() -> None:
    store = InMemoryStore()
    store.put_many([(("u",), "a", {"v": 1}), (["u"], "b", {"v": 2})], index=False)
    assert keys(store.search(("u",))) == ["b", "a"]
    with pytest.raises(ValueError, match="this store has no semantic index"):
        store.put_many([(("u",), "c", {"v": 3})], index=["v"])
    with pytest.raises(ValueError, match="items must be a list"):
        store.put_many("abc")  # type: ignore[arg-type]
    assert store.get(("u",), "c") is None
