"""Which media store a graph uses when `compile(media_store=...)` names none: one in the
checkpointer's own storage, so that media lives and dies with the threads naming it.

| checkpointer                       | default media store                           |
|------------------------------------|-----------------------------------------------|
| `InMemoryCheckpointer` (default)   | `InMemoryMediaStore()`                        |
| `SqliteCheckpointer(path)`         | `SqliteMediaStore(path)`: the same file       |
| `SqliteCheckpointer(":memory:")`   | `InMemoryMediaStore()`                        |
| `PgCheckpointer(dsn or pool)`      | `PostgresMediaStore`: same DSN/pool and schema |
| any other, or none                 | none: media stays inline                      |

The store is remembered on the checkpointer (`checkpointer.media_store`), so that every
graph compiled with it shares it and `adelete_thread` releases the thread's media.
"""

from __future__ import annotations

from typing import Any

from tenxgraph.storage.media.base import MediaStore


def default_media_store(checkpointer: Any) -> MediaStore | None:
    """The checkpointer's media store: the one it holds, else a new default (see above),
    which it then holds."""
    if checkpointer is None or checkpointer is False:
        return None
    held = getattr(checkpointer, "media_store", None)
    if held is not None:
        return held  # type: ignore[no-any-return]
    store = _made_for(checkpointer)
    if store is not None:
        checkpointer.media_store = store
    return store


def _made_for(checkpointer: Any) -> MediaStore | None:
    built_in = {  # the built-in stores it is (or derives from), by name: none is imported
        c.__name__
        for c in type(checkpointer).__mro__
        if c.__module__.startswith("tenxgraph.storage.checkpointer.")
    }
    if "InMemoryCheckpointer" in built_in or (
        "SqliteCheckpointer" in built_in and checkpointer.db_path is None
    ):
        from tenxgraph.storage.media.memory import InMemoryMediaStore

        return InMemoryMediaStore()
    if "SqliteCheckpointer" in built_in:
        from tenxgraph.storage.media.sqlite import SqliteMediaStore

        return SqliteMediaStore(checkpointer.db_path)
    if "PgCheckpointer" in built_in:
        from tenxgraph.storage.media.postgres import PostgresMediaStore

        pool = checkpointer._external_pool
        if pool is not None:
            return PostgresMediaStore(pool=pool, schema=checkpointer.schema)
        return PostgresMediaStore(checkpointer._dsn, schema=checkpointer.schema)
    return None


__all__ = ["default_media_store"]
