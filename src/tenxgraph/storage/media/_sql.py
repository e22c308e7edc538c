"""The tables both SQL media stores share, beside the checkpointer's (same SQLite file or
PostgreSQL schema; the names never clash): `tx_media_blobs` (one row per blob: its bytes,
size, MIME type, creation time), `tx_media_owners` (one row per thread and blob it owns) and
`tx_media_files` (the id a provider's Files API gave some bytes: provider, api base, sha256).
Message rows hold only the `tenxgraph://media/<sha256>` reference."""

from __future__ import annotations

BLOBS = "tx_media_blobs"
OWNERS = "tx_media_owners"
FILES = "tx_media_files"


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
        f"""CREATE TABLE IF NOT EXISTS {prefix}{FILES} (
            provider TEXT NOT NULL,
            api_base TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            file_id TEXT NOT NULL,
            expires_at {real},
            created_at {real} NOT NULL,
            PRIMARY KEY (provider, api_base, sha256))""",
    )


__all__ = ["BLOBS", "FILES", "OWNERS", "schema"]
