"""The SQL both SQL stores share: the table `tx_store_items` (and `tx_store_schema_version`,
its version), next to the checkpointer's tables (the same SQLite file or PostgreSQL schema
may hold both; their names never clash).

A namespace is stored as its labels joined by "/" (no label holds one), so a prefix search
is a range of the primary key (namespace, key): "a/b" itself, or "a/b/" <= namespace <
"a/b0". Values are JSON text, never a JSON column type, so they read back exactly as they
were written (PostgreSQL's jsonb would reorder keys and rewrite numbers). An item's vectors
(`_vectors`; NULL when it has none) are a binary column of its row, written with its value
in one statement: an item and its vectors never disagree.

Versions: 1, the first tables; 2, the `vectors` column (added to version 1 tables when a
store opens them).
"""

from __future__ import annotations

from tenxgraph.core.exceptions import SchemaVersionError
from tenxgraph.storage.store._values import Namespace, join, prefix_range

TABLE = "tx_store_items"
#: the table recording the version of the store's tables (the checkpointer has its own), so
#: that a later tenxgraph can migrate them and an older one refuses what it cannot read
VERSION_TABLE = "tx_store_schema_version"
#: the version of the store's tables this code writes; bump it with a migration
STORE_SCHEMA_VERSION = 2

_ORDER = "ORDER BY updated_at DESC, key, namespace"


def where_under(prefix: Namespace, placeholder: str = "?") -> tuple[str, list[str]]:
    """The WHERE clause (with its parameters) for namespaces equal to `prefix` or under it.
    `placeholder` is "?" (SQLite) or "${}" (PostgreSQL, numbered from 1)."""
    bounds = prefix_range(prefix)
    if bounds is None:
        return "", []
    marks = [placeholder.format(n) for n in (1, 2, 3)]
    clause = (
        f"WHERE (namespace = {marks[0]} OR (namespace >= {marks[1]} AND namespace < {marks[2]}))"
    )
    return clause, [join(prefix), *bounds]


def rows_query(
    prefix: Namespace, limit: int | None, offset: int, placeholder: str = "?"
) -> tuple[str, list[object]]:
    """The query of `_rows`, with its parameters."""
    where, params = where_under(prefix, placeholder)
    args: list[object] = list(params)
    page = ""
    if limit is not None:
        n = len(args)
        page = f" LIMIT {placeholder.format(n + 1)} OFFSET {placeholder.format(n + 2)}"
        args += [limit, offset]
    elif offset:
        raise AssertionError("an offset without a limit is applied by the caller")
    query = (
        f"SELECT namespace, key, value, created_at, updated_at FROM {TABLE} {where} {_ORDER}{page}"
    )
    return query, args


def vector_rows_query(prefix: Namespace, placeholder: str = "?") -> tuple[str, list[str]]:
    """The query of `_vector_rows`, with its parameters."""
    where, params = where_under(prefix, placeholder)
    where = f"{where} AND vectors IS NOT NULL" if where else "WHERE vectors IS NOT NULL"
    query = f"SELECT namespace, key, value, created_at, updated_at, vectors FROM {TABLE} {where}"
    return query, params


def namespaces_query(prefix: Namespace, placeholder: str = "?") -> tuple[str, list[str]]:
    """The query of `_namespace_texts`, with its parameters."""
    where, params = where_under(prefix, placeholder)
    return f"SELECT DISTINCT namespace FROM {TABLE} {where} ORDER BY namespace", params


def check_version(where: str, found: int | None) -> None:
    """Refuse tables written by a newer tenxgraph (`SchemaVersionError`, saying what to do)."""
    if found is not None and found > STORE_SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where} has store schema version {found}, but this tenxgraph only understands "
            f"versions up to {STORE_SCHEMA_VERSION}: it was written by a newer tenxgraph. "
            "Upgrade tenxgraph (pip install -U tenxgraph) to use it.",
            context={"found": found, "supported": STORE_SCHEMA_VERSION},
        )


__all__ = [
    "STORE_SCHEMA_VERSION",
    "TABLE",
    "VERSION_TABLE",
    "check_version",
    "namespaces_query",
    "rows_query",
    "vector_rows_query",
    "where_under",
]
