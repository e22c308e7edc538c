"""The behaviour every media store shares, run against memory, a local directory, SQLite and
PostgreSQL (when TENXGRAPH_TEST_PG_DSN names a server)."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tenxgraph.core.exceptions import ResourceNotFoundError
from tenxgraph.core.state import MediaRef
from tenxgraph.storage.media import (
    InMemoryMediaStore,
    LocalMediaStore,
    MediaStore,
    media_url,
    stored_sha256,
)
from tenxgraph.storage.media import base as media_base
from tenxgraph.storage.media.base import ProviderFile
from tests.storage.conftest import drop_schema, fresh_schema, pg_dsn

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@pytest.fixture(params=["memory", "local", "sqlite", "postgres"])
async def media(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MediaStore]:
    store: MediaStore
    schema = None
    if request.param == "memory":
        store = InMemoryMediaStore()
    elif request.param == "local":
        store = LocalMediaStore(tmp_path / "media")
    elif request.param == "sqlite":
        from tenxgraph.storage.media import SqliteMediaStore

        store = SqliteMediaStore(tmp_path / "media.db")
    else:
        dsn, schema = pg_dsn(), fresh_schema()
        from tenxgraph.storage.media import PostgresMediaStore

        store = PostgresMediaStore(dsn, schema=schema, max_size=2)
    await store.asetup()
    try:
        yield store
    finally:
        await store.aclose()
        if schema is not None:
            await drop_schema(pg_dsn(), schema)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1_000.0]
    monkeypatch.setattr(media_base, "_clock", lambda: now[0])
    return now


async def test_put_returns_a_reference_by_sha256_and_get_reads_the_bytes_back(
    media: MediaStore,
) -> None:
    ref = await media.aput(PNG, "image/png", filename="a.png")
    sha = hashlib.sha256(PNG).hexdigest()
    assert ref == MediaRef(
        kind="url",
        url=f"tenxgraph://media/{sha}",
        sha256=sha,
        size_bytes=len(PNG),
        mime_type="image/png",
        filename="a.png",
    )
    assert stored_sha256(ref) == sha
    assert media_url(sha) == ref.url
    assert await media.aget(sha) == PNG
    assert await media.ahas(sha)
    info = await media.ainfo(sha)
    assert info is not None
    assert (info.size_bytes, info.mime_type) == (len(PNG), "image/png")


async def test_the_same_bytes_are_stored_once(media: MediaStore) -> None:
    first = await media.aput(PNG, "image/png")
    second = await media.aput(bytearray(PNG), "image/png")
    await media.aput(b"other", "text/plain")
    assert first.url == second.url
    assert [i.sha256 for i in await media.alist()] == sorted(
        [hashlib.sha256(PNG).hexdigest(), hashlib.sha256(b"other").hexdigest()]
    )


async def test_an_unknown_blob_is_a_resource_not_found_error(media: MediaStore) -> None:
    sha = "0" * 64
    assert not await media.ahas(sha)
    assert await media.ainfo(sha) is None
    with pytest.raises(ResourceNotFoundError, match=sha):
        await media.aget(sha)
    with pytest.raises(ValueError, match="sha256"):
        await media.aget("../etc/passwd")


async def test_bad_arguments_are_refused(media: MediaStore) -> None:
    with pytest.raises(TypeError, match="bytes"):
        await media.aput("text", "text/plain")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="MIME"):
        await media.aput(b"x", "png")


async def test_delete_removes_the_blob_and_its_owners(media: MediaStore) -> None:
    ref = await media.aput(PNG, "image/png")
    sha = str(ref.sha256)
    await media.aadd_owners("t1", [sha])
    assert await media.adelete(sha)
    assert not await media.ahas(sha)
    assert await media.aowners(sha) == set()
    assert not await media.adelete(sha)


async def test_releasing_a_thread_deletes_only_the_blobs_no_other_thread_owns(
    media: MediaStore,
) -> None:
    shared = str((await media.aput(PNG, "image/png")).sha256)
    own = str((await media.aput(b"only t1", "text/plain")).sha256)
    await media.aadd_owners("t1", [shared, own])
    await media.aadd_owners("t1", [shared])  # idempotent
    await media.aadd_owners("t2", [shared])
    assert await media.aowners(shared) == {"t1", "t2"}
    assert await media.arelease_thread("t1") == [own]
    assert not await media.ahas(own)
    assert await media.ahas(shared)
    assert await media.aowners(shared) == {"t2"}
    assert await media.arelease_thread("t2") == [shared]
    assert await media.alist() == []
    assert await media.arelease_thread("never") == []


async def test_owning_a_blob_the_store_does_not_hold_records_nothing(media: MediaStore) -> None:
    held = str((await media.aput(PNG, "image/png")).sha256)
    assert await media.aadd_owners("t1", ["f" * 64, held]) == {"f" * 64}  # the one not held
    assert await media.aowners("f" * 64) == set()
    assert await media.aowners(held) == {"t1"}
    assert await media.aadd_owners("t1", [held]) == set()


async def test_a_blob_released_between_a_save_s_put_and_its_owning_is_put_again(
    media: MediaStore,
) -> None:
    """Thread B saves a picture that thread A's message already stored: B's put finds the
    blob there, and A is deleted (its blob released) before B records itself as an owner.
    B's save puts the bytes again, so what B stores can be read back."""
    import base64

    from tenxgraph.core.state import ImageBlock, Message
    from tenxgraph.storage.media.offload import MediaOffload

    picture = PNG * 8
    sha = str((await media.aput(picture, "image/png")).sha256)
    await media.aadd_owners("A", [sha])
    real_put = media.aput
    puts = []

    async def put_then_release_a(data: bytes, mime_type: str, **kwargs: object) -> MediaRef:
        ref = await real_put(data, mime_type)
        puts.append(ref.sha256)
        if len(puts) == 1:  # A's deletion lands between B's put and B's owning
            assert await media.arelease_thread("A") == [sha]
        return ref

    media.aput = put_then_release_a  # type: ignore[method-assign]
    inline = MediaRef(kind="data", data_base64=base64.b64encode(picture).decode(),
                      mime_type="image/png")  # fmt: skip
    message = Message.multimodal_message([ImageBlock(media=inline)])
    [stored] = await MediaOffload(media, threshold=100).prepare("B", [message])
    assert stored.content[0].media.sha256 == sha
    assert puts == [sha, sha]  # put, found deleted when owned, put again
    assert await media.aget(sha) == picture
    assert await media.aowners(sha) == {"B"}


