"""`BaseStore`: memories that outlive a thread, as JSON values under namespaced keys.

A checkpointer keeps one thread's state; a store keeps what every thread may read and write:
a user's preferences, facts an agent learnt, shared notes. Items live under a namespace (a
tuple of labels, e.g. ("users", "u-42", "memories")) and a key; a search lists the items
under a namespace prefix, newest first.

Every store checks what it is given before it reads or writes (`_values`): the namespace,
the key, and that the value reads back equal; otherwise `ValueError` or
`SerializationError`, naming what is wrong, and nothing is written. A store subclass
implements six small methods on checked, encoded data (`_write`, `_read`, `_remove`,
`_rows`, `_vector_rows`, `_namespace_texts`); the checks, the filter, the semantic ranking
and the sync twins live here, once.

A store made with `index={...}` (`index.IndexConfig`) embeds each item as it is put and keeps
its vectors with it (`_vectors`); `asearch(prefix, query=...)` then ranks the items under the
prefix by cosine similarity to the query, in Python, over every indexed item under the
prefix: a query costs O(items under the prefix), not an index lookup.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tenxgraph.core.exceptions import EmbeddingError, SerializationError
from tenxgraph.core.state._depth import format_path
from tenxgraph.storage.checkpointer._json_values import plain_problem
from tenxgraph.storage.store._values import (
    Namespace,
    check_size,
    decode_value,
    encode_value,
    join,
    split,
    valid_key,
    valid_namespace,
)
from tenxgraph.storage.store._vectors import best_score, blob_dims, pack, unit
from tenxgraph.storage.store.index import IndexArg, IndexConfig, SemanticIndex
from tenxgraph.utils.sync_bridge import read_blocking

T = TypeVar("T")

#: when a write happens (seconds since the epoch); tests set a clock of their own
_clock = time.time

#: one stored row: (namespace text, key, value JSON, created_at, updated_at)
Row = tuple[str, str, str, float, float]
#: a row with its vectors' blob (`_vectors`)
VectorRow = tuple[str, str, str, float, float, bytes]


@dataclass(frozen=True, slots=True)
class Item:
    """One stored memory. `value` is a fresh dict at every read: changing it changes nothing
    stored (`aput` it back for that). Times are seconds since the epoch (`time.time()`)."""

    namespace: Namespace
    key: str
    value: dict[str, Any]
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class SearchItem(Item):
    """An item found by `asearch`. `score` is the cosine similarity of its closest embedded
    text to the query (higher is closer, at most 1.0), or None for a search without one."""

    score: float | None = None


def _item(row: Sequence[Any]) -> Item:
    namespace = split(row[0])
    return Item(namespace, row[1], decode_value(namespace, row[1], row[2]), row[3], row[4])


class BaseStore(ABC):
    """Keeps JSON values under (namespace, key). Async methods, each with a sync twin that
    runs it on tenxgraph's own loop thread (for scripts and sync nodes and tools)."""

    #: the semantic index given as `index=` (None: searches take no query)
    _index: SemanticIndex | None = None

    def _set_index(self, index: IndexConfig | None) -> None:
        """Check and keep a store's `index=` argument (each store's `__init__` calls it)."""
        self._index = None if index is None else SemanticIndex(index)

    @property
    def index_config(self) -> IndexConfig | None:
        """The `index` this store was made with, or None."""
        return None if self._index is None else self._index.config

    # -- lifecycle -------------------------------------------------------------------------

    async def asetup(self) -> None:  # noqa: B027 - optional hook
        """Create tables or files. Safe to call more than once (first use also does it)."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections and files. The store reopens on its next use."""

    # -- what a backend implements, on checked and encoded data -----------------------------

    @abstractmethod
    async def _write(
        self, namespace: str, key: str, value: str, now: float, vectors: bytes | None
    ) -> None:
        """Insert, or replace the value, the vectors and `updated_at` of (keeping
        `created_at`), in one write."""

    @abstractmethod
    async def _write_many(self, rows: list[tuple[str, str, str, float, bytes | None]]) -> None:
        """`_write` of each (namespace, key, value, now, vectors), in order, in one
        transaction."""

    @abstractmethod
    async def _read(self, namespace: str, key: str) -> Row | None:
        """The row of (namespace, key), or None."""

    @abstractmethod
    async def _remove(self, namespace: str, key: str) -> None:
        """Delete the row of (namespace, key), if any."""

    @abstractmethod
    async def _rows(self, prefix: Namespace, limit: int | None, offset: int) -> list[Row]:
        """The rows whose namespace is `prefix` or under it (all for `()`), ordered by
        updated_at descending, then key, then namespace; `limit` None: all of them."""

    @abstractmethod
    async def _vector_rows(self, prefix: Namespace) -> list[VectorRow]:
        """The rows under `prefix` (as `_rows`, in any order) that have vectors, with them."""

    @abstractmethod
    async def _namespace_texts(self, prefix: Namespace) -> list[str]:
        """The distinct stored namespace texts equal to `prefix` or under it."""

    # -- the API ---------------------------------------------------------------------------

    async def aput(
        self,
        namespace: Sequence[str],
        key: str,
        value: dict[str, Any],
        index: IndexArg = None,
    ) -> None:
        """Store `value` under (namespace, key), replacing any value there (`created_at` stays,
        `updated_at` moves). `SerializationError` (naming the field) for a value that would
        not read back equal; nothing is written then.

        On a store with an index, the value is embedded first (its `fields`, or the paths in
        `index`; `index=False` stores it without vectors, out of query searches) and its
        vectors replace the old ones in the same write; an `EmbeddingError` writes nothing."""
        checked = valid_namespace(namespace)
        key = valid_key(key)
        check_size(checked, key)
        text = encode_value(checked, key, value)
        what = f"Store item {checked!r} / {key!r}"
        [vectors] = await self._embed([value], index, what)
        await self._write(join(checked), key, text, _clock(), vectors)

    async def aput_many(
        self,
        items: Sequence[tuple[Sequence[str], str, dict[str, Any]]],
        index: IndexArg = None,
    ) -> None:
        """Put each (namespace, key, value) of `items`, in order, as `aput` would, in one
        transaction: all of them or, on any error, none. On a store with an index, every
        item's texts go to the embedding function in one call."""
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise ValueError("items must be a list of (namespace, key, value) tuples")
        checked: list[tuple[str, str, str]] = []
        for n, item in enumerate(items):
            if not isinstance(item, tuple | list) or len(item) != 3:
                raise ValueError(f"items[{n}] must be a (namespace, key, value) tuple")
            namespace, key = valid_namespace(item[0]), valid_key(item[1])
            check_size(namespace, key)
            checked.append((join(namespace), key, encode_value(namespace, key, item[2])))
        if not checked:
            return
        first = f"{split(checked[0][0])!r} / {checked[0][1]!r}"
        what = f"{len(checked)} store items (the first {first})"
        blobs = await self._embed([item[2] for item in items], index, what)
        rows = [(*item, _clock(), blob) for item, blob in zip(checked, blobs, strict=True)]
        await self._write_many(rows)

    async def _embed(
        self, values: list[dict[str, Any]], index: IndexArg, what: str
    ) -> list[bytes | None]:
        """The vectors' blob of each value about to be put, or None (not indexed)."""
        if self._index is None:
            if index is None or index is False:
                return [None] * len(values)
            raise ValueError(
                f"aput(..., index={index!r:.60}): this store has no semantic index; create it "
                "with index={'dims': ..., 'embed': ...} to embed items, or leave index out"
            )
        paths = self._index.paths_for(index)
        if paths is None:
            return [None] * len(values)
        found = await self._index.embed_values(values, paths, what)
        return [pack(vectors, self._index.dims) if vectors else None for vectors in found]

    async def aget(self, namespace: Sequence[str], key: str) -> Item | None:
        """The item under (namespace, key), or None."""
        row = await self._read(join(valid_namespace(namespace)), valid_key(key))
        return None if row is None else _item(row)

    async def adelete(self, namespace: Sequence[str], key: str) -> None:
        """Delete the item under (namespace, key); nothing happens when there is none."""
        await self._remove(join(valid_namespace(namespace)), valid_key(key))

    async def asearch(
        self,
        namespace_prefix: Sequence[str],
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[SearchItem]:
        """The items whose namespace starts with `namespace_prefix` (whole labels: ("a",)
        matches ("a", "b"), never ("ab",); `()` matches every item), newest `updated_at`
        first, then by key. `filter` keeps the items whose value has each of its top-level
        fields equal as JSON (1 matches 1, not 1.0 or True). With a filter, the matching is
        done here, over every item under the prefix; `limit` and `offset` count matches.

        With a `query` (a store with an index only), the items under the prefix that have
        vectors are ranked by their `score` against the query's, highest first."""
        prefix = valid_namespace(namespace_prefix, allow_empty=True)
        _check_page(limit, offset)
        wanted = None if filter is None else _canonical_filter(filter)
        if query is not None:
            return await self._ranked(prefix, query, wanted, limit, offset)
        if wanted is None:
            return [_found(row, None) for row in await self._rows(prefix, limit, offset)]
        if limit == 0:
            return []
        rows = await self._rows(prefix, None, 0)
        return _page((_found(row, None) for row in rows), wanted, limit, offset)

    async def _ranked(
        self,
        prefix: Namespace,
        query: str,
        wanted: list[tuple[str, str]] | None,
        limit: int,
        offset: int,
    ) -> list[SearchItem]:
        """A query search: every indexed row under `prefix` scored, the best page kept."""
        index = self._index
        if index is None:
            raise ValueError(
                "search(..., query=...) ranks items by meaning, which needs a store made with "
                "an index: e.g. InMemoryStore(index={'dims': 1536, 'embed': "
                "'openai/text-embedding-3-small'}); or search without query"
            )
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query must be a non-empty str (or None), not {query!r:.60}")
        if limit == 0:
            return []
        target = unit(await index.embed_query(query))
        scored: list[tuple[float, VectorRow]] = []
        for row in await self._vector_rows(prefix):
            if blob_dims(row[5]) != index.dims:
                raise EmbeddingError(
                    f"Store item {split(row[0])!r} / {row[1]!r} was embedded with "
                    f"{blob_dims(row[5])} dims, but this store's index has {index.dims}: put "
                    "it again to embed it with this index. Nothing was searched.",
                    context={"namespace": list(split(row[0])), "key": row[1]},
                )
            scored.append((best_score(target, row[5]), row))
        scored.sort(key=lambda pair: (-pair[0], -pair[1][4], pair[1][1], pair[1][0]))
        return _page((_found(row, score) for score, row in scored), wanted, limit, offset)

    async def alist_namespaces(
        self,
        *,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """The namespaces holding items, sorted: those starting with `prefix` and ending with
        `suffix` (whole labels; a `"*"` label matches any one label), each cut to its first
        `max_depth` labels (duplicates removed after the cut), then `offset` and `limit`."""
        start = valid_namespace(prefix or (), allow_empty=True)
        end = valid_namespace(suffix or (), allow_empty=True)
        if max_depth is not None and (type(max_depth) is not int or max_depth < 1):
            raise ValueError(f"max_depth must be a positive int or None, got {max_depth!r}")
        _check_page(limit, offset)
        fixed = start[: start.index(WILDCARD)] if WILDCARD in start else start
        found: set[Namespace] = set()
        for text in await self._namespace_texts(fixed):
            namespace = split(text)
            if not _fits(namespace[: len(start)], start):
                continue
            if end and not _fits(namespace[max(0, len(namespace) - len(end)) :], end):
                continue
            found.add(namespace if max_depth is None else namespace[:max_depth])
        return sorted(found)[offset : offset + limit]

    # -- sync twins ------------------------------------------------------------------------

    def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: dict[str, Any],
        index: IndexArg = None,
    ) -> None:
        """`aput`, blocking (from synchronous code; never from the event loop's own thread)."""
        self._blocking(self.aput(namespace, key, value, index))

    def put_many(
        self,
        items: Sequence[tuple[Sequence[str], str, dict[str, Any]]],
        index: IndexArg = None,
    ) -> None:
        """`aput_many`, blocking."""
        self._blocking(self.aput_many(items, index))

    def get(self, namespace: Sequence[str], key: str) -> Item | None:
        """`aget`, blocking."""
        return self._blocking(self.aget(namespace, key))

    def delete(self, namespace: Sequence[str], key: str) -> None:
        """`adelete`, blocking."""
        self._blocking(self.adelete(namespace, key))

    def search(
        self,
        namespace_prefix: Sequence[str],
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[SearchItem]:
        """`asearch`, blocking."""
        return self._blocking(
            self.asearch(namespace_prefix, query=query, filter=filter, limit=limit, offset=offset)
        )

    def list_namespaces(
        self,
        *,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """`alist_namespaces`, blocking."""
        return self._blocking(
            self.alist_namespaces(
                prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit, offset=offset
            )
        )

    def _blocking(self, call: Coroutine[Any, Any, T]) -> T:
        """`call` run on tenxgraph's read loop thread, waited for; that loop closes this store
        (what it opened there) at exit."""
        return read_blocking(self, call)


def _check_page(limit: int, offset: int) -> None:
    if type(limit) is not int or limit < 0:
        raise ValueError(f"limit must be an int >= 0, got {limit!r}")
    if type(offset) is not int or offset < 0:
        raise ValueError(f"offset must be an int >= 0, got {offset!r}")


#: a label of `list_namespaces`' prefix or suffix that matches any one label
WILDCARD = "*"


def _fits(labels: Namespace, pattern: Namespace) -> bool:
    """Whether `labels` are `pattern`'s, label by label, a `"*"` matching any."""
    return len(labels) == len(pattern) and all(
        want in (WILDCARD, label) for label, want in zip(labels, pattern, strict=True)
    )


def _found(row: Sequence[Any], score: float | None) -> SearchItem:
    namespace = split(row[0])
    value = decode_value(namespace, row[1], row[2])
    return SearchItem(namespace, row[1], value, row[3], row[4], score)


def _page(
    items: Iterable[SearchItem], wanted: list[tuple[str, str]] | None, limit: int, offset: int
) -> list[SearchItem]:
    """The page `offset`..`offset + limit` of the `items` that match `wanted` (all: None),
    read no further than that page's end."""
    found: list[SearchItem] = []
    for item in items:
        if wanted is None or _matches(item.value, wanted):
            found.append(item)
            if len(found) == offset + limit:
                break
    return found[offset:]


def _matches(value: dict[str, Any], wanted: list[tuple[str, str]]) -> bool:
    return all(k in value and _canonical(value[k]) == v for k, v in wanted)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _canonical_filter(filter: dict[str, Any]) -> list[tuple[str, str]]:
    """The filter's fields with their JSON texts; its values are checked like a stored
    value's (a NaN or a set could never match anything stored)."""
    if not isinstance(filter, dict):
        raise ValueError(f"filter must be a dict of field values, not {type(filter).__name__}")
    problem = plain_problem(filter, 1)
    if problem is not None:
        field = format_path(problem.path)
        raise SerializationError(
            f"Search filter: field {field!r}: {problem.reason}; no stored value could match it",
            context={"field": field},
        )
    return [(field, _canonical(value)) for field, value in filter.items()]


__all__ = ["WILDCARD", "BaseStore", "Item", "Row", "SearchItem", "VectorRow"]
