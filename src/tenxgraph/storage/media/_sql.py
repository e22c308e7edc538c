"""The tables both SQL media stores share, beside the checkpointer's (same SQLite file or
PostgreSQL schema; the names never clash): `tx_media_blobs` (one row per blob: its bytes,
size, MIME type, creation time) and `tx_media_owners` (one row per thread and blob it owns).
Message rows hold only the `tenxgraph://media/<sha256>` reference."""

from __future__ import annotations

BLOBS = "tx_media_blobs"
OWNERS = "tx_media_owners"


def schema(blob_type: str, real: str, prefix: str = "") -> tuple[str, ...]:
    """The CREATE statements; `prefix` is a quoted schema and a dot (PostgreSQL)."""
    return (
        f"""CREATE TABLE IF NOT EXISTS {prefix}{BLOBS} (
            sha256 TEXT PRIMARY KEY,
            mime_type TEXT NOT NULL,
            size_bytes BIGINT NOT NULL,
            created_at {real} NOT NULL,
            data {blob_type} NOT NULL)""",
        f"""CREATE TABLE IF NOT EXISTS {prefix}{OWNERS} (
            thread_id TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            PRIMARY KEY (thread_id, sha256))""",
        f"CREATE INDEX IF NOT EXISTS {OWNERS}_sha256 ON {prefix}{OWNERS} (sha256)",
    )


__all__ = ["BLOBS", "OWNERS", "schema"]