async def test_gc_sweeps_unowned_blobs_older_than_the_grace_period(
    media: MediaStore, clock: list[float]
) -> None:
    old = str((await media.aput(b"old, never used", "text/plain")).sha256)
    kept = str((await media.aput(b"old, owned", "text/plain")).sha256)
    await media.aadd_owners("t", [kept])
    clock[0] += 100
    young = str((await media.aput(b"just put", "text/plain")).sha256)
    assert await media.agc(older_than=50) == [old]
    assert {i.sha256 for i in await media.alist()} == {kept, young}
    clock[0] += 100
    assert await media.agc(older_than=50) == [young]


async def test_a_new_instance_on_the_same_storage_reads_what_another_wrote(
    tmp_path: Path,
) -> None:
    from tenxgraph.storage.media import SqliteMediaStore

    for make in (
        lambda: LocalMediaStore(tmp_path / "m"),
        lambda: SqliteMediaStore(tmp_path / "m.db"),
    ):
        first = make()
        ref = await first.aput(PNG, "image/png")
        await first.aadd_owners("t", [str(ref.sha256)])
        await first.aclose()
        second = make()
        assert await second.aget(str(ref.sha256)) == PNG
        assert await second.aowners(str(ref.sha256)) == {"t"}
        await second.aclose()


async def test_provider_file_ids_are_kept_per_provider_base_and_content(
    media: MediaStore,
) -> None:
    sha = "a" * 64
    assert await media.aprovider_file("openai", "", sha) is None
    await media.aremember_provider_file("openai", "", sha, ProviderFile("file-1"))
    await media.aremember_provider_file("gemini", "", sha, ProviderFile("g-1", 1_000.5))
    await media.aremember_provider_file(
        "openai", "https://proxy.example/v1", sha, ProviderFile("p")
    )
    assert await media.aprovider_file("openai", "", sha) == ProviderFile("file-1")
    assert await media.aprovider_file("gemini", "", sha) == ProviderFile("g-1", 1_000.5)
    assert await media.aprovider_file("openai", "https://proxy.example/v1", sha) == (
        ProviderFile("p")
    )
    assert await media.aprovider_file("openai", "", "b" * 64) is None
    await media.aremember_provider_file("openai", "", sha, ProviderFile("file-2"))  # replaced
    assert await media.aprovider_file("openai", "", sha) == ProviderFile("file-2")
    await media.aforget_provider_file("openai", "", sha)
    assert await media.aprovider_file("openai", "", sha) is None
    assert await media.aprovider_file("gemini", "", sha) == ProviderFile("g-1", 1_000.5)


