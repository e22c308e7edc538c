"""`tenxgraph media gc`: delete the media blobs no thread owns (bytes put in a media store but
never saved into a thread, e.g. a `Message.with_image` never sent) once they are older than a
grace period, in a SQLite file or a PostgreSQL database: the store's `agc(older_than=...)`.

A database without media tables has nothing to delete and is left as it is (no table is
created); one that is not a tenxgraph database is refused, as by `tenxgraph threads`.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from tenxgraph.cli._console import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Console,
    existing_db,
)
from tenxgraph.cli.threads import redacted_dsn
from tenxgraph.storage.media.base import DEFAULT_GC_GRACE, MediaStore, StoredMedia

_DSN_PREFIXES = ("postgresql://", "postgres://")


@dataclass(frozen=True, slots=True)
class _Media:
    """Where the blobs are: a SQLite file or a PostgreSQL DSN and schema, named for messages
    without a password."""

    where: str
    path: str | None = None
    dsn: str | None = None
    schema: str = "public"

    def store(self) -> MediaStore:
        if self.dsn is not None:
            from tenxgraph.storage.media.postgres import PostgresMediaStore

            return PostgresMediaStore(self.dsn, schema=self.schema, min_size=1, max_size=2)
        from tenxgraph.storage.media.sqlite import SqliteMediaStore

        assert self.path is not None
        return SqliteMediaStore(self.path)


def command(args: argparse.Namespace, console: Console) -> int:
    older_than = DEFAULT_GC_GRACE if args.older_than is None else float(args.older_than)
    media = _media(args)
    return asyncio.run(_gc(console, media, older_than, bool(args.dry_run)))


def _media(args: argparse.Namespace) -> _Media:
    db, dsn = getattr(args, "db", None), getattr(args, "dsn", None)
    schema = getattr(args, "schema", None)
    if db is not None and db.startswith(_DSN_PREFIXES):
        db, dsn = (None, db) if dsn is None else (db, dsn)
    if dsn is None:
        if schema is not None:
            raise CliError("--schema goes with a PostgreSQL database (--dsn)", EXIT_USAGE)
        path = existing_db(db)
        return _Media(str(path), path=str(path))
    if db is not None:
        raise CliError("pass either --db (SQLite) or --dsn (PostgreSQL), not both", EXIT_USAGE)
    from tenxgraph.storage.checkpointer._pg_pools import check_schema

    schema = schema or "public"
    try:
        check_schema(schema)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    where = redacted_dsn(dsn) + ("" if schema == "public" else f" (schema {schema})")
    return _Media(where, dsn=dsn, schema=schema)


async def _gc(console: Console, media: _Media, older_than: float, dry_run: bool) -> int:
    if not await _has_media_tables(media):
        console.line(f"No media in {media.where}: nothing to delete.")
        return EXIT_OK
    store = media.store()
    try:
        sweepable = await store.asweepable(older_than=older_than)
        if dry_run:
            now = time.time()
            for info in sweepable:
                age = _duration(now - info.created_at)
                console.line(
                    f"{info.sha256}  {_size(info.size_bytes)}  {info.mime_type}  {age} old"
                )
            deleted = sweepable
        else:
            sizes = {info.sha256: info for info in sweepable}
            gone = await store.agc(older_than=older_than)
            deleted = [sizes.get(sha) or StoredMedia(sha, 0, "", 0.0) for sha in gone]
    finally:
        await store.aclose()
    verb = "Would delete" if dry_run else "Deleted"
    count = len(deleted)
    console.line(
        f"{verb} {count} media blob{'' if count == 1 else 's'} no thread owns "
        f"({_size(sum(i.size_bytes for i in deleted))}) stored more than "
        f"{_duration(older_than)} ago, from {media.where}."
    )
    return EXIT_OK


async def _has_media_tables(media: _Media) -> bool:
    """Whether the database holds a media store (asked without creating anything); a
    PostgreSQL database without tenxgraph tables is refused."""
    if media.dsn is None:
        conn = sqlite3.connect(str(media.path))
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tx_media_blobs'"
            ).fetchone()
        finally:
            conn.close()
        return found is not None
    import asyncpg  # type: ignore[import-untyped]

    try:
        conn_pg = await asyncpg.connect(media.dsn, timeout=10)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        message = str(exc)
        password = urlsplit(media.dsn).password if "://" in media.dsn else None
        if password:
            message = message.replace(password, "***")
        raise CliError(f"Cannot connect to PostgreSQL at {media.where}: {message}") from None
    try:
        tables = [f'"{media.schema}".{name}' for name in ("tx_schema_version", "tx_media_blobs")]
        ours, blobs = [await conn_pg.fetchval("SELECT to_regclass($1)", t) for t in tables]
    finally:
        await conn_pg.close()
    if ours is None and blobs is None:
        raise CliError(
            f"No tenxgraph database at {media.where}: schema {media.schema!r} has no tenxgraph "
            "tables (pass --schema if they are in another one)",
            EXIT_NOT_FOUND,
        )
    return blobs is not None


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}, {count} bytes"
    return f"{count} byte{'' if count == 1 else 's'}"


def _duration(seconds: float) -> str:
    for unit, scale in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= scale:
            count = round(seconds / scale, 1)
            return f"{count:g} {unit}{'' if count == 1 else 's'}"
    return f"{seconds:g} s"


__all__ = ["command"]
