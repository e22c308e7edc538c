"""Media sent by provider file id (`MultimodalConfig` with `FILE_ID`): stored or inline bytes
are uploaded once to the provider's Files API with the Agent's key, and the chat request
names the file. respx serves both the upload and the chat, for OpenAI, Anthropic and Gemini;
the request bodies are checked, the upload counted across turns, an id the provider forgot
uploaded again once, and a failed upload stops the call before the chat request."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

import base64
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from tenxgraph import END, START, Agent, StateGraph
from tenxgraph.core.exceptions import MediaUploadError, ModelError, UnsupportedContentError
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.state import (
    DocumentBlock,
    ImageBlock,
    MediaRef,
    Message,
    TextBlock,
    VideoBlock,
)
from tenxgraph.storage.checkpointer.sqlite import SqliteCheckpointer
from tenxgraph.storage.media import DocumentHandling, ImageHandling, MultimodalConfig
from tenxgraph.storage.media.base import MediaStore, ProviderFile
from tests.providers.test_transcripts import SECRET, Provider, providers

PROVIDERS = {p.name: p for p in providers()}
PDF = b"%PDF-1.0\ntrailer<<>>\n%%EOF\n"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)
GEMINI_UPLOAD = "https://generativelanguage.googleapis.com/upload/v1beta/files"
GEMINI_FILES = "https://generativelanguage.googleapis.com/v1beta/files/"
BY_FILE_ID = MultimodalConfig(
    image_handling=ImageHandling.FILE_ID, document_handling=DocumentHandling.FILE_ID
)


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


# -- the providers' Files APIs, as respx routes ----------------------------------------------


class Uploads:
    """A provider's upload endpoint: answers with ids up1, up2... (or `fail` as its status)
    and keeps what it was sent (the file bytes, the form, the headers)."""

    def __init__(self, name: str, mock: respx.MockRouter, fail: int | None = None) -> None:
        self.name = name
        self.fail = fail
        self.count = 0
        self.sent: list[httpx.Request] = []
        self.started: list[httpx.Request] = []  # Gemini: the requests starting an upload
        if name == "gemini":  # a resumable upload: start, then the bytes
            mock.post(url__startswith=GEMINI_UPLOAD).mock(side_effect=self._gemini)
        else:
            url = {"openai": "https://api.openai.com", "anthropic": "https://api.anthropic.com"}
            mock.post(f"{url[name]}/v1/files").mock(side_effect=self._answer)

    def file_id(self, n: int) -> str:
        return {"openai": f"file-up{n}", "anthropic": f"file_up{n}"}.get(
            self.name, f"{GEMINI_FILES}up{n}"
        )

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        if self.fail is not None:
            return httpx.Response(self.fail, json={"error": {"message": f"no: {SECRET}"}})
        self.count += 1
        if self.name == "openai":
            return httpx.Response(200, json={
                "id": self.file_id(self.count), "object": "file", "bytes": 1, "created_at": 1,
                "filename": "f", "purpose": "user_data", "status": "processed"})  # fmt: skip
        return httpx.Response(200, json={
            "id": self.file_id(self.count), "type": "file", "filename": "f",
            "mime_type": "application/pdf", "size_bytes": 1,
            "created_at": "2026-12-01T00:00:00Z", "downloadable": False})  # fmt: skip

    def _gemini(self, request: httpx.Request) -> httpx.Response:
        if "upload_id" not in str(request.url):
            self.started.append(request)
            start = {"x-goog-upload-url": f"{GEMINI_UPLOAD}?upload_id=u{len(self.sent)}"}
            return httpx.Response(200, headers=start, json={})
        self.sent.append(request)
        if self.fail is not None:
            return httpx.Response(self.fail, json={"error": {"message": "quota"}})
        self.count += 1
        return httpx.Response(200, json={"file": {
            "name": f"files/up{self.count}", "uri": self.file_id(self.count),
            "displayName": "f", "mimeType": "application/pdf", "sizeBytes": "1",
            "createTime": "2026-12-01T00:00:00Z", "state": "ACTIVE"}})  # fmt: skip

    def file_bytes(self, i: int = -1) -> bytes:
        request = self.sent[i]
        if self.name == "gemini":
            return request.content
        return form(request)[b"file"]


def form(request: httpx.Request) -> dict[bytes, bytes]:
    """A multipart/form-data body's fields, by name."""
    boundary = request.headers["content-type"].split("boundary=", 1)[1].encode()
    fields = {}
    for part in request.content.split(b"--" + boundary)[1:-1]:
        head, _, value = part.partition(b"\r\n\r\n")
        name = head.split(b'name="', 1)[1].split(b'"', 1)[0]
        fields[name] = value[: -len(b"\r\n")]
    return fields


