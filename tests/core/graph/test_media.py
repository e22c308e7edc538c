"""Media in graphs: big inline media is offloaded to the graph's media store when a message
is saved, an Agent sends stored media inline (per its MultimodalConfig), `Message.with_image`
/ `with_file` put bytes in a store, and deleting a thread releases its media."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from tenxgraph import Agent, Message
from tenxgraph.core.exceptions import NodeError, SerializationError
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.state import DataBlock, DocumentBlock, ImageBlock, MediaRef, TextBlock
from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer
from tenxgraph.storage.checkpointer.base import BaseCheckpointer
from tenxgraph.storage.media import (
    ImageHandling,
    InMemoryMediaStore,
    LocalMediaStore,
    MultimodalConfig,
    SqliteMediaStore,
    stored_sha256,
)
from tests._helpers import thread
from tests.core.graph._support import chain, linear

BIG = bytes(range(256)) * 1200  # 300 KiB: above the default threshold (256 KiB)
SMALL = b"tiny image"


def unique_big() -> bytes:
    """300 KiB no other test stores (PostgreSQL's tables outlive a test)."""
    return os.urandom(300 * 1024)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def image(data: bytes, text: str = "look") -> Message:
    return Message.image_message(image_base64=b64(data), mime_type="image/png", text=text)


def reply(state: Any) -> str:
    return "seen"


def images_of(messages: list[Message]) -> list[MediaRef]:
    return [b.media for m in messages for b in m.content if isinstance(b, ImageBlock)]


async def stored(app: Any, config: dict[str, Any]) -> list[Message]:
    state = await app.checkpointer.aget_state(config)
    return list(state.context)


# -- offload on save ---------------------------------------------------------------------------


async def test_big_inline_media_is_stored_once_and_the_saved_message_names_it(
    store: BaseCheckpointer,
) -> None:
    app = linear(reply, checkpointer=store)
    config = thread()
    big = unique_big()
    result = await app.ainvoke({"messages": [image(big), image(SMALL)]}, config)
    assert images_of(result["messages"])[0].kind == "data"  # the run's own state is unchanged
    saved_big, saved_small = images_of(await stored(app, config))
    sha = hashlib.sha256(big).hexdigest()
    assert saved_big.kind == "url"
    assert saved_big.url == f"tenxgraph://media/{sha}"
    assert (saved_big.sha256, saved_big.size_bytes, saved_big.mime_type) == (
        sha,
        len(big),
        "image/png",
    )
    assert saved_big.data_base64 is None
    assert saved_small.kind == "data"  # below the threshold: inline
    assert app.media_store is not None
    assert await app.media_store.aget(sha) == big
    assert await app.media_store.aowners(sha) == {config["thread_id"]}
    await app.ainvoke({"messages": [image(big, "again")]}, config)  # same bytes: stored once
    assert [i.sha256 for i in await app.media_store.alist()].count(sha) == 1


async def test_the_default_media_store_lives_in_the_checkpointers_storage(tmp_path: Path) -> None:
    sqlite = SqliteCheckpointer(tmp_path / "t.db")
    app = linear(reply, checkpointer=sqlite)
    assert isinstance(app.media_store, SqliteMediaStore)
    assert app.media_store.db_path == sqlite.db_path
    assert sqlite.media_store is app.media_store  # shared by every graph on it
    assert linear(reply, checkpointer=sqlite).media_store is app.media_store
    assert isinstance(linear(reply).media_store, InMemoryMediaStore)
    assert isinstance(linear(reply, checkpointer=SqliteCheckpointer(":memory:")).media_store,
                      InMemoryMediaStore)  # fmt: skip
    assert linear(reply, checkpointer=False).media_store is None
    await sqlite.aclose()


async def test_compile_takes_a_media_store_and_a_threshold(tmp_path: Path) -> None:
    media = LocalMediaStore(tmp_path / "media")
    checkpointer = InMemoryCheckpointer()
    app = chain(reply).compile(checkpointer=checkpointer, media_store=media, media_threshold=4)
    assert app.media_store is media
    assert checkpointer.media_store is media
    config = thread()
    await app.ainvoke({"messages": [image(SMALL)]}, config)
    assert images_of(await stored(app, config))[0].kind == "url"  # 10 bytes > 4
    assert await media.aget(hashlib.sha256(SMALL).hexdigest()) == SMALL


@pytest.mark.parametrize("options", [{"media_threshold": 0}, {"media_store": False}])
async def test_offload_can_be_turned_off(options: dict[str, Any]) -> None:
    app = chain(reply).compile(**options)
    config = thread()
    await app.ainvoke({"messages": [image(BIG)]}, config)
    assert images_of(await stored(app, config))[0].kind == "data"


def test_compile_refuses_what_is_not_a_media_store() -> None:
    with pytest.raises(TypeError, match="MediaStore"):
        chain(reply).compile(media_store=object())
    with pytest.raises(ValueError, match="threshold"):
        chain(reply).compile(media_threshold=-1)


async def test_data_urls_and_data_blocks_are_offloaded_too() -> None:
    app = linear(reply)
    config = thread()
    url = MediaRef(kind="url", url=f"data:image/jpeg;base64,{b64(BIG)}")
    data = DataBlock(mime_type="application/octet-stream", data_base64=b64(BIG[::-1]))
    message = Message.multimodal_message([ImageBlock(media=url), data])
    await app.ainvoke({"messages": [message]}, config)
    saved = (await stored(app, config))[0]
    first, second = saved.content
    assert isinstance(first, ImageBlock)
    assert first.media.url == f"tenxgraph://media/{hashlib.sha256(BIG).hexdigest()}"
    assert first.media.mime_type == "image/jpeg"
    assert isinstance(second, DataBlock)
    assert second.data_base64 is None
    assert second.media is not None
    assert stored_sha256(second.media) == hashlib.sha256(BIG[::-1]).hexdigest()


# -- thread deletion -------------------------------------------------------------------------


async def test_deleting_a_thread_releases_the_media_no_other_thread_names(
    store: BaseCheckpointer,
) -> None:
    app = linear(reply, checkpointer=store)
    media = app.media_store
    assert media is not None
    one, two = thread(), thread()
    big = unique_big()
    other = big[::-1]
    await app.ainvoke({"messages": [image(big), image(other)]}, one)
    await app.ainvoke({"messages": [image(big)]}, two)
    shared, own = hashlib.sha256(big).hexdigest(), hashlib.sha256(other).hexdigest()
    assert await store.adelete_thread(one["thread_id"])
    assert not await media.ahas(own)
    assert await media.ahas(shared)
    assert await store.adelete_thread(two["thread_id"])
    assert not await media.ahas(shared)


# -- with_image / with_file ------------------------------------------------------------------


async def test_with_image_and_with_file_put_the_bytes_in_the_store(tmp_path: Path) -> None:
    media = InMemoryMediaStore()
    message = await Message.with_image(SMALL, "image/png", media, text="what is it?")
    text, block = message.content
    assert text == TextBlock(text="what is it?")
    assert isinstance(block, ImageBlock)
    assert block.media.kind == "url"
    assert await media.aget(str(block.media.sha256)) == SMALL
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.4 ...")
    doc = await Message.with_file(tmp_path / "report.pdf", media, role="user", message_id="m1")
    assert doc.message_id == "m1"
    (only,) = doc.content
    assert isinstance(only, DocumentBlock)
    assert (only.media.mime_type, only.media.filename) == ("application/pdf", "report.pdf")
    assert await media.aget(str(only.media.sha256)) == b"%PDF-1.4 ..."
    with pytest.raises(FileNotFoundError, match="with_file"):
        await Message.with_file(tmp_path / "missing.png", media)
    with pytest.raises(TypeError, match="media store"):
        await Message.with_image(SMALL, "image/png", {})  # type: ignore[arg-type]


async def test_a_thread_owns_the_media_its_saved_messages_name(store: BaseCheckpointer) -> None:
    app = linear(reply, checkpointer=store)
    assert app.media_store is not None
    small = os.urandom(64)
    message = await Message.with_image(small, "image/png", app.media_store)
    config = thread()
    await app.ainvoke({"messages": [message]}, config)
    sha = hashlib.sha256(small).hexdigest()
    assert await app.media_store.aowners(sha) == {config["thread_id"]}
    await store.adelete_thread(config["thread_id"])
    assert not await app.media_store.ahas(sha)


# -- sending to the model --------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.seen: list[list[Message]] = []

    def __call__(self, messages: list[Message], info: Any) -> str:
        self.seen.append(messages)
        return "a cat"


async def test_an_agent_sends_stored_media_inline() -> None:
    recorder = Recorder()
    app = linear(("agent", Agent(FunctionModel(recorder))))
    assert app.media_store is not None
    message = await Message.with_image(SMALL, "image/png", app.media_store, text="what?")
    await app.ainvoke({"messages": [message]}, thread())
    (sent,) = images_of(recorder.seen[-1])
    assert sent.kind == "data"
    assert base64.b64decode(str(sent.data_base64)) == SMALL
    assert (sent.mime_type, sent.url) == ("image/png", None)
    assert images_of([message])[0].kind == "url"  # the message itself is not changed


async def test_a_reference_to_another_store_is_an_error_naming_the_message() -> None:
    message = await Message.with_image(SMALL, "image/png", InMemoryMediaStore())
    app = linear(("agent", Agent(FunctionModel(Recorder()))))
    config = thread()
    with pytest.raises(SerializationError, match="the media store does not hold it") as refused:
        await app.ainvoke({"messages": [message]}, config)
    assert refused.value.context["sha256"] == message.content[0].media.sha256
    assert await app.aget_state(config) is None  # refused before the input was stored
    app = linear(("agent", Agent(FunctionModel(Recorder()))), checkpointer=False)
    with pytest.raises(NodeError, match=f"message {message.message_id!r} .* no media store"):
        await app.ainvoke({"messages": [message]}, thread())


def fake_fetcher(monkeypatch: pytest.MonkeyPatch, fetched: list[Any]) -> None:
    """The safe fetcher answering every URL with a small image; records (url, policy)."""
    from tenxgraph.storage.media import fetch

    async def fetch_media(url: str, *, policy: Any = None) -> fetch.Fetched:
        fetched.append((url, policy))
        return fetch.Fetched(SMALL, "image/webp", url)

    monkeypatch.setattr(fetch, "fetch_media", fetch_media)


@pytest.mark.parametrize("handling", [ImageHandling.URL, ImageHandling.BASE64])
async def test_http_images_are_kept_as_urls_or_fetched_as_the_config_says(
    monkeypatch: pytest.MonkeyPatch, handling: ImageHandling
) -> None:
    fetched: list[Any] = []
    fake_fetcher(monkeypatch, fetched)
    recorder = Recorder()
    config = MultimodalConfig(image_handling=handling, max_image_size_mb=2)
    app = linear(("agent", Agent(FunctionModel(recorder), multimodal_config=config)))
    url = "https://example.com/cat.webp"
    await app.ainvoke({"messages": [Message.image_message(image_url=url, mime_type="image/webp")]},
                      thread())  # fmt: skip
    (sent,) = images_of(recorder.seen[-1])
    if handling is ImageHandling.URL:
        assert (sent.kind, sent.url, fetched) == ("url", url, [])
    else:
        ((asked, policy),) = fetched
        assert (sent.kind, asked) == ("data", url)
        assert base64.b64decode(str(sent.data_base64)) == SMALL
        # fetched within the config's limits
        assert policy.max_bytes == 2 * 1024 * 1024
        assert policy.allows_mime_type("image/webp")
        assert not policy.allows_mime_type("application/pdf")


@pytest.mark.parametrize(
    ("config", "error"),
    [
        (MultimodalConfig(max_image_size_mb=0.1), "max_image_size_mb"),
        (MultimodalConfig(supported_image_types=frozenset({"image/jpeg"})), "image/png"),
    ],
)
async def test_the_config_refuses_media_too_big_or_of_a_type_not_allowed(
    config: MultimodalConfig, error: str
) -> None:
    app = linear(("agent", Agent(FunctionModel(Recorder()), multimodal_config=config)))
    with pytest.raises(NodeError, match=error):  # the agent node's ValueError
        await app.ainvoke({"messages": [image(BIG)]}, thread())


def test_multimodal_config_is_checked() -> None:
    with pytest.raises(TypeError, match="MultimodalConfig"):
        Agent("test", multimodal_config={"image_handling": "url"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_image_size_mb"):
        MultimodalConfig(max_image_size_mb=0)
    assert MultimodalConfig(image_handling="base64").image_handling is ImageHandling.BASE64  # type: ignore[arg-type]


# -- subgraphs and the bounded in-memory checkpointer ----------------------------------------


async def test_a_subgraph_uses_its_parents_media_store() -> None:
    recorder = Recorder()
    child = linear(("agent", Agent(FunctionModel(recorder))))
    parent = linear(("child", child))
    assert parent.media_store is not None
    assert parent.media_store is not child.media_store
    message = await Message.with_image(SMALL, "image/png", parent.media_store)
    config = thread()
    await parent.ainvoke({"messages": [message, image(BIG)]}, config)
    sent = images_of(recorder.seen[-1])
    assert [m.kind for m in sent] == ["data", "data"]
    assert base64.b64decode(str(sent[0].data_base64)) == SMALL
    saved = images_of(await stored(parent, config))
    assert await parent.media_store.aget(str(saved[1].sha256)) == BIG


async def test_threads_the_in_memory_checkpointer_drops_release_their_media() -> None:
    checkpointer = InMemoryCheckpointer(max_threads=1)
    app = linear(reply, checkpointer=checkpointer)
    assert app.media_store is not None
    await app.ainvoke({"messages": [image(BIG)]}, thread())
    assert await app.media_store.ahas(hashlib.sha256(BIG).hexdigest())
    await app.ainvoke({"messages": [image(SMALL)]}, thread())  # drops the first thread
    assert not await app.media_store.ahas(hashlib.sha256(BIG).hexdigest())


async def test_an_adopted_checkpointer_brings_its_media_store(tmp_path: Path) -> None:
    """A host (the command, the server) giving an app without a checkpointer its own: the
    threads and their media go to the host's database, not to the process's memory."""
    app = linear(reply)  # compiled without a checkpointer: in memory by default
    db = SqliteCheckpointer(tmp_path / "host.db")
    assert app.adopt_checkpointer(db)
    assert app.checkpointer is db
    assert isinstance(app.media_store, SqliteMediaStore)
    data = unique_big()
    await app.ainvoke({"messages": [image(data)]}, {"thread_id": "adopted"})
    sha = hashlib.sha256(data).hexdigest()
    assert await SqliteMediaStore(tmp_path / "host.db").aget(sha) == data


async def test_an_app_keeps_the_checkpointer_it_chose(tmp_path: Path) -> None:
    own = InMemoryCheckpointer()
    app = linear(reply, checkpointer=own)
    assert not app.adopt_checkpointer(SqliteCheckpointer(tmp_path / "host.db"))
    assert app.checkpointer is own