async def test_provider_file_ids_outlive_the_sqlite_store_instance(tmp_path: Path) -> None:
    from tenxgraph.storage.media import SqliteMediaStore

    first = SqliteMediaStore(tmp_path / "m.db")
    await first.aremember_provider_file("anthropic", "", "c" * 64, ProviderFile("file_x"))
    await first.aclose()
    second = SqliteMediaStore(tmp_path / "m.db")
    assert await second.aprovider_file("anthropic", "", "c" * 64) == ProviderFile("file_x")
    await second.aclose()


async def test_sweepable_names_what_gc_would_delete_and_deletes_nothing(
    media: MediaStore, clock: list[float]
) -> None:
    old = await media.aput(b"old, never used", "text/plain")
    kept = str((await media.aput(b"old, owned", "text/plain")).sha256)
    await media.aadd_owners("t", [kept])
    clock[0] += 100
    await media.aput(b"just put", "text/plain")
    swept = await media.asweepable(older_than=50)
    assert [(i.sha256, i.size_bytes) for i in swept] == [(old.sha256, 15)]
    assert len(await media.alist()) == 3
    assert await media.agc(older_than=50) == [i.sha256 for i in swept]


# -- PostgreSQL: owning and deleting a blob at the same moment ----------------------------------


@pytest.fixture
async def pg_media() -> AsyncIterator[tuple[MediaStore, str, str]]:
    from tenxgraph.storage.media import PostgresMediaStore

    dsn, schema = pg_dsn(), fresh_schema()
    store = PostgresMediaStore(dsn, schema=schema, max_size=2)
    await store.asetup()
    try:
        yield store, dsn, schema
    finally:
        await store.aclose()
        await drop_schema(dsn, schema)


async def blocked_by(conn: object, task: asyncio.Task[object]) -> None:
    """Until some backend waits on a lock that `conn`'s backend holds (the task's statement),
    checked by asking PostgreSQL; fails if the task ends first."""
    pid = await conn.fetchval("SELECT pg_backend_pid()")  # type: ignore[attr-defined]
    query = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))"
    while not await conn.fetchval(query, pid):  # type: ignore[attr-defined]
        assert not task.done(), "the statement did not wait for the lock"
        await asyncio.sleep(0.005)


async def test_a_blob_owned_while_its_release_runs_is_kept(
    pg_media: tuple[MediaStore, str, str],
) -> None:
    """B owns the blob in a transaction not yet committed; A's release of the same blob waits
    for it, then sees B's ownership and keeps the blob."""
    import asyncpg

    media, dsn, schema = pg_media
    sha = str((await media.aput(PNG, "image/png")).sha256)
    await media.aadd_owners("A", [sha])
    b = await asyncpg.connect(dsn)
    try:
        transaction = b.transaction()
        await transaction.start()
        await b.fetch(  # what aadd_owners does, held open
            f'SELECT sha256 FROM "{schema}".tx_media_blobs WHERE sha256 = $1 FOR KEY SHARE', sha
        )
        await b.execute(f'INSERT INTO "{schema}".tx_media_owners VALUES ($1, $2)', "B", sha)
        release = asyncio.ensure_future(media.arelease_thread("A"))
        await blocked_by(b, release)
        await transaction.commit()
        assert await release == []
    finally:
        await b.close()
    assert await media.aget(sha) == PNG
    assert await media.aowners(sha) == {"B"}


async def test_owning_a_blob_while_its_release_deletes_it_reports_it_missing(
    pg_media: tuple[MediaStore, str, str],
) -> None:
    """A's release has locked and deleted the blob, not yet committed; B's owning waits for
    it and then reports the blob as not held (so B's save puts the bytes again)."""
    import asyncpg

    media, dsn, schema = pg_media
    sha = str((await media.aput(PNG, "image/png")).sha256)
    a = await asyncpg.connect(dsn)
    try:
        transaction = a.transaction()
        await transaction.start()
        await a.fetch(
            f'SELECT sha256 FROM "{schema}".tx_media_blobs WHERE sha256 = $1 FOR UPDATE', sha
        )
        await a.execute(f'DELETE FROM "{schema}".tx_media_blobs WHERE sha256 = $1', sha)
        owning = asyncio.ensure_future(media.aadd_owners("B", [sha]))
        await blocked_by(a, owning)
        await transaction.commit()
        assert await owning == {sha}
    finally:
        await a.close()
    assert await media.aowners(sha) == set()