def answer(provider: Provider) -> dict[str, Any]:
    data: dict[str, Any] = provider.case("plain").data["response"]["json"]
    return data


def app_for(provider: Provider, **compile_args: Any) -> Any:
    graph = StateGraph()
    agent = Agent(provider.model, **provider.call_settings(), multimodal_config=BY_FILE_ID)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(**compile_args)


def first_user_parts(name: str, request: httpx.Request) -> list[Any]:
    body = json.loads(request.content)
    if name == "gemini":
        parts: list[Any] = body["contents"][0]["parts"]
        return parts
    content: list[Any] = next(m for m in body["messages"] if m["role"] == "user")["content"]
    return content


def by_id(name: str, file_id: str, mime: str) -> dict[str, Any]:
    """The part naming an uploaded file, as each provider receives it."""
    if name == "openai":
        return {"type": "file", "file": {"file_id": file_id}}
    if name == "anthropic":
        kind = "image" if mime.startswith("image/") else "document"
        return {"type": kind, "source": {"type": "file", "file_id": file_id}}
    return {"file_data": {"file_uri": file_id, "mime_type": mime}}


async def stored_document(store: MediaStore) -> Message:
    ref = await store.aput(PDF, "application/pdf", filename="report.pdf")
    return Message.multimodal_message([TextBlock(text="Summarise."), DocumentBlock(media=ref)])


# -- uploads ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini"])
async def test_a_stored_document_is_uploaded_once_across_two_turns(name: str) -> None:
    provider = PROVIDERS[name]
    app = app_for(provider)
    turn = {"thread_id": f"files-{name}"}
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        uploads = Uploads(name, mock)
        chat = provider.route(mock).mock(return_value=httpx.Response(200, json=answer(provider)))
        await app.ainvoke({"messages": [await stored_document(app.media_store)]}, turn)
        await app.ainvoke({"messages": [Message.text_message("And the second page?")]}, turn)
    assert uploads.count == 1
    assert uploads.file_bytes() == PDF
    upload = uploads.sent[0]
    if name == "openai":
        assert upload.headers["authorization"] == f"Bearer {SECRET}"
        assert form(upload)[b"purpose"] == b"user_data"
        assert b'filename="report.pdf"' in upload.content
    elif name == "anthropic":
        assert upload.headers["x-api-key"] == SECRET
        assert "files-api" in upload.headers["anthropic-beta"]
        assert "files-api" in chat.calls.last.request.headers["anthropic-beta"]
    else:
        assert uploads.started[0].headers["x-goog-api-key"] == SECRET
    assert chat.call_count == 2
    for call in chat.calls:  # both turns name the file; neither holds its bytes
        parts = first_user_parts(name, call.request)
        assert parts[1] == by_id(name, uploads.file_id(1), "application/pdf")
        assert base64.b64encode(PDF).decode() not in call.request.content.decode()


@pytest.mark.parametrize(
    ("name", "uploaded"), [("openai", False), ("anthropic", True), ("gemini", True)]
)
async def test_an_inline_image_goes_by_file_id_where_the_chat_takes_one(
    name: str, uploaded: bool
) -> None:
    """OpenAI's chat completions takes no image by file id: the image stays inline there."""
    provider = PROVIDERS[name]
    app = app_for(provider)
    image = Message.image_message(
        image_base64=base64.b64encode(PNG).decode(), mime_type="image/png", text="What is it?"
    )
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        uploads = Uploads(name, mock)
        chat = provider.route(mock).mock(return_value=httpx.Response(200, json=answer(provider)))
        await app.ainvoke({"messages": [image]})
    parts = first_user_parts(name, chat.calls.last.request)
    sent = json.dumps(parts)
    if not uploaded:
        assert uploads.count == 0
        assert base64.b64encode(PNG).decode() in sent
        return
    assert uploads.count == 1
    assert uploads.file_bytes() == PNG
    assert by_id(name, uploads.file_id(1), "image/png") in parts
    assert base64.b64encode(PNG).decode() not in sent


GEMINI_GONE = "You do not have permission to access the File up1 or it may not exist."
LOST = {  # what each provider answers for a file id it no longer has
    "openai": (404, {"error": {"message": "No such File object: file-up1", "type": "x"}}),
    "anthropic": (
        404,
        {"type": "error", "error": {"type": "not_found_error", "message": "File not found"}},
    ),
    "gemini": (
        403,
        {"error": {"code": 403, "status": "PERMISSION_DENIED", "message": GEMINI_GONE}},
    ),
}


@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini"])
async def test_a_file_id_the_provider_forgot_is_uploaded_again_once(name: str) -> None:
    provider = PROVIDERS[name]
    app = app_for(provider)
    status, body = LOST[name]
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        uploads = Uploads(name, mock)
        chat = provider.route(mock).mock(
            side_effect=[
                httpx.Response(status, json=body),
                httpx.Response(200, json=answer(provider)),
            ]
        )
        await app.ainvoke({"messages": [await stored_document(app.media_store)]})
    assert uploads.count == 2
    assert chat.call_count == 2
    first, second = (first_user_parts(name, c.request) for c in chat.calls)
    assert uploads.file_id(1) in json.dumps(first)
    assert uploads.file_id(2) in json.dumps(second)
    sha = (await app.media_store.alist())[0].sha256  # the new id is the one remembered
    known = await app.media_store.aprovider_file(name, "", sha)
    assert known is not None
    assert known.file_id == uploads.file_id(2)


async def test_a_streamed_call_uploads_again_when_the_provider_forgot_the_file() -> None:
    provider = PROVIDERS["anthropic"]
    app = app_for(provider)
    status, body = LOST["anthropic"]
    streamed = provider.case("stream_text").http_response()
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        uploads = Uploads("anthropic", mock)
        chat = provider.route(mock).mock(side_effect=[httpx.Response(status, json=body), streamed])
        pieces = [
            c async for c in app.astream({"messages": [await stored_document(app.media_store)]})
        ]
    assert pieces
    assert (uploads.count, chat.call_count) == (2, 2)
    assert uploads.file_id(2) in chat.calls.last.request.content.decode()


async def test_a_file_forgotten_again_is_not_uploaded_a_third_time() -> None:
    provider = PROVIDERS["anthropic"]
    app = app_for(provider)
    status, body = LOST["anthropic"]
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        uploads = Uploads("anthropic", mock)
        chat = provider.route(mock).mock(return_value=httpx.Response(status, json=body))
        with pytest.raises(ModelError) as raised:
            await app.ainvoke({"messages": [await stored_document(app.media_store)]})
    assert raised.value.status_code == 404
    assert (uploads.count, chat.call_count) == (2, 2)


async def test_a_404_for_the_model_name_uploads_nothing_again() -> None:
    provider = PROVIDERS["openai"]
    app = app_for(provider)
    gone = {"error": {"message": "The model `gpt-4o-mini` does not exist", "type": "x"}}
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        uploads = Uploads("openai", mock)
        chat = provider.route(mock).mock(return_value=httpx.Response(404, json=gone))
        with pytest.raises(ModelError):
            await app.ainvoke({"messages": [await stored_document(app.media_store)]})
    assert (uploads.count, chat.call_count) == (1, 1)


@pytest.mark.parametrize(
    ("name", "status"), [("openai", 401), ("openai", 503), ("anthropic", 500), ("gemini", 429)]
)
async def test_a_failed_upload_stops_the_call_before_the_chat_request(
    name: str, status: int
) -> None:
    provider = PROVIDERS[name]
    app = app_for(provider)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        uploads = Uploads(name, mock, fail=status)
        chat = provider.route(mock).mock(return_value=httpx.Response(200, json=answer(provider)))
        with pytest.raises(MediaUploadError) as raised:
            await app.ainvoke({"messages": [await stored_document(app.media_store)]})
    error = raised.value
    assert chat.call_count == 0
    assert len(uploads.sent) == 1  # tried once, not retried
    assert error.error_code == "MODEL_UPLOAD_001"
    assert error.status_code == status
    assert error.context["mime_type"] == "application/pdf"
    assert "Files API" in error.message
    assert "Nothing was sent to the model" in error.message
    assert SECRET not in json.dumps(error.to_dict(), default=str)
    assert SECRET not in str(error)


async def test_an_expired_id_is_uploaded_again_without_asking(tmp_path: Path) -> None:
    provider = PROVIDERS["gemini"]
    app = app_for(provider, checkpointer=SqliteCheckpointer(tmp_path / "t.db"))
    message = await stored_document(app.media_store)
    sha = message.content[1].media.sha256  # type: ignore[union-attr]
    old = ProviderFile(GEMINI_FILES + "old", expires_at=time.time() - 1)
    await app.media_store.aremember_provider_file("gemini", "", sha, old)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        uploads = Uploads("gemini", mock)
        chat = provider.route(mock).mock(return_value=httpx.Response(200, json=answer(provider)))
        await app.ainvoke({"messages": [message]})
    assert uploads.count == 1
    assert "files/old" not in chat.calls.last.request.content.decode()
    known = await app.media_store.aprovider_file("gemini", "", sha)
    assert known is not None
    assert known.file_id == uploads.file_id(1)
    assert known.expires_at is not None
    assert known.expires_at > time.time() + 46 * 3600


async def test_ids_are_remembered_in_the_database_across_apps(tmp_path: Path) -> None:
    """A second process (here a second app on the same SQLite file) reuses the upload."""
    provider = PROVIDERS["anthropic"]
    db = tmp_path / "threads.db"
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        uploads = Uploads("anthropic", mock)
        chat = provider.route(mock).mock(return_value=httpx.Response(200, json=answer(provider)))
        for _ in range(2):
            app = app_for(provider, checkpointer=SqliteCheckpointer(db))
            await app.ainvoke({"messages": [await stored_document(app.media_store)]})
    assert uploads.count == 1
    assert chat.call_count == 2
    assert uploads.file_id(1) in chat.calls.last.request.content.decode()


async def test_another_api_base_is_another_upload() -> None:
    provider = PROVIDERS["openai"]
    graph = StateGraph()
    for node, base in (("a", None), ("b", "https://proxy.example/v1")):
        settings = {"api_key": SECRET, **({"api_base": base} if base else {})}
        graph.add_node(node, Agent(provider.model, **settings, multimodal_config=BY_FILE_ID))
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", END)
    app = graph.compile()
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        uploads = Uploads("openai", mock)
        proxied = mock.post("https://proxy.example/v1/files").mock(side_effect=uploads._answer)
        provider.route(mock).mock(return_value=httpx.Response(200, json=answer(provider)))
        mock.post("https://proxy.example/v1/chat/completions").mock(
            return_value=httpx.Response(200, json=answer(provider))
        )
        await app.ainvoke({"messages": [await stored_document(app.media_store)]})
    assert uploads.count == 2
    assert proxied.call_count == 1


async def test_a_model_without_a_provider_gets_the_bytes_inline() -> None:
    seen: list[MediaRef] = []

    def model(messages: list[Message], info: object) -> str:
        seen.append(messages[-1].content[-1].media)  # type: ignore[union-attr]
        return "ok"

    graph = StateGraph()
    graph.add_node("agent", Agent(FunctionModel(model), multimodal_config=BY_FILE_ID))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    app = graph.compile()
    ref = await app.media_store.aput(PNG, "image/png")
    await app.ainvoke({"messages": [Message.multimodal_message([ImageBlock(media=ref)])]})
    assert seen[0].kind == "data"
    assert base64.b64decode(seen[0].data_base64 or "") == PNG


async def test_a_fallback_on_another_provider_gets_its_own_upload() -> None:
    """Claude is uploaded to and then fails (503); the Gemini fallback gets the bytes
    uploaded to Gemini, with its own key, and names them by Gemini's id."""
    anthropic, gemini = PROVIDERS["anthropic"], PROVIDERS["gemini"]
    agent = Agent(
        anthropic.model,
        **anthropic.call_settings(),
        fallback_models=[(gemini.model, {"api_key": "gemini-key-0123456789"})],
        retry_config=False,
        multimodal_config=BY_FILE_ID,
    )
    graph = StateGraph()
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    app = graph.compile()
    busy = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        claude_files = Uploads("anthropic", mock)
        gemini_files = Uploads("gemini", mock)
        claude = anthropic.route(mock).mock(return_value=httpx.Response(503, json=busy))
        chat = gemini.route(mock).mock(return_value=httpx.Response(200, json=answer(gemini)))
        await app.ainvoke({"messages": [await stored_document(app.media_store)]})
    assert (claude_files.count, claude.call_count) == (1, 1)
    assert claude_files.file_id(1) in claude.calls.last.request.content.decode()
    assert gemini_files.count == 1
    assert gemini_files.started[0].headers["x-goog-api-key"] == "gemini-key-0123456789"
    parts = first_user_parts("gemini", chat.calls.last.request)
    assert parts[1] == by_id("gemini", gemini_files.file_id(1), "application/pdf")


async def test_a_failed_upload_is_not_passed_to_the_fallback_models() -> None:
    anthropic, gemini = PROVIDERS["anthropic"], PROVIDERS["gemini"]
    agent = Agent(
        anthropic.model,
        **anthropic.call_settings(),
        fallback_models=[(gemini.model, {"api_key": "gemini-key-0123456789"})],
        multimodal_config=BY_FILE_ID,
    )
    graph = StateGraph()
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    app = graph.compile()
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        refused = Uploads("anthropic", mock, fail=500)
        gemini_files = Uploads("gemini", mock)
        chats = [
            p.route(mock).mock(return_value=httpx.Response(200, json={}))
            for p in (anthropic, gemini)
        ]
        with pytest.raises(MediaUploadError):
            await app.ainvoke({"messages": [await stored_document(app.media_store)]})
    assert len(refused.sent) == 1  # not retried
    assert gemini_files.sent == []
    assert [c.call_count for c in chats] == [0, 0]


async def test_media_beside_a_tool_result_is_sent_inline() -> None:
    """Gemini takes no file id in a function response: an image in a tool message stays
    inline (uploading it would make the request fail)."""
    from tenxgraph.core.state import ToolCallBlock, ToolResultBlock

    provider = PROVIDERS["gemini"]
    app = app_for(provider)
    image = ImageBlock(
        media=MediaRef(
            kind="data", data_base64=base64.b64encode(PNG).decode(), mime_type="image/png"
        )
    )
    call = Message(role="assistant", content=[ToolCallBlock(id="c1", name="shot", args={})])
    result = ToolResultBlock(call_id="c1", output="the page", status="completed")
    history = [
        Message.text_message("What does the page show?"),
        call,
        Message.tool_message([result, image], meta={"tool_call_id": "c1"}),
    ]
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        uploads = Uploads("gemini", mock)
        chat = provider.route(mock).mock(return_value=httpx.Response(200, json=answer(provider)))
        await app.ainvoke({"messages": history})
    assert uploads.count == 0
    parts = json.loads(chat.calls.last.request.content)["contents"][2]["parts"]
    assert {"inline_data": {"mime_type": "image/png", "data": image.media.data_base64}} in parts


async def test_without_a_media_store_the_agent_remembers_the_ids() -> None:
    provider = PROVIDERS["anthropic"]
    app = app_for(provider, media_store=False)
    assert app.media_store is None
    image = Message.image_message(
        image_base64=base64.b64encode(PNG).decode(), mime_type="image/png", text="What is it?"
    )
    turn = {"thread_id": "no-store"}
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        uploads = Uploads("anthropic", mock)
        chat = provider.route(mock).mock(return_value=httpx.Response(200, json=answer(provider)))
        await app.ainvoke({"messages": [image]}, turn)
        await app.ainvoke({"messages": [Message.text_message("And now?")]}, turn)
    assert uploads.count == 1
    for call in chat.calls:
        assert by_id("anthropic", uploads.file_id(1), "image/png") in (
            first_user_parts("anthropic", call.request)
        )


async def test_content_a_provider_cannot_take_goes_to_a_fallback_that_can() -> None:
    """OpenAI's chat takes no video: the call fails before its request, and the Gemini
    fallback, which takes video inline, gets it. Without that fallback the error is raised,
    naming the block and the provider."""
    openai, gemini = PROVIDERS["openai"], PROVIDERS["gemini"]
    clip = VideoBlock(media=MediaRef(kind="data", data_base64="AAAA", mime_type="video/mp4"))
    question = Message.multimodal_message([TextBlock(text="what happens?"), clip])

    def app_with(*fallbacks: Provider) -> Any:
        graph = StateGraph()
        graph.add_node("agent", Agent(
            openai.model, **openai.call_settings(), retry_config=False,
            fallback_models=[(p.model, {"api_key": "gemini-key-0123456789"}) for p in fallbacks],
        ))  # fmt: skip
        graph.add_edge(START, "agent")
        graph.add_edge("agent", END)
        return graph.compile()

    with respx.mock(using="httpx", assert_all_called=False) as mock:
        first = openai.route(mock).mock(return_value=httpx.Response(200, json=answer(openai)))
        chat = gemini.route(mock).mock(return_value=httpx.Response(200, json=answer(gemini)))
        result = await app_with(gemini).ainvoke({"messages": [question]})
        assert first.call_count == 0  # refused before its request
        video = first_user_parts("gemini", chat.calls.last.request)[1]
        assert video == {"inline_data": {"mime_type": "video/mp4", "data": "AAAA"}}
        assert result["messages"][-1].role == "assistant"
        with pytest.raises(UnsupportedContentError, match="video"):
            await app_with().ainvoke({"messages": [question]})
    assert (first.call_count, chat.call_count) == (0, 1)
